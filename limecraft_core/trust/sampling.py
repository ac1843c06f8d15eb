"""Is the sample large enough, and the kernel not decisive?

Convergence in the number of samples, the kernel-width sweep, and the early-stop rule's record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.stats import rankdata

from ..limits import flat_series
from ..surrogate import cosine_distance, fit_ridge, make_kernel
from .conclusion import CONCLUSION_LEAD, lead_is_firm
from .stability import STABLE_JACCARD, Stability, _top, stability


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
    conclusion_agreement : list of float, the verdict's first figure at each size: the share of
        the repeats in which the conclusion (at that size) holds
    detail_kendall_w, detail_topk : lists of float, its second: Kendall's W and the top-k
        overlap over the regions that matter (the detail)
    details : list of str, the detail's verdict at each size
    """

    sizes: list[int]
    kendall_w: list[float]
    jaccard_top5: list[float]
    needed: int | None
    verdicts: list[str] = field(default_factory=list)
    conclusion_agreement: list[float] = field(default_factory=list)
    detail_kendall_w: list[float] = field(default_factory=list)
    detail_topk: list[float] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

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
    ws, js, vs, agree, dw, dj, ds = [], [], [], [], [], [], []
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
        agree.append(float(st.conclusion_agreement or 0.0))
        dw.append(st.matter_kendall_w)
        dj.append(st.matter_topk)
        ds.append(st.detail)
    needed = None
    for i, n in enumerate(sizes):
        if all(v == "stable" for v in vs[i:]):
            needed = int(n)
            break
    return Convergence(
        sizes=[int(n) for n in sizes],
        kendall_w=ws,
        jaccard_top5=js,
        needed=needed,
        verdicts=vs,
        conclusion_agreement=agree,
        detail_kendall_w=dw,
        detail_topk=dj,
        details=ds,
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


LEAD_MARGIN = 2.0  # sd: how far one sample's estimate of a lead may fall under its value


def next_check(n: int, step: int, lead: float | None, firm: float = CONCLUSION_LEAD) -> int:
    """The next sample size worth judging, after a check at ``n`` whose conclusion led the next
    region by ``lead`` sd (:func:`~limecraft_core.trust.conclusion_lead`), in whole steps.

    A lead's z-score grows about as the square root of the sample size (its gap settles, the
    gap's spread shrinks as 1/sqrt(n)), and one sample's estimate of it is off by about 1 sd.
    Allowing ``LEAD_MARGIN`` (2 sd) of that, a lead of ``lead`` at ``n`` reaches ``firm`` no
    sooner than at n * (firm / (lead + 2))^2: the checks before that cannot pass, and each
    costs 40 ridge fits, so they are skipped. Only leads under ``firm`` - 2 sd skip anything
    (under 1.5 sd at the default 3.5: a near-tie or no signal); a firm lead, no conclusion at
    all (``lead`` None) or a close one gives the next step, ``n + step``.
    """
    nxt = n + step
    if lead is None or not np.isfinite(lead) or lead >= firm - LEAD_MARGIN:
        return nxt
    want = n * (firm / (max(lead, 0.0) + LEAD_MARGIN)) ** 2
    return max(nxt, n + step * int(np.ceil((want - n) / step)))


#: A check is made only when :func:`quick_lead` reaches this (sd): half the firm lead.
SCREEN_LEAD = CONCLUSION_LEAD / 2


def quick_lead(masks: np.ndarray, y: np.ndarray, sample_weights: np.ndarray, alpha: float) -> float:
    """A check's lead estimated at the cost of one fit: the screen before the 40 resampled fits.

    The surrogate's weights and their standard errors from the weighted ridge's sandwich
    covariance (the variance the bootstrap resampling of :func:`stream_stability` estimates);
    then, for the first 1, 2 and 3 regions by |weight|, the gap to the next region over the
    two regions' standard errors, and the largest of the three. A check's conclusion leads by
    the gap between its smallest |weight| and the largest outside it, among regions ranked the
    same way, so its lead is seldom above this estimate's. On the 60 synthetic samples of
    tests/limecraft_core/trust/test_trust.py (N from 224 to 1008, K from 8 to 60, signal from
    none to one dominant region, an interaction, a skewed kernel) the estimate was 0.55 to 3.1
    times the resampled lead where that lead lay between 1 and 10 sd (median 0.96), and at
    least 3.6 sd on all 30 whose resampled lead was firm: a check whose estimate is under
    :data:`SCREEN_LEAD`, half the firm lead, cannot pass, and is not made.

    Parameters
    ----------
    masks : (N, K) bool, the sample; y : (N,) its outputs; sample_weights : (N,) the
    surrogate's weights of the rows; alpha : ridge regularisation

    Returns
    -------
    float >= 0, in sd (inf when the sample's weights have no spread at all)
    """
    x = np.asarray(masks, np.float64)
    w = np.asarray(sample_weights, np.float64)
    tot = float(w.sum())
    k = x.shape[1]
    if tot <= 0 or k < 2:
        return 0.0
    ws = w / tot
    yy = np.asarray(y, np.float64)
    if flat_series(yy):
        return 0.0  # the same score for every sample: no weights, no lead
    xc, yc = x - ws @ x, yy - ws @ yy
    xw = xc * ws[:, None]
    a_inv = np.linalg.pinv(xw.T @ xc + (alpha / tot) * np.eye(k))
    coef = a_inv @ (xw.T @ yc)
    g = xw * (yc - xc @ coef)[:, None]  # each row's score: the sandwich's meat is g'g
    se = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", a_inv, g.T @ g, a_inv), 0.0, None))
    a = np.abs(coef)
    order = np.argsort(-a, kind="stable")
    best = 0.0
    for j in range(1, min(3, k - 1) + 1):
        top, nxt = order[j - 1], order[j]
        gap, sd = a[top] - a[nxt], float(np.hypot(se[top], se[nxt]))
        best = max(best, gap / sd if sd > 0 else (float("inf") if gap > 0 else 0.0))
    return float(best)


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
    conclusion: list[int] = field(default_factory=list)
    conclusion_agreement: float | None = None
    conclusion_distinguishable: bool = False
    detail: str = ""
    conclusion_lead: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def passes(self, threshold: float) -> bool:
        """The early-stop rule: the conclusion is settled. Its regions are distinguishable
        from zero (the verdict says so), it holds in at least ``threshold`` of the resamples
        (1.0, all of them, the verdict's own line, by default): the same regions first, with the
        same signs, and it leads the next region firmly (``conclusion_lead`` at least
        ``THRESHOLDS["conclusion_lead"]`` sd; see :func:`~limecraft_core.trust.conclusion_of`).
        The detail (the order of the other regions that matter) does not hold the sampling up.
        (A check recorded before the verdict had two parts: the old rule, Kendall's W over the
        regions that matter at least ``threshold``.)"""
        if self.conclusion_agreement is not None:
            return (
                self.conclusion_distinguishable
                and lead_is_firm(self.conclusion_lead)
                and self.conclusion_agreement >= threshold
            )
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
            conclusion=list(st.conclusion),
            conclusion_agreement=st.conclusion_agreement,
            conclusion_distinguishable=st.conclusion_distinguishable,
            detail=st.detail,
            conclusion_lead=st.conclusion_lead,
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
