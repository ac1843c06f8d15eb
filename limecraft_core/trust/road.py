"""Removal metrics: IROF and ROAD.

IROF (Rieger & Hansen 2020) is the area over the deletion curve normalised by the original
score; ROAD (Rong et al., ICML 2022) removes by noisy linear imputation, most (MoRF) and least
(LeRF) relevant regions first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.linalg import spsolve

from .._validate import LimecraftError, check_float, check_int
from .metrics import _Metric, _weights

#: Default number of ROAD steps: removal fractions 1/10 .. 9/10 of the regions.
ROAD_STEPS = 10


#: Default standard deviation of ROAD's imputation noise (images in [0, 1]), as in the paper.
ROAD_NOISE = 0.01


#: ROAD's neighbour weights (Rong et al.; Quantus ``noisy_linear_imputation``):
#: (row offset, column offset, weight). They sum to 1.
_NEIGHBOURS = (
    (0, 1, 1 / 6),
    (0, -1, 1 / 6),
    (1, 0, 1 / 6),
    (-1, 0, 1 / 6),
    (1, 1, 1 / 12),
    (1, -1, 1 / 12),
    (-1, 1, 1 / 12),
    (-1, -1, 1 / 12),
)


@dataclass(frozen=True)
class Irof(_Metric):
    """IROF over the engine's deletion curve.

    Attributes
    ----------
    value : float, Quantus 0.6.0's IROF: ``K - trapz(y_j / y_0, j = 1..K)`` (unit spacing). 1 when
        hiding regions changes nothing, about K when the score vanishes at the first removal.
    per_region : float, ``value / K``, comparable across images with different region counts
    curve : list of K+1 floats, ``y_j / y_0`` for j = 0..K (starts at 1)
    definition, baseline, reading : str
    steps : int, the model passes the curve rests on (K+1)
    """

    value: float
    per_region: float
    curve: list[float]

    def to_dict(self) -> dict:
        return asdict(self)


def irof(deletion_curve: Sequence[float], *, fill: str = "mean") -> Irof:
    """IROF (Rieger & Hansen 2020) from a region deletion curve, with no model pass.

    Regions (the superpixels) are hidden cumulatively in order of decreasing weight, each replaced
    by the fill; the class score after j removals, divided by the original score, traces a curve
    whose area over is IROF. This matches Quantus 0.6.0 exactly: the ratios for j = 1..K
    (step 0 excluded) are integrated by the trapezoid rule with unit spacing and subtracted from
    K. Mean relevance of a region is its weight, so the order is the engine's deletion order.

    Parameters
    ----------
    deletion_curve : K+1 floats, the target output after hiding the first j regions in the
        explanation's order (largest weight first), j = 0..K (``Faithfulness.deletion``)
    fill : str, the fill the curve was scored with (recorded as the baseline)

    Returns
    -------
    Irof. The metric assumes a positive original score (a probability); if it is 0 the ratios are
    undefined and the curve is taken as flat 1 (the no-effect value, ``value`` = 1).

    Raises
    ------
    LimecraftError
        If the curve has fewer than 2 points or is not finite.
    """
    y = np.asarray(deletion_curve, np.float64)
    if y.ndim != 1 or len(y) < 2 or not np.all(np.isfinite(y)):
        raise LimecraftError("deletion_curve must hold K+1 >= 2 finite outputs (j = 0..K hidden)")
    k = len(y) - 1
    ratio = y / y[0] if y[0] != 0 else np.ones_like(y)
    value = float(k - np.trapezoid(ratio[1:], dx=1.0))  # 1 point (K = 1): area 0
    return Irof(
        value=value,
        per_region=value / k,
        curve=ratio.tolist(),
        definition=(
            "area over the curve of the class score, divided by the original score, as regions "
            "are hidden cumulatively from the largest weight (Quantus 0.6.0 scale: K minus the "
            "trapezoid area of steps 1..K)"
        ),
        baseline=str(fill),
        steps=k + 1,
        reading="higher is better",
    )


def _solve_hole(img: np.ndarray, hole: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The hole's pixels (``idx``, flat indices in row-major order) that each equal the
    weighted mean of their neighbours: one sparse linear system, solved for every channel."""
    h, w, c = img.shape
    n = len(idx)
    var = np.full(h * w, -1)
    var[idx] = np.arange(n)
    rows, cols = np.divmod(idx, w)
    diag = np.zeros(n)
    a_i, a_j, a_v = [], [], []
    b = np.zeros((n, c))
    for dr, dc, wt in _NEIGHBOURS:
        r, cc = rows + dr, cols + dc
        ok = (r >= 0) & (r < h) & (cc >= 0) & (cc < w)
        nb = np.where(ok, r * w + cc, 0)
        diag[ok] += wt
        inner = ok & hole.ravel()[nb]
        a_i.append(np.flatnonzero(inner))
        a_j.append(var[nb[inner]])
        a_v.append(np.full(inner.sum(), wt))
        known = ok & ~inner
        b[known] -= wt * img.reshape(h * w, c)[nb[known]]
    a_i.append(np.arange(n))
    a_j.append(np.arange(n))
    a_v.append(-diag)
    system = coo_matrix(
        (np.concatenate(a_v), (np.concatenate(a_i), np.concatenate(a_j))), shape=(n, n)
    ).tocsc()
    return np.asarray(spsolve(system, b)).reshape(n, c)


def noisy_linear_imputation(
    image: np.ndarray,
    hole: np.ndarray,
    noise: float = ROAD_NOISE,
    rng: np.random.Generator | np.random.RandomState | int | None = None,
) -> np.ndarray:
    """Fill a hole with the noisy linear imputation of ROAD (Rong et al. 2022).

    Each hole pixel equals the weighted mean of its 8 neighbours (4-neighbours 1/6, diagonals
    1/12, the weights of the paper and of Quantus 0.6.0). Neighbours outside the image are
    dropped, so a border pixel is the weighted sum of the neighbours it has, divided by their
    weight (as in Quantus). Hole pixels that neighbour each other are solved jointly, as one
    sparse linear system, per channel; then Gaussian noise of standard deviation ``noise`` is
    added to the hole. Values are not clipped.

    Parameters
    ----------
    image : (H, W, C) float ndarray (C = 3 for RGB; any C works), or (H, W, C) uint8 (scaled to
        [0, 1])
    hole : (H, W) bool ndarray, True where the pixel is removed
    noise : float >= 0
    rng : numpy Generator, RandomState, int seed or None. Draws ``standard_normal((C, n))`` for
        the n hole pixels in row-major order, which is Quantus's draw when ``rng`` is a
        ``RandomState`` seeded as Quantus's global one and the hole indices are sorted.

    Returns
    -------
    (H, W, C) ndarray, a new array (float32 for float32 or uint8 input, else float64).

    Raises
    ------
    LimecraftError
        If the shapes disagree, or the hole covers the whole image (nothing to impute from).
    """
    img = np.asarray(image)
    out_dtype = np.float32 if img.dtype in (np.float32, np.uint8) else np.float64
    img = img / 255.0 if img.dtype == np.uint8 else img.astype(np.float64)
    if img.ndim != 3:
        raise LimecraftError(f"image must have shape (H, W, C), got {img.shape}")
    hole = np.asarray(hole, bool)
    if hole.shape != img.shape[:2]:
        raise LimecraftError(f"hole is {hole.shape} but the image is {img.shape[:2]}")
    noise = check_float("noise", noise, 0.0)
    h, w, c = img.shape
    idx = np.flatnonzero(hole)
    n = len(idx)
    out = img.reshape(h * w, c).copy()
    if n == 0:
        return out.reshape(h, w, c).astype(out_dtype)
    if n == h * w:
        raise LimecraftError(
            "the hole covers the whole image: keep at least one pixel to impute from"
        )
    solved = _solve_hole(img, hole, idx)
    if noise > 0:
        gen = rng if hasattr(rng, "standard_normal") else np.random.default_rng(rng)
        solved = solved + noise * gen.standard_normal((c, n)).T
    out[idx] = solved
    return out.reshape(h, w, c).astype(out_dtype)


def road_counts(k: int, steps: int = ROAD_STEPS) -> np.ndarray:
    """How many regions each ROAD step removes.

    With ``k <= steps``: every count 1..k-1 (each region boundary). Otherwise the counts nearest
    to the fractions 1/steps .. (steps-1)/steps of k (9 steps by default, 0.1..0.9). Neither 0 (the
    original image, already scored) nor k (nothing left to impute from) is included.

    Returns
    -------
    (S,) int ndarray, increasing; empty when k = 1.
    """
    k = check_int("k", k, 1)
    steps = check_int("steps", steps, 2)
    if k <= steps:
        return np.arange(1, k)
    return np.unique(np.clip(np.rint(k * np.arange(1, steps) / steps).astype(int), 1, k - 1))


def road_order(weights: np.ndarray, order: Literal["morf", "lerf"] = "morf") -> np.ndarray:
    """Regions in removal order: largest weight first (``morf``) or smallest first (``lerf``)."""
    w = _weights(weights)
    if order not in ("morf", "lerf"):
        raise LimecraftError(f"order must be 'morf' or 'lerf', got {order!r}")
    return np.argsort(-w if order == "morf" else w, kind="stable")


def road_images(
    image: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    steps: int = ROAD_STEPS,
    order: Literal["morf", "lerf"] = "morf",
    noise: float = ROAD_NOISE,
    rng: np.random.Generator | np.random.RandomState | int | None = None,
) -> np.ndarray:
    """The images ROAD scores: for each count of :func:`road_counts`, the first regions in
    ``order`` removed by :func:`noisy_linear_imputation` (each step from the original image).

    Parameters
    ----------
    image : (H, W, C) float ndarray, at the model's input size (one sparse solve per step)
    labels : (H, W) int ndarray, 0..K-1 with no gaps
    weights : (K,) float ndarray
    steps, order, noise, rng : see :func:`road_counts`, :func:`road_order`,
        :func:`noisy_linear_imputation`

    Returns
    -------
    (S, H, W, C) ndarray, S = len(road_counts(K, steps)).
    """
    w = _weights(weights)
    labels = np.asarray(labels)
    if labels.shape != np.shape(image)[:2] or labels.min() < 0 or labels.max() != len(w) - 1:
        raise LimecraftError(
            f"labels must be an (H, W) map of 0..K-1 matching the image and K = {len(w)} weights"
        )
    gen = rng if hasattr(rng, "standard_normal") else np.random.default_rng(rng)
    ranked = road_order(w, order)
    rank = np.empty(len(w), int)
    rank[ranked] = np.arange(len(w))
    pixel_rank = rank[labels]
    imgs = [
        noisy_linear_imputation(image, pixel_rank < n, noise, gen)
        for n in road_counts(len(w), steps)
    ]
    if not imgs:
        return np.zeros((0, *np.shape(image)), np.float32)
    return np.stack(imgs)


@dataclass(frozen=True)
class Road(_Metric):
    """ROAD: class score as regions are removed by noisy linear imputation.

    Attributes
    ----------
    fractions : list of float, share of the regions removed at each step (counts / K)
    morf, lerf : lists of float, the target output per step, most / least relevant first
    morf_area, lerf_area : float, mean of each curve over the steps (equal spacing)
    value : float, ``lerf_area - morf_area``, the gap
    definition, baseline, reading : str
    steps : int, model passes (2 per fraction)
    """

    fractions: list[float]
    morf: list[float]
    lerf: list[float]
    morf_area: float
    lerf_area: float
    value: float

    def to_dict(self) -> dict:
        return asdict(self)


def road(
    curve_morf: Sequence[float],
    curve_lerf: Sequence[float],
    k: int,
    *,
    steps: int = ROAD_STEPS,
    noise: float = ROAD_NOISE,
) -> Road:
    """Summarise ROAD's two curves (scores of :func:`road_images` for ``morf`` and ``lerf``).

    Quantus 0.6.0 reports, per percentage, whether the predicted class is unchanged (MoRF only);
    here the curves hold the target class's output instead, as the engine's deletion curve
    does. The areas are the curves' means over the steps, whose fractions are equally spaced.

    Parameters
    ----------
    curve_morf, curve_lerf : S floats each, S = len(road_counts(k, steps))
    k : int, the number of regions
    steps, noise : as given to :func:`road_images` (recorded)

    Returns
    -------
    Road. With K = 1 there is no step: the curves are empty and every area is 0.0.
    """
    counts = road_counts(k, steps)
    morf = np.asarray(curve_morf, np.float64)
    lerf = np.asarray(curve_lerf, np.float64)
    if morf.shape != counts.shape or lerf.shape != counts.shape:
        raise LimecraftError(
            f"ROAD curves must hold {len(counts)} outputs each (road_counts({k}, {steps})); "
            f"got {morf.shape} and {lerf.shape}"
        )
    morf_area = float(morf.mean()) if len(counts) else 0.0
    lerf_area = float(lerf.mean()) if len(counts) else 0.0
    return Road(
        fractions=(counts / k).tolist(),
        morf=morf.tolist(),
        lerf=lerf.tolist(),
        morf_area=morf_area,
        lerf_area=lerf_area,
        value=lerf_area - morf_area,
        definition=(
            "mean class score as a growing share of the regions is removed by noisy linear "
            "imputation, most relevant first (MoRF) and least relevant first (LeRF); value is "
            "the gap LeRF - MoRF"
        ),
        baseline=f"noisy linear imputation (noise sd {noise:g})",
        steps=2 * len(counts),
        reading="MoRF area: lower is better; LeRF area: higher is better; gap: higher is better",
    )
