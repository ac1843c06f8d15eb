"""The server process ends promptly once Streamlit has stopped (SIGTERM, Ctrl-C).

Python's last step at exit is a garbage collection over every object still alive. With the
engine, torch and a model loaded, that took 11-17 s on the 2-core machine after Streamlit had
said "Stopping...": longer than ``docker stop`` waits (10 s) before it kills the container.
Those objects are freed by the process's end anyway, so at exit they are moved out of the
collector's sight first (``gc.freeze``). Every other exit handler still runs, and the exit
status is unchanged.
"""

from __future__ import annotations

import atexit
import gc

_installed = False


def install() -> None:
    """Once per process (later calls do nothing): at exit, skip the final collection.

    Exit handlers run last-registered first, so this one runs before those registered earlier,
    which still run after it."""
    global _installed
    if not _installed:
        atexit.register(gc.freeze)
        _installed = True
