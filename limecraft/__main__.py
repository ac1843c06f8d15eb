"""``python -m limecraft``, and the ``limecraft`` command (``run``); see :mod:`limecraft.cli`."""

import sys

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)


def run() -> int:
    """The ``limecraft`` command's entry point (``pyproject.toml``'s ``[project.scripts]``)."""
    from .cli import main

    return main()


if __name__ == "__main__":
    sys.exit(run())
