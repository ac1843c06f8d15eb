"""Does the model agree with the weights?

Deletion and insertion curves and their areas, the surrogate's fidelity (weighted R²), and
agreement across fills.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations

import numpy as np
from scipy.stats import spearmanr

from ..limits import THRESHOLDS

GOOD_R2, LOW_R2 = THRESHOLDS["good_r2"], THRESHOLDS["low_r2"]


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


def fidelity(r2: float, weights: np.ndarray | None = None) -> str:
    """``good``, ``fair`` or ``low``: how well the linear surrogate fits the model's outputs.

    ``none`` when the class's ``weights`` are given and every one is 0: its score was the same
    for every sample (:func:`~limecraft_core.limits.flat_scores`), so there was nothing to fit,
    and its R² (0/0, reported as 0) says nothing about the surrogate."""
    if weights is not None and not np.any(weights):
        return "none"
    return "good" if r2 >= GOOD_R2 else "fair" if r2 >= LOW_R2 else "low"


def r2_text(r2: float, weights: np.ndarray, digits: int = 3) -> str:
    """R² to ``digits`` decimals, or "n/a" where :func:`fidelity` finds nothing to fit."""
    return "n/a" if fidelity(r2, weights) == "none" else f"{r2:.{digits}f}"
