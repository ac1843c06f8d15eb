"""pages/lib/quick_exit.py: one exit handler per process, whatever the number of page runs."""

import atexit
import gc

from pages.lib import quick_exit


def test_install_registers_the_freeze_once(monkeypatch):
    registered = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(quick_exit, "_installed", False)
    quick_exit.install()
    quick_exit.install()  # every page run calls it again
    assert registered == [gc.freeze]
