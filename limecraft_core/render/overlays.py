"""The weight overlay, and the picture ``explain`` writes (overlay.png).

The top regions for (green) and against (red) a class are tinted over the image, with their ids
or names drawn on them, and the others greyed out.

Nothing here displays anything; the caller decides how."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from skimage.segmentation import find_boundaries

from .._validate import MIN_SIDE, LimecraftError, check_float, check_int
from .colours import MAX_ALPHA, MIN_SHARE, NEGATIVE, POSITIVE, _u8
from .legends import overlay_legend, stack_vertically
from .maps import _check
from .region_ids import _draw_ids


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


def _without(chosen: TintedRegions, grey_ids: Sequence[int]) -> TintedRegions:
    """``chosen`` less the regions to be greyed out."""
    if not grey_ids:
        return chosen
    keep = lambda ids: tuple(i for i in ids if i not in grey_ids)  # noqa: E731
    return dataclasses.replace(
        chosen,
        positive=keep(chosen.positive),
        negative=keep(chosen.negative),
        ids=keep(chosen.ids),
    )


def _paint(
    img: np.ndarray,
    labels: np.ndarray,
    w: np.ndarray,
    chosen: TintedRegions,
    grey_ids: Sequence[int],
    max_alpha: float,
    dim_others: float,
    width: int,
) -> np.ndarray:
    """The chosen regions tinted and outlined, the others dimmed, ``grey_ids`` greyed out."""
    share, colour = _strengths(w, chosen)
    tinted = np.isin(labels, chosen.ids)
    out = _tint(img, labels, tinted, share * max_alpha, colour, dim_others)
    if grey_ids:
        out = _grey_out(out, np.isin(labels, grey_ids))
    if width:
        edge = _near_border(labels, width) & tinted
        opacity = (0.2 + 0.8 * share)[labels][edge][:, None]  # a weak region's outline is fainter
        out[edge] = (1 - opacity) * out[edge] + opacity * colour[labels[edge]]
    return _u8(out)


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
    chosen = _without(chosen, grey_ids)
    picture = _paint(img, labels, w, chosen, grey_ids, max_alpha, dim_others, width)
    if texts is not None and chosen.ids:
        picture = _draw_ids(picture, segments, chosen.ids, texts, w)
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

    from ..regions import resize_nearest

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
