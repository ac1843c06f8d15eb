"""Pictures of an explanation, as arrays. Nothing here displays anything; the caller decides how."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from skimage.segmentation import find_boundaries

from ._validate import MIN_SIDE, LimecraftError, as_float_image, check_float, check_int
from .limits import THRESHOLDS

__all__ = [
    "MAX_ALPHA",
    "MIN_SHARE",
    "Heatmap",
    "TintedRegions",
    "boundaries",
    "colorbar",
    "delta_map",
    "diverging_colors",
    "explanation_overlay",
    "heatmap",
    "id_positions",
    "location_map",
    "outline_masks",
    "overlay_legend",
    "region_colors",
    "region_map",
    "sequential_colors",
    "softmax",
    "stack_vertically",
    "tinted_regions",
    "top_regions",
    "weight_overlay",
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
# A sequential ramp (matplotlib's "inferno", sampled): black for nothing, pale yellow for the
# most, readable in greyscale and by colour-blind viewers. For unsigned maps (an audit's
# location map).
_INFERNO = (
    np.array(
        [
            [0, 0, 4],
            [31, 12, 72],
            [85, 15, 109],
            [136, 34, 106],
            [186, 54, 85],
            [227, 89, 51],
            [249, 140, 10],
            [249, 201, 50],
            [252, 255, 164],
        ],
        dtype=np.float64,
    )
    / 255.0
)
POSITIVE = np.array([0.0, 0.75, 0.2])  # green: supports the class
NEGATIVE = np.array([0.9, 0.1, 0.1])  # red: speaks against it
#: Regions whose |weight| is under this share of the largest |weight| are not tinted (the same
#: share under which the stability verdict calls a region negligible).
MIN_SHARE = THRESHOLDS["matter_min_share"]
#: Fill opacity of the strongest region: light, so that the region's own colours stay legible.
MAX_ALPHA = 0.25


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


def _u8(a: np.ndarray) -> np.ndarray:
    return (np.clip(a, 0, 1) * 255 + 0.5).astype(np.uint8)


def diverging_colors(values: np.ndarray, vmax: float) -> np.ndarray:
    """Map values in [-vmax, vmax] to RGB floats on the PiYG scale; (...,) -> (..., 3)."""
    v = np.asarray(values, np.float64)
    v = np.where(np.isfinite(v), v, 0.0)  # a value that was not computed is drawn as neutral
    return _ramp(_PIYG, (v / max(vmax, 1e-12) + 1) / 2)


def _ramp(table: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Colours of ``t`` in [0, 1] (clipped) on a ramp of RGB stops, interpolated; (...,) -> (..., 3)."""
    pos = np.clip(t, 0, 1) * (len(table) - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, len(table) - 1)
    frac = (pos - lo)[..., None]
    return table[lo] * (1 - frac) + table[hi] * frac


def sequential_colors(values: np.ndarray, vmax: float) -> np.ndarray:
    """Map values in [0, vmax] to RGB floats on the inferno scale; (...,) -> (..., 3)."""
    v = np.asarray(values, np.float64)
    return _ramp(_INFERNO, np.where(np.isfinite(v), v, 0.0) / max(vmax, 1e-12))


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


@dataclass(frozen=True)
class TintedRegions:
    """Which regions a weight overlay tints, and the scale it tints them on.

    Attributes
    ----------
    positive : tuple of int, the regions tinted green (for the class), largest weight first
    negative : tuple of int, the regions tinted red (against it), most negative first
    ids : tuple of int, all the tinted regions, largest |weight| first
    vmax : float > 0, the |weight| that gets the full tint
    threshold : float >= 0, regions whose |weight| is under it are not tinted
    """

    positive: tuple[int, ...]
    negative: tuple[int, ...]
    ids: tuple[int, ...]
    vmax: float
    threshold: float


def _weights(weights: np.ndarray) -> np.ndarray:
    """(K,) float64 copy; a value that was not computed (NaN) counts as 0."""
    try:
        w = np.array(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise LimecraftError("weights must be numbers, one per region") from None
    if w.ndim != 1:
        raise LimecraftError(
            f"weights must be a 1-D array with one value per region, got shape {w.shape}"
        )
    return np.where(np.isfinite(w), w, 0.0)


def tinted_regions(
    weights: np.ndarray,
    *,
    k: int = 5,
    min_share: float = MIN_SHARE,
    show_weak: bool = False,
    vmax: float | None = None,
    positive: bool = True,
    negative: bool = True,
) -> TintedRegions:
    """The regions :func:`weight_overlay` tints: the top ``k`` for and the top ``k`` against.

    Parameters
    ----------
    weights : (K,) float ndarray; NaN counts as 0
    k : int >= 1, how many regions of each sign (k for and k against)
    min_share : float in [0, 1], regions whose |weight| is under ``min_share * vmax`` are
        not tinted (default 5%)
    show_weak : bool, tint them all the same (the threshold becomes 0)
    vmax : float > 0, optional; the |weight| of full strength, default the largest |weight|
        (1 when every weight is 0). Give the same value to several overlays to compare them.
    positive, negative : bool, whether to tint the regions for / against
    grey : region ids shown greyed out and untinted (e.g. those whose sign is not consistent
        over repeats): desaturated, lightened and hatched, so that their weight is not read

    Returns
    -------
    TintedRegions

    Raises
    ------
    LimecraftError
        If ``weights`` is not 1-D or a parameter is out of its range.
    """
    w = _weights(weights)
    k = check_int("k", k, 1)
    min_share = check_float("min_share", min_share, 0.0, 1.0)
    if vmax is None:
        top = float(np.abs(w).max()) if w.size else 0.0
        vmax = top if top > 0 else 1.0
    else:
        vmax = check_float("vmax", vmax, 0.0, lo_open=True)
    threshold = 0.0 if show_weak else min_share * vmax
    strong = (np.abs(w) >= threshold) & (w != 0)
    up = np.argsort(-w, kind="stable")
    down = np.argsort(w, kind="stable")
    pos = tuple(int(i) for i in up if w[i] > 0 and strong[i])[:k] if positive else ()
    neg = tuple(int(i) for i in down if w[i] < 0 and strong[i])[:k] if negative else ()
    ids = tuple(sorted(pos + neg, key=lambda i: (-abs(w[i]), i)))
    return TintedRegions(pos, neg, ids, float(vmax), float(threshold))


def weight_overlay(
    image: np.ndarray,
    segments: np.ndarray,
    weights: np.ndarray,
    *,
    k: int = 5,
    min_share: float = MIN_SHARE,
    show_weak: bool = False,
    names: Sequence[str] | None = None,
    ids: bool = True,
    long_side: int | None = None,
    max_alpha: float = MAX_ALPHA,
    vmax: float | None = None,
    outline: int | None = None,
    dim_others: float = 0.0,
    positive: bool = True,
    negative: bool = True,
    grey: Sequence[int] = (),
) -> np.ndarray:
    """The image with the strongest regions tinted by the sign and size of their weight.

    Green (``POSITIVE``) regions speak for the class, red (``NEGATIVE``) ones against it. A
    region's fill opacity is ``max_alpha * |w| / vmax``, so a weight ten times smaller is ten
    times fainter; the fill stays light so the region's own colours remain legible, and an
    outline in the sign colour carries the sign. Only the top ``k`` for and the top ``k``
    against are tinted, and none whose |weight| is under ``min_share`` of the largest (see
    :func:`tinted_regions`); the others keep their pixels.

    Parameters
    ----------
    image : (H, W, 3) uint8 or float ndarray
    segments : (H, W) int ndarray, region ids 0..K-1
    weights : (K,) float ndarray; NaN counts as 0
    k : int >= 1, regions tinted on each side (default 5 for and 5 against)
    min_share : float in [0, 1], the threshold as a share of ``vmax`` (default 0.05)
    show_weak : bool, also tint the regions under the threshold (default False)
    names : sequence of K str, optional; the text written on each tinted region (default its id)
    ids : bool, write the ids (or ``names``) at the tinted regions' centres, dark text on a
        light box (default True)
    long_side : int in [8, 20000], optional; resize so that the longer side has this many
        pixels (the image smoothly, the regions by nearest neighbour). Default: no resizing.
    max_alpha : float in [0, 1], fill opacity at |w| = vmax (default 0.25)
    vmax : float > 0, optional; the |weight| of full strength (default the largest |weight|)
    outline : int in [0, 20], optional; outline width in output pixels, 0 for none
        (default: 1 up to 200 px on the long side, 2 up to 640 px, then 3)
    dim_others : float in [0, 1], how much the untinted regions are darkened (default 0)
    positive, negative : bool, whether to tint the regions for / against

    Returns
    -------
    (H', W', 3) uint8 ndarray; (H, W) unless ``long_side`` is given. Inputs are not modified.

    Raises
    ------
    LimecraftError
        If the shapes do not agree, ``names`` does not have one entry per region, or a
        parameter is out of its range.
    """
    img = _check(image, segments, weights)
    w = _weights(weights)
    chosen = tinted_regions(
        w,
        k=k,
        min_share=min_share,
        show_weak=show_weak,
        vmax=vmax,
        positive=positive,
        negative=negative,
    )
    max_alpha = check_float("max_alpha", max_alpha, 0.0, 1.0)
    dim_others = check_float("dim_others", dim_others, 0.0, 1.0)
    texts = _region_texts(names, len(w)) if ids else None
    img, labels = _resized(img, segments, long_side)
    width = _outline_width(labels.shape, outline)
    grey_ids = [int(check_int("grey region", g, 0, len(w) - 1)) for g in grey]
    if grey_ids:
        keep = lambda ids: tuple(i for i in ids if i not in grey_ids)  # noqa: E731
        chosen = dataclasses.replace(
            chosen,
            positive=keep(chosen.positive),
            negative=keep(chosen.negative),
            ids=keep(chosen.ids),
        )
    share, colour = _strengths(w, chosen)
    tinted = np.isin(labels, chosen.ids)
    out = _tint(img, labels, tinted, share * max_alpha, colour, dim_others)
    if grey_ids:
        out = _grey_out(out, np.isin(labels, grey_ids))
    if width:
        edge = _near_border(labels, width) & tinted
        opacity = (0.2 + 0.8 * share)[labels][edge][:, None]  # a weak region's outline is fainter
        out[edge] = (1 - opacity) * out[edge] + opacity * colour[labels[edge]]
    picture = _u8(out)
    if texts is not None and chosen.ids:
        picture = _draw_ids(picture, segments, chosen, texts, w)
    return picture


GREY_HATCH = 8  # px between the hatch lines of a greyed-out region


def _grey_out(img: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Desaturate and lighten the pixels ``where``, with light diagonal hatching."""
    out = img.copy()
    luma = img @ np.array([0.299, 0.587, 0.114])
    light = 0.55 * luma + 0.45 * 0.85
    yy, xx = np.indices(where.shape)
    hatch = ((yy + xx) % GREY_HATCH) == 0
    light = np.where(hatch, 0.6 * light, light)
    out[where] = light[where][:, None]
    return out


def _region_texts(names: Sequence[str] | None, n: int) -> list[str]:
    if names is None:
        return [str(i) for i in range(n)]
    if isinstance(names, str) or len(names) != n:
        got = "a single string" if isinstance(names, str) else f"{len(names)} names"
        raise LimecraftError(f"names must give one text per region: {got} for {n} regions")
    return [str(t) for t in names]


def _resized(
    img: np.ndarray, segments: np.ndarray, long_side: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """The image (smooth) and its label map (nearest) with ``long_side`` px on the long side."""
    if long_side is None:
        return img, segments
    long_side = check_int("long_side", long_side, MIN_SIDE, 20000)
    h, w = segments.shape
    scale = long_side / max(h, w)
    h2, w2 = max(1, round(h * scale)), max(1, round(w * scale))
    if (h2, w2) == (h, w):
        return img, segments
    from PIL import Image

    from .regions import resize_nearest

    resized = Image.fromarray(_u8(img)).resize((w2, h2), Image.Resampling.LANCZOS)
    return np.asarray(resized, np.float32) / 255.0, resize_nearest(segments, (h2, w2))


def _outline_width(shape: tuple[int, ...], outline: int | None) -> int:
    if outline is not None:
        return check_int("outline", outline, 0, 20)
    long = max(shape)
    return 1 if long <= 200 else 2 if long <= 640 else 3


def _strengths(w: np.ndarray, chosen: TintedRegions) -> tuple[np.ndarray, np.ndarray]:
    """Per region: (K,) share of full strength (0 if untinted) and (K, 3) sign colour."""
    share = np.zeros(len(w))
    ids = list(chosen.ids)
    share[ids] = np.minimum(np.abs(w[ids]) / chosen.vmax, 1.0)
    colour = np.where((w > 0)[:, None], POSITIVE, NEGATIVE)
    return share, colour


def _tint(
    img: np.ndarray,
    labels: np.ndarray,
    tinted: np.ndarray,
    alpha: np.ndarray,
    colour: np.ndarray,
    dim_others: float,
) -> np.ndarray:
    """(H, W, 3) float: each region blended with its colour at its own opacity."""
    a = alpha[labels][..., None]
    base = img * np.where(tinted, 1.0, 1.0 - dim_others)[..., None]
    return (1 - a) * base + a * colour[labels]


def _near_border(labels: np.ndarray, width: int) -> np.ndarray:
    """(H, W) bool: pixels within ``width`` px of another region (each region's inner rim)."""
    from scipy import ndimage as ndi

    size = 2 * width + 1
    return ndi.maximum_filter(labels, size=size) != ndi.minimum_filter(labels, size=size)


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only its small bitmap font
        return ImageFont.load_default()


def _draw_ids(
    picture: np.ndarray,
    segments: np.ndarray,
    chosen: TintedRegions,
    texts: list[str],
    w: np.ndarray,
) -> np.ndarray:
    """Each tinted region's text on a light box at its centre; the strongest drawn last (on top)."""
    from PIL import Image, ImageDraw

    h2, w2 = picture.shape[:2]
    sy, sx = h2 / segments.shape[0], w2 / segments.shape[1]
    size = int(np.clip(round(max(h2, w2) / 30), 10, 40))
    font, pad = _font(size), max(2, size // 5)
    layer = Image.new("RGBA", (w2, h2), (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    where = {r: (x * sx, y * sy) for r, x, y in _positions(segments, chosen.ids)}
    for region in reversed(chosen.ids):
        x, y = where[region]
        left, top, right, bottom = draw.textbbox((x, y), texts[region], font=font, anchor="mm")
        box = [left - pad, top - pad, right + pad, bottom + pad]
        dx = max(0, -box[0]) - max(0, box[2] - (w2 - 1))  # keep the box inside the picture
        dy = max(0, -box[1]) - max(0, box[3] - (h2 - 1))
        box = [box[0] + dx, box[1] + dy, box[2] + dx, box[3] + dy]
        sign = tuple(int(c * 255 + 0.5) for c in (POSITIVE if w[region] > 0 else NEGATIVE))
        draw.rounded_rectangle(
            box, radius=pad, fill=(255, 255, 255, 225), outline=(*sign, 255), width=1
        )
        draw.text((x + dx, y + dy), texts[region], fill=(20, 20, 20, 255), font=font, anchor="mm")
    base = Image.fromarray(picture).convert("RGBA")
    return np.asarray(Image.alpha_composite(base, layer).convert("RGB"))


def top_regions(
    image: np.ndarray,
    segments: np.ndarray,
    weights: np.ndarray,
    k: int = 5,
    *,
    positive: bool = True,
    negative: bool = True,
    alpha: float = MAX_ALPHA,
    dim_others: float = 0.0,
    show_boundaries: bool = True,
    min_share: float = MIN_SHARE,
    show_weak: bool = False,
) -> np.ndarray:
    """The top-k regions for (green) and the top-k against (red), at the image's size, no ids.

    :func:`weight_overlay` with ``ids=False``: the fill opacity is ``alpha * |w| / max|w|``
    and regions under ``min_share`` of the largest |weight| are not tinted.

    Parameters
    ----------
    weights : (K,) float ndarray
    k : int >= 1, how many of each sign
    alpha : float in [0, 1], fill opacity of the strongest region (default 0.25)
    dim_others : float in [0, 1], how much the untinted regions are darkened (default 0)
    show_boundaries : outline the tinted regions in their sign colour
    min_share, show_weak : the threshold, see :func:`tinted_regions`

    Returns
    -------
    (H, W, 3) uint8 ndarray.
    """
    alpha = check_float("alpha", alpha, 0.0, 1.0)
    return weight_overlay(
        image,
        segments,
        weights,
        k=k,
        min_share=min_share,
        show_weak=show_weak,
        ids=False,
        max_alpha=alpha,
        outline=None if show_boundaries else 0,
        dim_others=dim_others,
        positive=positive,
        negative=negative,
    )


def overlay_legend(
    width: int,
    *,
    class_label: str | None = None,
    k: int | None = None,
    min_share: float = MIN_SHARE,
    show_weak: bool = False,
    vmax: float | None = None,
    max_alpha: float = MAX_ALPHA,
) -> np.ndarray:
    """A key to :func:`weight_overlay`, to put under it (see :func:`stack_vertically`).

    Shows green = for the class and red = against it, a ramp from a light to the strongest tint
    with the |weight| values at its ends (the part under the threshold left blank), and which
    regions are not tinted.

    Parameters
    ----------
    width : int in [120, 20000], the picture's width in pixels (the overlay's width)
    class_label : str, optional; the explained class (default "the class")
    k : int >= 1, optional; the overlay's ``k``, to say that only the top k of each side are
        tinted
    min_share, show_weak : the overlay's threshold (default 0.05, False)
    vmax : float > 0, optional; the overlay's full-strength |weight| (e.g.
        ``tinted_regions(...).vmax``), written at the ramp's end; default "largest |weight|"
    max_alpha : float in [0, 1], the overlay's ``max_alpha``

    Returns
    -------
    (h, width, 3) uint8 ndarray on white; h grows with the width (about 0.3 * width at 512).
    """
    from PIL import Image, ImageDraw

    width = check_int("width", width, 120, 20000)
    min_share = check_float("min_share", min_share, 0.0, 1.0)
    max_alpha = check_float("max_alpha", max_alpha, 0.0, 1.0)
    if k is not None:
        k = check_int("k", k, 1)
    if vmax is not None:
        vmax = check_float("vmax", vmax, 0.0, lo_open=True)
    threshold = 0.0 if show_weak else min_share
    who = "the class" if class_label is None else str(class_label)
    size = int(np.clip(round(width / 36), 10, 28))
    font, pad = _font(size), max(4, size // 2)
    canvas = Image.new("RGB", (width, 8 * width), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    y = pad
    y = _legend_keys(canvas, draw, font, size, pad, y, who, max_alpha)
    y = _legend_ramp(canvas, draw, font, size, pad, y, threshold, vmax, max_alpha)
    notes = []
    if k is not None:
        notes.append(f"Only the top {k} for and the top {k} against are tinted.")
    if threshold > 0:
        at = f" ({threshold * vmax:.3g})" if vmax is not None else ""
        notes.append(f"Regions under {threshold:.0%} of the largest |weight|{at} are not tinted.")
    else:
        notes.append("Every region with a non-zero weight may be tinted (no threshold).")
    for line in _wrap(draw, " ".join(notes), font, width - 2 * pad):
        draw.text((pad, y), line, fill=(40, 40, 40), font=font)
        y += round(size * 1.3)
    return np.asarray(canvas.crop((0, 0, width, y + pad)))


def _legend_keys(canvas, draw, font, size: int, pad: int, y: int, who: str, alpha: float) -> int:
    """The two swatches, side by side when both fit, else one under the other; returns new y."""
    width = canvas.width
    side = round(size * 1.3)
    entries = [(POSITIVE, f"for {who}"), (NEGATIVE, f"against {who}")]
    lengths = [side + pad + draw.textlength(t, font=font) for _, t in entries]
    same_row = lengths[0] <= width / 2 - 2 * pad and lengths[1] <= width / 2 - 2 * pad
    for i, (colour, text) in enumerate(entries):
        x = pad + (i * width // 2 if same_row else 0)
        fill = tuple(int(c) for c in _u8((1 - alpha) * _NEUTRAL + alpha * colour))
        edge = tuple(int(c) for c in _u8(colour))
        line = max(2, size // 6)
        draw.rectangle([x, y, x + side, y + side], fill=fill, outline=edge, width=line)
        room = width - x - side - 2 * pad
        draw.text(
            (x + side + pad, y + side / 2),
            _fit(draw, text, font, room),
            fill=(20, 20, 20),
            font=font,
            anchor="lm",
        )
        if not same_row and i == 0:
            y += side + pad // 2
    return y + side + pad


def _legend_ramp(
    canvas, draw, font, size: int, pad: int, y: int, threshold: float, vmax, alpha: float
) -> int:
    """'tint grows with |weight|' and a two-row ramp (green over red); returns the new y."""
    from PIL import Image

    draw.text((pad, y), "tint strength grows with |weight|:", fill=(20, 20, 20), font=font)
    y += round(size * 1.4)
    length, height = canvas.width - 2 * pad, max(8, size)
    share = np.linspace(0.0, 1.0, length)
    a = np.where(share >= threshold, alpha * share, 0.0)[:, None]
    rows = [(1 - a) * _NEUTRAL + a * colour for colour in (POSITIVE, NEGATIVE)]
    ramp = np.concatenate([np.repeat(r[None], height // 2 + 1, axis=0) for r in rows])
    canvas.paste(Image.fromarray(_u8(ramp)), (pad, y))
    bottom = y + ramp.shape[0]
    draw.rectangle([pad - 1, y - 1, pad + length, bottom], outline=(120, 120, 120), width=1)
    if threshold > 0:
        x = pad + round(threshold * (length - 1))
        draw.line([x, y - 2, x, bottom + 2], fill=(40, 40, 40), width=max(1, size // 8))
    y = bottom + pad // 2
    right = "largest |weight|" if vmax is None else f"|weight| {vmax:.3g}"
    draw.text((pad, y), "0", fill=(40, 40, 40), font=font)
    draw.text((pad + length, y), right, fill=(40, 40, 40), font=font, anchor="ra")
    return y + round(size * 1.3) + pad // 2


_NEUTRAL = np.array([0.8, 0.8, 0.8])  # the grey the legend's swatches are tinted over


def _wrap(draw, text: str, font, room: float) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and draw.textlength(f"{lines[-1]} {word}", font=font) <= room:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return lines


def _fit(draw, text: str, font, room: float) -> str:
    """``text`` cut with an ellipsis to fit ``room`` pixels."""
    if draw.textlength(text, font=font) <= room:
        return text
    while text and draw.textlength(text + "…", font=font) > room:
        text = text[:-1]
    return text + "…"


def stack_vertically(*pictures: np.ndarray, gap: int = 0, background: int = 255) -> np.ndarray:
    """Pictures one under the other, left-aligned, e.g. an overlay and its legend.

    Parameters
    ----------
    *pictures : (H_i, W_i, 3) uint8 ndarrays, at least one
    gap : int in [0, 1000], pixels of background between them
    background : int in [0, 255], the grey level of the padding

    Returns
    -------
    (sum H_i + gaps, max W_i, 3) uint8 ndarray.
    """
    if not pictures:
        raise LimecraftError("stack_vertically needs at least one picture")
    for i, p in enumerate(pictures):
        if not isinstance(p, np.ndarray) or p.ndim != 3 or p.shape[2] != 3 or p.dtype != np.uint8:
            got = p.shape if isinstance(p, np.ndarray) else type(p).__name__
            raise LimecraftError(f"picture {i + 1} must be an (H, W, 3) uint8 array, got {got}")
    gap = check_int("gap", gap, 0, 1000)
    background = check_int("background", background, 0, 255)
    width = max(p.shape[1] for p in pictures)
    height = sum(p.shape[0] for p in pictures) + gap * (len(pictures) - 1)
    out = np.full((height, width, 3), background, np.uint8)
    y = 0
    for p in pictures:
        out[y : y + p.shape[0], : p.shape[1]] = p
        y += p.shape[0] + gap
    return out


def delta_map(
    image: np.ndarray, segments: np.ndarray, deltas: np.ndarray, *, alpha: float = 0.75
) -> Heatmap:
    """Per-region prediction change when that region alone is hidden (positive = score drops).

    Drawn like :func:`heatmap`: vivid where the change is large, the plain image where it is 0.
    """
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
    labels = np.asarray(labels)
    if labels.ndim != 2 or not np.issubdtype(labels.dtype, np.integer):
        raise LimecraftError("labels must be a 2-D integer label map")
    return _positions(labels)


def _positions(
    labels: np.ndarray, wanted: Sequence[int] | None = None
) -> list[tuple[int, float, float]]:
    """:func:`id_positions` for the ids in ``wanted`` only (default all)."""
    from scipy import ndimage as ndi

    wanted_set = None if wanted is None else {int(i) for i in wanted}
    out = []
    for region, box in enumerate(ndi.find_objects(labels + 1)):
        if box is None or (wanted_set is not None and region not in wanted_set):
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


#: An explanation's overlay picture is at least this many pixels on its long side, so that
#: region ids are readable.
OVERLAY_LONG_SIDE = 512


def explanation_overlay(image: np.ndarray, result: Any, k: int) -> np.ndarray:
    """The picture ``explain`` writes as overlay.png: the weight overlay, at least 512 px on its
    long side, over its legend.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, the explained image
    result : Explanation
    k : int >= 1, regions tinted on each side

    Returns
    -------
    (H', W', 3) uint8 ndarray; each tinted region carries its id (or its name), as the CLI's
    summary names it.
    """
    long_side = max(OVERLAY_LONG_SIDE, *result.segments.shape)
    texts = [name or str(i) for i, name in enumerate(result.region_names)]
    chosen = tinted_regions(result.weights, k=k)
    over = weight_overlay(
        image, result.segments, result.weights, k=k, names=texts, long_side=long_side
    )
    legend = overlay_legend(
        over.shape[1], class_label=result.class_labels[0], k=k, vmax=chosen.vmax
    )
    return stack_vertically(over, legend)
