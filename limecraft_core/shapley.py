"""Shapley values over regions: the exact table of all 2^K coalitions, and the Shapley kernel.

Pure numpy, torch-free. A *coalition* is a (K,) bool mask of the regions kept; the others show
the fill. The value of a coalition is the model's output for the explained class.

- :func:`all_coalitions`: the 2^K masks, row ``c`` keeping region ``j`` iff bit ``j`` of ``c``
  is set (row 0 hides everything, the last row keeps everything).
- :func:`exact_shapley` and :func:`shapley_interactions`: Shapley values and pairwise Shapley
  interaction indices (Grabisch 1997) from that one table of values.
- :func:`kernel_coalitions` and :func:`kernel_shap`: KernelSHAP (Lundberg and Lee 2017), the
  Shapley kernel's weighted regression over sampled coalitions, with the efficiency constraint
  (the values sum to f(all) - f(none)) solved exactly, as the shap package does.

The exact table costs 2^K model passes: :data:`SHAPLEY_MAX_K` is the largest K allowed.
"""

from __future__ import annotations

import math

import numpy as np

from ._validate import LimecraftError, check_int

__all__ = [
    "SHAPLEY_MAX_K",
    "all_coalitions",
    "check_exact_size",
    "exact_shapley",
    "kernel_coalitions",
    "kernel_shap",
    "shapley_interactions",
]

#: The largest K for exact Shapley values: 2^10 = 1024 model passes, fewer than LIME's default
#: sample of 1600. Measured with the demo model (128 x 128 px) on this project's shared 2-core
#: CPU, two runs: K = 10 took 0.7-3.7 s, K = 11 5-7.5 s, K = 12 12-19 s, against 1.2-3 s for a
#: default explanation over 10 regions (docs/python.md, "Explainers"). Not measured on a GPU,
#: where the issue expects about 12.
SHAPLEY_MAX_K = 10


def check_exact_size(k: int, max_k: int = SHAPLEY_MAX_K) -> int:
    """``k`` if the exact table of 2^k coalitions is affordable, else a LimecraftError that says
    what it would cost and offers KernelSHAP."""
    k = check_int("number of regions", k, 1)
    if k > max_k:
        raise LimecraftError(
            f"exact Shapley values over {k} regions would cost 2^{k} = {2**k:,} model passes "
            f"(the limit is {max_k} regions, {2**max_k:,} passes): use kernelshap, which "
            "estimates them from a sample, or merge regions"
        )
    return k


def all_coalitions(k: int) -> np.ndarray:
    """(2^K, K) bool: row ``c`` keeps region ``j`` iff bit ``j`` of ``c`` is set."""
    codes = np.arange(2**k, dtype=np.int64)
    return ((codes[:, None] >> np.arange(k)) & 1).astype(bool)


def _table(values: np.ndarray, k: int) -> np.ndarray:
    y = np.asarray(values, dtype=np.float64)
    if y.shape != (2**k,):
        raise LimecraftError(f"an exact table over {k} regions has {2**k} values, got {y.shape}")
    return y


def exact_shapley(values: np.ndarray, k: int) -> np.ndarray:
    """Exact Shapley values from the table of every coalition's value.

    Parameters
    ----------
    values : (2^K,) float, the value of coalition ``c`` (see :func:`all_coalitions`)
    k : int, K

    Returns
    -------
    (K,) float64: phi_j = sum over S not holding j of |S|!(K-|S|-1)!/K! (v(S+j) - v(S)); they
    sum to v(all) - v(none).
    """
    y = _table(values, k)
    codes = np.arange(2**k, dtype=np.int64)
    size = np.bitwise_count(codes)
    w = np.array([math.factorial(s) * math.factorial(k - s - 1) for s in range(k)], np.float64)
    w /= math.factorial(k)
    phi = np.empty(k)
    for j in range(k):
        off = codes[(codes >> j) & 1 == 0]
        phi[j] = w[size[off]] @ (y[off | (1 << j)] - y[off])
    return phi


def shapley_interactions(values: np.ndarray, k: int) -> np.ndarray:
    """Pairwise Shapley interaction indices from the same exact table.

    Returns
    -------
    (K, K) float64, symmetric, zero diagonal: I_ij = sum over S holding neither of
    |S|!(K-|S|-2)!/(K-1)! (v(S+i+j) - v(S+i) - v(S+j) + v(S)). Positive: the two regions
    count for more together than apart (merge candidates); zero for an additive model.
    """
    y = _table(values, k)
    out = np.zeros((k, k))
    if k < 2:
        return out
    codes = np.arange(2**k, dtype=np.int64)
    size = np.bitwise_count(codes)
    w = np.array([math.factorial(s) * math.factorial(k - s - 2) for s in range(k - 1)], float)
    w /= math.factorial(k - 1)
    for i in range(k):
        for j in range(i + 1, k):
            s = codes[((codes >> i) & 1 == 0) & ((codes >> j) & 1 == 0)]
            bi, bj = 1 << i, 1 << j
            d = y[s | bi | bj] - y[s | bi] - y[s | bj] + y[s]
            out[i, j] = out[j, i] = w[size[s]] @ d
    return out


def kernel_coalitions(k: int, n: int, rng: np.random.Generator | int | None = 0) -> np.ndarray:
    """(n, K) bool coalitions drawn from the Shapley kernel, as captum and shap draw them.

    The size s in 1..K-1 is drawn with probability proportional to (K-1)/(s(K-s)), then s
    regions uniformly; so each coalition's chance is proportional to its Shapley kernel weight,
    and the regression weighs every row the same. K = 1 has no such coalition: (0, 1).
    """
    k = check_int("number of regions", k, 1)
    n = check_int("samples", n, 1)
    if k == 1:
        return np.zeros((0, 1), dtype=bool)
    gen = np.random.default_rng(rng)
    s = np.arange(1, k, dtype=np.float64)
    p = (k - 1) / (s * (k - s))
    sizes = gen.choice(np.arange(1, k), size=n, p=p / p.sum())
    ranks = np.argsort(np.argsort(gen.random((n, k)), axis=1), axis=1)
    return ranks < sizes[:, None]


def kernel_shap(
    masks: np.ndarray,
    values: np.ndarray,
    full: float,
    empty: float,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """KernelSHAP: the weighted least squares of the Shapley kernel, efficiency exact.

    Parameters
    ----------
    masks : (M, K) bool coalitions (sizes 1..K-1), drawn from the Shapley kernel
    values : (M,) float, their values
    full, empty : the values of all regions kept and of none kept
    weights : (M,) float >= 0, optional; each row's weight relative to the kernel draw
        (all ones for :func:`kernel_coalitions`)

    Returns
    -------
    (K,) float64, summing to ``full - empty``. The last region is eliminated through the
    constraint and the rest solved by least squares.
    """
    z = np.asarray(masks, dtype=np.float64)
    k = z.shape[1]
    delta = float(full) - float(empty)
    if k == 1:
        return np.array([delta])
    r = np.asarray(values, dtype=np.float64) - float(empty) - z[:, -1] * delta
    x = z[:, :-1] - z[:, -1:]
    sw = np.sqrt(np.ones(len(z)) if weights is None else np.asarray(weights, np.float64))
    head, *_ = np.linalg.lstsq(x * sw[:, None], r * sw, rcond=None)
    return np.append(head, delta - head.sum())
