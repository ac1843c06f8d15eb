"""LIMEcraft, the web app: ``streamlit run app.py``.

Opens on a demo image with the demo model; the Explain page's button works at once.
"""

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import logging
from urllib.parse import urlsplit

import streamlit as st

from limecraft_core import LimecraftError

st.set_page_config(page_title="LIMEcraft", page_icon=":material/lightbulb:", layout="wide")


def _leave_pages_folder_mode() -> None:
    """Our ``pages/`` package sits next to app.py, so Streamlit runs the first script run of a
    fresh server through its old pages-folder navigation before ``st.navigation`` switches it
    off. Widgets made in that one run get other ids than in every later run, and the browser
    then drops them: a file picked in the first seconds vanished (seen with a model upload). The
    first run therefore switches the mode off and starts again, before any widget is made."""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    # Not under AppTest (its session id is fixed): it clicks on the widgets of its first run.
    if PagesManager.uses_pages_directory and ctx and ctx.session_id != "test session id":
        PagesManager.uses_pages_directory = False
        # That first run also loses the page the address asked for (/audit opened on Explain):
        # remember it, and go there once the pages are known.
        path = urlsplit(st.context.url or "").path.strip("/").split("/")[-1]
        if path:
            st.session_state["_first_page"] = path
        st.rerun()


def _first_page(pages: list) -> None:
    """The page a fresh server's first visitor asked for (see _leave_pages_folder_mode)."""
    wanted = st.session_state.pop("_first_page", None)
    target = next((p for p in pages if p.url_path == wanted), None)
    if target is not None:
        st.switch_page(target)


_leave_pages_folder_mode()

try:  # the settings are read on import (e.g. LIMECRAFT_DEFAULT_MODEL): a bad one is a message
    from pages.lib import audits, auth, display, sidebar, state
except LimecraftError as e:
    st.error(f"LIMEcraft cannot start: {e}", icon=":material/error:")
    st.stop()

# Access control (LIMECRAFT_AUTH): until this session signs in, only the sign-in shows.
auth.gate()

sidebar.load_pending()  # a just-uploaded image: decoded and segmented here, with progress
app = state.get()
audits.keep_in_url()  # the session's audit stays in the page address on every page
sidebar.sidebar(app)

pages = [
    st.Page(
        "pages/app_pages/explain.py",
        title="Explain",
        icon=":material/travel_explore:",
        default=True,
    ),
    st.Page(
        "pages/app_pages/craft.py", title="Craft regions", icon=":material/draw:", url_path="craft"
    ),
    st.Page(
        "pages/app_pages/inspect.py", title="Inspect", icon=":material/science:", url_path="inspect"
    ),
    st.Page(
        "pages/app_pages/trust.py", title="Trust", icon=":material/verified:", url_path="trust"
    ),
    st.Page(
        "pages/app_pages/export.py", title="Export", icon=":material/download:", url_path="export"
    ),
    st.Page("pages/app_pages/audit.py", title="Audit", icon=":material/dataset:", url_path="audit"),
]
page = st.navigation(pages)
_first_page(pages)
st.set_page_config(page_title=f"{page.title} · LIMEcraft")  # each page's own browser tab title
if app.message:  # e.g. a reopened analysis's model is gone: said once, on top of the page
    sidebar.error(app.message)
    app.message = None
display.measure_main()  # narrow windows stack the pages' side-by-side columns
try:
    page.run()
except Exception as e:  # a bug must not show a traceback; the session keeps its work
    logging.getLogger("limecraft").exception("page failed")
    st.error(
        f"Something went wrong on this page ({type(e).__name__}: {e}). Your image, regions and "
        "results are kept: try again, or go to another page.",
        icon=":material/error:",
    )
finally:  # also when a page stops early or reruns: the analysis is saved when it changed
    state.save()
