"""``python -m limecraft``, and the ``limecraft`` command (``run``); see :mod:`limecraft.cli`."""

import os
import sys

# Busy-waiting OpenMP threads cost ~8 ms per torch op on small, throttled machines; waiting
# passively costs nothing measurable elsewhere. Must be set before torch starts its pool.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def run() -> int:
    """The ``limecraft`` command's entry point (``pyproject.toml``'s ``[project.scripts]``)."""
    from .cli import main

    return main()


if __name__ == "__main__":
    sys.exit(run())
