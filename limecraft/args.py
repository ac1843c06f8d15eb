"""What the command line's commands share for their arguments: a positive integer and the
``--out`` folder (``limecraft.cli`` and ``limecraft.watermark_cmd`` import it; neither imports
the other's module for it)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from limecraft_core._validate import LimecraftError

__all__ = ["out_dir", "positive_int"]


def positive_int(name: str) -> Callable[[str], int]:
    """argparse type: an integer of at least 1, or a one-line message naming ``name``."""

    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {s!r}") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be at least 1, got {v}")
        return v

    return parse


def out_dir(path: str) -> Path:
    """The ``--out`` folder, made if missing; a file in its place is a clear error."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise LimecraftError(f"--out {path!r} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LimecraftError(f"cannot create --out folder {path!r}: {e.strerror or e}") from None
    return out
