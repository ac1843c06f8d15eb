"""Faithfulness and localisation metrics from the literature, at region level.

Faithfulness correlation (Bhatt et al., IJCAI 2020), sparseness (Chalasani et al., ICML 2020)
and localisation against the regions the analyst expects (relevance mass and rank accuracy,
Arras et al. 2022; the pointing game, Zhang et al. 2018). IROF and ROAD are in :mod:`.road`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .._validate import LimecraftError, check_float, check_int


def _weights(weights: np.ndarray, name: str = "weights") -> np.ndarray:
    w = np.asarray(weights, np.float64)
    if w.ndim != 1 or len(w) == 0:
        raise LimecraftError(
            f"{name} must be a non-empty 1-D array (one per region), got {w.shape}"
        )
    if not np.all(np.isfinite(w)):
        raise LimecraftError(f"{name} must be finite; drop or fix NaN/inf entries")
    return w


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's r; 0.0 when either side is constant or there are fewer than 2 pairs."""
    if len(a) < 2:
        return 0.0
    da, db = a - a.mean(), b - b.mean()
    na, nb = np.sqrt(da @ da), np.sqrt(db @ db)
    # Relative test: float rounding leaves a tiny spread on values that are equal.
    if na <= 1e-12 * max(1.0, np.abs(a).max()) or nb <= 1e-12 * max(1.0, np.abs(b).max()):
        return 0.0
    return float(np.clip((da @ db) / (na * nb), -1.0, 1.0))


@dataclass(frozen=True)
class _Metric:
    """What every metric's result says of itself: a one-line ``definition``, its ``baseline``
    (what a removed region shows), its ``steps`` (model passes or samples it rests on) and how
    to read it (``reading``, e.g. "higher is better")."""

    definition: str
    baseline: str
    steps: int
    reading: str

    def to_dict(self) -> dict:
        return asdict(self)


def random_subsets(
    k: int,
    n: int,
    subset_size: int,
    rng: np.random.Generator | np.random.RandomState | int | None = None,
) -> np.ndarray:
    """Masks that each hide ``subset_size`` regions drawn without replacement (Quantus's variant).

    Row i hides ``rng.choice(k, subset_size, replace=False)``: with a ``RandomState`` seeded as
    Quantus's global generator and k equal to its feature count, these are Quantus's subsets.

    Returns
    -------
    (n, k) bool ndarray; True keeps a region.
    """
    k = check_int("k", k, 1)
    n = check_int("n", n, 0)
    subset_size = check_int("subset_size", subset_size, 1, k)
    gen = rng if hasattr(rng, "choice") else np.random.default_rng(rng)
    masks = np.ones((n, k), bool)
    for row in masks:
        row[gen.choice(k, subset_size, replace=False)] = False
    return masks


@dataclass(frozen=True)
class FaithfulnessCorrelation(_Metric):
    """Faithfulness correlation (Bhatt et al. 2020).

    Attributes
    ----------
    value : float in [-1, 1], Pearson's r; 0.0 when undefined (fewer than 2 subsets, or the
        hidden weight sums or the drops are all equal, e.g. all-zero weights)
    mean_hidden : float, mean number of regions hidden per subset
    definition, baseline, reading : str
    steps : int, the subsets (model passes) it rests on
    """

    value: float
    mean_hidden: float

    def to_dict(self) -> dict:
        return asdict(self)


def faithfulness_correlation(
    weights: np.ndarray,
    masks: np.ndarray,
    outputs: np.ndarray,
    original_output: float,
    *,
    fill: str = "mean",
) -> FaithfulnessCorrelation:
    """Pearson correlation of the weight each subset hides with the output drop it causes.

    Parameters
    ----------
    weights : (K,) float ndarray
    masks : (N, K) bool ndarray, True keeps a region; the hidden subset is ``~masks``. Any random
        masks that the surrogate was not fitted on will do (the held-out LIME sample), or
        :func:`random_subsets`.
    outputs : (N,) float ndarray, the target output for each mask
    original_output : float, the target output on the unperturbed image
    fill : str, the fill the masks were scored with (recorded)

    Returns
    -------
    FaithfulnessCorrelation.
    """
    w = _weights(weights)
    m = np.asarray(masks, bool)
    y = np.asarray(outputs, np.float64)
    if m.ndim != 2 or m.shape[1] != len(w) or y.shape != (len(m),):
        raise LimecraftError(
            f"masks must be (N, {len(w)}) and outputs (N,); got {m.shape} and {y.shape}"
        )
    hidden = ~m
    return FaithfulnessCorrelation(
        value=_pearson(hidden.astype(np.float64) @ w, float(original_output) - y),
        mean_hidden=float(hidden.sum(axis=1).mean()) if len(m) else 0.0,
        definition=(
            "Pearson correlation, over random subsets of regions, between the subset's summed "
            "weight and the drop in class score when the subset is hidden"
        ),
        baseline=str(fill),
        steps=len(m),
        reading="higher is better",
    )


@dataclass(frozen=True)
class Sparseness(_Metric):
    """Gini index of |weights| over regions.

    Attributes
    ----------
    value : float in [0, 1 - 1/K]; 0.0 when every |weight| is equal (including all zero)
    definition, baseline, reading : str
    steps : int, 0 (no model pass)
    """

    value: float

    def to_dict(self) -> dict:
        return asdict(self)


def sparseness(weights: np.ndarray) -> Sparseness:
    """Sparseness (Chalasani et al. 2020) as Quantus 0.6.0 computes it, over regions.

    ``sum_i (2i - K - 1) a_(i) / (K sum_i a_i)`` with ``a`` the sorted |weights| (i = 1..K).
    Quantus adds 1e-7 to every value first (a guard against division by zero); here an all-zero
    explanation returns 0.0 instead, so values differ from Quantus's by O(1e-7 / mean |w|).
    """
    a = np.sort(np.abs(_weights(weights)))
    k, total = len(a), a.sum()
    value = float(((2 * np.arange(1, k + 1) - k - 1) @ a) / (k * total)) if total > 0 else 0.0
    return Sparseness(
        value=max(0.0, value),
        definition="Gini index of the absolute region weights",
        baseline="none (no model pass)",
        steps=0,
        reading="higher is sparser: fewer regions carry the weight (Chalasani et al.: better)",
    )


def expected_regions(labels: np.ndarray, mask: np.ndarray, min_share: float = 0.5) -> np.ndarray:
    """The regions inside an expected area.

    Parameters
    ----------
    labels : (H, W) int ndarray, 0..K-1 with no gaps
    mask : (H, W) bool ndarray, the expected area (e.g. the object)
    min_share : float in (0, 1]; a region counts as inside when at least this share of its pixels
        is inside the mask

    Returns
    -------
    (K,) bool ndarray.
    """
    labels = np.asarray(labels)
    mask = np.asarray(mask, bool)
    if labels.ndim != 2 or mask.shape != labels.shape:
        raise LimecraftError(f"mask {mask.shape} must have the label map's shape {labels.shape}")
    min_share = check_float("min_share", min_share, 0.0, 1.0, lo_open=True)
    k = int(labels.max()) + 1
    size = np.bincount(labels.ravel(), minlength=k)
    inside = np.bincount(labels.ravel(), weights=mask.ravel(), minlength=k)
    return inside >= min_share * size


@dataclass(frozen=True)
class Localisation(_Metric):
    """How much of the explanation falls on the regions the analyst expects.

    Attributes
    ----------
    relevance_mass : float in [0, 1], share of the positive weight inside; 0.0 when no weight is
        positive or nothing is expected
    relevance_rank_accuracy : float in [0, 1], share of the top-|E| regions by weight inside E;
        0.0 when E is empty
    pointing_game : bool, a region with the largest weight is inside E (ties: any of them, as in
        Quantus; so an all-equal explanation hits whenever E is non-empty); False when E is empty
    expected : int, |E|, the number of expected regions
    positive_mass : float, the sum of the positive weights (0 makes relevance_mass 0.0)
    mask_coverage : float or None, share of the expected area's pixels inside the expected
        regions (None when no mask was given); low means the regions miss much of the area
    region_purity : float or None, share of the expected regions' pixels inside the area; low
        means the regions spill well beyond it
    top : int or None, the region with the largest weight (the first of ties); None in results
        saved before it was kept
    top_inside : float or None, share of the top region's pixels inside the expected area (None
        when no mask was given)
    definition, baseline, reading : str
    steps : int, 0 (no model pass)
    regions : list of int, the expected regions' ids
    """

    relevance_mass: float
    relevance_rank_accuracy: float
    pointing_game: bool
    expected: int
    positive_mass: float
    mask_coverage: float | None
    region_purity: float | None
    regions: list[int] = field(default_factory=list)
    top: int | None = None
    top_inside: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def localisation(
    weights: np.ndarray,
    expected: np.ndarray,
    *,
    labels: np.ndarray | None = None,
    mask: np.ndarray | None = None,
) -> Localisation:
    """Relevance mass, relevance rank accuracy and the pointing game, over regions.

    Parameters
    ----------
    weights : (K,) float ndarray
    expected : (K,) bool ndarray, the regions inside the expected area (:func:`expected_regions`)
    labels, mask : (H, W) label map and bool area, optional; given together they add
        ``mask_coverage`` and ``region_purity``

    Returns
    -------
    Localisation. Relevance mass counts positive weight only (Arras et al.); Quantus sums the
    signed attribution, so the two agree when no weight is negative.
    """
    w = _weights(weights)
    e = np.asarray(expected, bool)
    if e.shape != w.shape:
        raise LimecraftError(f"expected must be a (K,) bool vector, K = {len(w)}; got {e.shape}")
    n_e = int(e.sum())
    pos = np.maximum(w, 0.0)
    total = float(pos.sum())
    mass = float(pos[e].sum() / total) if total > 0 and n_e else 0.0
    top = np.argsort(-w, kind="stable")[:n_e]
    rank = float(e[top].mean()) if n_e else 0.0
    pointing = bool(np.any(e & (w == w.max())))
    coverage = purity = inside = None
    if (labels is None) != (mask is None):
        raise LimecraftError("give both labels and mask (for the coverage), or neither")
    if labels is not None and mask is not None:
        labels = np.asarray(labels)
        area = np.asarray(mask, bool)
        if labels.shape != area.shape or int(labels.max()) + 1 != len(w):
            raise LimecraftError("labels and mask must share one (H, W) shape, with K regions")
        in_regions = e[labels]
        coverage = float((in_regions & area).sum() / area.sum()) if area.any() else 0.0
        purity = float((in_regions & area).sum() / in_regions.sum()) if n_e else 0.0
        inside = float(area[labels == int(np.argmax(w))].mean())
    return Localisation(
        relevance_mass=mass,
        relevance_rank_accuracy=rank,
        pointing_game=pointing,
        expected=n_e,
        positive_mass=total,
        mask_coverage=coverage,
        region_purity=purity,
        definition=(
            "relevance mass: share of the positive weight on the expected regions E; rank "
            "accuracy: share of the top-|E| regions by weight inside E; pointing game: the "
            "top region is inside E"
        ),
        baseline="none (no model pass)",
        steps=0,
        reading="higher is better (pointing game: a hit is better)",
        regions=np.flatnonzero(e).tolist(),
        top=int(np.argmax(w)),
        top_inside=inside,
    )


def localise(weights: np.ndarray, labels: np.ndarray, expected_mask: np.ndarray) -> Localisation:
    """Localisation of an explanation against the area the analyst expects (no model pass).

    Parameters
    ----------
    weights : (K,) the explained class's weights
    labels : (H, W) the regions' label map
    expected_mask : (H, W) bool, the expected area (e.g. the union of handcrafted regions);
        a region counts as expected when at least half its pixels are inside
    """
    mask = np.asarray(expected_mask)
    if mask.shape != labels.shape:
        raise LimecraftError(
            f"the expected mask is {mask.shape[:2]} but the image is {labels.shape}: "
            "draw it on the same image"
        )
    mask = mask.astype(bool) if mask.ndim == 2 else mask.any(axis=-1)
    if not mask.any():
        raise LimecraftError(
            "the expected mask is empty: mark the area you expect the model to use"
        )
    return localisation(weights, expected_regions(labels, mask), labels=labels, mask=mask)
