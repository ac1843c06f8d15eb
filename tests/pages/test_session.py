"""The session's values are one typed object (pages/lib/session.py): every other key a page
reads or writes in ``st.session_state`` is a widget's own key."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from pages.lib.session import KEY, Session

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def _files() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "pages").rglob("*.py"))]


def _is_session_state(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "session_state"


def _state_keys(tree: ast.AST) -> set[str]:
    """The literal keys read or written in st.session_state (subscripts, get/pop/setdefault)."""
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_session_state(node.value):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                keys.add(node.slice.value)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault", "__setitem__")
            and _is_session_state(node.func.value)
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            keys.add(node.args[0].value)
    return keys


def _pattern(value: ast.expr) -> str | None:
    """A widget key as a regular expression: a literal, or an f-string whose fields match
    anything (``f"cancel-{label}"``); None for a key computed otherwise."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return re.escape(value.value)
    if isinstance(value, ast.JoinedStr):
        return "".join(
            re.escape(part.value) if isinstance(part, ast.Constant) else ".*"
            for part in value.values
        )
    return None


def _widget_keys(tree: ast.AST) -> set[str]:
    """The ``key=`` of every call (the widgets'), as patterns."""
    return {
        p
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == "key"
        for p in [_pattern(kw.value)]
        if p is not None
    }


def test_every_raw_session_key_is_a_widget_key():
    used, widgets = {}, set()
    for f in _files():
        tree = ast.parse(f.read_text(), str(f))
        widgets |= _widget_keys(tree)
        for k in _state_keys(tree):
            used.setdefault(k, []).append(str(f.relative_to(ROOT)))
    assert "model_pick" in widgets and "model_pick" in used  # the check sees both sides
    assert any(re.fullmatch(w, "cancel-Checking") for w in widgets)  # f-string keys too
    not_widgets = {
        k: fs for k, fs in used.items() if k != KEY and not any(re.fullmatch(w, k) for w in widgets)
    }
    assert not_widgets == {}, "keep the app's own values in pages/lib/session.py's Session"


def test_a_session_holds_its_values_in_one_object(monkeypatch, tmp_path):
    monkeypatch.setenv("LIMECRAFT_STORE_DIR", str(tmp_path / "store"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    ses = at.session_state[KEY]
    assert isinstance(ses, Session) and ses.app is not None and ses.saved is not None
    # the app's values are attributes of the one object, not keys beside it
    assert "app" not in at.session_state and "_recent" not in at.session_state
    assert at.query_params["a"] in (ses.app.id, [ses.app.id])
