"""Perturbations: binary masks over regions, what a hidden region shows, and batched composition.

Perturbed images are never built one at a time in Python: each batch is composed on the model's
device as ``where(masks[:, labels], image, fill)`` and only the model's outputs are kept. The
``inpaint`` fill depends on which regions are hidden together, so it has no fixed fill image:
its fill is the marker :data:`PER_MASK` (NaN) and each batch is inpainted as it is composed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Union

import numpy as np
import torch
import torch.nn.functional as F
from scipy import ndimage as ndi
from scipy.special import gammaln

from ._validate import (
    Cancelled,
    LimecraftError,
    as_float_image,
    check_float,
    check_int,
    parse_colour,
)
from .limits import FILLS, SCHEMES
from .surrogate import make_kernel

__all__ = [
    "FILLS",
    "PER_MASK",
    "SCHEMES",
    "MaskCache",
    "MaskSample",
    "check_fill",
    "compose_batch",
    "inpaint",
    "make_fill",
    "perturbed_images",
    "sample_masks",
]


#: The fill value that stands for "inpaint each perturbation": a fill image whose values are NaN
#: (what :func:`make_fill` gives for ``inpaint``). :func:`compose_batch` recognises it and fills
#: the hidden pixels of each mask from that mask's kept pixels. A fill image is never NaN
#: otherwise, and a scorer that composes without :func:`compose_batch` gets NaN images, so
#: the model fails loudly rather than scoring the wrong pixels.
PER_MASK = float("nan")

#: A fill is a name from FILLS, a ``#RRGGBB`` colour, or a callable
#: ``(image (H, W, 3) float32, labels (H, W) int) -> (H, W, 3) float32``.
Fill = Union[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]  # noqa: UP007 (a runtime alias)


@dataclass(frozen=True)
class MaskSample:
    """Binary perturbation masks and their sampling correction.

    Attributes
    ----------
    masks : (N, K) bool ndarray; True keeps region k, False hides it. Row 0 is all True.
    weights : (N,) float64 ndarray; importance weight that makes the sample equivalent to
        Bernoulli(p) sampling (all ones for ``bernoulli`` and ``antithetic``).
    scheme : str
    p : float
    """

    masks: np.ndarray
    weights: np.ndarray
    scheme: str
    p: float


def _binom_pmf(k: np.ndarray, n: int, p: float) -> np.ndarray:
    logc = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
    with np.errstate(divide="ignore"):
        return np.exp(logc + k * np.log(p) + (n - k) * np.log1p(-p))


def _glime_counts(k_regions: int, p: float, kernel_width: float | str) -> np.ndarray:
    """GLIME's distribution of kept counts: q(k) ∝ Binom(k; K, p) π(d_k), k = 0..K."""
    k = np.arange(k_regions + 1, dtype=np.float64)
    d = 1.0 - np.sqrt(k / k_regions)  # surrogate.cosine_distance of a mask with k kept
    # a kernel that underflows to 0 far away would give infinite weights: keep it positive
    pi = np.maximum(make_kernel(kernel_width)(d), np.finfo(np.float64).tiny)
    q = _binom_pmf(k, k_regions, p) * pi
    return q / q.sum()


def sample_masks(
    n_regions: int,
    n_samples: int,
    *,
    scheme: str = "bernoulli",
    p: float = 0.5,
    rng: np.random.Generator | int | None = 0,
    kernel_width: float | str = 0.25,
) -> MaskSample:
    """Draw N binary masks over K regions; row 0 is the original image (all regions on).

    Parameters
    ----------
    n_regions : int, K >= 1
    n_samples : int, N >= 2
    scheme : {"bernoulli", "stratified", "antithetic", "glime"}
        ``bernoulli``: each region on with probability p (the lime package's scheme).
        ``stratified``: the number of active regions k is drawn uniformly from 0..K, then k
        regions at random; each row is weighted by Binom(k; K, p) * (K + 1) so that the fit
        targets the same objective as Bernoulli(p) (arXiv 2403.17742).
        ``antithetic``: Bernoulli(0.5) rows in complementary pairs (z, 1 - z), one after the
        other, which cancels the sampling noise of every linear effect; needs p = 0.5.
        ``glime``: GLIME-Binomial (Tan et al., NeurIPS 2023): draws from the kernel-weighted
        target instead of weighting Bernoulli(p) draws by the kernel. The count k is drawn
        from q(k) ∝ Binom(k; K, p) π(1 - sqrt(k / K)), π the kernel of ``kernel_width``, then
        k regions at random; each row is weighted by Binom(k; K, p) / q(k) (expectation 1, as
        for ``stratified``), so kernel times weight is constant for that kernel and any other
        kernel still fits the Bernoulli(p) objective. Lower variance when the kernel is narrow.
    p : float in (0, 1)
    rng : numpy Generator or int seed
        The same seed gives identical masks.
    kernel_width : float or "uniform"
        The kernel that ``glime`` samples from (the surrogate's, see
        :func:`~limecraft_core.surrogate.make_kernel`); ignored by the other schemes.

    Returns
    -------
    MaskSample

    Notes
    -----
    For N >= 4, every region is guaranteed to be hidden in at least one row and kept in at
    least one row other than row 0: a column that came out constant (chance 2**-(N-1) with
    Bernoulli(0.5)) gets one entry of a random row flipped.
    """
    k_regions = check_int("number of regions", n_regions, 1)
    n = check_int("samples", n_samples, 2, 1_000_000)
    if scheme not in SCHEMES:
        raise LimecraftError(f"sampling must be one of {', '.join(SCHEMES)}; got {scheme!r}")
    p = check_float("p", p, 0.0, 1.0, lo_open=True)
    if p >= 1.0:
        raise LimecraftError("p must be in (0, 1), got 1.0")
    gen = np.random.default_rng(rng)
    rows = n - 1
    weights = np.ones(n, dtype=np.float64)
    if scheme == "bernoulli":
        z = gen.random((rows, k_regions)) < p
    elif scheme == "stratified":
        k = gen.integers(0, k_regions + 1, size=rows)
        ranks = np.argsort(np.argsort(gen.random((rows, k_regions)), axis=1), axis=1)
        z = ranks < k[:, None]
        weights[1:] = _binom_pmf(k.astype(np.float64), k_regions, p) * (k_regions + 1)
    elif scheme == "glime":
        q = _glime_counts(k_regions, p, kernel_width)
        k = gen.choice(k_regions + 1, size=rows, p=q)
        ranks = np.argsort(np.argsort(gen.random((rows, k_regions)), axis=1), axis=1)
        z = ranks < k[:, None]
    else:
        if abs(p - 0.5) > 1e-12:
            raise LimecraftError("antithetic sampling needs p = 0.5")
        half = gen.random(((rows + 1) // 2, k_regions)) < 0.5
        # Interleaved (z1, ~z1, z2, ~z2, ...): every even-length prefix is balanced, so
        # convergence checks that refit on prefixes keep the variance reduction.
        z = np.empty((2 * len(half), k_regions), dtype=bool)
        z[0::2], z[1::2] = half, ~half
        z = z[:rows]
    if rows >= 3:
        for j in np.flatnonzero(z.all(axis=0) | ~z.any(axis=0)):
            z[gen.integers(rows), j] ^= True
    if scheme == "glime":  # after the guard, so a flipped row is weighted for its own count
        k = z.sum(axis=1)
        weights[1:] = _binom_pmf(k.astype(np.float64), k_regions, p) / q[k]
    masks = np.concatenate([np.ones((1, k_regions), dtype=bool), z])
    return MaskSample(masks=masks, weights=weights, scheme=scheme, p=p)


# --------------------------------------------------------------------------- fills


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


def _pull_push(premultiplied: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
    """Fill unknown pixels from their surroundings by pull-push interpolation.

    A classical multi-resolution scheme (Gortler et al., "The Lumigraph", 1996): average the
    known pixels down a pyramid (pull), then fill each level's holes from the coarser level,
    upsampled bilinearly (push). Known pixels are returned unchanged. Cost is O(H * W).

    Parameters
    ----------
    premultiplied : (B, 3, H, W) float tensor, the values times ``known``
    known : (B, 1, H, W) float tensor in [0, 1], the known fraction of each pixel
    """
    v, w = premultiplied, known
    stack = []
    while True:
        stack.append((v, w))
        if min(v.shape[-2:]) <= 2:
            break
        v = F.avg_pool2d(v, 2, ceil_mode=True)
        w = F.avg_pool2d(w, 2, ceil_mode=True)
    v, w = stack.pop()
    colour = v / w.clamp_min(1e-8)
    while stack:
        v, w = stack.pop()
        up = F.interpolate(colour, size=v.shape[-2:], mode="bilinear", align_corners=False)
        colour = v + (1.0 - w) * up  # premultiplied: w is the known fraction of each cell
    return colour


_INPAINT_SIZE = 128


def inpaint(image: np.ndarray, hole: np.ndarray, *, max_size: int | None = 256) -> np.ndarray:
    """Fill the ``hole`` pixels of an image from their surroundings (pull-push interpolation).

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float in [0, 1]
    hole : (H, W) bool ndarray, the pixels to fill
    max_size : int or None
        Interpolate on a copy at most this many pixels on its longer side (a hole's fill is
        smooth, so little is lost), then upsample; ``None`` works at full resolution.

    Returns
    -------
    (H, W, 3) float32 ndarray in [0, 1]; pixels outside the hole are unchanged.
    """
    img = as_float_image(image)
    hole = np.asarray(hole, dtype=bool)
    if hole.shape != img.shape[:2]:
        raise LimecraftError(f"hole mask {hole.shape} does not match the image {img.shape[:2]}")
    if not hole.any():
        return img
    if hole.all():
        return np.broadcast_to(img.mean(axis=(0, 1)), img.shape).astype(np.float32).copy()
    h, w = hole.shape
    x = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))[None]
    known = torch.from_numpy(~hole)[None, None].float()
    v = x * known
    s = 1.0 if max_size is None else min(1.0, max_size / max(h, w))
    if s < 1:
        small = (max(1, round(h * s)), max(1, round(w * s)))
        v = F.interpolate(v, size=small, mode="area")
        known_s = F.interpolate(known, size=small, mode="area")
    else:
        known_s = known
    filled = _pull_push(v, known_s)
    if s < 1:
        filled = F.interpolate(filled, size=(h, w), mode="bilinear", align_corners=False)
    out = torch.where(known.bool(), x, filled)[0]
    return np.clip(out.numpy().transpose(1, 2, 0), 0.0, 1.0)


def _inpaint_small(
    values: torch.Tensor,
    known: torch.Tensor,
    finish: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Pull-push at most ``_INPAINT_SIZE`` px on the longer side, upsampled back.

    A hole's fill is smooth, so little is lost. Area averages keep the premultiplied form exact
    at partly known cells.

    Parameters
    ----------
    values : (B, 3, H, W) float tensor, premultiplied by ``known``
    known : (B, 1, H, W) float tensor in [0, 1]
    finish : callable, optional; applied to the fill at the reduced size, before upsampling

    Returns
    -------
    (B, 3, H, W) float tensor; the fill everywhere (known pixels too, smoothed).
    """
    h, w = values.shape[-2:]
    s = min(1.0, _INPAINT_SIZE / max(h, w))
    if s < 1:
        small = (max(1, round(h * s)), max(1, round(w * s)))
        values = F.interpolate(values, size=small, mode="area")
        known = F.interpolate(known, size=small, mode="area")
    filled = _pull_push(values, known)
    if finish is not None:
        filled = finish(filled)
    if s < 1:
        filled = F.interpolate(filled, size=(h, w), mode="bilinear", align_corners=False)
    return filled


def _inpaint_union(image: torch.Tensor, keep: torch.Tensor, out: torch.Tensor | None = None):
    """Each perturbation's hidden pixels filled from its own kept pixels (fill ``inpaint``).

    Parameters
    ----------
    image : (3, H, W) float tensor
    keep : (B, 1, H, W) float tensor in {0, 1}, after mask expansion
    out : (B, 3, H, W) float tensor, optional

    Returns
    -------
    (B, 3, H, W) float tensor: the image where kept (exactly), the pull-push fill elsewhere; a
    perturbation that keeps nothing shows the image's mean colour, as :func:`inpaint` does.
    """
    nothing_kept = keep.amax(dim=(1, 2, 3)).view(-1, 1, 1, 1) == 0
    mean = image.mean(dim=(1, 2)).view(1, 3, 1, 1)

    def finish(small: torch.Tensor) -> torch.Tensor:  # at the reduced size: cheaper
        return torch.where(nothing_kept, mean, small.clamp_(0.0, 1.0))

    filled = _inpaint_small(image * keep, keep, finish)
    # lerp is exact at weights 0 and 1 (and 7x faster than a broadcast boolean where on a CPU)
    return torch.lerp(filled, image.expand_as(filled), keep, out=out)


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


# --------------------------------------------------------------------------- composition


def compose_batch(
    image: torch.Tensor,
    fill: torch.Tensor,
    labels: torch.Tensor,
    masks: torch.Tensor,
    out: torch.Tensor | None = None,
    diff: torch.Tensor | None = None,
    expand: int = 0,
    per_mask: bool | None = None,
) -> torch.Tensor:
    """Build a batch of perturbed images on the tensors' device.

    This is ``where(masks[:, labels], image, fill)``, computed as
    ``fill + keep * (image - fill)`` with ``keep`` in {0, 1}: one gather and one fused
    multiply-add, about 3x faster than a boolean ``where`` on a CPU. Hidden pixels are exactly
    the fill; kept pixels equal the image up to float rounding (1 ulp).

    When ``fill`` is the :data:`PER_MASK` marker (fill ``inpaint``), the hidden pixels of each
    image are instead inpainted, all at once, from that image's kept pixels (pull-push at most
    128 px on the longer side, as for ``inpaint-each``); kept pixels are the image exactly.

    Parameters
    ----------
    image, fill : (3, H, W) float tensors
    labels : (H, W) int64 tensor, 0..K-1
    masks : (B, K) bool tensor; True keeps the region
    out : (B, 3, H, W) float tensor, optional; a buffer to write into
    diff : (3, H, W) float tensor, optional; ``image - fill``, precomputed once per image
        (not used for the :data:`PER_MASK` fill)
    expand : int >= 0; hidden areas grow by this many pixels (mask expansion), so that the
        edges of a hidden object do not leak through the fill
    per_mask : bool, optional; whether ``fill`` is the :data:`PER_MASK` marker. Default: look
        (one element, which waits for the device); pass it when composing many batches.

    Returns
    -------
    (B, 3, H, W) float tensor.
    """
    b = masks.shape[0]
    keep = masks.to(image.dtype).index_select(1, labels.reshape(-1)).view(b, 1, *labels.shape)
    if expand > 0:  # grow every hidden area by `expand` pixels: 1 - maxpool(1 - keep)
        keep = 1.0 - F.max_pool2d(1.0 - keep, 2 * expand + 1, stride=1, padding=expand)
    if _is_per_mask(fill) if per_mask is None else per_mask:
        return _inpaint_union(image, keep, out=out)
    return torch.addcmul(fill, keep, image - fill if diff is None else diff, out=out)


def perturbed_images(
    image: np.ndarray,
    labels: np.ndarray,
    masks: np.ndarray,
    fill: Fill = "mean",
    *,
    expand: int = 0,
) -> np.ndarray:
    """The perturbed images for a few masks, as arrays (for display and tests).

    Parameters
    ----------
    image : (H, W, 3) uint8 or float ndarray
    labels : (H, W) int ndarray, 0..K-1
    masks : (B, K) bool ndarray
    fill : str or callable, as for :func:`make_fill`
    expand : int >= 0, mask expansion in pixels

    Returns
    -------
    (B, H, W, 3) float32 ndarray in [0, 1]; the pixels the model sees (composed as the
    engine's batches are).
    """
    img = as_float_image(image)
    f = make_fill(img, labels, fill)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))  # noqa: E731
    out = compose_batch(
        t(img),
        t(f),
        torch.from_numpy(labels.astype(np.int64)),
        torch.from_numpy(np.asarray(masks, dtype=bool)),
        expand=check_int("expand", expand, 0, 64),
    )
    return out.numpy().transpose(0, 2, 3, 1)


def run_masks(
    forward: Callable[[torch.Tensor], torch.Tensor],
    image: torch.Tensor,
    fill: torch.Tensor,
    labels: torch.Tensor,
    masks: np.ndarray,
    batch_size: int,
    *,
    progress: Callable[[int, int], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    expand: int = 0,
) -> torch.Tensor:
    """Stream masks through the model in chunks and keep only its outputs.

    Only the (B, K) masks travel host-to-device; images are composed on the device. Peak
    memory is one batch of images plus the (N, C) outputs.

    Parameters
    ----------
    forward : callable, (B, 3, H, W) float tensor on the device -> (B, C) float tensor
    image, fill : (3, H, W) float tensors on the device; ``fill`` may be :data:`PER_MASK`
    labels : (H, W) int64 tensor on the device
    masks : (N, K) bool ndarray
    batch_size : int
    progress : callable(done, total), optional, called after each batch
    cancel : callable() -> bool, optional; checked before each batch

    Returns
    -------
    (N, C) float32 tensor on the device.
    """
    n = len(masks)
    result: torch.Tensor | None = None  # (N, C), allocated once the first batch gives C
    done = 0
    buffer = None
    per_mask = _is_per_mask(fill)
    diff = None if per_mask else image - fill
    while done < n:
        if cancel is not None and cancel():
            raise Cancelled("cancelled")
        stop = min(done + batch_size, n)
        m = torch.from_numpy(masks[done:stop]).to(image.device, non_blocking=True)
        try:
            if buffer is None or buffer.shape[0] < stop - done:
                buffer = torch.empty(
                    (stop - done, *image.shape), dtype=image.dtype, device=image.device
                )
            batch = compose_batch(
                image,
                fill,
                labels,
                m,
                out=buffer[: stop - done],
                diff=diff,
                expand=expand,
                per_mask=per_mask,
            )
            out = forward(batch).float()
            if result is None:
                # One allocation for all scores: many small per-batch tensors kept alive between
                # the model's large, freed activations fragment the heap (RSS grew with N).
                result = torch.empty((n, *out.shape[1:]), dtype=out.dtype, device=out.device)
            result[done:stop] = out
        except torch.OutOfMemoryError:
            buffer = None
            if batch_size == 1:
                raise LimecraftError(
                    "the model ran out of device memory on a single image; "
                    "use a smaller input size or device='cpu'"
                ) from None
            batch_size = max(1, batch_size // 2)  # halve and retry the same chunk
            if image.device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        done = stop
        if progress is not None:
            progress(done, n)
    return result if result is not None else torch.empty(0)


class MaskCache:
    """Model outputs remembered by mask, so that no perturbation is scored twice.

    With few regions most masks repeat: K=6 handcrafted regions have only 64 distinct masks,
    so 1000 samples need at most 64 forward passes. The outputs are deterministic given the
    mask (same image, fill and model), so deduplication is exact up to floating-point
    differences between batch compositions.
    """

    def __init__(self) -> None:
        self._index: dict[bytes, int] = {}
        self._chunks: list[torch.Tensor] = []
        self._stacked: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self._index)

    def missing(self, masks: np.ndarray) -> tuple[np.ndarray, list[bytes], list[bytes]]:
        """The distinct rows of ``masks`` with no output yet, their keys, and every row's key."""
        masks = np.asarray(masks, bool)
        keys = [row.tobytes() for row in np.packbits(masks, axis=1)]
        new: dict[bytes, int] = {}
        for i, key in enumerate(keys):
            if key not in self._index and key not in new:
                new[key] = i
        return masks[list(new.values())], list(new), keys

    def add(self, keys: list[bytes], outputs: torch.Tensor) -> None:
        """Remember ``outputs`` (M, C) for the M mask rows whose keys are ``keys``."""
        if len(keys) != len(outputs):
            raise ValueError("one output row per key")
        for key in keys:
            self._index[key] = len(self._index)
        self._chunks.append(outputs)
        self._stacked = None

    def gather(self, keys: list[bytes]) -> torch.Tensor:
        """(N, C) outputs in the order of ``keys``; every key must have been added."""
        if self._stacked is None:
            self._stacked = torch.cat(self._chunks)
            self._chunks = [self._stacked]  # hold the scores once, not as chunks and a copy
        idx = torch.tensor([self._index[k] for k in keys], device=self._stacked.device)
        return self._stacked.index_select(0, idx)


def default_batch_size(device: torch.device, pixels: int) -> int:
    """A starting batch size for images of ``pixels`` pixels.

    On a CPU, 16 images of 224x224 (10 MB): a batch that stays in cache while the model reads
    it composes 1.5x faster than 64, and convolutions gain nothing from more. On a GPU, 256.
    """
    base = 256 if device.type == "cuda" else 16
    return int(max(1, min(4 * base, base * 224 * 224 // max(pixels, 1))))
