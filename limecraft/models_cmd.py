"""``models``: list the registered models and whether each can run now."""

from __future__ import annotations

import argparse

__all__ = ["cmd_models"]


def cmd_models(_a: argparse.Namespace) -> int:
    from models.registry import list_models

    rows = [
        (
            m.name,
            "yes" if m.ready else "no",
            str(m.input_size),
            str(m.num_classes),
            m.reason or m.description,
        )
        for m in list_models()
    ]
    head = ("name", "ready", "input", "classes", "notes")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    for r in [head, *rows]:
        print("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4])
    return 0
