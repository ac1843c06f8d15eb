"""Edits of one region for the "Inspect" step: recolour, move, rotate, scale, blur or remove it.

The analyst edits one object and watches the model's prediction move; that is how a shortcut
is caught. Every function here is pure: arrays in, new arrays out, inputs never modified.
Label maps hold ints 0..K-1 with no gaps, and every pixel is assigned; so do the label maps
returned. Images of any size from 1x1 up are accepted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import ndimage as ndi
from skimage.color import hsv2rgb, rgb2hsv

from ._validate import (
    MAX_PIXELS,
    MIN_SIDE,
    LimecraftError,
    as_float_image,
    check_choice,
    check_float,
    check_int,
    check_label_map,
)
from .perturb import check_fill, inpaint, make_fill
from .regions import relabel

__all__ = [
    "EDIT_FILLS",
    "EDIT_KINDS",
    "Edit",
    "EditResult",
    "apply_edit",
    "apply_edits",
    "transform_mask",
]

EDIT_KINDS = ("color", "move", "rotate", "scale", "blur", "remove")
#: Named fills for a vacated or removed area; a ``#RRGGBB`` colour is accepted too.
EDIT_FILLS = ("inpaint", "mean", "gray", "black")

#: Above this sigma the blur runs on a coarser grid (see ``_blur_region``).
_DIRECT_BLUR_SIGMA = 8.0


def _check_edit_fill(fill: object) -> str:
    ok = isinstance(fill, str) and (fill in EDIT_FILLS or fill.startswith("#"))
    if ok and fill not in EDIT_FILLS:
        try:
            check_fill(fill)  # type: ignore[arg-type]
        except LimecraftError:
            ok = False
    if not ok:
        raise LimecraftError(
            f"fill must be one of {', '.join(EDIT_FILLS)} or a colour like #808080; got {fill!r}"
        )
    return str(fill)


def _signed(value: float, digits: int = 0) -> str:
    return f"{value:+.{digits}f}"


def _num(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class Edit:
    """One edit of one region. Only the parameters of ``kind`` matter; the defaults change nothing.

    Parameters are checked (and normalised to plain Python types, so an Edit is hashable) when
    the Edit is made; the region id is checked against the label map when it is applied.

    Attributes
    ----------
    kind : {"color", "move", "rotate", "scale", "blur", "remove"}
    region : int, the region's id in the label map the edit is applied to
    rgb_shift : (float, float, float), each in [-1, 1]; added to R, G, B (in [0, 1] units)
        after the HSV changes (``color``)
    hue : float in [-180, 180], degrees added to the hue (``color``)
    saturation : float in [0, 4], factor on the saturation (``color``)
    brightness : float in [0, 4], factor on the HSV value (``color``)
    dx, dy : int, pixels; right and down are positive (``move``)
    angle : float in [-360, 360], degrees counter-clockwise about the region's centroid
        (``rotate``)
    factor : float in [0.1, 5], scale about the region's centroid (``scale``)
    sigma : float in [0, 100], Gaussian blur in pixels (``blur``)
    fill : str
        What a vacated (``move``, ``rotate``, ``scale``) or removed (``remove``) area shows:
        ``inpaint`` (filled from its surroundings), ``mean`` (the region's mean colour, as in
        LIME), ``gray``, ``black`` or a ``#RRGGBB`` colour.

    Raises
    ------
    LimecraftError
        If ``kind`` is unknown or a parameter is out of its range; the message names the range.
    """

    kind: str
    region: int
    rgb_shift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    hue: float = 0.0
    saturation: float = 1.0
    brightness: float = 1.0
    dx: int = 0
    dy: int = 0
    angle: float = 0.0
    factor: float = 1.0
    sigma: float = 0.0
    fill: str = "inpaint"

    def __post_init__(self) -> None:
        put = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        put("kind", check_choice("edit kind", self.kind, EDIT_KINDS))
        put("region", check_int("region", self.region, 0))
        shift = self.rgb_shift
        if isinstance(shift, (str, bytes)) or np.ndim(shift) != 1 or len(shift) != 3:
            raise LimecraftError(
                f"rgb_shift must be three numbers (R, G, B), each in [-1, 1]; got {shift!r}"
            )
        put(
            "rgb_shift",
            tuple(check_float(f"rgb_shift[{i}]", v, -1.0, 1.0) for i, v in enumerate(shift)),
        )
        put("hue", check_float("hue (degrees)", self.hue, -180.0, 180.0))
        put("saturation", check_float("saturation factor", self.saturation, 0.0, 4.0))
        put("brightness", check_float("brightness factor", self.brightness, 0.0, 4.0))
        put("dx", check_int("dx (pixels)", self.dx, -MAX_PIXELS, MAX_PIXELS))
        put("dy", check_int("dy (pixels)", self.dy, -MAX_PIXELS, MAX_PIXELS))
        put("angle", check_float("angle (degrees)", self.angle, -360.0, 360.0))
        put("factor", check_float("scale factor", self.factor, 0.1, 5.0))
        put("sigma", check_float("blur sigma (pixels)", self.sigma, 0.0, 100.0))
        put("fill", _check_edit_fill(self.fill))

    def describe(self) -> str:
        """One human-readable line, e.g. ``"move region 3 by (+12, -4) px"``."""
        r = self.region
        fill = "" if self.fill == "inpaint" else f", fill {self.fill}"
        if self.kind == "color":
            parts = []
            if self.hue:
                parts.append(f"hue {_signed(self.hue, 0)}°")
            if self.saturation != 1.0:
                parts.append(f"saturation x{_num(self.saturation)}")
            if self.brightness != 1.0:
                parts.append(f"brightness x{_num(self.brightness)}")
            if any(self.rgb_shift):
                parts.append("RGB " + " ".join(_signed(v, 2) for v in self.rgb_shift))
            return f"recolour region {r} ({', '.join(parts) or 'no change'})"
        if self.kind == "move":
            return f"move region {r} by ({self.dx:+d}, {self.dy:+d}) px{fill}"
        if self.kind == "rotate":
            way = "counter-clockwise" if self.angle >= 0 else "clockwise"
            return f"rotate region {r} by {_num(abs(self.angle))}° {way}{fill}"
        if self.kind == "scale":
            return f"scale region {r} by x{_num(self.factor)}{fill}"
        if self.kind == "blur":
            return f"blur region {r} (sigma {_num(self.sigma)} px)"
        return f"remove region {r} (fill {self.fill})"


@dataclass(frozen=True)
class EditResult:
    """The image and label map after one or more edits.

    Attributes
    ----------
    image : (H, W, 3) uint8 ndarray, the edited image
    labels : (H, W) int32 ndarray, ids 0..K'-1 with no gaps; a moved, rotated or scaled
        region's id covers exactly its transformed mask
    region : int, the (last) edited region's id in ``labels``; -1 if it vanished (moved out
        of the image, scaled to nothing) or if no edit was applied
    changed : (H, W) bool ndarray, pixels whose uint8 value differs from the input's
    """

    image: np.ndarray
    labels: np.ndarray
    region: int
    changed: np.ndarray


# --------------------------------------------------------------------------- input checks


def _as_float(image: object) -> np.ndarray:
    """as_float_image for any size from 1x1: a small image is padded for the check, then cropped."""
    if isinstance(image, np.ndarray) and image.ndim in (2, 3):
        if image.ndim == 3 and image.shape[2] != 3:
            raise LimecraftError(
                f"image must have shape (H, W, 3), got {image.shape}; "
                "drop the alpha channel or convert the image to RGB first"
            )
        h, w = image.shape[:2]
        if h == 0 or w == 0:
            raise LimecraftError(f"image is {w}x{h} pixels; it must be at least 1x1")
        if min(h, w) < MIN_SIDE:
            pad = [(0, max(0, MIN_SIDE - h)), (0, max(0, MIN_SIDE - w))]
            padded = np.pad(image, pad + [(0, 0)] * (image.ndim - 2), mode="edge")
            return as_float_image(padded)[:h, :w].copy()
    return as_float_image(image)  # type: ignore[arg-type]


def _as_labels(labels: object, shape: tuple[int, int]) -> np.ndarray:
    check_label_map(labels, shape)  # type: ignore[arg-type]
    lab = np.asarray(labels).astype(np.int64)
    if lab.min() < 0:
        raise LimecraftError(
            f"label map has negative ids (min {lab.min()}); ids must be 0..K-1 "
            "(limecraft_core.relabel makes such a map)"
        )
    if lab.max() >= lab.size or not np.bincount(lab.ravel()).all():
        raise LimecraftError(
            "label map has gaps in its ids; ids must be 0..K-1 with every id present "
            "(limecraft_core.relabel makes such a map)"
        )
    return lab


def _check_region(edit: Edit, n_regions: int, where: str = "") -> None:
    if edit.region >= n_regions:
        raise LimecraftError(
            f"{where}region {edit.region} does not exist; the label map has regions "
            f"0..{n_regions - 1}"
        )


def _to_uint8(img: np.ndarray) -> np.ndarray:
    return np.round(np.clip(img, 0.0, 1.0) * 255.0).astype(np.uint8)


# --------------------------------------------------------------------------- geometry


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


# --------------------------------------------------------------------------- fills


def _filled(img: np.ndarray, hole: np.ndarray, fill: str) -> np.ndarray:
    """``img`` with the ``hole`` pixels replaced by ``fill``; a new (H, W, 3) float32 array.

    Images smaller than the engine's minimum side are padded for the fill (the padding is
    part of the hole for ``inpaint`` and a region of its own for ``mean``), then cropped.
    """
    out = img.copy()
    if not hole.any():
        return out
    h, w = hole.shape
    pad = [(0, max(0, MIN_SIDE - h)), (0, max(0, MIN_SIDE - w))]
    p_img = np.pad(img, [*pad, (0, 0)], mode="edge")
    if fill == "inpaint":
        if hole.all():  # nothing to draw from: the image's mean, as inpaint does
            values = np.broadcast_to(img.mean(axis=(0, 1)), img.shape)
        else:
            values = inpaint(p_img, np.pad(hole, pad, constant_values=True))[:h, :w]
    else:
        p_lab = np.pad(hole.astype(np.int32), pad, constant_values=2)
        values = make_fill(p_img, p_lab, fill)[:h, :w]
    out[hole] = values[hole]
    return out


# --------------------------------------------------------------------------- the edits


def _recolour(img: np.ndarray, mask: np.ndarray, edit: Edit) -> np.ndarray:
    out = img.copy()
    px = img[mask]
    if edit.hue != 0.0 or edit.saturation != 1.0 or edit.brightness != 1.0:
        hsv = rgb2hsv(px[None])[0]
        hsv[:, 0] = (hsv[:, 0] + edit.hue / 360.0) % 1.0
        hsv[:, 1] = np.clip(hsv[:, 1] * edit.saturation, 0.0, 1.0)
        hsv[:, 2] = np.clip(hsv[:, 2] * edit.brightness, 0.0, 1.0)
        px = hsv2rgb(hsv[None])[0]
    if any(edit.rgb_shift):
        px = px + np.asarray(edit.rgb_shift, np.float32)
    out[mask] = np.clip(px, 0.0, 1.0)
    return out


def _blur_region(img: np.ndarray, mask: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur (border mode ``nearest``), written into the mask's pixels only.

    Only a window of the mask's bounding box plus the kernel radius is filtered, which gives
    the same values as filtering the whole image. Above ``_DIRECT_BLUR_SIGMA`` the window is
    block-averaged by f = sigma // 4, blurred with the matching smaller sigma and sampled back
    bilinearly (within about 1/255 of the exact filter, at a fraction of the cost).
    """
    out = img.copy()
    if sigma == 0.0:
        return out
    h, w = mask.shape
    rows, cols = np.nonzero(mask)
    radius = int(4.0 * sigma + 0.5) + 1
    r0, r1 = max(0, rows.min() - radius), min(h, rows.max() + radius + 1)
    c0, c1 = max(0, cols.min() - radius), min(w, cols.max() + radius + 1)
    win = img[r0:r1, c0:c1]
    if sigma <= _DIRECT_BLUR_SIGMA:
        blurred = ndi.gaussian_filter(win, (sigma, sigma, 0), mode="nearest")
        out[rows, cols] = blurred[rows - r0, cols - c0]
        return out
    f = int(sigma // 4)
    # Border mode "nearest" at full resolution: pad the window to its unclipped extent.
    top, left = rows.min() - radius, cols.min() - radius
    bottom, right = rows.max() + radius + 1, cols.max() + radius + 1
    wh, ww = bottom - top, right - left
    nh, nw = -(-wh // f), -(-ww // f)
    pad = [(r0 - top, top + nh * f - r1), (c0 - left, left + nw * f - c1), (0, 0)]
    padded = np.pad(win, pad, mode="edge")
    rr, cc = rows - top, cols - left
    small = padded.reshape(nh, f, nw, f, 3).mean(axis=(1, 3))
    # Block averaging and bilinear upsampling each add blur (variance f^2/12 and f^2/6).
    s = math.sqrt(max(sigma**2 - f**2 / 4.0, 0.0)) / f
    small = ndi.gaussian_filter(small, (s, s, 0), mode="nearest")
    coords = np.stack([(rr + 0.5) / f - 0.5, (cc + 0.5) / f - 0.5])
    kw = {"order": 1, "mode": "nearest", "prefilter": False}
    out[rows, cols] = np.stack(
        [ndi.map_coordinates(small[..., ch], coords, **kw) for ch in range(3)], axis=1
    )
    return out


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


def _apply(img: np.ndarray, labels: np.ndarray, edit: Edit) -> tuple[np.ndarray, np.ndarray, int]:
    """One edit on a float image and a checked label map; returns new arrays."""
    if edit.kind in ("move", "rotate", "scale"):
        return _geometric(img, labels, edit)
    mask = labels == edit.region
    if edit.kind == "color":
        out = _recolour(img, mask, edit)
    elif edit.kind == "blur":
        out = _blur_region(img, mask, edit.sigma)
    else:
        out = _filled(img, mask, edit.fill)
    return out, labels.astype(np.int32), edit.region


def _result(base: np.ndarray, img: np.ndarray, labels: np.ndarray, region: int) -> EditResult:
    out = _to_uint8(img)
    changed = (out != _to_uint8(base)).any(axis=2)
    return EditResult(image=out, labels=labels.astype(np.int32), region=region, changed=changed)


def _check_edit_type(edit: object, where: str = "") -> Edit:
    if not isinstance(edit, Edit):
        raise LimecraftError(
            f"{where}expected an Edit, got {type(edit).__name__}; build one with "
            "Edit(kind, region, ...)"
        )
    return edit


def apply_edit(image: np.ndarray, labels: np.ndarray, edit: Edit) -> EditResult:
    """Apply one edit to one region.

    - ``color``: the region's pixels only: hue, saturation and brightness in HSV, then
      ``rgb_shift`` added, clipped to [0, 1]. Labels unchanged.
    - ``move``, ``rotate``, ``scale``: the object is transformed about its centroid
      (bilinear for the image, nearest for the mask; pixels pushed outside are dropped).
      Its old area is filled per ``fill``, then the object is pasted on top. In the new
      label map the region covers exactly the transformed mask; old pixels it no longer
      covers take the label of the nearest other region (a new region of their own if
      there is none); other regions lose the pixels it now covers; ids are then made
      contiguous again, in the same order (a region covered entirely disappears).
    - ``blur``: a Gaussian blur of the image, written into the region's pixels only.
      Labels unchanged.
    - ``remove``: the region's pixels get ``fill``. Labels unchanged; the region still
      exists, with its content gone.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float in [0, 1]; any size from 1x1
    labels : (H, W) int ndarray, ids 0..K-1 with no gaps
    edit : Edit

    Returns
    -------
    EditResult
        ``image`` is uint8. For a float input, ``changed`` compares with the input rounded
        to uint8.

    Raises
    ------
    LimecraftError
        If the image or label map is malformed, or ``edit.region`` is not in 0..K-1.
    """
    return apply_edits(image, labels, [_check_edit_type(edit)])


def apply_edits(image: np.ndarray, labels: np.ndarray, edits: Sequence[Edit]) -> EditResult:
    """Apply edits in order; each edit's ``region`` refers to the label map left by the ones
    before it.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float in [0, 1]; any size from 1x1
    labels : (H, W) int ndarray, ids 0..K-1 with no gaps
    edits : sequence of Edit
        An empty sequence returns copies of the inputs, with ``region`` -1.

    Returns
    -------
    EditResult
        ``region`` is the last edited region's id; ``changed`` is relative to the input.

    Raises
    ------
    LimecraftError
        If the image or label map is malformed, an item is not an Edit, or an edit's region
        does not exist in the label map it is applied to.
    """
    img = _as_float(image)
    lab = _as_labels(labels, img.shape[:2])
    if isinstance(edits, (Edit, str, bytes)) or not isinstance(edits, Sequence):
        raise LimecraftError(
            f"edits must be a list of Edit, got {type(edits).__name__}; "
            "use apply_edit for a single edit"
        )
    many = len(edits) > 1
    for i, edit in enumerate(edits):
        _check_edit_type(edit, f"edit {i}: " if many else "")
    base = img
    region = -1
    for i, edit in enumerate(edits):
        _check_region(edit, int(lab.max()) + 1, f"edit {i} ({edit.describe()}): " if many else "")
        img, lab, region = _apply(img, lab, edit)
    return _result(base, img, lab, region)
