"""Every engine module opens with a docstring whose first line is one summary under 100
characters, with any detail after a blank line (issue 49, item 6), as pydoc, IDEs and the
architecture notes show that line alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted((ROOT / "limecraft_core").rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_docstring_is_one_short_summary_line_then_detail(path):
    doc = ast.get_docstring(ast.parse(path.read_bytes()), clean=False)
    assert doc, f"{path.relative_to(ROOT)} has no module docstring"
    lines = doc.splitlines()
    summary = lines[0].strip()
    assert summary, "the summary starts on the docstring's first line"
    assert len(summary) < 100, f"summary of {len(summary)} characters: {summary}"
    assert len(lines) == 1 or not lines[1].strip(), "a blank line after the summary"
