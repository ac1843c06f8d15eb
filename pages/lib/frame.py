"""What every page starts with: the sidebar (image, model, recent analyses), a message left for
the page, and the main area's width.

Each page script calls :func:`start` first, so that these widgets are made inside the page's own
run. A fresh server's first script run goes through Streamlit's pages-folder navigation (our
``pages/`` package sits beside ``app.py``), and a widget made outside a page would get another
id in that one run than in every later run, so the browser would drop what was picked in it
(a model file picked in the first seconds vanished). Inside a page, a widget's id is the same in
every run. ``app.py`` itself makes no widget (``tests/pages/test_streamlit_public_api.py``)."""

from __future__ import annotations

import streamlit as st

from pages.lib import display, loading, sidebar, state
from pages.lib.analysis import Analysis
from pages.lib.session import session


def start() -> Analysis:
    """The sidebar and the page's frame; returns the session's state."""
    app = state.get()
    sidebar.sidebar(app)  # loads the model
    loading.done()  # a cold server's "Loading the model…" line gives way to the page
    if app.message:  # e.g. a reopened analysis's model is gone: said once, on top of the page
        sidebar.error(app.message)
        app.message = None
    ses = session()
    note, ses.run_note = ses.run_note, None
    if note:  # a reload (F5) interrupted an Explain: said once, on top of the page
        st.info(note, icon=":material/history:")
    display.measure_main()  # narrow windows stack the pages' side-by-side columns
    return app
