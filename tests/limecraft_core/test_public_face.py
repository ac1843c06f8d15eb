"""The engine's public face (issue 49, item 6): one list of names, ``limecraft_core/__init__.pyi``,
which type checkers read and ``lazy_loader`` loads from; each name resolves, ``lc.explain`` stays
the function, and every ``lc.<name>`` the repository uses is on the face."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import limecraft_core as lc

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "limecraft_core" / "__init__.pyi"


def _stub_names() -> set[str]:
    tree = ast.parse(STUB.read_text())
    return {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}


def test_every_name_on_the_face_resolves_and_is_re_exported():
    tree = ast.parse(STUB.read_text())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            assert node.level == 1, "lazy_loader reads only `from .x import` lines"
            # a stub re-exports a name only as `name as name` (PEP 484)
            assert all(a.asname == a.name for a in node.names), ast.unparse(node)
    names = _stub_names()
    assert sorted(names) == lc.__all__
    for name in names:
        getattr(lc, name)


def test_explain_is_the_function_whichever_import_comes_first():
    code = (
        "import types, limecraft_core.explain, limecraft_core as lc; "
        "from limecraft_core.explain import as_scorer; "
        "assert isinstance(lc.explain, types.FunctionType), lc.explain; "
        "from limecraft_core import explain; assert explain is lc.explain; print('ok')"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.stdout.strip() == "ok", r.stderr[-2000:]


def test_every_name_the_repository_uses_is_on_the_face():
    used: set[str] = set()
    for folder in ("limecraft", "limecraft_core", "models", "serving", "pages", "tests", "bench"):
        for p in (ROOT / folder).rglob("*.py"):
            used |= set(re.findall(r"\blc\.([A-Za-z_]\w*)", p.read_text(encoding="utf-8")))
    used |= set(re.findall(r"\blc\.([A-Za-z_]\w*)", (ROOT / "README.md").read_text()))
    # private modules reached through the package once the engine has loaded them
    missing = sorted(n for n in used - _stub_names() - {"__all__"} if not n.startswith("_"))
    assert not missing, missing
