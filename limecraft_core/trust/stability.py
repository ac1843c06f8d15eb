"""The stability verdict: do the regions that matter keep their rank, top-k place and sign?

Over repeats or over resamples of one sample (``stream_stability``, the default): Kendall's W,
top-k Jaccard, sign flips, and the verdict in words.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field, replace
from itertools import combinations

import numpy as np
from scipy.stats import rankdata

from ..limits import THRESHOLDS, flat_series
from .conclusion import (
    CONCLUSION_LEAD,
    conclusion_of,
    conclusion_verdict,
    lead_is_firm,
)
from .wording import TOP_K, explain_verdict

STABLE_W, UNSTABLE_W = THRESHOLDS["stable_kendall_w"], THRESHOLDS["unstable_kendall_w"]


STABLE_JACCARD = THRESHOLDS["stable_jaccard_top5"]


UNSTABLE_JACCARD = THRESHOLDS["unstable_jaccard_top5"]


UNSTABLE_FLIPS = THRESHOLDS["unstable_sign_flips_top10"]


MASS_SHARE, MIN_SHARE = THRESHOLDS["matter_mass_share"], THRESHOLDS["matter_min_share"]


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
    ranks = rankdata(-w[:, _top(w, top)], axis=1)  # (m, n), every run at once
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
    conclusion : region ids, the conclusion (:func:`conclusion_regions`): the first region
        that matters and those close behind it; the verdict is the conclusion's
    conclusion_signs : +1 or -1 per conclusion region (for or against the class)
    conclusion_agreement : float, the share of the runs in which the conclusion holds (for
        "stream": over all the resamples)
    conclusion_lead : float or None, for "stream": the conclusion's lead over the next region
        in standard deviations of that gap over the resamples (:func:`conclusion_lead`; at
        most 1e6); None over repeats, and in verdicts recorded before it was judged
    detail : str, the verdict of the rule over the regions that matter (their order, top set
        and signs): reported beside the conclusion, it does not decide the verdict
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
    conclusion: list[int] = field(default_factory=list)
    conclusion_signs: list[int] = field(default_factory=list)
    conclusion_agreement: float | None = None
    detail: str = ""
    conclusion_lead: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def conclusion_firm(self) -> bool:
        """The conclusion's lead over the next region is firm (at least
        :data:`~limecraft_core.trust.conclusion.CONCLUSION_LEAD` sd over the resamples); true
        over repeats and for a verdict recorded before the lead was judged."""
        return lead_is_firm(self.conclusion_lead)

    @property
    def conclusion_distinguishable(self) -> bool:
        """Each of the conclusion's regions has an interval that excludes zero."""
        c = self.conclusion
        return bool(c) and all(self.ci_low[i] > 0 or self.ci_high[i] < 0 for i in c)

    @property
    def detail_settled(self) -> bool | None:
        """Whether the order of the regions that matter is settled (None: not judged)."""
        return (self.detail == "stable") if self.detail else None

    @property
    def runs(self) -> str:
        """What the runs are, for a heading: "5 repeats" or "40 resamples of one sample"."""
        if self.source == "stream":
            # the conclusion is judged over every resample (groups of ``repeats``)
            n = self.repeats * (STREAM_GROUPS if self.conclusion_agreement is not None else 1)
            return f"{n} resamples of one sample"
        return f"{self.repeats} repeats"

    @property
    def inconsistent_sign(self) -> list[int]:
        """Regions whose sign is not the same in every repeat (sign entropy above zero)."""
        return [i for i, h in enumerate(self.sign_entropy) if h > 0]


def _finite(x: float, most: float = 1e6) -> float:
    """``x`` bounded to ±``most`` (JSON has no infinity)."""
    return float(min(max(x, -most), most))


def _detail_of(
    w: np.ndarray, matter: np.ndarray, n_dist: int
) -> tuple[str, float, float, float, list[int]]:
    """The detail of R runs ``w`` over the regions that matter: its verdict, their Kendall's W,
    top-k overlap and share of sign flips, and the regions that flip (one group of
    :func:`_details_of_groups`)."""
    return _details_of_groups(w, 1, matter, n_dist)[0]


def _average_ranks(a: np.ndarray) -> np.ndarray:
    """Ranks 1..n along the last axis, ties given their average rank: scipy's
    ``rankdata(a, axis=-1)``, exactly (ranks are whole or half numbers), by counting the
    smaller and equal values of each element (n is a few dozen regions at most here)."""
    less = (a[..., None, :] < a[..., :, None]).sum(axis=-1)
    same = (a[..., None, :] == a[..., :, None]).sum(axis=-1)
    return less + (same + 1) / 2


def _details_of_groups(
    coefs: np.ndarray, groups: int, matter: np.ndarray, n_dist: int
) -> list[tuple[str, float, float, float, list[int]]]:
    """The detail of each of ``groups`` consecutive groups of R runs (the rows of ``coefs``):
    its verdict, Kendall's W over the regions that matter, the top-k overlap, the share of
    those regions whose sign flips, and the regions that flip; computed for all the groups at
    once (an early-stop check judges 8 groups of 5 resamples)."""
    r = len(coefs) // groups
    w = np.asarray(coefs, np.float64).reshape(groups, r, -1)
    m = len(matter)
    # Kendall's W over the regions that matter
    if r < 2 or m < 2:
        mws = [1.0] * groups
    else:
        ranks = _average_ranks(-w[:, :, matter])  # (G, R, m)
        s = ((ranks.sum(axis=1) - r * (m + 1) / 2) ** 2).sum(axis=1)
        mws = [float(12 * x / (r**2 * (m**3 - m))) for x in s]
    # the top-k overlap (over every region), as jaccard_top
    k = min(TOP_K, max(1, m))
    if r < 2:
        mjs = [1.0] * groups
    else:
        top = np.argsort(-np.abs(w), axis=2, kind="stable")[:, :, :k]
        member = np.zeros(w.shape, bool)
        np.put_along_axis(member, top, True, axis=2)
        inter = np.matmul(member.astype(np.int64), member.transpose(0, 2, 1).astype(np.int64))
        size = member.sum(axis=2)  # k, or K when there are fewer regions
        i, j = np.triu_indices(r, 1)  # the pairs in combinations' order
        union = size[:, i] + size[:, j] - inter[:, i, j]
        mjs = [float(np.mean(x)) for x in inter[:, i, j] / union]
    # the regions that matter whose sign changes within the group
    sg = np.sign(w[:, :, matter])
    changes = ~np.all(sg == sg[:, :1], axis=1)  # (G, m)
    out = []
    for g in range(groups):
        flipped = [int(x) for x in matter[changes[g]]]
        mf = len(flipped) / m if m else 0.0
        detail = verdict(mws[g], mjs[g], mf) if m else "unstable"
        if n_dist == 0 and detail == "stable":
            detail = "borderline"  # agreement among regions none of which is distinguishable
        out.append((detail, mws[g], mjs[g], mf, flipped))
    return out


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
    n_dist = int(dist.sum())
    detail, mw, mj, mf, flipped = _detail_of(w, matter, n_dist)
    conc, signs, agree, _ = conclusion_of(mean, matter, w)
    v = conclusion_verdict(agree, bool(dist[conc].all())) if len(conc) else "unstable"
    reason = explain_verdict(
        v, r, matter.tolist(), dist, mw, mj, flipped, source, conclusion=conc.tolist(),
        agreement=agree, detail=detail, signs=signs.tolist(),
    ) if r > 1 else ""  # fmt: skip
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
        reason=reason,
        source=source,
        conclusion=[int(i) for i in conc],
        conclusion_signs=[int(x) for x in signs],
        conclusion_agreement=agree,
        detail=detail,
    )


@functools.lru_cache(maxsize=8)
def _upper(k: int) -> tuple[np.ndarray, np.ndarray]:
    """The row and column indices of a (k, k) matrix's upper triangle, the diagonal included."""
    return np.triu_indices(k)


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
    if flat_series(yy):
        return np.zeros((len(w), x.shape[1]))  # the same score for every sample: no weights
    tot = w.sum(axis=1)  # (B,)
    ws = w / tot[:, None]
    k = x.shape[1]
    xm = ws @ x  # (B, K)
    ym = ws @ yy  # (B,)
    # sum_i ws_i (x_i - xm)(x_i - xm)^T = X^T diag(ws) X - xm xm^T. Every X^T diag(ws_b) X at
    # once is one matrix product (BLAS) of the weights with the rows' outer products, (B, N)
    # @ (N, K*K): 2.3x faster than the batched (B, K, N) @ (N, K) it replaces, which was 6x
    # faster than an einsum, at N=1000, K=34, B=41 (the same sums, to the last bit or so).
    # The products are symmetric: only the upper triangle's K(K+1)/2 columns are computed and
    # mirrored, half the work (the early stop's checks run this at every check)
    iu, ju = _upper(k)
    outer = x[:, iu] * x[:, ju]  # (N, K(K+1)/2)
    gram = np.empty((len(w), k, k))
    gram[:, iu, ju] = ws @ outer
    gram[:, ju, iu] = gram[:, iu, ju]
    a = gram - xm[:, :, None] * xm[:, None, :]
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
    lead: float = CONCLUSION_LEAD,
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
    lead : the lead a firm conclusion needs, in sd (:func:`~.conclusion.conclusion_of`; the
        calibration's threshold by default, another value only to calibrate it)
    """
    n = len(masks)
    rng = np.random.default_rng(seed)
    sw = np.asarray(sample_weights, np.float64)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=groups * repeats)
    coefs = ridge_coefs(masks, y, np.vstack([sw[None], counts * sw]), alpha)
    own, coefs = coefs[0], coefs[1:]
    spread = coefs.std(axis=0, ddof=1)
    # the regions that matter and their intervals are the explanation's own (``own`` ±
    # 1.96 ``spread``), the same in every group: only the detail's figures differ by group
    half = 1.959964 * spread
    dist = (own - half > 0) | (own + half < 0)
    matter = regions_that_matter(own, dist)
    figures = _details_of_groups(coefs, groups, matter, int(dist.sum()))
    # the detail: the median group by the rule over the regions that matter
    order = sorted(
        range(groups), key=lambda g: (_SEVERITY[figures[g][0]], figures[g][1], figures[g][2])
    )
    mid = order[groups // 2]
    median = stability(coefs[mid * repeats : (mid + 1) * repeats], "stream", own, spread)
    share = float(np.mean([f[0] == "stable" for f in figures]))
    # the conclusion: over every resample (the conclusion's regions and signs are the
    # explanation's own, the same in every group)
    conc, signs, agree, z = conclusion_of(own, matter, coefs, lead)
    firm = z is not None and z >= lead
    v = conclusion_verdict(agree, bool(dist[conc].all()), firm) if len(conc) else "unstable"
    flipped = figures[mid][4]  # the median group's regions that change sign
    reason = explain_verdict(
        v, len(coefs), matter.tolist(), dist, median.matter_kendall_w, median.matter_topk,
        flipped, "stream", conclusion=conc.tolist(), agreement=agree, detail=median.detail,
        signs=signs.tolist(), lead=z,
    )  # fmt: skip
    return replace(
        median,
        verdict=v,
        reason=reason,
        conclusion=[int(i) for i in conc],
        conclusion_signs=[int(x) for x in signs],
        conclusion_agreement=agree,
        conclusion_lead=None if z is None else _finite(z),
        sign_entropy=sign_entropy(coefs).tolist(),  # over every resample, as the conclusion
        stable_share=share,
        samples=n,
    )
