"""Masks named as the images, in a folder: each image's expected mask, or the analyst's own regions.

The matching by file name that the audit's ``--expected-masks`` and ``--regions-masks`` share,
and one image's own regions mask read for :func:`limecraft_core.propose`'s ``given`` (so that
this module imports neither the audit nor the proposers, and the proposers read no file).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._validate import LimecraftError
from .images import _read_bytes, decode_mask

__all__ = ["IMAGE_SUFFIXES", "check_images_source", "match_masks", "read_regions_mask"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff", ".gif")


def check_images_source(source: str | Path) -> Path:
    """``source`` (a folder of images, or a list file) as a Path, if it exists. Light on
    purpose: the command line checks it before anything loads torch, so a typo is answered at
    once.

    Raises
    ------
    LimecraftError
        If ``source`` does not exist.
    """
    src = Path(source)
    if not src.exists():
        raise LimecraftError(f"IMAGES {str(src)!r} does not exist: give a folder or a list file")
    return src


def _is_image_name(name: str) -> bool:
    base = os.path.basename(name)
    return not base.startswith(".") and base.lower().endswith(IMAGE_SUFFIXES)


def match_masks(
    files: Sequence[tuple[str, Path]], masks: str | Path, what: str = "--expected-masks"
) -> dict[str, Path]:
    """Each image's mask in the folder ``masks`` (expected masks, or the analyst's own regions):
    the file named as the image (its relative path without the extension, any image
    extension), else one with the same bare file name when only one has it. Images without a
    mask are left out.

    Raises
    ------
    LimecraftError
        If ``masks`` is not a folder (the message names it as ``what``).
    """
    root = Path(masks)
    if not root.is_dir():
        raise LimecraftError(f"{what} {str(root)!r} is not a folder")
    by_rel: dict[str, Path] = {}
    by_stem: dict[str, list[Path]] = {}
    for p in root.rglob("*"):
        if p.is_file() and _is_image_name(p.name):
            rel = p.relative_to(root).with_suffix("").as_posix()
            by_rel.setdefault(rel, p)
            by_stem.setdefault(p.stem, []).append(p)
    out = {}
    for name, _ in files:
        rel = Path(name).with_suffix("").as_posix()
        if rel in by_rel:
            out[name] = by_rel[rel]
        elif len(by_stem.get(Path(name).stem, [])) == 1:
            out[name] = by_stem[Path(name).stem][0]
    return out


def read_regions_mask(masks_dir: str | Path, image_name: str | None) -> np.ndarray | None:
    """The analyst's own regions mask for the image ``image_name`` in the folder ``masks_dir``
    (matched as :func:`match_masks` does), or None when the folder has none for it.

    Returns
    -------
    (H, W) int32 ndarray, each distinct non-zero value one region; or None.

    Raises
    ------
    LimecraftError
        If ``image_name`` is missing, the folder is no folder or its mask cannot be decoded.
    """
    if image_name is None:
        raise LimecraftError("give the image's file name (image_name) to find its regions mask")
    found = match_masks([(image_name, Path(image_name))], masks_dir, "--regions-masks")
    path = found.get(image_name)
    if path is None:
        return None
    return decode_mask(_read_bytes(path, "regions mask"), f"regions mask {path.name!r}")
