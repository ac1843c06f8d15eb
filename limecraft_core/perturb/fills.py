"""What a hidden region shows: a fill image made once per image from a name (mean, blur, a colour...), a ``#RRGGBB`` colour or a callable, or the marker ``PER_MASK`` for inpainting each perturbation from its own kept pixels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Union

import numpy as np
import torch
from scipy import ndimage as ndi

from .._validate import (
    LimecraftError,
    as_float_image,
    check_float,
    parse_colour,
)
from ..limits import FILLS
from .inpaint import _inpaint_small

#: The fill value that stands for "inpaint each perturbation": a fill image whose values are NaN
#: (what :func:`make_fill` gives for ``inpaint``). :func:`compose_batch` recognises it and fills
#: the hidden pixels of each mask from that mask's kept pixels. A fill image is never NaN
#: otherwise, and a scorer that composes without :func:`compose_batch` gets NaN images, so
#: the model fails loudly rather than scoring the wrong pixels.
PER_MASK = float("nan")


#: A fill is a name from FILLS, a ``#RRGGBB`` colour, or a callable
#: ``(image (H, W, 3) float32, labels (H, W) int) -> (H, W, 3) float32``.
Fill = Union[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]  # noqa: UP007 (a runtime alias)


def check_fill(fill: Fill) -> Fill:
    """Return ``fill`` if it is valid, else raise LimecraftError listing the choices."""
    if callable(fill):
        return fill
    if isinstance(fill, str) and (fill in FILLS or parse_colour(fill) is not None):
        return fill
    raise LimecraftError(
        f"fill must be one of {', '.join(FILLS)} or a colour like #808080; got {fill!r}"
    )


def _region_means(img: np.ndarray, labels: np.ndarray) -> np.ndarray:
    k = int(labels.max()) + 1
    flat = labels.ravel()
    counts = np.maximum(np.bincount(flat, minlength=k), 1)
    return np.stack(
        [np.bincount(flat, weights=img[..., c].ravel(), minlength=k) / counts for c in range(3)],
        axis=1,
    ).astype(np.float32)


def _is_per_mask(fill: torch.Tensor) -> bool:
    """Whether ``fill`` is the :data:`PER_MASK` marker (one element is enough: see there)."""
    return bool(torch.isnan(fill.reshape(-1)[:1]).any())


def _inpaint_regions(img: np.ndarray, labels: np.ndarray, chunk: int = 16) -> np.ndarray:
    """Per-region inpainting (fill ``inpaint-each``): region k is filled from everything around it.

    The pull-push runs on a copy at most 128 px on its longer side (a hole's fill is smooth, so
    little is lost) and is upsampled back; known pixels keep their exact values.
    """
    k = int(labels.max()) + 1
    x = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))[None]
    lab = torch.from_numpy(labels.astype(np.int64))
    out = x[0].clone()
    for start in range(0, k, chunk):
        ids = torch.arange(start, min(start + chunk, k))
        hidden = lab[None] == ids[:, None, None]  # (b, H, W)
        known = (~hidden)[:, None].float()
        filled = _inpaint_small(x * known, known)
        for b in range(len(ids)):
            out = torch.where(hidden[b], filled[b], out)
    return out.numpy().transpose(1, 2, 0)


def make_fill(
    image: np.ndarray, labels: np.ndarray, fill: Fill = "mean", *, blur_sigma: float | None = None
) -> np.ndarray:
    """What each hidden region shows.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float in [0, 1]
    labels : (H, W) int ndarray, 0..K-1
    fill : str or callable
        ``mean``: each region's mean colour (the lime package's default). ``gray``, ``black``
        or ``#RRGGBB``: a constant colour. ``blur``: a Gaussian blur of the image
        (sigma ``blur_sigma``, default 1/20 of the shorter side). ``inpaint``: the hidden
        regions of each perturbation are filled together, by pull-push interpolation from
        the pixels that perturbation keeps, so a hidden region never shows the pixels of
        another hidden one; this depends on the mask, so the fill returned is the marker
        :data:`PER_MASK` and :func:`compose_batch` computes it (see :func:`perturbed_images`
        for the images). ``inpaint-each``: each region filled alone from everything around
        it, hidden neighbours included (computed once). A callable ``(image, labels) -> fill``.

    Returns
    -------
    (H, W, 3) float32 ndarray in [0, 1]; all :data:`PER_MASK` (NaN) for ``inpaint``.

    Raises
    ------
    LimecraftError
        For an unknown fill, or a fill function that returns the wrong shape or NaN.
    """
    img = as_float_image(image)
    fill = check_fill(fill)
    if callable(fill):
        out = np.asarray(fill(img.copy(), labels.copy()), dtype=np.float32)
        if out.shape != img.shape:
            raise LimecraftError(f"a fill function must return shape {img.shape}, got {out.shape}")
        if not np.isfinite(out).all():
            raise LimecraftError("a fill function must return finite values in [0, 1]")
        return np.clip(out, 0.0, 1.0)
    colour = parse_colour(fill)
    if colour is not None:
        return np.broadcast_to(colour, img.shape).copy()
    if fill == "mean":
        return _region_means(img, labels)[labels]
    if fill == "blur":
        sigma = blur_sigma if blur_sigma is not None else max(1.0, min(img.shape[:2]) / 20)
        sigma = check_float("blur_sigma", sigma, 0.0, lo_open=True)
        return ndi.gaussian_filter(img, sigma=(sigma, sigma, 0), mode="nearest")
    if fill == "inpaint":
        return np.full(img.shape, PER_MASK, np.float32)
    return np.clip(_inpaint_regions(img, labels), 0.0, 1.0)
