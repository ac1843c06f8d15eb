"""Which regions each perturbation keeps: binary masks drawn by a sampling scheme.

The schemes are Bernoulli, stratified, antithetic and GLIME; each sample carries its correction
weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from .._validate import (
    LimecraftError,
    check_float,
    check_int,
)
from ..limits import SCHEMES
from ..surrogate import make_kernel


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


def _draw_rows(
    scheme: str,
    gen: np.random.Generator,
    rows: int,
    k_regions: int,
    p: float,
    kernel_width: float | str,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The rows after row 0 as ``scheme`` draws them, and their weights where the scheme sets
    them before the guard of :func:`sample_masks` (None: all 1)."""
    if scheme == "bernoulli":
        return gen.random((rows, k_regions)) < p, None
    if scheme in ("stratified", "glime"):
        if scheme == "stratified":
            k = gen.integers(0, k_regions + 1, size=rows)
        else:
            k = gen.choice(k_regions + 1, size=rows, p=_glime_counts(k_regions, p, kernel_width))
        ranks = np.argsort(np.argsort(gen.random((rows, k_regions)), axis=1), axis=1)
        z = ranks < k[:, None]
        if scheme == "glime":
            return z, None  # weighted after the guard, for each row's own count
        return z, _binom_pmf(k.astype(np.float64), k_regions, p) * (k_regions + 1)
    if abs(p - 0.5) > 1e-12:
        raise LimecraftError("antithetic sampling needs p = 0.5")
    half = gen.random(((rows + 1) // 2, k_regions)) < 0.5
    # Interleaved (z1, ~z1, z2, ~z2, ...): every even-length prefix is balanced, so
    # convergence checks that refit on prefixes keep the variance reduction.
    z = np.empty((2 * len(half), k_regions), dtype=bool)
    z[0::2], z[1::2] = half, ~half
    return z[:rows], None


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
    z, row_weights = _draw_rows(scheme, gen, rows, k_regions, p, kernel_width)
    if row_weights is not None:
        weights[1:] = row_weights
    if rows >= 3:
        for j in np.flatnonzero(z.all(axis=0) | ~z.any(axis=0)):
            z[gen.integers(rows), j] ^= True
    if scheme == "glime":  # after the guard, so a flipped row is weighted for its own count
        k = z.sum(axis=1)
        q = _glime_counts(k_regions, p, kernel_width)
        weights[1:] = _binom_pmf(k.astype(np.float64), k_regions, p) / q[k]
    masks = np.concatenate([np.ones((1, k_regions), dtype=bool), z])
    return MaskSample(masks=masks, weights=weights, scheme=scheme, p=p)
