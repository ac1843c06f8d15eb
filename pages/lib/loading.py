"""The main area's first line while a cold server gets ready: the title and "Loading the model…".

A fresh server process spends its first run importing the engine and loading the model, 6-10 s
in which the main area would be blank. ``app.py`` calls :func:`show` before that work (this
module imports nothing heavy), and the page's frame calls :func:`done` once the sidebar, which
loads the model, is drawn. From then on :func:`show` draws nothing in this process, so a warm
server's runs never flash the line.
"""

from __future__ import annotations

import threading

import streamlit as st

from pages.lib.session import session

TITLE = "LIMEcraft"
LINE = "Loading the model…"
_ready = threading.Event()  # a page's frame was drawn in this process: the model is loaded


def show() -> None:
    """The title and the loading line, at once, while this process has not drawn a page yet."""
    ses = session()
    ses.loading = None  # the slot of an earlier run is not this run's
    if _ready.is_set():
        return
    slot = st.empty()
    with slot.container():
        st.title(TITLE)
        st.caption(LINE)
    ses.loading = slot


def hide() -> None:
    """Remove this run's loading line, if any (before a message that replaces the page)."""
    ses = session()
    slot, ses.loading = ses.loading, None
    if slot is not None:
        slot.empty()


def done() -> None:
    """The model is loaded and the sidebar drawn: the page takes over the main area."""
    _ready.set()
    hide()
