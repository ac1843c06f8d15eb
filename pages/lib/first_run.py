"""A fresh server's first run, opened at a page's own address (``/craft``, ``/audit``, ...).

Streamlit runs a fresh server's first script run in its pages-folder mode, because a ``pages/``
folder sits beside ``app.py`` (the app's own package). That mode knows only the ``*.py`` files
directly in ``pages/``, and the app's pages live in ``pages/app_pages/``: a first run opened at
``/craft`` found no page of that name, put "Page not found" over the page, and ran ``app.py``,
whose ``st.navigation`` then opened the Craft page under the message. That is what a team meets
after a restart, when the open tabs reconnect at their pages.

So each page of the app's navigation but the default one has a file in ``pages/`` named after
its address, with a number first (``1_craft.py``: the number keeps the file from being
importable as a module, so ``2_inspect.py`` shadows no ``inspect``; the pages-folder mode drops
it from the name). The file runs ``app.py`` (:func:`run_app`): the first run finds its page and
goes on into ``app.py``, as any run does, sign-in included. From then on ``st.navigation`` is in
charge, and the files are never run again. ``tests/pages/test_first_run_pages.py`` checks that
each address has its file.
"""

from __future__ import annotations

import runpy
from pathlib import Path

__all__ = ["APP", "run_app"]

#: The app's main script.
APP = Path(__file__).resolve().parents[2] / "app.py"


def run_app() -> None:
    """Run ``app.py``, as the main script's own run would."""
    runpy.run_path(str(APP), run_name="__main__")
