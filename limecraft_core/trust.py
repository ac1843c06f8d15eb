"""Can this explanation be trusted? Stability over repeats, convergence in N, kernel-width
sensitivity, faithfulness (deletion and insertion), and agreement across fills.

Pure functions on weight matrices and masks; :func:`limecraft_core.explain` runs the model passes
(sharing them wherever the work allows) and calls these.

Verdict thresholds (documented in the README):

- **stable**: Kendall's W >= 0.9, mean top-5 Jaccard >= 0.8, and no sign flip among the top-10;
- **unstable**: W < 0.7, or Jaccard < 0.5, or more than 30% of the top-10 flip sign;
- **borderline**: anything between.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import combinations

import numpy as np
from scipy.stats import rankdata, spearmanr

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
    "Stability",
    "TrustResults",
    "auc",
    "convergence",
    "deletion_insertion_masks",
    "fidelity",
    "jaccard_top",
    "kendall_w",
    "kernel_sweep",
    "sign_flips",
    "stability",
    "verdict",
]

STABLE_W, UNSTABLE_W = THRESHOLDS["stable_kendall_w"], THRESHOLDS["unstable_kendall_w"]
STABLE_JACCARD = THRESHOLDS["stable_jaccard_top5"]
UNSTABLE_JACCARD = THRESHOLDS["unstable_jaccard_top5"]
UNSTABLE_FLIPS = THRESHOLDS["unstable_sign_flips_top10"]
GOOD_R2, LOW_R2 = THRESHOLDS["good_r2"], THRESHOLDS["low_r2"]


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


def verdict(w: float, jaccard: float, flips_top10: float) -> str:
    """``stable``, ``borderline`` or ``unstable`` (thresholds in the module docstring)."""
    if w < UNSTABLE_W or jaccard < UNSTABLE_JACCARD or flips_top10 > UNSTABLE_FLIPS:
        return "unstable"
    if w >= STABLE_W and jaccard >= STABLE_JACCARD and flips_top10 == 0:
        return "stable"
    return "borderline"


@dataclass(frozen=True)
class Stability:
    """How much R repeated explanations (seeds seed..seed+R-1) agree.

    Attributes
    ----------
    repeats : int
    kendall_w : float, over the top-10 regions by |mean weight|
    jaccard_top5 : float, mean pairwise Jaccard of the top-5 sets
    sign_flips : float, share of all regions whose sign is not the same in every run
    sign_flips_top10 : float, the same over the top-10 regions
    verdict : str
    mean, std, ci_low, ci_high : lists of K floats (95% interval of the mean, t-distribution)
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

    def to_dict(self) -> dict:
        return asdict(self)


def stability(weights: np.ndarray) -> Stability:
    """Summarise R explanations of the same image and class.

    Parameters
    ----------
    weights : (R, K) float ndarray
    """
    from scipy.stats import t as student_t

    w = np.asarray(weights, np.float64)
    r = w.shape[0]
    mean = w.mean(axis=0)
    std = w.std(axis=0, ddof=1) if r > 1 else np.zeros_like(mean)
    half = student_t.ppf(0.975, r - 1) * std / np.sqrt(r) if r > 1 else np.zeros_like(mean)
    kw, jac = kendall_w(w), jaccard_top(w)
    flips10 = sign_flips(w, _top(w, 10))
    return Stability(
        repeats=r,
        kendall_w=kw,
        jaccard_top5=jac,
        sign_flips=sign_flips(w),
        sign_flips_top10=flips10,
        verdict=verdict(kw, jac, flips10),
        mean=mean.tolist(),
        std=std.tolist(),
        ci_low=(mean - half).tolist(),
        ci_high=(mean + half).tolist(),
    )


@dataclass(frozen=True)
class Convergence:
    """Stability as N grows, fitted on prefixes of the same samples.

    Attributes
    ----------
    sizes : list of int
    kendall_w, jaccard_top5 : lists of float, one per size
    needed : int or None, the smallest size from which W stays >= 0.9 (None: not reached)
    """

    sizes: list[int]
    kendall_w: list[float]
    jaccard_top5: list[float]
    needed: int | None

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
    ws, js = [], []
    for n in sizes:
        w = np.stack(
            [
                fit_ridge(m[:n], o[:n, None], sw[:n], alpha=alpha).coef[0]
                for m, o, sw in zip(masks, outputs, sample_weights, strict=True)
            ]
        )
        ws.append(kendall_w(w))
        js.append(jaccard_top(w))
    needed = None
    for i, n in enumerate(sizes):
        if all(v >= THRESHOLDS["convergence_kendall_w"] for v in ws[i:]):
            needed = int(n)
            break
    return Convergence(sizes=[int(n) for n in sizes], kendall_w=ws, jaccard_top5=js, needed=needed)


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
    """

    fills: list[str]
    weights: list[list[float]]
    spearman: list[list[float]]
    top5_overlap_with_main: list[float]
    top1: list[int]

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def agree(self) -> bool:
        """Every fill puts the same region first."""
        return len(set(self.top1)) == 1


def fill_comparison(names: Sequence[str], weights: np.ndarray) -> FillComparison:
    """Compare explanations of the same masks under several fills (row 0 is the main fill)."""
    fw = np.asarray(weights, np.float64)
    top = [set(np.argsort(-row, kind="stable")[:5].tolist()) for row in fw]
    return FillComparison(
        fills=list(names),
        weights=fw.tolist(),
        spearman=rank_agreement(fw),
        top5_overlap_with_main=[len(top[0] & t) / 5 for t in top],
        top1=[int(np.argmax(row)) for row in fw],
    )


@dataclass(frozen=True)
class EarlyStopCheck:
    """One split-half check: two halves of the first ``n`` samples fitted separately."""

    n: int
    kendall_w: float
    jaccard_top5: float
    sign_flips_top10: float

    def to_dict(self) -> dict:
        return asdict(self)

    def passes(self, threshold: float) -> bool:
        """The early-stop rule: the halves agree as "stable" does, with W at least ``threshold``."""
        return (
            self.kendall_w >= threshold
            and self.jaccard_top5 >= STABLE_JACCARD
            and self.sign_flips_top10 == 0
        )


def split_half(
    masks: np.ndarray, y: np.ndarray, sample_weights: np.ndarray, alpha: float
) -> EarlyStopCheck:
    """Fit the two halves of a sample independently and measure their agreement.

    Rows go to halves in pairs (0-1, 4-5, ... and 2-3, 6-7, ...), so that antithetic pairs
    stay together; each half is a valid sample on its own.
    """
    half = (np.arange(len(masks)) // 2) % 2 == 0
    w = [
        fit_ridge(masks[h], y[h, None], sample_weights[h], alpha=alpha).coef[0]
        for h in (half, ~half)
    ]
    st = stability(np.stack(w))
    return EarlyStopCheck(
        n=len(masks),
        kendall_w=st.kendall_w,
        jaccard_top5=st.jaccard_top5,
        sign_flips_top10=st.sign_flips_top10,
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
