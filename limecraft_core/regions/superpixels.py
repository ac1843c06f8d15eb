"""Automatic superpixels: quickshift, SLIC, Felzenszwalb, watershed or a grid.

They are made on a working copy of at most 512 px, with the region count asked for met within
``COUNT_TOLERANCE``.

Every label map produced here holds ints 0..K-1 with no gaps, and every pixel is assigned.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from skimage import color, filters, segmentation

from .._validate import (
    LimecraftError,
    as_float_image,
    check_choice,
    check_float,
    check_int,
)
from ..limits import LIMITS, PARAM_RANGES, SEGMENTERS
from ..tensors import resize_chw, to_chw
from .labels import (
    COUNT_TOLERANCE,
    _count,
    _grid,
    _merge_smallest,
    _split_by_grid,
    relabel,
    resize_nearest,
)
from .types import Regions, regions_from_labels

#: Segmentation runs on a copy whose longer side is at most this many pixels; labels are
#: scaled back to the image's own size. Keeps 12-megapixel photos fast.
DEFAULT_WORKING_SIZE = 512
# quickshift costs ~2x per pixel what the others do; at 384 px a 12 MP photo segments in < 1 s
WORKING_SIZES = {"quickshift": 384}
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

# Default parameters per method. quickshift's are the lime package's.
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "quickshift": {"kernel_size": 4.0, "max_dist": 200.0, "ratio": 0.2},
    "slic": {"n_segments": 50, "compactness": 10.0, "sigma": 1.0},
    "felzenszwalb": {"scale": 100.0, "sigma": 0.5, "min_size": 50},
    "watershed": {"n_segments": 50, "compactness": 0.001},
    "grid": {"n_segments": 49},
}


def _silent(fraction: float, message: str) -> None:
    pass


def _between(progress: Progress, lo: float, hi: float) -> Progress:
    """``progress`` with fractions 0..1 mapped onto ``lo``..``hi``."""
    return lambda f, message: progress(lo + (hi - lo) * f, message)


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
    small = resize_chw(to_chw(np.asarray(img, np.float32)), size)
    return np.ascontiguousarray(small.permute(1, 2, 0).clamp_(0.0, 1.0).numpy())


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
    check_choice("segmentation method", method, SEGMENTERS)
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
