"""Whether explainers agree over the same regions: top-k agreement, rank correlation, a sentence.

Pure numpy and SciPy. The four top-k measures are the "disagreement problem"'s (Krishna et al.
2022, as OpenXAI implements them). The top k of a method are its k regions of largest |value|
(ties: the lower region id first), in that order, and each measure is a share of k:

- feature agreement (FA): regions in both top k;
- rank agreement (RA): positions 1..k that hold the same region in both;
- sign agreement (SA): regions in both top k with the same sign in both;
- signed-rank agreement (SRA): positions holding the same region with the same sign.

So SRA <= RA <= FA and SRA <= SA <= FA. Spearman's rank correlation is over all K signed values.
One colour scale for every method: :func:`normalise` divides each method's values by its own
largest |value|, so each lies in [-1, 1] with its strongest region at +-1 (a method that gives
zero everywhere stays zero). The regions where the methods disagree are ranked by the spread
(largest minus smallest) of their normalised values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy.stats import rankdata

from ._validate import LimecraftError, check_int

__all__ = [
    "Agreement",
    "PairAgreement",
    "agreement",
    "feature_agreement",
    "normalise",
    "rank_agreement",
    "sign_agreement",
    "signed_rank_agreement",
    "spearman",
    "top_k",
]


def _vec(v: np.ndarray) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    if a.ndim != 1 or not np.isfinite(a).all():
        raise LimecraftError("an attribution must be a finite (K,) vector")
    return a


def top_k(values: np.ndarray, k: int) -> np.ndarray:
    """(k,) int: the regions of the k largest |values|, largest first (ties: lower id first)."""
    v = _vec(values)
    k = check_int("k", k, 1, len(v))
    return np.argsort(-np.abs(v), kind="stable")[:k]


def _pair(
    a: np.ndarray, b: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    a, b = _vec(a), _vec(b)
    if a.shape != b.shape:
        raise LimecraftError(f"attributions over different regions: {a.shape} and {b.shape}")
    return a, b, top_k(a, k), top_k(b, k)


def feature_agreement(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """FA: the share of k regions in both top k."""
    _, _, ta, tb = _pair(a, b, k)
    return len(np.intersect1d(ta, tb)) / k


def rank_agreement(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """RA: the share of positions 1..k that hold the same region."""
    _, _, ta, tb = _pair(a, b, k)
    return float(np.mean(ta == tb))


def sign_agreement(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """SA: the share of k regions in both top k with the same sign in both."""
    a, b, ta, tb = _pair(a, b, k)
    both = np.intersect1d(ta, tb)
    return int(np.sum(np.sign(a[both]) == np.sign(b[both]))) / k


def signed_rank_agreement(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """SRA: the share of positions 1..k holding the same region with the same sign."""
    a, b, ta, tb = _pair(a, b, k)
    return float(np.mean((ta == tb) & (np.sign(a[ta]) == np.sign(b[tb]))))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of the signed values (average ranks for ties); NaN when
    either method gives every region the same value."""
    a, b = _vec(a), _vec(b)
    ra, rb = rankdata(a), rankdata(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def normalise(values: np.ndarray) -> np.ndarray:
    """(K,) float64 in [-1, 1]: the values divided by their largest |value| (zeros stay zero).
    Every method drawn on one colour scale is normalised this way."""
    v = _vec(values)
    m = float(np.abs(v).max()) if len(v) else 0.0
    return v / m if m > 0 else np.zeros_like(v)


@dataclass(frozen=True)
class PairAgreement:
    """Two methods' agreement over their top k regions (each a share of k in [0, 1]), and
    Spearman's rank correlation over all regions (NaN when one method is constant)."""

    a: str
    b: str
    feature: float
    rank: float
    sign: float
    signed_rank: float
    spearman: float


@dataclass(frozen=True)
class Agreement:
    """Whether the methods agree.

    Attributes
    ----------
    k : int, the top regions compared
    methods : tuple of str, the methods' names, in order
    pairs : tuple of PairAgreement, one per pair of methods, in order
    spread : (K,) float64 ndarray, each region's largest minus smallest normalised value
    disagreeing : tuple of int, the regions with a spread above zero, most disputed first
    sentence : str, the agreement in plain words
    """

    k: int
    methods: tuple[str, ...]
    pairs: tuple[PairAgreement, ...]
    spread: np.ndarray
    disagreeing: tuple[int, ...]
    sentence: str


def _names(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _signed_top(v: np.ndarray, k: int) -> frozenset[tuple[int, float]]:
    t = top_k(v, k)
    return frozenset((int(r), float(np.sign(v[r]))) for r in t)


def _sentence(values: Mapping[str, np.ndarray], k: int, region_names: Sequence[str]) -> str:
    """The largest group with the same top-k regions and signs, then each other method: "LIME,
    KernelSHAP and occlusion agree on the top 3 and their signs; RISE puts region 4 first".
    A method that gives every region 0 ranks none first: it is named apart."""
    zero = [n for n, v in values.items() if not np.any(v)]
    if len(zero) == len(values):
        every = "every method gives" if len(zero) > 1 else f"{zero[0]} gives"
        return (
            f"No method finds a region that matters: {every} every region 0 (hiding regions "
            "does not change the score)."
        )
    if zero:
        rest = _sentence({n: v for n, v in values.items() if n not in zero}, k, region_names)
        return f"{rest[:-1]}; {_names(zero)} give{'s' if len(zero) == 1 else ''} every region 0."
    groups: dict[frozenset[tuple[int, float]], list[str]] = {}
    for name, v in values.items():
        groups.setdefault(_signed_top(v, k), []).append(name)
    group = max(groups.values(), key=len)  # the first largest, in the methods' order
    first = {n: region_names[int(top_k(v, 1)[0])] for n, v in values.items()}
    if len(group) == len(values):
        if len(group) == 1:
            return f"{group[0]} puts {first[group[0]]} first."
        return f"All {len(group)} methods agree on the top {k} and their signs ({first[group[0]]} first)."
    others = []
    for n in values:
        if n in group:
            continue
        if len(group) > 1 and first[n] == first[group[0]]:
            others.append(f"{n} agrees on {first[n]} first but not on the rest of the top {k}")
        else:
            others.append(f"{n} puts {first[n]} first")
    if len(group) == 1:
        return (
            f"No two methods agree on the top {k} and their signs: "
            + "; ".join(f"{n} puts {first[n]} first" for n in values)
            + "."
        )
    return f"{_names(group)} agree on the top {k} and their signs; " + "; ".join(others) + "."


def agreement(
    values: Mapping[str, np.ndarray], k: int = 3, region_names: Sequence[str] | None = None
) -> Agreement:
    """How far the methods agree over their top ``k`` regions.

    Parameters
    ----------
    values : {method title: (K,) float ndarray}, in the order a sentence lists them
    k : int in [1, K], the top regions compared
    region_names : K names for the sentence, optional (default ``region 0``, ``region 1``, ...)

    Returns
    -------
    Agreement
    """
    if len(values) < 1:
        raise LimecraftError("agreement needs at least one method")
    vecs = {n: _vec(v) for n, v in values.items()}
    kk = {len(v) for v in vecs.values()}
    if len(kk) != 1:
        raise LimecraftError(f"attributions over different numbers of regions: {sorted(kk)}")
    n_regions = kk.pop()
    k = check_int("k", k, 1, n_regions)
    names = (
        list(region_names)
        if region_names is not None
        else [f"region {i}" for i in range(n_regions)]
    )
    if len(names) != n_regions:
        raise LimecraftError(f"region_names must have {n_regions} names, got {len(names)}")
    pairs = tuple(
        PairAgreement(
            a,
            b,
            feature_agreement(vecs[a], vecs[b], k),
            rank_agreement(vecs[a], vecs[b], k),
            sign_agreement(vecs[a], vecs[b], k),
            signed_rank_agreement(vecs[a], vecs[b], k),
            spearman(vecs[a], vecs[b]),
        )
        for a, b in combinations(vecs, 2)
    )
    norm = np.stack([normalise(v) for v in vecs.values()])
    spread = norm.max(axis=0) - norm.min(axis=0)
    order = np.argsort(-spread, kind="stable")
    return Agreement(
        k=k,
        methods=tuple(vecs),
        pairs=pairs,
        spread=spread,
        disagreeing=tuple(int(r) for r in order if spread[r] > 1e-12),
        sentence=_sentence(vecs, k, names),
    )
