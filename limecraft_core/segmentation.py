"""Regions an explanation is made of: automatic superpixels, handcrafted masks, merges and splits.

Every label map produced here holds ints 0..K-1 with no gaps, and every pixel is assigned.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from scipy import ndimage as ndi
from skimage import color, filters, measure, segmentation

from ._validate import (
    MAX_PIXELS,
    LimecraftError,
    as_float_image,
    check_choice,
    check_float,
    check_int,
    check_label_map,
)
from .limits import LIMITS, METHODS, PARAM_RANGES

__all__ = [
    "METHODS",
    "Regions",
    "compose_regions",
    "masks_from_label_image",
    "merge_by_keys",
    "merge_regions",
    "regions_from_labels",
    "relabel",
    "resize_nearest",
    "segment",
    "segment_regions",
    "split_region",
]

#: Segmentation runs on a copy whose longer side is at most this many pixels; labels are
#: scaled back to the image's own size. Keeps 12-megapixel photos fast.
DEFAULT_WORKING_SIZE = 512
# quickshift costs ~2x per pixel what the others do; at 384 px a 12 MP photo segments in < 1 s
WORKING_SIZES = {"quickshift": 384}
#: A region count within this factor of the one asked for, give or take one region, is met.
#: Outside it the segmentation is refitted (see ``_fit_count``), so results that met it before
#: are unchanged.
COUNT_TOLERANCE = 1.5
# The working copy keeps at least this many pixels per region asked for (very wide images).
_MIN_WORKING_PIXELS_PER_REGION = 16
# The method parameters that ``n_segments`` sets: given explicitly, they win and the count is
# not refitted.
_COUNT_PARAMS = {
    "quickshift": ("kernel_size",),
    "slic": ("n_segments",),
    "felzenszwalb": ("scale", "min_size"),
    "watershed": ("n_segments",),
    "grid": ("n_segments",),
}

#: ``progress(fraction, message)``: fraction in [0, 1], increasing; the message says the stage.
Progress = Callable[[float, str], None]


def _silent(fraction: float, message: str) -> None:
    pass


def _between(progress: Progress, lo: float, hi: float) -> Progress:
    """``progress`` with fractions 0..1 mapped onto ``lo``..``hi``."""
    return lambda f, message: progress(lo + (hi - lo) * f, message)


# Default parameters per method. quickshift's are the lime package's.
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "quickshift": {"kernel_size": 4.0, "max_dist": 200.0, "ratio": 0.2},
    "slic": {"n_segments": 50, "compactness": 10.0, "sigma": 1.0},
    "felzenszwalb": {"scale": 100.0, "sigma": 0.5, "min_size": 50},
    "watershed": {"n_segments": 50, "compactness": 0.001},
    "grid": {"n_segments": 49},
}


def _check_params(method: str, p: dict[str, Any]) -> dict[str, Any]:
    """Check every parameter against ``PARAM_RANGES``; the error names the range."""
    out = dict(p)
    for name, value in p.items():
        if value is None and name == "min_size":
            continue  # searched for the target count (felzenszwalb)
        lo, hi, lo_open, integer = PARAM_RANGES[name]
        what = f"{method} parameter {name}"
        if integer:
            out[name] = check_int(what, value, int(lo), int(hi))
        else:
            out[name] = check_float(what, value, lo, hi, lo_open=lo_open)
    return out


def relabel(labels: np.ndarray) -> np.ndarray:
    """Map any integer label map onto 0..K-1, keeping the order of the original values.

    Parameters
    ----------
    labels : (H, W) integer ndarray

    Returns
    -------
    (H, W) int32 ndarray with values 0..K-1, no gaps. A new array.
    """
    labels = np.asarray(labels)
    if labels.size == 0:
        return np.zeros(labels.shape, np.int32)
    lo, hi = int(labels.min()), int(labels.max())
    if hi - lo <= 4 * labels.size + 1024:  # a lookup table: O(pixels), no sort
        present = np.bincount((labels - lo).ravel().astype(np.intp), minlength=hi - lo + 1) > 0
        lut = (np.cumsum(present) - 1).astype(np.int32)
        return lut[labels - lo]
    _, inverse = np.unique(labels, return_inverse=True)
    return inverse.reshape(labels.shape).astype(np.int32)


def _grid_shape(h: int, w: int, n: int) -> tuple[int, int]:
    """Rows and columns of a grid of about ``n`` cells, as square as the count allows."""
    rows = min(max(1, round(math.sqrt(n * h / w))), h)
    cols = min(max(1, round(n / rows)), w)
    if abs(rows * cols - n) <= max(1, n // 10):
        return rows, cols

    # A very wide or tall image: the closest count, then the squarest cells.
    def cost(r: int) -> tuple[int, float]:
        c = min(max(1, round(n / r)), w)
        return abs(r * c - n), abs(math.log(h * c / (w * r)))

    rows = min(range(1, min(n, h) + 1), key=cost)
    return rows, min(max(1, round(n / rows)), w)


def _grid(shape: tuple[int, int], n_segments: int) -> np.ndarray:
    h, w = shape
    rows, cols = _grid_shape(h, w, n_segments)
    r = np.minimum(np.arange(h) * rows // h, rows - 1)
    c = np.minimum(np.arange(w) * cols // w, cols - 1)
    return (r[:, None] * cols + c[None, :]).astype(np.int32)


def _params_for(method: str, area: int, n_segments: int | None, params: Mapping[str, Any]):
    """Merge defaults, the target region count (scaled to the image area) and explicit params."""
    p = dict(DEFAULT_PARAMS[method])
    if n_segments is not None:
        if method in ("slic", "watershed", "grid"):
            p["n_segments"] = n_segments
        elif method == "quickshift":
            # Measured: regions ~= 0.011 * area / kernel_size**2 (224x224 and 512x512 photos).
            p["kernel_size"] = float(np.clip(math.sqrt(0.011 * area / n_segments), 1.0, 20.0))
        elif method == "felzenszwalb":
            p["scale"] = 0.3 * area / n_segments  # min_size is then searched (_felzenszwalb)
            p["min_size"] = None
    unknown = set(params) - set(p) - {"n_segments"}
    if unknown:
        raise LimecraftError(
            f"unknown parameter(s) {sorted(unknown)} for {method}; valid: {sorted(p)}"
        )
    p.update(params)
    return _check_params(method, p)


def _felzenszwalb_min_size(img: np.ndarray, n_segments: int, sigma: float) -> int:
    """Find felzenszwalb's ``min_size`` that gives about ``n_segments`` regions.

    The count is not a simple function of the parameters, so bisect (in log space) on a copy at
    most 128 px wide, where each try costs a few milliseconds, and scale the answer back up.
    """
    h, w = img.shape[:2]
    small = _at_working_size(img, 128)
    ratio = (h * w) / (small.shape[0] * small.shape[1])
    area = small.shape[0] * small.shape[1]
    lo, hi = math.log(max(1.0, area / (n_segments * 50))), math.log(max(2.0, area / n_segments))
    best, best_err = math.exp(hi), math.inf
    for _ in range(8):
        mid = (lo + hi) / 2
        ms = max(1, round(math.exp(mid)))
        count = (
            int(
                segmentation.felzenszwalb(
                    small, scale=0.3 * area / n_segments, sigma=sigma, min_size=ms, channel_axis=-1
                ).max()
            )
            + 1
        )
        err = abs(math.log(count / n_segments))
        if err < best_err:
            best, best_err = ms, err
        if count > n_segments:
            lo = mid
        else:
            hi = mid
    return max(1, round(best * ratio))


def _run_method(
    img: np.ndarray, method: str, p: Mapping[str, Any], n_segments: int | None, seed: int
) -> np.ndarray:
    """One run of ``method`` with the checked parameters ``p``; returns contiguous labels."""
    h, w = img.shape[:2]
    if method == "quickshift":
        labels = segmentation.quickshift(
            img.astype(np.float64),
            kernel_size=p["kernel_size"],
            max_dist=p["max_dist"],
            ratio=p["ratio"],
            rng=seed,
        )
    elif method == "slic":
        labels = segmentation.slic(
            img,
            n_segments=int(p["n_segments"]),
            compactness=p["compactness"],
            sigma=p["sigma"],
            start_label=0,
            channel_axis=-1,
        )
    elif method == "felzenszwalb":
        min_size = p["min_size"]
        if min_size is None:
            min_size = _felzenszwalb_min_size(img, n_segments or 50, p["sigma"])
        labels = segmentation.felzenszwalb(
            img, scale=p["scale"], sigma=p["sigma"], min_size=int(min_size), channel_axis=-1
        )
    elif method == "watershed":
        gradient = filters.sobel(color.rgb2gray(img))
        labels = segmentation.watershed(
            gradient, markers=int(p["n_segments"]), compactness=p["compactness"]
        )
    else:
        labels = _grid((h, w), int(p["n_segments"]))
    return relabel(labels)


def _count(labels: np.ndarray) -> int:
    return int(labels.max()) + 1


def _count_met(k: int, n: int) -> bool:
    return n / COUNT_TOLERANCE - 1 <= k <= n * COUNT_TOLERANCE + 1


def _segment_float(
    img: np.ndarray,
    method: str,
    n_segments: int | None,
    params: Mapping[str, Any],
    seed: int,
    progress: Progress = _silent,
) -> tuple[np.ndarray, str]:
    """Segment a float (h, w, 3) image at its own size.

    Returns contiguous labels and a note: why the count differs from ``n_segments`` ("" when it
    is met, or when explicit parameters set the scale instead).
    """
    p = _params_for(method, img.shape[0] * img.shape[1], n_segments, params)
    progress(0.0, f"segmenting with {method} at {img.shape[1]}×{img.shape[0]} px")
    labels = _run_method(img, method, p, n_segments, seed)
    explicit = any(name in params for name in _COUNT_PARAMS[method])
    if n_segments is None or explicit or _count_met(_count(labels), n_segments):
        return labels, ""
    progress(
        0.7, f"{method} made {_count(labels)} of the {n_segments} regions asked for; refitting"
    )
    most = PARAM_RANGES["compactness"][1]
    slic_retry = method == "slic" and "compactness" not in params and p["compactness"] < most
    if slic_retry and _count(labels) < n_segments:
        # Texture finer than a superpixel (noise, stripes) cuts every SLIC cluster into bits
        # that skimage's connectivity step merges in a chain, down to one region. More weight
        # on distance keeps clusters compact.
        p["compactness"] = min(10 * p["compactness"], most)
        again = _run_method(img, method, p, n_segments, seed)
        if abs(math.log(_count(again) / n_segments)) < abs(math.log(_count(labels) / n_segments)):
            labels = again
    return _fit_count(img, labels, n_segments, method)


def _fit_count(img: np.ndarray, labels: np.ndarray, n: int, method: str) -> tuple[np.ndarray, str]:
    """Bring the region count near ``n``: cut regions that are too few with a grid of ``n``
    cells (pieces keep the method's own boundaries), or merge the smallest regions.

    A flat image has nothing to cut along: its regions stay, and the note says so.
    """
    k = _count(labels)
    if _count_met(k, n):
        return labels, ""
    if k < n and float(np.ptp(img, axis=(0, 1)).max()) < 1 / 255:
        return labels, (
            f"{method} found {k} region{'s' if k != 1 else ''}, not the {n} asked for: the image "
            "is one flat colour, with no edges to follow. The grid method cuts it into a "
            "regular grid."
        )
    if k < n:
        labels = _split_by_grid(labels, n)
    if _count(labels) > n:
        labels = _merge_smallest(labels, count=n)
    return labels, ""


def _split_by_grid(labels: np.ndarray, n: int) -> np.ndarray:
    """Cut each region by a grid of about ``n`` cells; slivers under half a cell join the piece
    of the same region they touch most. Where that still leaves too few (regions only a pixel
    or two wide, all slivers), the grid itself."""
    cells = _grid(labels.shape, n)
    pieces_of_cells = labels.astype(np.int64) * (int(cells.max()) + 1) + cells + 1
    cut = measure.label(pieces_of_cells, background=0, connectivity=1) - 1
    pieces = _merge_smallest(cut, min_size=labels.size // (2 * n), within=labels)
    return pieces if _count(pieces) >= n / COUNT_TOLERANCE - 1 else cells


def _merge_smallest(
    labels: np.ndarray,
    *,
    count: int = 1,
    min_size: int | None = None,
    within: np.ndarray | None = None,
) -> np.ndarray:
    """Merge the smallest region into the neighbour it shares the longest border with, again and
    again, while more than ``count`` remain and (with ``min_size``) the smallest is under
    ``min_size`` pixels. With ``within`` (a label map that each region lies inside), a region
    only joins a neighbour inside the same ``within`` region.

    The borders are counted once with array operations; each merge then only updates the
    merged region's few entries, so 10**5 regions merge in about a second.
    """
    k = _count(labels)
    sizes = np.bincount(labels.ravel(), minlength=k)
    # touching pairs (i < j) and the length of their shared border
    a = np.concatenate([labels[:, :-1].ravel(), labels[:-1, :].ravel()]).astype(np.int64)
    b = np.concatenate([labels[:, 1:].ravel(), labels[1:, :].ravel()]).astype(np.int64)
    touching = a != b
    lo, hi = np.minimum(a, b)[touching], np.maximum(a, b)[touching]
    if within is not None:
        home = np.zeros(k, np.int64)
        home[labels.ravel()] = within.ravel()
        lo, hi = lo[home[lo] == home[hi]], hi[home[lo] == home[hi]]
    pairs, lengths = np.unique(lo * k + hi, return_counts=True)
    border: list[dict[int, int]] = [{} for _ in range(k)]
    for pair, length in zip(pairs.tolist(), lengths.tolist(), strict=True):
        i, j = divmod(pair, k)
        border[i][j] = border[j][i] = length
    sizes_left = sizes.tolist()
    into = list(range(k))
    heap = [(size, label) for label, size in enumerate(sizes_left)]
    heapq.heapify(heap)
    left = k
    while left > count and heap:
        size, label = heapq.heappop(heap)
        if size != sizes_left[label]:
            continue  # merged away, or grown (queued again at its new size)
        if min_size is not None and size >= min_size:
            break
        if not border[label]:
            continue  # nothing it may join
        target = max(border[label], key=lambda j: (border[label][j], -j))
        for other, length in border[label].items():
            del border[other][label]
            if other != target:
                border[target][other] = border[other][target] = (
                    border[target].get(other, 0) + length
                )
        border[label] = {}
        into[label] = target
        sizes_left[target] += size
        sizes_left[label] = -1
        heapq.heappush(heap, (sizes_left[target], target))
        left -= 1
    lut = np.array(into)
    for _ in range(k):  # follow each chain of merges to its end
        nxt = lut[lut]
        if np.array_equal(nxt, lut):
            break
        lut = nxt
    return relabel(lut[labels])


def resize_nearest(labels: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour resize of a 2-D label map or mask to ``shape`` (rows, cols).

    Each output pixel takes the input pixel under its centre, so upscaling keeps every label.
    """
    h, w = labels.shape
    rows = np.minimum(((np.arange(shape[0]) + 0.5) * h / shape[0]).astype(np.intp), h - 1)
    cols = np.minimum(((np.arange(shape[1]) + 0.5) * w / shape[1]).astype(np.intp), w - 1)
    return labels[rows[:, None], cols[None, :]]


def _at_working_size(
    img: np.ndarray, working_size: int | None, n_segments: int | None = None
) -> np.ndarray:
    """A copy whose longer side is at most ``working_size``, with at least
    ``_MIN_WORKING_PIXELS_PER_REGION`` pixels per region asked for; ``img`` itself if smaller."""
    h, w = img.shape[:2]
    if working_size is None or max(h, w) <= working_size:
        return img
    s = working_size / max(h, w)
    if n_segments is not None:
        s = max(s, math.sqrt(_MIN_WORKING_PIXELS_PER_REGION * n_segments / (h * w)))
        if s >= 1:
            return img
    size = (max(2, round(h * s)), max(2, round(w * s)))
    # torch's antialiased bilinear: 10x faster than skimage's resize on a 12 MP photo
    x = torch.from_numpy(np.ascontiguousarray(img, np.float32)).permute(2, 0, 1)[None]
    small = F.interpolate(x, size=size, mode="bilinear", antialias=True, align_corners=False)
    return small[0].permute(1, 2, 0).clamp_(0.0, 1.0).numpy()


def _check_working_size(working_size: int | str | None, method: str) -> int | None:
    """``"auto"`` is the method's own working size (``WORKING_SIZES``, else 512)."""
    if working_size is None:
        return None
    if working_size == "auto":
        return WORKING_SIZES.get(method, DEFAULT_WORKING_SIZE)
    return LIMITS["working_size"].check("working_size", working_size)


def _check_count(name: str, n: int | None, shape: tuple[int, int]) -> None:
    """More regions than pixels cannot be made."""
    if n is not None and n > shape[0] * shape[1]:
        raise LimecraftError(
            f"{name}={n} asks for more regions than the image has pixels "
            f"({shape[1]}×{shape[0]} = {shape[0] * shape[1]}); ask for fewer regions"
        )


def _segment_scaled(
    img: np.ndarray,
    method: str,
    n_segments: int | None,
    params: Mapping[str, Any],
    working_size: int | None,
    seed: int,
    progress: Progress = _silent,
) -> tuple[np.ndarray, str]:
    """Segment a float image at its working size and scale the labels back to its own size."""
    h, w = img.shape[:2]
    if working_size is not None and max(h, w) > working_size:
        progress(0.0, "scaling the image down")
    small = _at_working_size(img, working_size, n_segments)
    labels, note = _segment_float(
        small, method, n_segments, params, seed, _between(progress, 0.1, 0.8)
    )
    if small.shape[:2] != (h, w):
        progress(0.8, f"scaling the regions up to {w}×{h} px")
        # upscaling by nearest neighbour keeps every label, so the ids stay 0..K-1
        labels = resize_nearest(labels, (h, w))
    return labels, note


def _segment(
    image: np.ndarray,
    method: str,
    n_segments: int | None,
    params: Mapping[str, Any] | None,
    working_size: int | str | None,
    seed: int,
    progress: Progress | None,
) -> tuple[np.ndarray, str]:
    """:func:`segment` and :func:`segment_regions`: checked inputs, labels and the note."""
    progress = progress or _silent
    progress(0.0, "reading the image")
    img = as_float_image(image)
    check_choice("segmentation method", method, METHODS)
    if n_segments is not None:
        n_segments = LIMITS["n_segments"].check("n_segments", n_segments)
    _check_count("n_segments", n_segments, img.shape[:2])
    working_size = _check_working_size(working_size, method)
    seed = LIMITS["seed"].check("seed", seed)
    out = _segment_scaled(
        img, method, n_segments, params or {}, working_size, seed, _between(progress, 0.1, 0.95)
    )
    progress(1.0, "done")
    return out


def segment(
    image: np.ndarray,
    method: str = "quickshift",
    n_segments: int | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    working_size: int | str | None = "auto",
    seed: int = 0,
    progress: Progress | None = None,
) -> np.ndarray:
    """Automatic superpixels.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float in [0, 1]
    method : {"quickshift", "slic", "felzenszwalb", "watershed", "grid"}
        ``watershed`` is compact watershed on the Sobel gradient.
    n_segments : int, optional
        Target number of regions, at most the image's pixels. For slic, watershed and grid it
        is passed on; for quickshift and felzenszwalb the scale parameters are derived from it
        and the image area. When a method's count is not within ``COUNT_TOLERANCE`` of it
        (give or take one region), the regions are refitted: slic is retried with 10x the
        compactness, then regions that are too few are cut by a grid of ``n_segments`` cells
        (pieces keep the method's own boundaries) and regions that are too many are merged,
        smallest first. A flat image cannot be cut so: :func:`segment_regions` says so in
        ``Regions.note``. ``None`` keeps each method's defaults (quickshift: lime's
        ``kernel_size=4, max_dist=200, ratio=0.2``) and is not refitted.
    params : mapping, optional
        Explicit parameters of the method, overriding the defaults and ``n_segments``. The
        count is not refitted when they set the scale (``_COUNT_PARAMS``).
    working_size : int in [16, 100000], "auto" or None
        Segment a copy whose longer side is at most this many pixels, then scale the labels
        back up (nearest neighbour). ``"auto"``: 384 for quickshift, 512 for the others, so
        that a 12-megapixel photo segments in under a second. The copy keeps at least 16
        pixels per region asked for. ``None`` segments at full resolution.
    seed : int in [0, 2**63 - 1]
        Seeds quickshift's tie-breaking.
    progress : callable(fraction, message), optional
        Told each stage (reading, scaling down, segmenting, refitting, scaling up, done), with
        fractions in [0, 1] that increase. Changes nothing else.

    Returns
    -------
    (H, W) int32 ndarray with labels 0..K-1, no gaps, at the image's own resolution.

    Raises
    ------
    LimecraftError
        For an unknown method or parameter, or a value outside its range (``n_segments`` in
        [1, 5000] and at most the image's pixels, ``working_size`` in [16, 100000], each
        parameter in ``PARAM_RANGES``).
    """
    return _segment(image, method, n_segments, params, working_size, seed, progress)[0]


def segment_regions(
    image: np.ndarray,
    method: str = "quickshift",
    n_segments: int | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    working_size: int | str | None = "auto",
    seed: int = 0,
    progress: Progress | None = None,
) -> Regions:
    """:func:`segment` as :class:`Regions` (keys ``auto:j``), with ``note`` saying why the
    count differs from ``n_segments`` where it cannot be met (a flat image).

    Parameters, Raises: see :func:`segment`.
    """
    labels, note = _segment(image, method, n_segments, params, working_size, seed, progress)
    return replace(regions_from_labels(labels), note=note)


# --------------------------------------------------------------------------- regions


@dataclass(frozen=True, eq=False)
class Regions:
    """A label map with stable identities, names, and reversible merges.

    The finest pieces are *atoms*. Region k is the union of the atoms in ``groups[k]``; regions
    are ordered by their smallest atom, so merging then splitting gives back the same ids.

    Attributes
    ----------
    atoms : (H, W) int32 ndarray, ids 0..A-1 with no gaps
    atom_keys : tuple of str, one per atom, stable across merges and relabelling
        ``"hand:i"`` (handcrafted region i as one feature), ``"hand:i.j"`` (piece j inside it),
        ``"auto:j"`` (automatic superpixel j), ``"background"`` (the rest, as one feature).
    atom_names : tuple of str, one per atom ("" for automatic superpixels)
    groups : tuple of tuple of int, atoms of each region
    group_names : tuple of str, one per region
    source : dict or None, the segmentation settings that made the atoms (flat
        ``SegmentationConfig`` fields), kept through merges and splits; None for a label map
        given as is
    note : str, why the number of automatic regions differs from the one asked for, in a
        sentence to show as is ("" when it was met or none was asked for); kept through merges
        and splits
    """

    atoms: np.ndarray
    atom_keys: tuple[str, ...]
    atom_names: tuple[str, ...]
    groups: tuple[tuple[int, ...], ...] = field(default=())
    group_names: tuple[str, ...] = field(default=())
    source: dict | None = field(default=None, compare=False)
    note: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        n = len(self.atom_keys)
        if not self.groups:
            object.__setattr__(self, "groups", tuple((a,) for a in range(n)))
            object.__setattr__(self, "group_names", tuple(self.atom_names))
        groups = sorted((tuple(sorted(g)) for g in self.groups), key=lambda g: g[0])
        if sorted(a for g in groups for a in g) != list(range(n)):
            raise LimecraftError("every atom must belong to exactly one region")
        if len(self.group_names) != len(self.groups):
            raise LimecraftError("one name per region is needed")
        # Keep names aligned with the sorted groups.
        order = sorted(range(len(self.groups)), key=lambda k: min(self.groups[k]))
        object.__setattr__(self, "group_names", tuple(self.group_names[k] for k in order))
        object.__setattr__(self, "groups", tuple(groups))

    @property
    def n_regions(self) -> int:
        """Number of regions K."""
        return len(self.groups)

    @cached_property
    def labels(self) -> np.ndarray:
        """(H, W) int32 label map of the regions, 0..K-1 with no gaps."""
        lut = np.empty(len(self.atom_keys), dtype=np.int32)
        for k, g in enumerate(self.groups):
            lut[list(g)] = k
        return lut[self.atoms]

    @property
    def keys(self) -> tuple[str, ...]:
        """Stable identity of each region: its atom's key, or ``merge(a+b+...)``."""
        return tuple(
            self.atom_keys[g[0]]
            if len(g) == 1
            else "merge(" + "+".join(self.atom_keys[a] for a in g) + ")"
            for g in self.groups
        )

    @property
    def names(self) -> tuple[str, ...]:
        """Display name of each region ("" where it has none)."""
        return self.group_names

    def index_of(self, key: str) -> int:
        """Current id of the region with stable identity ``key``."""
        try:
            return self.keys.index(key)
        except ValueError:
            raise LimecraftError(f"no region with key {key!r}") from None

    def pixel_counts(self) -> np.ndarray:
        """(K,) int64 ndarray, pixels per region."""
        return np.bincount(self.labels.ravel(), minlength=self.n_regions)


def regions_from_labels(labels: np.ndarray, names: Sequence[str] | None = None) -> Regions:
    """Wrap a plain label map as :class:`Regions` (keys ``auto:j``), relabelled to 0..K-1."""
    if not isinstance(labels, np.ndarray) or labels.ndim != 2:
        raise LimecraftError("a label map must be a 2-D integer array")
    atoms = relabel(labels)
    k = int(atoms.max()) + 1
    if names is not None and len(names) != k:
        raise LimecraftError(f"{len(names)} names given for {k} regions")
    return Regions(atoms, tuple(f"auto:{j}" for j in range(k)), tuple(names or [""] * k))


def masks_from_label_image(label_image: np.ndarray) -> list[np.ndarray]:
    """Split a mask image into one boolean mask per region.

    Parameters
    ----------
    label_image : (H, W) ndarray
        Each distinct non-zero value is one region, in increasing order of value. A boolean
        or 0/255 image is one region.

    Returns
    -------
    list of (H, W) bool ndarray, possibly empty.
    """
    if label_image.ndim != 2:
        raise LimecraftError(
            f"a mask image must be 2-D (one channel), got shape {label_image.shape}"
        )
    values = np.unique(label_image)
    return [label_image == v for v in values if v != 0]


def _as_masks(regions_mask: Any, shape: tuple[int, int]) -> list[np.ndarray]:
    if isinstance(regions_mask, np.ndarray):
        check_label_map(regions_mask, shape, "regions mask")
        if regions_mask.dtype == np.bool_:
            return [regions_mask.copy()]
        return masks_from_label_image(regions_mask)
    masks = []
    for i, m in enumerate(regions_mask):
        m = np.asarray(m)
        check_label_map(m, shape, f"regions mask {i + 1}")
        masks.append(m.astype(bool))
    return masks


def _components(labels: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Connected components of ``labels`` restricted to ``where``; 0 outside, 1.. inside."""
    comp = measure.label(np.where(where, labels + 1, 0), background=0, connectivity=1)
    return comp.astype(np.int64)


def _merge_small(pieces: np.ndarray, movable: np.ndarray, min_size: int) -> np.ndarray:
    """Merge movable pieces under ``min_size`` pixels into the movable neighbour they touch most.

    ``pieces`` is a label map (0 = not part of this group); ``movable`` marks pixels of the
    group. Pieces with no neighbour in the group are kept.
    """
    pieces = pieces.copy()
    sizes = np.bincount(pieces.ravel())
    boxes = ndi.find_objects(pieces)  # boxes[label - 1], kept up to date as pieces merge
    struct = ndi.generate_binary_structure(2, 1)
    for label in np.argsort(sizes, kind="stable"):
        if label == 0 or sizes[label] == 0 or sizes[label] >= min_size:
            continue
        box = boxes[label - 1]
        sl = tuple(slice(max(s.start - 1, 0), s.stop + 1) for s in box)
        local = pieces[sl]
        mine = local == label
        ring = ndi.binary_dilation(mine, struct) & ~mine & movable[sl] & (local > 0)
        if not ring.any():
            continue
        neighbours, counts = np.unique(local[ring], return_counts=True)
        target = neighbours[np.argmax(counts)]
        local[mine] = target
        tb = boxes[target - 1]
        boxes[target - 1] = tuple(
            slice(min(a.start, b.start), max(a.stop, b.stop)) for a, b in zip(tb, box, strict=False)
        )
        sizes[target] += sizes[label]
        sizes[label] = 0
    return pieces


def compose_regions(
    image: np.ndarray,
    regions_mask: Any,
    *,
    names: Sequence[str] | None = None,
    inner_segments: int | Sequence[int | None] | None = None,
    inner_method: str = "slic",
    outer_segments: int | None = None,
    outer_method: str = "quickshift",
    outer_params: Mapping[str, Any] | None = None,
    min_fragment: int | None = None,
    working_size: int | str | None = "auto",
    seed: int = 0,
    progress: Progress | None = None,
) -> Regions:
    """Compose the final regions from handcrafted masks and automatic superpixels.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float in [0, 1]
    regions_mask : (H, W) bool or integer ndarray, or sequence of (H, W) bool ndarrays
        Handcrafted regions. In an integer image each distinct non-zero value is one region.
        Where masks overlap, the later one wins.
    names : sequence of str, optional
        One display name per handcrafted region (default ``"region 1"``, ...).
    inner_segments : int or sequence of (int or None), optional
        Per region (or one value for all): ``None`` or 1 keeps the region as one feature;
        N > 1 segments inside it with ``inner_method`` into about N pieces.
    outer_segments : int, optional
        The rest of the image: 1 keeps it as one background feature; ``None`` segments it with
        ``outer_method`` and its defaults; N > 1 targets N regions over the whole image (at most
        its pixels), refitted as in :func:`segment`.
    min_fragment : int, optional
        Automatic pieces smaller than this (pixels) are merged into the neighbour they share the
        longest border with. Default: 0.1% of the image, at least 4 pixels. Handcrafted regions
        kept as one feature are never changed. In [0, MAX_PIXELS].
    working_size : int in [16, 100000], "auto" or None, see :func:`segment`
    seed : int in [0, 2**63 - 1]
    progress : callable(fraction, message), optional
        Told each stage (each handcrafted region cut into pieces, then the rest as in
        :func:`segment`), with fractions in [0, 1] that increase. Changes nothing else.

    Returns
    -------
    Regions
        Handcrafted regions first (in mask order), then the outer regions. A region kept as one
        feature is exactly its mask minus later masks. ``note`` says why the outer count differs
        from ``outer_segments`` where it cannot be met (a flat image).

    Raises
    ------
    LimecraftError
        If a mask does not have the image's height and width, or a value is out of its range
        (``inner_segments`` in [1, 1000], ``outer_segments`` in [1, 5000] and at most the
        image's pixels).
    """
    progress = progress or _silent
    progress(0.0, "reading the image")
    img = as_float_image(image)
    shape = img.shape[:2]
    masks = _as_masks(regions_mask, shape)
    names, inner = _hand_settings(len(masks), names, inner_segments)
    if outer_segments is not None:
        outer_segments = LIMITS["outer_segments"].check("outer_segments", outer_segments)
    _check_count("outer_segments", outer_segments, shape)
    check_choice("inner method", inner_method, METHODS)
    check_choice("outer method", outer_method, METHODS)
    inner_size = _check_working_size(working_size, inner_method)
    outer_size = _check_working_size(working_size, outer_method)
    seed = LIMITS["seed"].check("seed", seed)
    if min_fragment is None:
        min_fragment = max(4, shape[0] * shape[1] // 1000)
    min_fragment = check_int("min_fragment", min_fragment, 0, MAX_PIXELS)

    owner = np.zeros(shape, dtype=np.int32)  # 0 = rest of the image, i + 1 = handcrafted region i
    for i, m in enumerate(masks):
        owner[m] = i + 1
    atoms = _Atoms(shape)
    for i in range(len(masks)):
        where = owner == i + 1
        if not where.any():
            continue  # fully covered by later masks
        if inner[i] is not None and inner[i] > 1:
            progress(0.1 + 0.2 * i / len(masks), f"cutting {names[i]} into pieces")
        pieces = _inner_pieces(img, where, inner[i], inner_method, inner_size, min_fragment, seed)
        atoms.add(pieces, where, f"hand:{i}", names[i], split=pieces is not None)

    rest = owner == 0
    note = ""
    if rest.any():
        if outer_segments == 1:
            atoms.add(None, rest, "background", "background", split=False)
        else:
            whole, note = _segment_scaled(
                img,
                outer_method,
                outer_segments,
                outer_params or {},
                outer_size,
                seed,
                _between(progress, 0.3, 0.9),
            )
            progress(0.9, "merging the rest's small pieces")
            atoms.add_auto(_merge_small(_components(whole, rest), rest, min_fragment), rest)
    progress(1.0, "done")
    return atoms.regions(note)


def _hand_settings(
    n_masks: int, names: Sequence[str] | None, inner_segments: Any
) -> tuple[list[str], list[int | None]]:
    """One name and one inner count per handcrafted region, checked."""
    if names is None:
        names = [f"region {i + 1}" for i in range(n_masks)]
    if len(names) != n_masks:
        raise LimecraftError(f"{len(names)} names given for {n_masks} handcrafted regions")
    if inner_segments is None or isinstance(inner_segments, (int, np.integer)):
        inner = [inner_segments] * n_masks
    else:
        inner = list(inner_segments)
        if len(inner) != n_masks:
            raise LimecraftError(
                f"{len(inner)} inner_segments values for {n_masks} handcrafted regions"
            )
    return list(names), [
        None if v is None else LIMITS["inner_segments"].check("inner_segments", v) for v in inner
    ]


def _inner_pieces(
    img: np.ndarray,
    where: np.ndarray,
    n: int | None,
    method: str,
    size: int | None,
    min_fragment: int,
    seed: int,
) -> np.ndarray | None:
    """A handcrafted region segmented into about ``n`` connected pieces, or None (one feature)."""
    if n is None or n <= 1:
        return None
    rows, cols = np.nonzero(where)
    r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
    crop = img[r0:r1, c0:c1]
    if min(crop.shape[:2]) < 2:
        return None
    n = min(n, crop.shape[0] * crop.shape[1])
    local, _ = _segment_scaled(crop, method, n, {}, size, seed)
    pieces = np.zeros(where.shape, np.int64)
    pieces[r0:r1, c0:c1] = local + 1
    return _merge_small(_components(pieces, where), where, min_fragment)


class _Atoms:
    """The atom label map as it is built, with one key and one name per atom."""

    def __init__(self, shape: tuple[int, int]) -> None:
        self.atoms = np.full(shape, -1, dtype=np.int32)
        self.keys: list[str] = []
        self.names: list[str] = []

    def add(
        self, pieces: np.ndarray | None, where: np.ndarray, key: str, name: str, split: bool
    ) -> None:
        if pieces is None:
            pieces = np.zeros(where.shape, np.int64)
        ids = relabel(pieces[where])  # pieces in order of their values, one pass
        self.atoms[where] = len(self.keys) + ids
        for j in range(int(ids.max()) + 1 if ids.size else 0):
            self.keys.append(f"{key}.{j}" if split else key)
            self.names.append(f"{name} · {j + 1}" if split else name)

    def add_auto(self, comps: np.ndarray, rest: np.ndarray) -> None:
        ids = relabel(comps[rest])
        self.atoms[rest] = len(self.keys) + ids
        for j in range(int(ids.max()) + 1):
            self.keys.append(f"auto:{j}")
            self.names.append("")

    def regions(self, note: str = "") -> Regions:
        assert (self.atoms >= 0).all()
        return Regions(self.atoms, tuple(self.keys), tuple(self.names), note=note)


def merge_regions(regions: Regions, ids: Iterable[int], name: str | None = None) -> Regions:
    """Merge regions ``ids`` into one region; its id is the smallest of theirs after reordering.

    Parameters
    ----------
    regions : Regions
    ids : iterable of int, current region ids (0..K-1), at least two
    name : str, optional
        Name of the merged region (default: the names of the parts joined with ``+``).

    Returns
    -------
    Regions, a new object; ``regions`` is unchanged.
    """
    ids = sorted({check_int("region id", i, 0, regions.n_regions - 1) for i in ids})
    if len(ids) < 2:
        raise LimecraftError("select at least two regions to merge")
    merged = tuple(a for i in ids for a in regions.groups[i])
    if name is None:
        name = "+".join(n for n in (regions.names[i] for i in ids) if n) or ""
    groups = [g for i, g in enumerate(regions.groups) if i not in ids] + [merged]
    names = [n for i, n in enumerate(regions.names) if i not in ids] + [name]
    return Regions(
        regions.atoms,
        regions.atom_keys,
        regions.atom_names,
        tuple(groups),
        tuple(names),
        regions.source,
        regions.note,
    )


def merge_by_keys(regions: Regions, keys: Iterable[str], name: str | None = None) -> Regions:
    """Merge the regions with these stable keys (see :func:`merge_regions`).

    Keys that no longer exist are ignored, so a list of merges can be replayed on a
    re-composed region map; fewer than two remaining keys leave ``regions`` unchanged.
    """
    present = set(regions.keys)
    ids = [regions.index_of(k) for k in keys if k in present]
    if len(set(ids)) < 2:
        return regions
    return merge_regions(regions, ids, name)


def split_region(regions: Regions, region_id: int) -> Regions:
    """Split a merged region back into the regions it was made of.

    Raises
    ------
    LimecraftError
        If the region is a single piece (nothing to split).
    """
    region_id = check_int("region id", region_id, 0, regions.n_regions - 1)
    group = regions.groups[region_id]
    if len(group) == 1:
        raise LimecraftError(
            f"region {region_id} was not made by a merge; there is nothing to split"
        )
    groups = [g for i, g in enumerate(regions.groups) if i != region_id] + [(a,) for a in group]
    names = [n for i, n in enumerate(regions.names) if i != region_id] + [
        regions.atom_names[a] for a in group
    ]
    return Regions(
        regions.atoms,
        regions.atom_keys,
        regions.atom_names,
        tuple(groups),
        tuple(names),
        regions.source,
        regions.note,
    )
