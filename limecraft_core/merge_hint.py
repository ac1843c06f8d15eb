"""From disagreement to a merge: adjacent disputed regions' interaction, and a merge suggestion.

Pure numpy, torch-free. Explainers disagree over regions that interact (AGREED, ICLR 2026):
when two regions count only together, occlusion gives each the whole joint effect, Shapley
values and LIME split it, so their rankings part. Merging the two removes the interaction and
with it the disagreement. :func:`merge_hint` finds such a pair:

1. **The disputed regions**: the fewest regions, most disputed first (the agreement's
   ``spread``), whose spreads make up at least :data:`DISPUTE_SHARE` of the total spread.
2. **The candidate pairs**: regions that touch in the label map (4-connectivity) with at least
   one of the two disputed.
3. **Their interaction index** I_ij:

   - ``exact``: the pairwise Shapley interaction index from the table of all 2^K coalitions
     (:func:`~limecraft_core.shapley.shapley_interactions`), when that table was scored
     (K <= :data:`~limecraft_core.shapley.SHAPLEY_MAX_K`);
   - ``sample``: else, from the shared sample's scored masks: the coefficient of z_i z_j in the
     weighted least-squares fit y ~ 1 + z_1 + ... + z_K + z_i z_j (the sample's importance
     weights, so the fit is Bernoulli(p)'s). With p = 0.5 this coefficient estimates the
     Banzhaf interaction index, which equals the Shapley interaction index when no three
     regions interact (both are then the pair's own joint term); it costs no model pass.

4. **The rule**: suggest the pair of largest |I| when |I| >= :data:`INTERACTION_SHARE` times the
   methods' scale (the median over methods of each method's largest |value|), and, for the
   sample estimate, when |I| is also at least :data:`MIN_Z` standard errors from zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validate import LimecraftError

__all__ = [
    "DISPUTE_SHARE",
    "INTERACTION_SHARE",
    "MIN_Z",
    "MergeHint",
    "PairInteraction",
    "adjacent_pairs",
    "disputed_regions",
    "merge_hint",
    "sample_interaction",
]

#: The disputed regions carry at least this share of the total disagreement (spread).
DISPUTE_SHARE = 0.5
#: Suggest a merge when |I| is at least this share of the methods' scale. Why 0.2: for two
#: regions that count only together, occlusion gives each I and Shapley values I / 2, so the
#: methods part by |I| / 2 on the pair; at 0.2 of the scale that is a tenth of the shared colour
#: scale (each method divided by its largest |value|), the size of a change that reorders the
#: top regions. An additive model gives I = 0 exactly, far below it.
INTERACTION_SHARE = 0.2
#: The sample estimate must also lie this many standard errors from zero.
MIN_Z = 3.0
ESTIMATORS = ("exact", "sample")


@dataclass(frozen=True)
class PairInteraction:
    """Two adjacent regions ``a`` < ``b``, their interaction ``index``, and its standard error
    ``se`` (NaN for the exact table)."""

    a: int
    b: int
    index: float
    se: float = float("nan")


@dataclass(frozen=True)
class MergeHint:
    """Whether to merge two adjacent regions where the explainers disagree.

    Attributes
    ----------
    pair : (int, int) or None, the regions to merge (ids of the compared map), None for none
    index : float, the suggested pair's interaction index (else the largest tested |index|'s)
    estimator : str, ``exact`` (the 2^K table) or ``sample`` (the shared sample's fit)
    threshold : float, the |index| at and above which a pair is suggested
    tested : tuple of PairInteraction, the candidate pairs, largest |index| first
    sentence : str, the suggestion in plain words
    """

    pair: tuple[int, int] | None
    index: float
    estimator: str
    threshold: float
    tested: tuple[PairInteraction, ...]
    sentence: str

    def to_dict(self) -> dict[str, Any]:
        """The ``merge`` part of the explanation file's ``explainers`` block (JSON-ready)."""

        def num(x: float) -> float | None:
            return float(x) if np.isfinite(x) else None

        return {
            "pair": None if self.pair is None else [int(self.pair[0]), int(self.pair[1])],
            "index": num(self.index),
            "estimator": self.estimator,
            "threshold": float(self.threshold),
            "tested": [[t.a, t.b, num(t.index), num(t.se)] for t in self.tested],
            "sentence": self.sentence,
        }


def adjacent_pairs(labels: np.ndarray) -> np.ndarray:
    """(P, 2) int64: every pair of regions i < j that share an edge (4-connectivity), sorted.

    Parameters
    ----------
    labels : (H, W) int ndarray, region ids 0..K-1
    """
    lab = np.asarray(labels)
    if lab.ndim != 2:
        raise LimecraftError(f"a label map must be (H, W), got shape {lab.shape}")
    a = np.concatenate([lab[:, :-1].ravel(), lab[:-1, :].ravel()]).astype(np.int64)
    b = np.concatenate([lab[:, 1:].ravel(), lab[1:, :].ravel()]).astype(np.int64)
    touch = a != b
    pairs = np.stack([np.minimum(a, b)[touch], np.maximum(a, b)[touch]], axis=1)
    return np.unique(pairs, axis=0) if len(pairs) else np.zeros((0, 2), np.int64)


def disputed_regions(spread: np.ndarray, share: float = DISPUTE_SHARE) -> tuple[int, ...]:
    """The fewest regions, most disputed first, whose spreads make up at least ``share`` of the
    total (none when the methods agree everywhere)."""
    s = np.asarray(spread, dtype=np.float64)
    total = float(s.sum())
    if total <= 1e-12:
        return ()
    order = np.argsort(-s, kind="stable")
    n = int(np.searchsorted(np.cumsum(s[order]), share * total - 1e-12)) + 1
    return tuple(int(r) for r in order[:n])


def sample_interaction(
    masks: np.ndarray, y: np.ndarray, weights: np.ndarray, i: int, j: int
) -> tuple[float, float]:
    """The coefficient of z_i z_j in the weighted least squares y ~ 1 + z + z_i z_j, and its
    standard error (NaN when the sample cannot tell: too few rows, or the pair never kept).

    Parameters
    ----------
    masks : (N, K) bool, the scored masks; y : (N,) their outputs; weights : (N,) >= 0
    i, j : the two regions
    """
    z = np.asarray(masks, dtype=np.float64)
    n = z.shape[0]
    x = np.column_stack([np.ones(n), z, z[:, i] * z[:, j]])
    w = np.asarray(weights, dtype=np.float64)
    if n <= x.shape[1] + 1 or not (z[:, i] * z[:, j]).any():
        return float("nan"), float("nan")
    sw = np.sqrt(w)
    xs, ys = x * sw[:, None], np.asarray(y, np.float64) * sw
    coef, *_ = np.linalg.lstsq(xs, ys, rcond=None)
    resid = ys - xs @ coef
    dof = max(n - np.linalg.matrix_rank(xs), 1)
    cov = np.linalg.pinv(xs.T @ xs) * float(resid @ resid) / dof
    return float(coef[-1]), float(np.sqrt(max(cov[-1, -1], 0.0)))


def _named(names: Sequence[str], i: int, j: int) -> str:
    a, b = names[i], names[j]
    if a == f"region {i}" and b == f"region {j}":
        return f"Regions {i} and {j}"
    return f"{a[:1].upper()}{a[1:]} and {b}"


def _tested(
    pairs: list[tuple[int, int]],
    interactions: np.ndarray | None,
    sample: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
) -> list[PairInteraction]:
    if interactions is not None:
        out = [PairInteraction(i, j, float(interactions[i, j])) for i, j in pairs]
    elif sample is not None:
        out = [PairInteraction(i, j, *sample_interaction(*sample, i, j)) for i, j in pairs]
    else:
        raise LimecraftError("merge_hint needs the exact interactions or the scored sample")
    out = [t for t in out if np.isfinite(t.index)]
    return sorted(out, key=lambda t: (-abs(t.index), t.a, t.b))


def merge_hint(
    labels: np.ndarray,
    spread: np.ndarray,
    values: Sequence[np.ndarray],
    *,
    interactions: np.ndarray | None = None,
    sample: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    region_names: Sequence[str] | None = None,
) -> MergeHint:
    """Suggest merging the adjacent disputed pair that interacts most, if it interacts enough.

    Parameters
    ----------
    labels : (H, W) int ndarray, the compared regions (ids 0..K-1, no gaps)
    spread : (K,) float, each region's disagreement (:class:`~limecraft_core.Agreement`'s)
    values : each method's (K,) attribution; their scale sets the threshold
    interactions : (K, K) float, the exact Shapley interaction indices, optional
    sample : (masks (N, K) bool, y (N,), weights (N,)), the scored shared sample; used when
        ``interactions`` is None
    region_names : K names for the sentence (default ``region 0``, ...)

    Returns
    -------
    MergeHint
    """
    spread = np.asarray(spread, dtype=np.float64)
    k = len(spread)
    names = list(region_names) if region_names is not None else [f"region {r}" for r in range(k)]
    estimator = "exact" if interactions is not None else "sample"
    scale = float(np.median([np.abs(np.asarray(v, np.float64)).max() for v in values]))
    threshold = INTERACTION_SHARE * scale
    disputed = set(disputed_regions(spread))
    pairs = [(int(i), int(j)) for i, j in adjacent_pairs(labels) if i in disputed or j in disputed]
    tested = _tested(pairs, interactions, sample) if pairs and scale > 0 else []

    def strong(t: PairInteraction) -> bool:
        clear = estimator == "exact" or abs(t.index) >= MIN_Z * t.se
        return abs(t.index) >= threshold and clear

    hit = next((t for t in tested if strong(t)), None)
    if hit is not None:
        sentence = (
            f"{_named(names, hit.a, hit.b)} interact (index {hit.index:.2g}): merge them and "
            "explain again."
        )
        return MergeHint((hit.a, hit.b), hit.index, estimator, threshold, tuple(tested), sentence)
    if scale <= 0:
        sentence = "No method finds a region that matters: nothing to merge."
    elif not disputed:
        sentence = "The methods agree: nothing to merge."
    elif not tested:
        sentence = "No adjacent pair among the disputed regions could be tested: nothing to merge."
    else:
        t = tested[0]
        err = "" if estimator == "exact" else f" ± {t.se:.2g}"
        needs = f"{threshold:.2g}" + (
            "" if estimator == "exact" else f" and {MIN_Z:g} standard errors"
        )
        sentence = (
            f"No adjacent disputed regions interact clearly enough to merge (largest |index| "
            f"{abs(t.index):.2g}{err}, {names[t.a]} and {names[t.b]}; a merge needs {needs})."
        )
    index = tested[0].index if tested else 0.0
    return MergeHint(None, index, estimator, threshold, tuple(tested), sentence)
