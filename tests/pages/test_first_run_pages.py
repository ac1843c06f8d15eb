"""Each page address of the app has its file in ``pages/`` for a fresh server's first run
(pages/lib/first_run.py): the pages-folder mode of that run finds the page there, so no "Page not
found" is put over it. The browser test is tests/e2e/test_e2e_first_run.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from streamlit.source_util import page_icon_and_name

ROOT = Path(__file__).resolve().parents[2]


def app_addresses() -> list[str]:
    """The ``url_path`` of every ``st.Page`` in app.py (the default page has none)."""
    tree = ast.parse((ROOT / "app.py").read_text())
    return [
        kw.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Page"
        for kw in node.keywords
        if kw.arg == "url_path"
    ]


def test_every_page_address_has_a_first_run_file_that_runs_the_app():
    addresses = app_addresses()
    assert addresses == ["craft", "inspect", "trust", "export", "audit"]
    files = sorted(p for p in (ROOT / "pages").glob("*.py") if p.name != "__init__.py")
    # the pages-folder mode names a file's page as this: the number first is dropped
    assert sorted(page_icon_and_name(p)[1] for p in files) == sorted(addresses)
    for p in files:
        assert re.fullmatch(r"\d+_[a-z]+\.py", p.name), p.name  # never importable as a module
        code = p.read_text()
        assert "from pages.lib.first_run import run_app\n\nrun_app()\n" in code, p.name


def test_run_app_runs_app_py():
    from pages.lib import first_run

    assert first_run.APP == ROOT / "app.py" and first_run.APP.is_file()
