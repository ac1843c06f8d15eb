"""Whether a browser session is still open: the one use of ``streamlit.runtime`` in the app.

Streamlit has no public API that tells a long job (an Explain scored in a worker thread, an
audit) that its browser tab has been closed, so that the job stops spending the device on it.
``Runtime.is_active_session`` is the runtime's own answer; it lives here, in one named module,
so that nothing else in ``app.py`` or ``pages/`` touches Streamlit's internals
(``tests/pages/test_streamlit_public_api.py`` checks).
"""

from __future__ import annotations

from collections.abc import Callable


def session_alive() -> Callable[[], bool]:
    """A liveness check for this browser session (False once the tab is closed; always True
    outside a running server, e.g. under AppTest)."""
    from streamlit.runtime import Runtime, exists
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None or not exists():
        return lambda: True
    runtime, sid = Runtime.instance(), ctx.session_id
    return lambda: runtime.is_active_session(sid)
