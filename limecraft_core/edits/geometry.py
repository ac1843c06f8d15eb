"""Moving, rotating and scaling a region.

The warp, the region's mask carried along (``transform_mask``), the object sampled at its new
place, and the vacated pixels given to their nearest neighbour region.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import ndimage as ndi

from .._validate import (
    MAX_PIXELS,
    LimecraftError,
    check_float,
    check_int,
)
from ..regions import relabel
from .edit import Edit
from .pixels import _filled


@dataclass(frozen=True)
class _Warp:
    """A region's mask after a transform, and where each of its pixels comes from."""

    mask: np.ndarray  # (H, W) bool
    rows: np.ndarray  # (N,) int, the new mask's pixels
    cols: np.ndarray
    src_y: np.ndarray  # (N,) float, their source positions
    src_x: np.ndarray
    exact: bool  # integer translation: sources are whole pixels


def _warp(
    mask: np.ndarray,
    *,
    dx: int,
    dy: int,
    angle: float,
    factor: float,
    center: tuple[float, float] | None,
) -> _Warp:
    """Nearest-neighbour inverse mapping of ``mask`` under the affine transform about ``center``.

    Forward map in (x, y) image coordinates (y down):
    ``p' = c + factor * R(angle) (p - c) + (dx, dy)`` with R counter-clockwise on screen.
    """
    h, w = mask.shape
    rows, cols = np.nonzero(mask)
    empty = np.zeros(0, np.intp)
    if rows.size == 0:
        return _Warp(np.zeros((h, w), bool), empty, empty, empty * 1.0, empty * 1.0, True)
    if angle == 0.0 and factor == 1.0:
        nr, nc = rows + dy, cols + dx
        keep = (nr >= 0) & (nr < h) & (nc >= 0) & (nc < w)
        new = np.zeros((h, w), bool)
        new[nr[keep], nc[keep]] = True
        src_r, src_c = rows[keep], cols[keep]
        return _Warp(new, nr[keep], nc[keep], src_r * 1.0, src_c * 1.0, True)
    cx, cy = (float(cols.mean()), float(rows.mean())) if center is None else center
    t = math.radians(angle)
    cos, sin = math.cos(t), math.sin(t)
    # Where the mask's bounding box (pixel extents) lands bounds the new mask.
    bx = np.array([cols.min() - 0.5, cols.max() + 0.5]) - cx
    by = np.array([rows.min() - 0.5, rows.max() + 0.5]) - cy
    px, py = np.meshgrid(bx, by)
    fx = cx + factor * (cos * px + sin * py) + dx
    fy = cy + factor * (-sin * px + cos * py) + dy
    c0, c1 = max(0, math.floor(fx.min()) - 1), min(w - 1, math.ceil(fx.max()) + 1)
    r0, r1 = max(0, math.floor(fy.min()) - 1), min(h - 1, math.ceil(fy.max()) + 1)
    new = np.zeros((h, w), bool)
    if c0 > c1 or r0 > r1:
        return _Warp(new, empty, empty, empty * 1.0, empty * 1.0, False)
    yy, xx = np.mgrid[r0 : r1 + 1, c0 : c1 + 1]
    u = (xx - dx - cx) / factor
    v = (yy - dy - cy) / factor
    sx = cx + cos * u - sin * v
    sy = cy + sin * u + cos * v
    sr = np.floor(sy + 0.5).astype(np.intp)
    sc = np.floor(sx + 0.5).astype(np.intp)
    hit = (sr >= 0) & (sr < h) & (sc >= 0) & (sc < w)
    hit[hit] = mask[sr[hit], sc[hit]]
    new[r0 : r1 + 1, c0 : c1 + 1] = hit
    return _Warp(new, yy[hit], xx[hit], sy[hit], sx[hit], False)


def _check_center(center: object) -> tuple[float, float] | None:
    if center is None:
        return None
    if isinstance(center, (str, bytes)) or not isinstance(center, Sequence) or len(center) != 2:
        raise LimecraftError(f"center must be None or (x, y) in pixels; got {center!r}")
    x, y = center
    return (check_float("center x", x, -math.inf), check_float("center y", y, -math.inf))


def transform_mask(
    mask: np.ndarray,
    *,
    dx: int = 0,
    dy: int = 0,
    angle: float = 0.0,
    factor: float = 1.0,
    center: tuple[float, float] | None = None,
) -> np.ndarray:
    """Move, rotate and scale a mask (nearest neighbour); pixels pushed outside are dropped.

    The forward map is ``p' = center + factor * R(angle) (p - center) + (dx, dy)`` in (x, y)
    pixel coordinates, y down; every output pixel takes the value of the input pixel nearest
    to its preimage, so the result has no holes.

    Parameters
    ----------
    mask : (H, W) bool ndarray (anything that casts to bool), any size from 1x1
    dx, dy : int, pixels; right and down are positive
    angle : float in [-360, 360], degrees counter-clockwise on screen
    factor : float in [0.1, 5]
    center : (x, y) floats, or None for the mask's centroid
        x is the column and y the row, as in ``skimage.transform.rotate``.

    Returns
    -------
    (H, W) bool ndarray, a new array. An empty mask stays empty.

    Raises
    ------
    LimecraftError
        If ``mask`` is not 2-D or a parameter is out of range.
    """
    if not isinstance(mask, np.ndarray) or mask.ndim != 2:
        got = getattr(mask, "shape", type(mask).__name__)
        raise LimecraftError(f"mask must be a 2-D array, got {got}")
    if not (mask.dtype == np.bool_ or np.issubdtype(mask.dtype, np.number)):
        raise LimecraftError(f"mask must be boolean or numeric, got dtype {mask.dtype}")
    m = mask.astype(bool)
    return _warp(
        m,
        dx=check_int("dx (pixels)", dx, -MAX_PIXELS, MAX_PIXELS),
        dy=check_int("dy (pixels)", dy, -MAX_PIXELS, MAX_PIXELS),
        angle=check_float("angle (degrees)", angle, -360.0, 360.0),
        factor=check_float("scale factor", factor, 0.1, 5.0),
        center=_check_center(center),
    ).mask


def _sample_object(img: np.ndarray, mask: np.ndarray, warp: _Warp) -> np.ndarray:
    """The object's colours at the warped pixels, (N, 3) float32.

    Bilinear on premultiplied values (image * mask, then / interpolated mask), so that the
    background around the object does not bleed into its edges.
    """
    if warp.exact:
        return img[warp.src_y.astype(np.intp), warp.src_x.astype(np.intp)]
    h, w = mask.shape
    rows, cols = np.nonzero(mask)
    r0, r1 = max(0, rows.min() - 1), min(h, rows.max() + 2)
    c0, c1 = max(0, cols.min() - 1), min(w, cols.max() + 2)
    m = mask[r0:r1, c0:c1].astype(np.float32)
    pm = img[r0:r1, c0:c1] * m[..., None]
    coords = np.stack([warp.src_y - r0, warp.src_x - c0])
    kw = {"order": 1, "mode": "nearest", "prefilter": False}
    den = ndi.map_coordinates(m, coords, **kw)
    num = np.stack([ndi.map_coordinates(pm[..., ch], coords, **kw) for ch in range(3)], axis=1)
    return (num / np.maximum(den, 1e-6)[:, None]).astype(np.float32)


def _nearest_other(labels: np.ndarray, old: np.ndarray) -> np.ndarray:
    """For each pixel, the label of the nearest pixel outside ``old`` (a non-empty mask).

    Computed on the mask's bounding box plus one pixel: the point of that window nearest to
    any outside pixel lies on its rim, which is outside ``old``, so the answer is the same
    as on the whole image. Returns the window's labels and its slices.
    """
    h, w = old.shape
    rows, cols = np.nonzero(old)
    r0, r1 = max(0, rows.min() - 1), min(h, rows.max() + 2)
    c0, c1 = max(0, cols.min() - 1), min(w, cols.max() + 2)
    sub = old[r0:r1, c0:c1]
    idx = ndi.distance_transform_edt(sub, return_distances=False, return_indices=True)
    out = labels.copy()
    out[r0:r1, c0:c1] = labels[r0:r1, c0:c1][idx[0], idx[1]]
    return out


def _geometric(
    img: np.ndarray, labels: np.ndarray, edit: Edit
) -> tuple[np.ndarray, np.ndarray, int]:
    old = labels == edit.region
    params = {"dx": 0, "dy": 0, "angle": 0.0, "factor": 1.0}
    if edit.kind == "move":
        params.update(dx=edit.dx, dy=edit.dy)
    elif edit.kind == "rotate":
        params["angle"] = edit.angle
    else:
        params["factor"] = edit.factor
    if params == {"dx": 0, "dy": 0, "angle": 0.0, "factor": 1.0}:
        return img.copy(), labels.copy(), edit.region
    warp = _warp(old, center=None, **params)
    vacated = old & ~warp.mask
    # The whole old area is the hole, so that the object's own colours do not leak into the
    # fill; the object is then pasted on top.
    out = _filled(img, old, edit.fill) if vacated.any() else img.copy()
    out[warp.rows, warp.cols] = _sample_object(img, old, warp)

    new_labels = labels.copy()
    if vacated.any():
        if old.all():  # no other region to extend: the vacated area becomes one of its own
            new_labels[vacated] = labels.max() + 1
        else:
            new_labels[vacated] = _nearest_other(labels, old)[vacated]
    new_labels[warp.mask] = edit.region
    new_labels = relabel(new_labels)
    region = int(new_labels[warp.rows[0], warp.cols[0]]) if warp.rows.size else -1
    return out, new_labels, region
