"""What the machine says about itself, read from the files the system keeps (the one place in
the engine that does, so the rest of it reads no file)."""

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
