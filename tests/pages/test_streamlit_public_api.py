"""The app uses Streamlit through its public API only: no file under ``pages/`` or ``app.py``
patches Streamlit or touches its internals, and no app code special-cases AppTest. The one use
of ``streamlit.runtime`` with no public replacement (whether a browser session is still open)
lives in ``pages/lib/session_liveness.py``, which says why."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIVENESS = ROOT / "pages" / "lib" / "session_liveness.py"
#: Streamlit's public modules an app may import from (its documented API)
PUBLIC = {"streamlit", "streamlit.components.v1", "streamlit.components.v2"}
#: Streamlit's internals, and AppTest's fixed session id
FORBIDDEN_NAMES = {"PagesManager", "get_script_run_ctx", "ScriptRunContext", "Runtime"}


def app_files() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "pages").rglob("*.py"))]


def offences(path: Path) -> list[str]:
    """What ``path`` does with Streamlit that the public API does not offer, one line each."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("streamlit.") and node.module not in PUBLIC:
                found.append(f"imports from {node.module}")
        elif isinstance(node, ast.Import):
            found += [
                f"imports {a.name}"
                for a in node.names
                if a.name.startswith("streamlit.") and a.name not in PUBLIC
            ]
        elif isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and base.id == "st" and node.attr.startswith("_"):
                found.append(f"uses st.{node.attr}")
            if isinstance(node.ctx, ast.Store) and node.attr in FORBIDDEN_NAMES | {
                "uses_pages_directory"
            }:
                found.append(f"assigns .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(f"names {node.id}")
        elif isinstance(node, ast.Constant) and node.value == "test session id":
            found.append("special-cases AppTest's session id")
    return found


def test_the_checker_sees_each_kind_of_internal_use(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import streamlit as st\n"
        "import streamlit.runtime.scriptrunner\n"
        "from streamlit.runtime.pages_manager import PagesManager\n"
        "PagesManager.uses_pages_directory = False\n"
        "st._main.empty()\n"
        "if ctx.session_id != 'test session id':\n"
        "    pass\n"
    )
    got = offences(bad)
    assert "imports streamlit.runtime.scriptrunner" in got
    assert "imports from streamlit.runtime.pages_manager" in got
    assert "assigns .uses_pages_directory" in got and "names PagesManager" in got
    assert "uses st._main" in got and "special-cases AppTest's session id" in got
    good = tmp_path / "good.py"
    good.write_text("import streamlit as st\nfrom streamlit.components.v2 import component\n")
    assert offences(good) == []


def test_the_app_uses_only_streamlits_public_api():
    bad = {
        str(p.relative_to(ROOT)): offences(p) for p in app_files() if p != LIVENESS and offences(p)
    }
    assert bad == {}


def test_the_one_runtime_use_is_named_and_says_why():
    text = LIVENESS.read_text()
    assert offences(LIVENESS) and "no public API" in text
    users = [p for p in app_files() if "session_liveness" in p.read_text() and p != LIVENESS]
    assert users  # it is used (by the pages' Explain and the audit), through this module


def test_every_page_starts_its_frame_before_anything_else():
    """Each page script's first statement after its imports is ``frame.start()``, so the
    sidebar's widgets are made inside the page's run (pages/lib/frame.py), and app.py makes no
    widget of its own (it calls no ``st.`` function that takes a key or shows a control)."""
    for path in sorted((ROOT / "pages" / "app_pages").glob("[!_]*.py")):
        body = [
            n
            for n in ast.parse(path.read_text()).body
            if not isinstance(n, (ast.Import, ast.ImportFrom))
            and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
        ]
        assert ast.unparse(body[0]) == "frame.start()", path.name
    app = ast.parse((ROOT / "app.py").read_text())
    calls = {
        n.func.attr
        for n in ast.walk(app)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "st"
    }
    assert calls <= {"set_page_config", "error", "stop", "Page", "navigation"}, calls
