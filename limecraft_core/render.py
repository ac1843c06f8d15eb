"""Pictures of an explanation, as arrays. Nothing here displays anything; the caller decides how."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from skimage.segmentation import find_boundaries

from ._validate import LimecraftError, as_float_image, check_float, check_int

__all__ = [
    "Heatmap",
    "boundaries",
    "colorbar",
    "delta_map",
    "diverging_colors",
    "heatmap",
    "id_positions",
    "outline_masks",
    "region_colors",
    "region_map",
    "softmax",
    "top_regions",
]

# PiYG (ColorBrewer): magenta for negative, green for positive; readable by most colour-blind
# viewers, unlike a plain red-green ramp.
_PIYG = (
    np.array(
        [
            [142, 1, 82],
            [197, 27, 125],
            [222, 119, 174],
            [241, 182, 218],
            [253, 224, 239],
            [247, 247, 247],
            [230, 245, 208],
            [184, 225, 134],
            [127, 188, 65],
            [77, 146, 33],
            [39, 100, 25],
        ],
        dtype=np.float64,
    )
    / 255.0
)
POSITIVE = np.array([0.0, 0.75, 0.2])  # green: supports the class
NEGATIVE = np.array([0.9, 0.1, 0.1])  # red: speaks against it


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
    if segments.shape != img.shape[:2]:
        raise LimecraftError(f"segments {segments.shape} do not match the image {img.shape[:2]}")
    if values is not None and len(values) != int(segments.max()) + 1:
        raise LimecraftError(f"{len(values)} values given for {int(segments.max()) + 1} regions")
    return img


def _u8(a: np.ndarray) -> np.ndarray:
    return (np.clip(a, 0, 1) * 255 + 0.5).astype(np.uint8)


def diverging_colors(values: np.ndarray, vmax: float) -> np.ndarray:
    """Map values in [-vmax, vmax] to RGB floats on the PiYG scale; (...,) -> (..., 3)."""
    v = np.asarray(values, np.float64)
    v = np.where(np.isfinite(v), v, 0.0)  # a value that was not computed is drawn as neutral
    t = np.clip((v / max(vmax, 1e-12) + 1) / 2, 0, 1)
    pos = t * (len(_PIYG) - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, len(_PIYG) - 1)
    frac = (pos - lo)[..., None]
    return _PIYG[lo] * (1 - frac) + _PIYG[hi] * frac


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
    alpha: float = 0.65,
    vmax: float | None = None,
) -> Heatmap:
    """Each region painted with its signed value, blended over a grayscale copy of the image.

    Parameters
    ----------
    image : (H, W, 3) uint8 or float ndarray
    segments : (H, W) int ndarray, 0..K-1
    values : (K,) float ndarray, e.g. the weights; NaN (a value not computed) is drawn neutral
    alpha : float in [0, 1], opacity of the colours
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
    gray = img.mean(axis=2, keepdims=True)
    colours = diverging_colors(values, vmax)[segments]
    out = (1 - alpha) * gray + alpha * colours
    return Heatmap(image=_u8(out), vmin=-vmax, vmax=vmax, colorbar=colorbar())


def top_regions(
    image: np.ndarray,
    segments: np.ndarray,
    weights: np.ndarray,
    k: int = 5,
    *,
    positive: bool = True,
    negative: bool = True,
    alpha: float = 0.5,
    dim_others: float = 0.35,
    show_boundaries: bool = True,
) -> np.ndarray:
    """The top-k positive regions tinted green and the top-k negative ones red.

    Parameters
    ----------
    weights : (K,) float ndarray
    k : int >= 1, how many of each sign
    alpha : float in [0, 1], opacity of the tint
    dim_others : float in [0, 1], how much the other regions are darkened
    show_boundaries : draw the boundaries of the tinted regions

    Returns
    -------
    (H, W, 3) uint8 ndarray.
    """
    img = _check(image, segments, weights)
    k = check_int("k", k, 1)
    alpha = check_float("alpha", alpha, 0.0, 1.0)
    dim_others = check_float("dim_others", dim_others, 0.0, 1.0)
    weights = np.asarray(weights, np.float64)
    order = np.argsort(-weights, kind="stable")
    pos = [i for i in order[:k] if weights[i] > 0] if positive else []
    neg = [i for i in order[::-1][:k] if weights[i] < 0] if negative else []
    out = img * (1 - dim_others)
    for ids, colour in ((pos, POSITIVE), (neg, NEGATIVE)):
        m = np.isin(segments, ids)
        out[m] = (1 - alpha) * img[m] + alpha * colour
        if show_boundaries and m.any():
            out[find_boundaries(np.where(m, segments, -1), mode="inner") & m] = colour
    return _u8(out)


def delta_map(
    image: np.ndarray, segments: np.ndarray, deltas: np.ndarray, *, alpha: float = 0.65
) -> Heatmap:
    """Per-region prediction change when that region alone is hidden (positive = score drops)."""
    return heatmap(image, segments, deltas, alpha=alpha)


def region_colors(n: int, seed: int = 7) -> np.ndarray:
    """(n, 3) float ndarray of distinct, fairly bright colours (golden-ratio hues)."""
    from skimage.color import hsv2rgb

    h = (np.arange(n) * 0.61803398875 + (seed % 100) / 100) % 1.0
    hsv = np.stack([h, np.full(n, 0.65), np.full(n, 0.95)], axis=1)
    return hsv2rgb(hsv[None])[0]


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


def id_positions(labels: np.ndarray) -> list[tuple[int, float, float]]:
    """A point well inside each region, where its id can be written.

    Parameters
    ----------
    labels : (H, W) int ndarray, ids 0..K-1 (a missing id is skipped)

    Returns
    -------
    list of (id, x, y), in pixel units of ``labels``: the point farthest from the region's
    border (a centroid can fall outside a ring or a crescent).
    """
    from scipy import ndimage as ndi

    labels = np.asarray(labels)
    if labels.ndim != 2 or not np.issubdtype(labels.dtype, np.integer):
        raise LimecraftError("labels must be a 2-D integer label map")
    out = []
    for region, box in enumerate(ndi.find_objects(labels + 1)):
        if box is None:
            continue
        m = np.pad(labels[box] == region, 1)
        dist = ndi.distance_transform_edt(m)[1:-1, 1:-1]
        y, x = np.unravel_index(np.argmax(dist), dist.shape)
        out.append((region, box[1].start + x + 0.5, box[0].start + y + 0.5))
    return out


def outline_masks(
    image: np.ndarray,
    masks: list[np.ndarray],
    colours: list[tuple[int, int, int]],
    alpha: float = 0.35,
) -> np.ndarray:
    """The image with each mask tinted and outlined in its colour (handcrafted regions).

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray
    masks : list of (H, W) bool ndarrays; a later mask is drawn over an earlier one
    colours : list of (R, G, B) ints in [0, 255], one per mask
    alpha : float in [0, 1], opacity of the tint

    Returns
    -------
    (H, W, 3) uint8 ndarray; ``image`` is not modified.
    """
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3:
        raise LimecraftError("image must be (H, W, 3)")
    if len(masks) != len(colours):
        raise LimecraftError("one colour per mask is needed")
    alpha = check_float("alpha", alpha, 0.0, 1.0)
    out = image.astype(np.float32)
    for mask, colour in zip(masks, colours, strict=True):
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != image.shape[:2]:
            raise LimecraftError(
                f"a mask is {mask.shape[1]}x{mask.shape[0]}, the image "
                f"{image.shape[1]}x{image.shape[0]}; they must match"
            )
        rgb = np.asarray(colour, np.float32)
        out[mask] = (1 - alpha) * out[mask] + alpha * rgb
        out[find_boundaries(mask, mode="inner")] = rgb
    return np.clip(out, 0, 255).astype(np.uint8)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Class probabilities from a model's raw scores (numerically stable).

    Parameters
    ----------
    logits : (C,) float ndarray

    Returns
    -------
    (C,) float64 ndarray, non-negative, summing to 1.
    """
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()
