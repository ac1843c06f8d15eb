"""LIMEcraft, the web app: ``streamlit run app.py``.

Opens on a demo image with the demo model; the Explain page's button works at once.
"""

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import logging

import streamlit as st

from limecraft_core import LimecraftError

st.set_page_config(page_title="LIMEcraft", page_icon=":material/lightbulb:", layout="wide")


from pages.lib import auth, loading, quick_exit  # none imports the engine: they answer at once

quick_exit.install()  # a stopped server exits in a second or two, not 10-15 s (docker stop)

# Access control (LIMECRAFT_AUTH): until this session signs in, only the sign-in shows.
auth.gate()
# A cold server imports the engine and loads the model next, for seconds: the title and a
# "Loading the model…" line show at once, until the page's frame is drawn.
loading.show()

try:  # the settings are read on import (e.g. LIMECRAFT_DEFAULT_MODEL): a bad one is a message
    from pages.lib import audits, sidebar, state
except LimecraftError as e:
    loading.hide()
    st.error(f"LIMEcraft cannot start: {e}", icon=":material/error:")
    st.stop()

sidebar.load_pending()  # a just-uploaded image: decoded and segmented here, with progress
state.get()
audits.keep_in_url()  # the session's audit stays in the page address on every page

# Every page script starts with pages.lib.frame.start() (the sidebar and the page's frame), so
# that every widget is made inside the page's own run: see pages/lib/frame.py.
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
st.set_page_config(page_title=f"{page.title} · LIMEcraft")  # each page's own browser tab title
try:
    page.run()
except Exception as e:  # a bug must not show a traceback; the session keeps its work
    logging.getLogger("limecraft").exception("page failed")
    loading.hide()  # a page that failed before its frame was drawn
    st.error(
        f"Something went wrong on this page ({type(e).__name__}: {e}). Your image, regions and "
        "results are kept: try again, or go to another page.",
        icon=":material/error:",
    )
finally:  # also when a page stops early or reruns: the analysis is saved when it changed
    state.save()
