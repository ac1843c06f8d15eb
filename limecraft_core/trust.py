"""Can this explanation be trusted? Stability over repeats, convergence in N, kernel-width
sensitivity, faithfulness (deletion and insertion), and agreement across fills.

Pure functions on weight matrices and masks; :func:`limecraft_core.explain` runs the model passes
(sharing them wherever the work allows) and calls these.

The stability verdict judges **the regions that matter**, not noise among near-zero weights.
Over R runs, a region matters when

- it is among the fewest regions, by |mean weight|, that carry half of the total |mean weight|
  (so a heavy region is always judged, even when it is unstable), or
- its 95% interval of the mean excludes zero *and* its |mean| is at least 5% of the largest
  (distinguishable from zero, and not negligible).

Over those regions (thresholds in :data:`limecraft_core.limits.THRESHOLDS`):

- **stable**: Kendall's W >= 0.9 (1 for a single region), the top-k sets overlap with mean
  Jaccard >= 0.8 (k = min(5, regions that matter)), no sign flip, and at least one region is
  distinguishable from zero;
- **unstable**: W < 0.7, or Jaccard < 0.5, or more than 30% flip sign, or no region carries
  weight;
- **borderline**: anything between (including agreement among regions none of which is
  distinguishable from zero).

Kendall's W over the top-10 regions is kept for comparison with the literature (LILI reports it),
but it does not decide the verdict.

**One stream, one verdict** (:func:`stream_stability`, the default: ``repeats=1``). Independent
repeats multiply the model passes. Instead, the explanation's own sample is resampled: each
bootstrap resample (rows drawn with replacement, as many as the sample has) is refitted, which
costs no model pass, and a resample varies as an independent sample of the same size would.
Groups of 5 resamples are judged by the rule above as 5 repeats would be, with one difference:
the regions are ranked by the explanation's own weights and judged distinguishable from zero by
their bootstrap interval (weight ± 1.96 sd), since one sample's estimate is not a mean of 5 runs.
The verdict is the median over 8 groups (worst first, the 5th: "stable" needs at least 4 of the
8). The early-stop rule is this verdict on the samples scored so far: sampling stops once it is
"stable". ``bench/bench_fast.py`` measures how often it agrees with 5 independent repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import combinations

import numpy as np
from scipy.stats import rankdata, spearmanr

from . import metrics as _metrics
from ._validate import LimecraftError
from .limits import THRESHOLDS
from .surrogate import cosine_distance, fit_ridge, make_kernel

__all__ = [
    "STABLE_W",
    "UNSTABLE_W",
    "Convergence",
    "EarlyStop",
    "EarlyStopCheck",
    "Faithfulness",
    "FillComparison",
    "KernelSweep",
    "MetricRow",
    "Stability",
    "TrustResults",
    "auc",
    "convergence",
    "deletion_insertion_masks",
    "fidelity",
    "field_metric_rows",
    "jaccard_top",
    "kendall_w",
    "kernel_sweep",
    "regions_that_matter",
    "sign_entropy",
    "sign_flips",
    "stability",
    "stream_stability",
    "verdict",
]

STABLE_W, UNSTABLE_W = THRESHOLDS["stable_kendall_w"], THRESHOLDS["unstable_kendall_w"]
STABLE_JACCARD = THRESHOLDS["stable_jaccard_top5"]
UNSTABLE_JACCARD = THRESHOLDS["unstable_jaccard_top5"]
UNSTABLE_FLIPS = THRESHOLDS["unstable_sign_flips_top10"]
GOOD_R2, LOW_R2 = THRESHOLDS["good_r2"], THRESHOLDS["low_r2"]
MASS_SHARE, MIN_SHARE = THRESHOLDS["matter_mass_share"], THRESHOLDS["matter_min_share"]
TOP_K = 5  # the verdict's top-k overlap: k = min(5, regions that matter)
# The one-stream verdict: groups of resamples, each judged as that many repeats would be.
STREAM_REPEATS, STREAM_GROUPS = 5, 8
_SEVERITY = {"unstable": 0, "borderline": 1, "stable": 2}


def _top(weights: np.ndarray, n: int) -> np.ndarray:
    """Indices of the n regions with the largest |mean weight| over runs."""
    return np.argsort(-np.abs(weights.mean(axis=0)), kind="stable")[: min(n, weights.shape[1])]


def kendall_w(weights: np.ndarray, top: int = 10) -> float:
    """Kendall's coefficient of concordance of R runs over the top regions.

    Parameters
    ----------
    weights : (R, K) float ndarray, one explanation per row
    top : int, the regions ranked (largest |mean weight|)

    Returns
    -------
    float in [0, 1]; 1 when every run ranks those regions (by weight) the same way. Ties get
    average ranks (no tie correction). 1.0 for a single run or a single region.
    """
    w = np.asarray(weights, np.float64)
    m, n = w.shape[0], min(top, w.shape[1])
    if m < 2 or n < 2:
        return 1.0
    ranks = np.stack([rankdata(-row[_top(w, top)]) for row in w])  # (m, n)
    s = ((ranks.sum(axis=0) - m * (n + 1) / 2) ** 2).sum()
    return float(12 * s / (m**2 * (n**3 - n)))


def jaccard_top(weights: np.ndarray, k: int = 5) -> float:
    """Mean pairwise Jaccard index of the top-k sets (by |weight|) of R runs; 1.0 for one run."""
    w = np.asarray(weights)
    if w.shape[0] < 2:
        return 1.0
    sets = [set(np.argsort(-np.abs(row), kind="stable")[:k].tolist()) for row in w]
    return float(np.mean([len(a & b) / len(a | b) for a, b in combinations(sets, 2)]))


def sign_flips(weights: np.ndarray, regions: np.ndarray | None = None) -> float:
    """Share of regions (all, or those given) whose weight does not keep one sign in every run."""
    w = np.asarray(weights)
    if regions is not None:
        w = w[:, regions]
    if w.shape[0] < 2 or w.shape[1] == 0:
        return 0.0
    s = np.sign(w)
    return float(np.mean(~(np.all(s == s[0], axis=0))))


def verdict(w: float, jaccard: float, flips: float) -> str:
    """``stable``, ``borderline`` or ``unstable`` from agreement over the regions that matter.

    Parameters
    ----------
    w : Kendall's W over the regions that matter (1.0 when one region matters)
    jaccard : mean pairwise overlap of the repeats' top-k sets, k = min(5, regions that matter)
    flips : share of the regions that matter whose sign is not the same in every repeat
    """
    if w < UNSTABLE_W or jaccard < UNSTABLE_JACCARD or flips > UNSTABLE_FLIPS:
        return "unstable"
    if w >= STABLE_W and jaccard >= STABLE_JACCARD and flips == 0:
        return "stable"
    return "borderline"


def sign_entropy(weights: np.ndarray) -> np.ndarray:
    """Each region's sign entropy over R runs (SLICE, CVPR 2024), in bits.

    With p the share of positive weights among the runs whose weight is not exactly zero,
    H = -p log2 p - (1-p) log2 (1-p): 0 when every run gives the same sign (or no sign at all),
    1 when half the runs say "for" and half "against". (K,) float ndarray; zeros for one run.
    """
    w = np.asarray(weights, np.float64)
    pos, neg = (w > 0).sum(axis=0), (w < 0).sum(axis=0)
    p = np.where(pos + neg > 0, pos / np.maximum(pos + neg, 1), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(p * np.log2(p) + (1 - p) * np.log2(1 - p))
    return np.nan_to_num(h, nan=0.0)


def regions_that_matter(mean: np.ndarray, distinguishable: np.ndarray) -> np.ndarray:
    """The regions the verdict judges, by decreasing |mean weight| (rule in the module docstring).

    Parameters
    ----------
    mean : (K,) mean weight over the runs
    distinguishable : (K,) bool, the region's 95% interval over the runs excludes zero
    """
    a = np.abs(np.asarray(mean, np.float64))
    if a.max(initial=0.0) <= 0:
        return np.zeros(0, int)
    order = np.argsort(-a, kind="stable")
    cum = np.cumsum(a[order])
    heavy = np.zeros(len(a), bool)
    heavy[order[: int(np.searchsorted(cum, MASS_SHARE * cum[-1])) + 1]] = True
    matter = heavy | (np.asarray(distinguishable, bool) & (a >= MIN_SHARE * a.max()))
    return order[matter[order]]


def _say_regions(n: int) -> str:
    return f"the {n} region{'s' if n != 1 else ''} that matter{'s' if n == 1 else ''}"


def explain_verdict(
    verdict_: str,
    repeats: int,
    matter: Sequence[int],
    distinguishable: np.ndarray,
    w: float,
    jaccard: float,
    flipped: Sequence[int],
    source: str = "repeats",
) -> str:
    """The verdict in one sentence, e.g. "stable: the 1 region that matters is first in all 5
    repeats; 13 others are indistinguishable from zero".

    Parameters
    ----------
    verdict_ : the verdict
    repeats : R (2 reads "both halves": the early-stop rule's split-half check)
    matter : the regions that matter
    distinguishable : (K,) bool, the regions whose interval excludes zero
    w, jaccard : Kendall's W and the top-k overlap over the regions that matter
    flipped : the regions that matter whose sign changes
    source : "repeats" (independent runs) or "stream" (resamples of one sample)
    """
    m, k = len(matter), len(distinguishable)
    unit = "resamples of the sample" if source == "stream" else "repeats"
    runs = f"all {repeats} {unit}" if repeats > 2 else "both halves"
    others = k - m
    rest = ""
    if others:
        small = int(np.delete(distinguishable, np.asarray(matter, int)).sum())
        verb = "is" if others == 1 else "are"
        rest = f"; {others} other{'s' if others != 1 else ''} {verb} indistinguishable from zero"
        if small:
            rest += f" or under {MIN_SHARE:.0%} of the largest weight"
    if m == 0:
        return f"{verdict_}: no region carries any weight"
    if not distinguishable.any():
        over = f"{repeats} {unit}" if repeats > 2 else "two halves of the sample"
        return (
            f"{verdict_}: no region is distinguishable from zero over {over}: "
            "at this sample size the weights are mostly noise"
        )
    if verdict_ == "stable":
        if m == 1:
            return f"stable: {_say_regions(1)} is first in {runs}{rest}"
        return (
            f"stable: {_say_regions(m)} keep their order (W {w:.2f}) and their top set and "
            f"sign in {runs}{rest}"
        )
    why = []
    if flipped:
        more = len(flipped) - 1
        others_ = f" and {more} other{'s' if more > 1 else ''}" if more else ""
        why.append(f"region {flipped[0]}{others_} change{'s' if not more else ''} sign")
    if m > 1 and w < STABLE_W:
        why.append(f"{_say_regions(m)} change order (W {w:.2f})")
    if jaccard < STABLE_JACCARD:
        t = min(TOP_K, m)
        why.append(
            "the first region changes" if t == 1 else f"the top {t} changes (overlap {jaccard:.2f})"
        )
    where = f" across {runs.replace('all ', '')}"
    return (
        f"{verdict_}: " + "; ".join(why or [f"{_say_regions(m)} agree only partly"]) + where + rest
    )


@dataclass(frozen=True)
class Stability:
    """How much R repeated explanations (seeds seed..seed+R-1) agree.

    Attributes
    ----------
    repeats : int
    kendall_w : float, over the top-10 regions by |mean weight| (the literature's figure)
    jaccard_top5 : float, mean pairwise Jaccard of the top-5 sets
    sign_flips : float, share of all regions whose sign is not the same in every run
    sign_flips_top10 : float, the same over the top-10 regions
    verdict : str, judged over the regions that matter (module docstring)
    mean, std, ci_low, ci_high : lists of K floats (95% interval of the mean, t-distribution)
    matter : region ids that matter, by decreasing |mean weight|
    distinguishable : int, regions whose interval excludes zero
    matter_kendall_w, matter_topk, matter_sign_flips : the verdict's three figures
    sign_entropy : list of K floats, each region's sign entropy in bits (SLICE)
    reason : str, the verdict in one sentence
    source : "repeats" (R independent runs) or "stream" (R resamples of one run's sample: the
        figures are those of the median group, see :func:`stream_stability`)
    stable_share : float or None, for "stream": the share of groups judged stable
    samples : int or None, for "stream": the rows resampled
    """

    repeats: int
    kendall_w: float
    jaccard_top5: float
    sign_flips: float
    sign_flips_top10: float
    verdict: str
    mean: list[float]
    std: list[float]
    ci_low: list[float]
    ci_high: list[float]
    matter: list[int] = field(default_factory=list)
    distinguishable: int = 0
    matter_kendall_w: float = 1.0
    matter_topk: float = 1.0
    matter_sign_flips: float = 0.0
    sign_entropy: list[float] = field(default_factory=list)
    reason: str = ""
    source: str = "repeats"
    stable_share: float | None = None
    samples: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def runs(self) -> str:
        """What the runs are, for a heading: "5 repeats" or "5 resamples of one sample"."""
        if self.source == "stream":
            return f"{self.repeats} resamples of one sample"
        return f"{self.repeats} repeats"

    @property
    def inconsistent_sign(self) -> list[int]:
        """Regions whose sign is not the same in every repeat (sign entropy above zero)."""
        return [i for i, h in enumerate(self.sign_entropy) if h > 0]


def _kendall_w_of(weights: np.ndarray, regions: np.ndarray) -> float:
    """Kendall's W of R runs ranking the given regions by weight."""
    w = np.asarray(weights, np.float64)[:, regions]
    m, n = w.shape
    if m < 2 or n < 2:
        return 1.0
    ranks = np.stack([rankdata(-row) for row in w])
    s = ((ranks.sum(axis=0) - m * (n + 1) / 2) ** 2).sum()
    return float(12 * s / (m**2 * (n**3 - n)))


def stability(
    weights: np.ndarray,
    source: str = "repeats",
    center: np.ndarray | None = None,
    spread: np.ndarray | None = None,
) -> Stability:
    """Summarise R explanations of the same image and class.

    Parameters
    ----------
    weights : (R, K) float ndarray
    source : "repeats" or "stream" (R resamples of one sample)
    center, spread : (K,) float ndarrays, optional (for "stream"): the explanation's own
        weights and their bootstrap standard deviation. The regions are then ranked by
        ``center`` and judged distinguishable from zero by its normal 95% interval
        (``center`` ± 1.96 ``spread``): one sample's estimate, not a mean of R runs
    """
    from scipy.stats import t as student_t

    w = np.asarray(weights, np.float64)
    r, k = w.shape
    if center is not None and spread is not None:
        mean, std = np.asarray(center, np.float64), np.asarray(spread, np.float64)
        half = 1.959964 * std
    else:
        mean = w.mean(axis=0)
        std = w.std(axis=0, ddof=1) if r > 1 else np.zeros_like(mean)
        half = student_t.ppf(0.975, r - 1) * std / np.sqrt(r) if r > 1 else np.zeros_like(mean)
    lo, hi = mean - half, mean + half
    # one run says nothing about the spread: no region is distinguishable from zero
    dist = ((lo > 0) | (hi < 0)) if r > 1 else np.zeros(k, bool)
    matter = regions_that_matter(mean, dist)
    mw = _kendall_w_of(w, matter)
    top = min(TOP_K, max(1, len(matter)))
    mj = jaccard_top(w, top)
    flipped = [int(i) for i in matter if not np.all(np.sign(w[:, i]) == np.sign(w[0, i]))]
    mf = len(flipped) / len(matter) if len(matter) else 0.0
    n_dist = int(dist.sum())
    v = verdict(mw, mj, mf) if len(matter) else "unstable"
    if n_dist == 0 and v == "stable":
        v = "borderline"  # agreement among regions none of which is distinguishable from zero
    kw, jac = kendall_w(w), jaccard_top(w)
    flips10 = sign_flips(w, _top(w, 10))
    return Stability(
        repeats=r,
        kendall_w=kw,
        jaccard_top5=jac,
        sign_flips=sign_flips(w),
        sign_flips_top10=flips10,
        verdict=v,
        mean=mean.tolist(),
        std=std.tolist(),
        ci_low=lo.tolist(),
        ci_high=hi.tolist(),
        matter=[int(i) for i in matter],
        distinguishable=n_dist,
        matter_kendall_w=mw,
        matter_topk=mj,
        matter_sign_flips=mf,
        sign_entropy=sign_entropy(w).tolist(),
        reason=explain_verdict(v, r, matter.tolist(), dist, mw, mj, flipped, source)
        if r > 1
        else "",
        source=source,
    )


def ridge_coefs(masks: np.ndarray, y: np.ndarray, weights: np.ndarray, alpha: float) -> np.ndarray:
    """:func:`~limecraft_core.surrogate.fit_ridge`'s coefficients for B weightings at once.

    Parameters
    ----------
    masks : (N, K) bool or float
    y : (N,) float, one output column
    weights : (B, N) float >= 0, one row of sample weights per fit (a bootstrap resample is
        its multiplicities times the sample weights)
    alpha : float, ridge regularisation

    Returns
    -------
    (B, K) float64 ndarray
    """
    x = np.asarray(masks, np.float64)
    yy = np.asarray(y, np.float64)
    w = np.asarray(weights, np.float64)
    tot = w.sum(axis=1)  # (B,)
    ws = w / tot[:, None]
    xm = ws @ x  # (B, K)
    ym = ws @ yy  # (B,)
    # sum_i ws_i (x_i - xm)(x_i - xm)^T = X^T diag(ws) X - xm xm^T
    a = np.einsum("bn,nk,nl->bkl", ws, x, x) - xm[:, :, None] * xm[:, None, :]
    a += (alpha / tot)[:, None, None] * np.eye(x.shape[1])
    b = ws @ (x * yy[:, None]) - xm * ym[:, None]  # (B, K)
    try:
        return np.linalg.solve(a, b[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:  # singular (alpha = 0 and too few distinct samples)
        return (np.linalg.pinv(a) @ b[:, :, None])[:, :, 0]


def stream_stability(
    masks: np.ndarray,
    y: np.ndarray,
    sample_weights: np.ndarray,
    alpha: float,
    seed: int = 0,
    repeats: int = STREAM_REPEATS,
    groups: int = STREAM_GROUPS,
) -> Stability:
    """The stability verdict from one sample, without another model pass (module docstring).

    ``groups`` groups of ``repeats`` bootstrap resamples of the rows are refitted; each group is
    judged by :func:`stability` as ``repeats`` independent runs would be (the regions ranked by
    the explanation's own weights, distinguishable by their bootstrap interval), and the group
    at the median of the verdicts (worst first, then by W and top-k overlap over the regions
    that matter; the (G/2+1)-th) is returned, with the share of stable groups.

    Parameters
    ----------
    masks : (N, K) bool, the sample (row 0 the original image)
    y : (N,) float, the explained class's outputs
    sample_weights : (N,) float, the surrogate's weights of the rows
    alpha : ridge regularisation
    seed : the resampling seed (the same seed gives the same verdict)
    """
    n = len(masks)
    rng = np.random.default_rng(seed)
    sw = np.asarray(sample_weights, np.float64)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=groups * repeats)
    coefs = ridge_coefs(masks, y, np.vstack([sw[None], counts * sw]), alpha)
    own, coefs = coefs[0], coefs[1:]
    spread = coefs.std(axis=0, ddof=1)
    judged = [
        stability(coefs[g * repeats : (g + 1) * repeats], "stream", own, spread)
        for g in range(groups)
    ]
    order = sorted(
        range(groups),
        key=lambda g: (
            _SEVERITY[judged[g].verdict],
            judged[g].matter_kendall_w,
            judged[g].matter_topk,
        ),
    )
    median = judged[order[groups // 2]]
    share = float(np.mean([j.verdict == "stable" for j in judged]))
    return replace(median, stable_share=share, samples=n)


@dataclass(frozen=True)
class Convergence:
    """Stability as N grows, fitted on prefixes of the same samples.

    Attributes
    ----------
    sizes : list of int
    kendall_w, jaccard_top5 : lists of float, one per size (top-10 W and top-5 overlap)
    needed : int or None, the smallest size from which the verdict stays "stable"
        (None: not reached)
    verdicts : list of str, the stability verdict at each size (the same rule as the verdict)
    """

    sizes: list[int]
    kendall_w: list[float]
    jaccard_top5: list[float]
    needed: int | None
    verdicts: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def convergence(
    masks: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray],
    sample_weights: Sequence[np.ndarray],
    sizes: Sequence[int],
    alpha: float,
) -> Convergence:
    """Refit each repeat on its first n samples for each n in ``sizes``.

    Parameters
    ----------
    masks : R arrays (N, K) bool, one per repeat
    outputs : R arrays (N,) float, the target class's outputs
    sample_weights : R arrays (N,) float
    sizes : increasing ints <= N
    """
    ws, js, vs = [], [], []
    for n in sizes:
        w = np.stack(
            [
                fit_ridge(m[:n], o[:n, None], sw[:n], alpha=alpha).coef[0]
                for m, o, sw in zip(masks, outputs, sample_weights, strict=True)
            ]
        )
        st = stability(w)
        ws.append(st.kendall_w)
        js.append(st.jaccard_top5)
        vs.append(st.verdict)
    needed = None
    for i, n in enumerate(sizes):
        if all(v == "stable" for v in vs[i:]):
            needed = int(n)
            break
    return Convergence(
        sizes=[int(n) for n in sizes], kendall_w=ws, jaccard_top5=js, needed=needed, verdicts=vs
    )


@dataclass(frozen=True)
class KernelSweep:
    """The surrogate refitted for several kernel widths on the same model outputs.

    Attributes
    ----------
    widths : list of (float or "uniform")
    weights : list of K-float lists, one per width
    scores : list of float, weighted R^2 per width
    top5 : list of int lists, the top-5 regions (by weight) per width
    sensitive : list of int, regions whose sign changes across widths, or whose rank among the
        top-10 moves by 3 or more places
    """

    widths: list
    weights: list[list[float]]
    scores: list[float]
    top5: list[list[int]]
    sensitive: list[int]

    def to_dict(self) -> dict:
        return asdict(self)


def kernel_sweep(
    masks: np.ndarray,
    outputs: np.ndarray,
    correction: np.ndarray,
    widths: Sequence[float | str],
    alpha: float,
) -> KernelSweep:
    """Refit the surrogate for each kernel width; no model pass.

    Parameters
    ----------
    masks : (N, K) bool
    outputs : (N,) float, the target class's outputs
    correction : (N,) float, the sampling scheme's importance weights
    """
    d = cosine_distance(masks)
    coefs, scores = [], []
    for width in widths:
        fit = fit_ridge(masks, outputs[:, None], make_kernel(width)(d) * correction, alpha=alpha)
        coefs.append(fit.coef[0])
        scores.append(float(fit.score[0]))
    w = np.stack(coefs)
    top10 = _top(w, 10)
    ranks = np.stack([rankdata(-row)[top10] for row in w])
    moved = top10[(ranks.max(axis=0) - ranks.min(axis=0)) >= 3]
    signs = np.sign(w)
    flipped = np.flatnonzero(
        ~np.all(signs == signs[0], axis=0) & (np.abs(w).max(axis=0) > 0.05 * np.abs(w).max())
    )
    sensitive = sorted(set(moved.tolist()) | set(flipped.tolist()))
    return KernelSweep(
        widths=list(widths),
        weights=w.tolist(),
        scores=scores,
        top5=[np.argsort(-row, kind="stable")[:5].tolist() for row in w],
        sensitive=sensitive,
    )


@dataclass(frozen=True)
class Faithfulness:
    """Deletion and insertion curves at region level (arXiv 1806.07421's RISE metrics, by region).

    Attributes
    ----------
    deletion, insertion : lists of K+1 floats, the target output after hiding (revealing) the
        first j regions in the explanation's order (largest weight first)
    deletion_auc, insertion_auc : float, the curves' areas over [0, 1]; for a faithful
        explanation deletion is low and insertion is high
    random_deletion_auc, random_insertion_auc : float, the same for random orders (mean)
    heldout_r2 : float or None, the surrogate's weighted R^2 on fresh perturbations
    """

    deletion: list[float]
    insertion: list[float]
    deletion_auc: float
    insertion_auc: float
    random_deletion_auc: float
    random_insertion_auc: float
    heldout_r2: float | None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def beats_random(self) -> bool:
        """The explanation's order beats random orders both ways (deletion lower, insertion higher)."""
        return (
            self.deletion_auc < self.random_deletion_auc
            and self.insertion_auc > self.random_insertion_auc
        )


def deletion_insertion_masks(order: Sequence[int], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Masks hiding (deletion) or revealing (insertion) the first j regions of ``order``.

    Returns
    -------
    deletion, insertion : (K+1, K) bool ndarrays; row j has j regions hidden (revealed).
    """
    dele = np.ones((k + 1, k), bool)
    ins = np.zeros((k + 1, k), bool)
    for j, region in enumerate(order, start=1):
        dele[j:, region] = False
        ins[j:, region] = True
    return dele, ins


def auc(curve: Sequence[float]) -> float:
    """Trapezoid area of a curve sampled evenly over [0, 1]."""
    c = np.asarray(curve, np.float64)
    return float(((c[1:] + c[:-1]) / 2).mean()) if len(c) > 1 else float(c[0])


def weighted_r2(pred: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Weighted coefficient of determination."""
    ybar = np.average(y, weights=w)
    ss_tot = np.sum(w * (y - ybar) ** 2)
    ss_res = np.sum(w * (y - pred) ** 2)
    return float(1 - ss_res / ss_tot) if ss_tot > 0 else float(ss_res == 0)


def rank_agreement(weights: np.ndarray) -> list[list[float]]:
    """Spearman correlations between rows of weights (e.g. one row per fill)."""
    w = np.asarray(weights)
    out = np.eye(len(w))
    for i, j in combinations(range(len(w)), 2):
        rho = spearmanr(w[i], w[j]).statistic if np.ptp(w[i]) > 0 and np.ptp(w[j]) > 0 else 0.0
        out[i, j] = out[j, i] = float(rho)
    return out.tolist()


@dataclass(frozen=True)
class FillComparison:
    """The same masks explained under other fills: does the conclusion depend on the fill?

    Attributes
    ----------
    fills : list of str, the main fill first
    weights : list of K-float lists, one per fill
    spearman : (F, F) list of lists, rank agreement between fills
    top5_overlap_with_main : list of float, |top-5 ∩ main top-5| / 5 per fill
    top1 : list of int, the top region per fill
    seconds : list of float or None, the time to score the sample under each other fill
        (None for the main fill, scored with the explanation itself)
    """

    fills: list[str]
    weights: list[list[float]]
    spearman: list[list[float]]
    top5_overlap_with_main: list[float]
    top1: list[int]
    seconds: list[float | None] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def agree(self) -> bool:
        """Every fill puts the same region first."""
        return len(set(self.top1)) == 1


def fill_comparison(
    names: Sequence[str], weights: np.ndarray, seconds: Sequence[float | None] = ()
) -> FillComparison:
    """Compare explanations of the same masks under several fills (row 0 is the main fill)."""
    fw = np.asarray(weights, np.float64)
    top = [set(np.argsort(-row, kind="stable")[:5].tolist()) for row in fw]
    return FillComparison(
        fills=list(names),
        weights=fw.tolist(),
        spearman=rank_agreement(fw),
        top5_overlap_with_main=[len(top[0] & t) / 5 for t in top],
        top1=[int(np.argmax(row)) for row in fw],
        seconds=list(seconds),
    )


@dataclass(frozen=True)
class EarlyStopCheck:
    """One early-stop check: the one-stream verdict (:func:`stream_stability`) on the first
    ``n`` samples, judged by the stability verdict's rule (over the regions that matter)."""

    n: int
    kendall_w: float
    jaccard_top5: float
    sign_flips_top10: float
    matter_kendall_w: float = 1.0
    matter_topk: float = 1.0
    matter_sign_flips: float = 0.0
    distinguishable: int = 0
    verdict: str = ""
    reason: str = ""
    stable_share: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def passes(self, threshold: float) -> bool:
        """The early-stop rule: the sample so far is "stable" by the verdict's rule, with
        Kendall's W over the regions that matter at least ``threshold`` (0.9, the verdict's own
        line, by default)."""
        return (
            self.distinguishable > 0
            and self.matter_kendall_w >= threshold
            and self.matter_topk >= STABLE_JACCARD
            and self.matter_sign_flips == 0
        )

    @classmethod
    def of(cls, st: Stability) -> EarlyStopCheck:
        """The check that a one-stream verdict makes."""
        return cls(
            n=int(st.samples or 0),
            kendall_w=st.kendall_w,
            jaccard_top5=st.jaccard_top5,
            sign_flips_top10=st.sign_flips_top10,
            matter_kendall_w=st.matter_kendall_w,
            matter_topk=st.matter_topk,
            matter_sign_flips=st.matter_sign_flips,
            distinguishable=st.distinguishable,
            verdict=st.verdict,
            reason=st.reason,
            stable_share=st.stable_share,
        )


@dataclass(frozen=True)
class EarlyStop:
    """What the early-stop rule did: the checks it made and where it stopped."""

    threshold: float
    step: int
    samples_requested: int
    samples_used: int
    stopped: bool
    checks: list[EarlyStopCheck]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["checks"] = [c.to_dict() for c in self.checks]
        return d


def fidelity(r2: float) -> str:
    """``good``, ``fair`` or ``low``: how well the linear surrogate fits the model's outputs."""
    return "good" if r2 >= GOOD_R2 else "fair" if r2 >= LOW_R2 else "low"


_RESULTS = {
    "stability": Stability,
    "convergence": Convergence,
    "kernel_sweep": KernelSweep,
    "faithfulness": Faithfulness,
    "fills": FillComparison,
    "early_stop": EarlyStop,
    "irof": _metrics.Irof,
    "road": _metrics.Road,
    "faithfulness_correlation": _metrics.FaithfulnessCorrelation,
    "sparseness": _metrics.Sparseness,
    "localisation": _metrics.Localisation,
}
VERDICTS = ("stable", "borderline", "unstable")


@dataclass(frozen=True)
class TrustResults:
    """The trust checks that ran (None: not asked for); each a typed result."""

    stability: Stability | None = None
    convergence: Convergence | None = None
    kernel_sweep: KernelSweep | None = None
    faithfulness: Faithfulness | None = None
    fills: FillComparison | None = None
    early_stop: EarlyStop | None = None
    irof: _metrics.Irof | None = None
    road: _metrics.Road | None = None
    faithfulness_correlation: _metrics.FaithfulnessCorrelation | None = None
    sparseness: _metrics.Sparseness | None = None
    localisation: _metrics.Localisation | None = None

    def to_dict(self) -> dict:
        """JSON-ready, one key per check that ran."""
        return {k: getattr(self, k).to_dict() for k in _RESULTS if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, d: dict) -> TrustResults:
        """Rebuild from :meth:`to_dict`'s output (keys other than the checks' are ignored).

        Raises
        ------
        LimecraftError
            If a check's fields are missing, extra or of the wrong kind.
        """
        out = {}
        for key, kind in _RESULTS.items():
            if key not in d:
                continue
            v = d[key]
            try:
                if not isinstance(v, dict):
                    raise TypeError("not an object")
                if key == "early_stop":
                    v = {**v, "checks": [EarlyStopCheck(**c) for c in v["checks"]]}
                obj = kind(**v)
            except (TypeError, KeyError) as e:
                raise LimecraftError(f"the {key} check is malformed: {e}") from None
            if key == "stability" and obj.verdict not in VERDICTS:
                raise LimecraftError(f"unknown stability verdict {obj.verdict!r}")
            out[key] = obj
        return cls(**out)


@dataclass(frozen=True)
class MetricRow:
    """One of the field's metrics as a reader sees it (the Trust page's table, the report)."""

    name: str
    value: str
    reading: str
    definition: str
    baseline: str
    steps: int


def field_metric_rows(t: TrustResults) -> list[MetricRow]:
    """The field's metrics that ran, each with its value in words, how to read it, its
    definition, baseline and steps (model passes or samples it rests on)."""
    shown = (
        ("IROF", t.irof, lambda m: f"{m.value:.2f} ({m.per_region:.2f} per region)"),
        (
            "ROAD",
            t.road,
            lambda m: f"gap {m.value:.3f} (MoRF area {m.morf_area:.3f}, LeRF {m.lerf_area:.3f})",
        ),
        ("Faithfulness correlation", t.faithfulness_correlation, lambda m: f"{m.value:.3f}"),
        ("Sparseness (Gini)", t.sparseness, lambda m: f"{m.value:.3f}"),
    )
    return [
        MetricRow(name, value(m), m.reading, m.definition, m.baseline, m.steps)
        for name, m, value in shown
        if m is not None
    ]
