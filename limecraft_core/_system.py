"""What the machine says about itself: the CPU's features, from ``/proc/cpuinfo``.

It sits on the ground, below the classifier that asks it (for the bf16 choice), and it is the
one engine module outside ``io/`` that reads a file: the kernel's own description of the CPU,
not a user's file (``tests/test_layers.py`` names it).
"""

from __future__ import annotations

__all__ = ["cpu_flags"]


def cpu_flags() -> frozenset[str] | None:
    """The first CPU's feature flags from ``/proc/cpuinfo``, or None where there is no such file
    (not Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            line = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return None
    return frozenset(line.split(":", 1)[-1].split())
