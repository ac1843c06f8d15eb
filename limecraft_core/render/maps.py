"""Whole-image pictures of numbers per region or per cell.

The signed heatmap and its colour bar, region boundaries, the per-region delta map, the region
map, and the audit's location map.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from skimage.segmentation import find_boundaries

from .._validate import LimecraftError, as_float_image, check_float, check_int
from .colours import _u8, diverging_colors, region_colors, sequential_colors


@dataclass(frozen=True)
class Heatmap:
    """A signed map over the image, with what a colorbar needs.

    Attributes
    ----------
    image : (H, W, 3) uint8 ndarray, the map blended over the image
    vmin, vmax : float, the values at the two ends of the colour scale (vmin = -vmax)
    colorbar : (24, 256, 3) uint8 ndarray, the colour scale from vmin (left) to vmax (right)
    """

    image: np.ndarray
    vmin: float
    vmax: float
    colorbar: np.ndarray


def _check(image: np.ndarray, segments: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
    img = as_float_image(image)
    if not isinstance(segments, np.ndarray) or segments.ndim != 2:
        raise LimecraftError("segments must be a 2-D integer array")
    if not np.issubdtype(segments.dtype, np.integer):
        raise LimecraftError(
            f"segments must hold integer region ids 0..K-1, got dtype {segments.dtype}"
        )
    if segments.shape != img.shape[:2]:
        raise LimecraftError(f"segments {segments.shape} do not match the image {img.shape[:2]}")
    if segments.size and int(segments.min()) < 0:
        raise LimecraftError("segments must hold region ids 0..K-1; found a negative id")
    if values is not None and len(values) != int(segments.max()) + 1:
        raise LimecraftError(f"{len(values)} values given for {int(segments.max()) + 1} regions")
    return img


def location_map(grid: np.ndarray, *, side: int = 256, vmax: float | None = None) -> Heatmap:
    """An unsigned map in normalised image coordinates (an audit's mean |weight| per position)
    as a square picture, brighter where the value is larger, with its colour scale.

    Parameters
    ----------
    grid : (G, G) float ndarray, values >= 0 (NaN counts as 0)
    side : int in [16, 4096], pixels on each side of the picture (cells are drawn as blocks)
    vmax : float > 0, optional; the value of the brightest colour (default the grid's maximum)

    Returns
    -------
    Heatmap with ``vmin`` 0; its colorbar runs from 0 (left) to ``vmax`` (right).
    """
    g = np.asarray(grid, np.float64)
    if g.ndim != 2 or g.shape[0] != g.shape[1] or g.shape[0] < 1:
        raise LimecraftError(f"a location map must be a square 2-D grid, got shape {g.shape}")
    side = check_int("side", side, 16, 4096)
    top = float(np.nanmax(g)) if vmax is None else check_float("vmax", vmax, 0.0)
    top = top if top > 0 else 1.0
    idx = np.minimum((np.arange(side) * g.shape[0]) // side, g.shape[0] - 1)
    picture = _u8(sequential_colors(g[np.ix_(idx, idx)], top))
    bar = _u8(np.repeat(sequential_colors(np.linspace(0, top, 256), top)[None], 24, axis=0))
    return Heatmap(image=picture, vmin=0.0, vmax=top, colorbar=bar)


def colorbar(width: int = 256, height: int = 24) -> np.ndarray:
    """(height, width, 3) uint8 strip of the diverging scale, negative on the left."""
    row = diverging_colors(np.linspace(-1, 1, width), 1.0)
    return _u8(np.repeat(row[None], height, axis=0))


def boundaries(
    image: np.ndarray, segments: np.ndarray, color: tuple[float, float, float] = (1.0, 1.0, 0.0)
) -> np.ndarray:
    """The image with region boundaries drawn in ``color``.

    Returns
    -------
    (H, W, 3) uint8 ndarray.
    """
    img = _check(image, segments).copy()
    img[find_boundaries(segments, mode="inner")] = color
    return _u8(img)


def heatmap(
    image: np.ndarray,
    segments: np.ndarray,
    values: np.ndarray,
    *,
    alpha: float = 0.75,
    vmax: float | None = None,
) -> Heatmap:
    """Each region painted with its signed value over the image, opacity growing with |value|.

    A region at ``vmax`` gets its colour at opacity ``alpha``; a region at 0 shows the image
    unchanged, so the strong regions are vivid and the rest stays a photo, not a grey wash.

    Parameters
    ----------
    image : (H, W, 3) uint8 or float ndarray
    segments : (H, W) int ndarray, 0..K-1
    values : (K,) float ndarray, e.g. the weights; NaN (a value not computed) is drawn neutral
    alpha : float in [0, 1], opacity of the colour at |value| = vmax (it falls as the square
        root of |value| / vmax, so that middling values still show)
    vmax : float >= 0, optional; default max |values| over the finite values, symmetric around 0

    Returns
    -------
    Heatmap
    """
    img = _check(image, segments, values)
    alpha = check_float("alpha", alpha, 0.0, 1.0)
    values = np.asarray(values, np.float64)
    finite = np.abs(values[np.isfinite(values)])
    if vmax is None:
        vmax = float(finite.max()) if finite.size else 0.0
    else:
        vmax = check_float("vmax", vmax, 0.0)
    vmax = vmax if vmax > 0 else 1.0
    mag = np.clip(np.abs(np.where(np.isfinite(values), values, 0.0)) / vmax, 0.0, 1.0)
    opacity = (alpha * np.sqrt(mag))[segments][..., None]
    colours = diverging_colors(values, vmax)[segments]
    out = (1 - opacity) * img + opacity * colours
    return Heatmap(image=_u8(out), vmin=-vmax, vmax=vmax, colorbar=colorbar())


def delta_map(
    image: np.ndarray, segments: np.ndarray, deltas: np.ndarray, *, alpha: float = 0.75
) -> Heatmap:
    """Per-region prediction change when that region alone is hidden (positive = score drops).

    Drawn like :func:`heatmap`: vivid where the change is large, the plain image where it is 0.
    """
    return heatmap(image, segments, deltas, alpha=alpha)


def region_map(image: np.ndarray, segments: np.ndarray, *, alpha: float = 0.45) -> np.ndarray:
    """Every region in its own colour over the image, with boundaries.

    Parameters
    ----------
    alpha : float in [0, 1], opacity of the colours

    Returns
    -------
    (H, W, 3) uint8 ndarray.
    """
    img = _check(image, segments)
    alpha = check_float("alpha", alpha, 0.0, 1.0)
    colours = region_colors(int(segments.max()) + 1)[segments]
    out = (1 - alpha) * img + alpha * colours
    out[find_boundaries(segments, mode="inner")] = 1.0
    return _u8(out)
