"""The pure logic behind the app's drawing and clicking widgets (no Streamlit here).

The drawing canvas returns what was drawn as an RGBA raster at the canvas's displayed size; a
click returns a position in displayed pixels. These functions turn both into image-resolution
masks and region ids.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage as ndi

from .._validate import LimecraftError
from .labels import resize_nearest

__all__ = ["mask_from_canvas", "region_at", "toggle"]


def mask_from_canvas(
    image_data: np.ndarray | None, image_shape: tuple[int, int], *, fill_holes: bool = True
) -> np.ndarray:
    """The drawn area of a canvas, as a mask at the image's resolution.

    Parameters
    ----------
    image_data : (h, w, 4) uint8 ndarray or None
        The canvas's strokes (no background), at the displayed size; drawn where alpha > 0.
        The canvas must have the image's aspect ratio.
    image_shape : (H, W)
    fill_holes : bool
        Fill the inside of closed outlines (a freehand loop becomes a filled region).

    Returns
    -------
    (H, W) bool ndarray; all False when nothing was drawn.
    """
    if image_data is None:
        return np.zeros(image_shape, bool)
    data = np.asarray(image_data)
    if data.ndim != 3 or data.shape[2] != 4:
        raise LimecraftError(f"canvas data must be (h, w, 4) RGBA, got {data.shape}")
    drawn = data[..., 3] > 0
    if fill_holes and drawn.any():
        drawn = ndi.binary_fill_holes(drawn)
    return resize_nearest(drawn, tuple(image_shape))


def region_at(
    labels: np.ndarray, x: float, y: float, display_width: float, display_height: float
) -> int:
    """The region under a click given in displayed pixels.

    Parameters
    ----------
    labels : (H, W) int ndarray
    x, y : click position in the displayed image, pixels from the top-left corner
    display_width, display_height : the displayed image's size

    Returns
    -------
    int, the region id.
    """
    if not all(np.isfinite(v) for v in (x, y, display_width, display_height)):
        raise LimecraftError(f"a click must be finite numbers, got ({x}, {y})")
    if display_width <= 0 or display_height <= 0:
        raise LimecraftError("the displayed image has no size")
    h, w = labels.shape
    col = int(np.clip(x * w / display_width, 0, w - 1))
    row = int(np.clip(y * h / display_height, 0, h - 1))
    return int(labels[row, col])


def toggle(selected: frozenset[str] | set[str], key: str) -> frozenset[str]:
    """Add ``key`` to the selection, or remove it if present."""
    return frozenset(selected) ^ {key}
