"""Demo data on disk: the demo model's synthetic pictures with their tag and shape masks and
``labels.json``, in the flat layout of ``python -m limecraft demo-data`` or the audit layout of
``demo-data --mixed`` (which the app's Audit page writes too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from limecraft_core.io import encode_png

from . import demo

__all__ = ["demo_entry", "write_demo", "write_demo_mixed"]


def demo_entry(s: demo.DemoSample, file: str, tag: str, shape: str, **more: Any) -> dict[str, Any]:
    """One picture's entry of ``labels.json``: its file, its masks' files, its classes."""
    return {
        "file": file,
        "tag_mask": tag,
        "shape_mask": shape,
        "shape_class": int(s.shape_class),
        "tag_class": int(s.tag_class),
        "shape_label": demo.CLASS_NAMES[s.shape_class],
        "tag_label": demo.CLASS_NAMES[s.tag_class],
        **more,
    }


def _png(mask: np.ndarray) -> bytes:
    return encode_png((mask * 255).astype(np.uint8))


def write_demo(out: Path, count: int, seed: int, mode: str = "aligned") -> list[dict[str, Any]]:
    """``count`` pictures in ``out`` (an existing folder): ``demo_NNNN.png``, its
    ``_tag.png`` and ``_shape.png`` masks, and labels.json. Returns labels.json's entries.

    Parameters
    ----------
    mode : {"aligned", "conflict"}, whether tag and shape agree (see :func:`models.demo.generate`)
    """
    entries: list[dict[str, Any]] = []
    for i, s in enumerate(demo.generate(count, seed=seed, mode=mode)):
        name = f"demo_{i:04d}"
        (out / f"{name}.png").write_bytes(encode_png(s.image))
        (out / f"{name}_tag.png").write_bytes(_png(s.tag_mask))
        # the drawn shape, never the tag's pixels
        (out / f"{name}_shape.png").write_bytes(_png(s.shape_mask))
        entries.append(demo_entry(s, f"{name}.png", f"{name}_tag.png", f"{name}_shape.png"))
    (out / "labels.json").write_text(json.dumps(entries, indent=2))
    return entries


def write_demo_mixed(out: Path, count: int, seed: int) -> list[dict[str, Any]]:
    """The audit layout of ``demo-data --mixed`` in ``out``: images/, masks/ (the drawn shapes,
    the expected regions), tags/ and labels.json. Returns labels.json's entries."""
    folders = {k: out / k for k in ("images", "masks", "tags")}
    for f in folders.values():
        f.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, (mode, s) in enumerate(demo.generate_mixed(count, seed=seed)):
        name = f"demo_{i:04d}.png"
        (folders["images"] / name).write_bytes(encode_png(s.image))
        (folders["masks"] / name).write_bytes(_png(s.shape_mask))
        (folders["tags"] / name).write_bytes(_png(s.tag_mask))
        entries.append(demo_entry(s, name, f"tags/{name}", f"masks/{name}", mode=mode))
    (out / "labels.json").write_text(json.dumps(entries, indent=2))
    return entries
