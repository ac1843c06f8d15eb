"""The table of explainers: attribution methods over the same regions, by name (:data:`EXPLAINERS`).

Torch-free at import time, like the table of fills (``fill_table.py``), so that the settings,
the command line's ``--help`` and the docs read the names without loading torch; LIME's ridge
imports the surrogate (torch) only when it runs.

Every method is one :class:`Explainer`: a name, a title, a line of help, its cost in model
passes, the masks of its own block (None: the shared sample is enough) and a function from
the scored masks (:class:`Scored`) to an :class:`Attribution`, one value per region for the
explained class. :func:`limecraft_core.compare_explainers` scores the shared sample and every
method's own block in one pass through the engine's scoring path (each distinct mask once), so
a method whose masks are already scored costs nothing more. Adding a method is one entry here.

Two methods attribute from gradients instead (``gradients=True``): Integrated Gradients summed
over each region and Grad-CAM averaged per region (:mod:`limecraft_core.gradients`, captum at
run time). They need the scorer's gradient capability (a local torch model); ONNX graphs and
remote scorers refuse before any model pass, and the method reads the scene from
:attr:`Scored.scene`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._validate import LimecraftError
from .shapley import (
    SHAPLEY_MAX_K,
    all_coalitions,
    check_exact_size,
    exact_shapley,
    kernel_coalitions,
    kernel_shap,
)

# KernelSHAP draws its coalitions with a seed this far from the shared sample's.
KERNELSHAP_SEED_OFFSET = 5_000_011
#: Integrated Gradients' steps (Gauss-Legendre points on the path from the fill), captum's default.
IG_STEPS = 50
#: When the values miss f(all) - f(none) by more than ``IG_TOLERANCE`` of it, IG runs again at
#: ``IG_MORE_STEPS`` and keeps the closer. EfficientNet-Lite0 (ReLU6: its path is piecewise
#: linear) missed it by 0.8-4.2% at 50 steps and by 0.1% at 200 (100 gained little) on the
#: gallery's watermarked page and cat (quickshift, measured on 2026-12-06; docs/python.md).
IG_TOLERANCE = 0.01
IG_MORE_STEPS = 200


@dataclass(frozen=True)
class Attribution:
    """One method's attribution over the regions, for the explained class.

    Attributes
    ----------
    method : str, the method's name in :data:`EXPLAINERS`
    values : (K,) float64 ndarray, one value per region 0..K-1 (positive: for the class)
    note : str, what the values mean, in a line
    """

    method: str
    values: np.ndarray
    note: str = ""


@dataclass(frozen=True, eq=False)
class Scored:
    """What a method attributes from: the shared sample and the method's own block, scored.

    Attributes
    ----------
    masks : (N, K) bool ndarray, the shared sample (explain()'s main sample); row 0 keeps all
    y : (N,) float64 ndarray, the explained class's output for each row
    weights : (N,) float64 ndarray, each row's importance weight to Bernoulli(p) sampling
    p : float, the chance of keeping a region
    lime_weights : (N,) float64 ndarray, LIME's sample weights (kernel times ``weights``)
    ridge_alpha : float, LIME's ridge penalty
    own_masks : (M, K) bool ndarray, the method's own block (M = 0 without one)
    own_y : (M,) float64 ndarray, its outputs
    scene : GradientScene or None, the differentiable model and the scene at its input size,
        aimed at the explained class (:mod:`limecraft_core.gradients`); given when a chosen
        method has ``gradients=True``, else None
    """

    masks: np.ndarray
    y: np.ndarray
    weights: np.ndarray
    p: float
    lime_weights: np.ndarray
    ridge_alpha: float
    own_masks: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), bool))
    own_y: np.ndarray = field(default_factory=lambda: np.zeros(0))
    scene: Any = None

    @property
    def k(self) -> int:
        return int(self.masks.shape[1])

    @property
    def full(self) -> float:
        """The output with every region kept (the original image at the model's size)."""
        return float(self.y[0])


#: A method's own block: ``(K, N, seed) -> (M, K) bool`` masks to score beside the shared sample.
OwnMasks = Callable[[int, int, int], np.ndarray]


@dataclass(frozen=True)
class Explainer:
    """One attribution method.

    Attributes
    ----------
    name : str, its key in :data:`EXPLAINERS` (the command line's spelling)
    title : str, how a sentence or a table names it (``KernelSHAP``)
    help : str, a line
    cost : str, its model passes in words, beyond the shared sample of N
    passes : callable(K, N) -> int, those passes before de-duplication
    attribute : callable(Scored) -> Attribution
    own_masks : callable(K, N, seed) -> (M, K) bool, or None when the shared sample is enough;
        it raises LimecraftError when the method cannot run on K regions (before any pass)
    gradients : bool, it attributes from the model's gradients (:attr:`Scored.scene`), which
        the scorer must offer (:class:`~limecraft_core.scorer.GradientScorer`); ``passes``
        then counts forward and backward passes of one image, outside the shared scoring
    """

    name: str
    title: str
    help: str
    cost: str
    passes: Callable[[int, int], int]
    attribute: Callable[[Scored], Attribution]
    own_masks: OwnMasks | None = None
    gradients: bool = False


def _lime(s: Scored) -> Attribution:
    from .surrogate import fit_ridge  # torch, only when LIME runs

    fit = fit_ridge(s.masks, s.y[:, None], s.lime_weights, alpha=s.ridge_alpha)
    return Attribution("lime", fit.coef[0], "weighted ridge weights, as explain() gives them")


def _hidden_alone(k: int, n: int, seed: int) -> np.ndarray:
    return ~np.eye(k, dtype=bool)


def _occlusion(s: Scored) -> Attribution:
    return Attribution(
        "occlusion", s.full - s.own_y, "output of the image minus output with the region hidden"
    )


def _rise(s: Scored) -> Attribution:
    w = s.weights
    kept = s.masks.astype(np.float64) * w[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_kept = (s.y @ kept) / kept.sum(axis=0)
    base = float(w @ s.y / w.sum())
    return Attribution(
        "rise",
        np.nan_to_num(mean_kept - base),
        "mean output over the masks that keep the region, minus the mean output of all masks",
    )


def _kernel_block(k: int, n: int, seed: int) -> np.ndarray:
    empty = np.zeros((1, k), dtype=bool)
    return np.concatenate([empty, kernel_coalitions(k, n, seed + KERNELSHAP_SEED_OFFSET)])


def _kernelshap(s: Scored) -> Attribution:
    values = kernel_shap(s.own_masks[1:], s.own_y[1:], s.full, s.own_y[0])
    return Attribution(
        "kernelshap", values, "estimated Shapley values; they sum to f(all) - f(none)"
    )


def _exact_block(k: int, n: int, seed: int) -> np.ndarray:
    return all_coalitions(check_exact_size(k))


def _shapley(s: Scored) -> Attribution:
    return Attribution(
        "shapley", exact_shapley(s.own_y, s.k), "exact Shapley values over all 2^K coalitions"
    )


def _scene(s: Scored, method: str) -> Any:
    if s.scene is None:
        raise LimecraftError(f"{method} attributes from gradients: it needs Scored.scene")
    return s.scene


def _ig(s: Scored) -> Attribution:
    scene, steps = _scene(s, "ig"), IG_STEPS
    values, gap, span = scene.integrated_gradients(steps)
    if gap > IG_TOLERANCE * span:  # the path integral is too coarse: once more, finer
        more = scene.integrated_gradients(IG_MORE_STEPS)
        if more[1] < gap:
            (values, gap, span), steps = more, IG_MORE_STEPS
    return Attribution(
        "ig",
        values,
        f"Integrated Gradients from the fill to the image ({steps} steps), summed per region; "
        f"they sum to f(all) - f(none) = {span:.3g} within {gap:.2g}"
        + ("" if gap <= IG_TOLERANCE * span else f" (over {IG_TOLERANCE:.0%} of it)"),
    )


def _gradcam(s: Scored) -> Attribution:
    values, layer = _scene(s, "gradcam").grad_cam()
    return Attribution(
        "gradcam",
        values,
        f"Grad-CAM on the last convolutional layer ({layer or 'the model'}), ReLU'd, upsampled "
        "and averaged per region; >= 0, on the layer's scale",
    )


#: Every method, in the order the docs and a comparison list them.
EXPLAINERS: dict[str, Explainer] = {
    e.name: e
    for e in (
        Explainer(
            "lime",
            "LIME",
            "the weighted ridge surrogate's weights on the shared sample (explain()'s weights)",
            "none: the shared sample",
            lambda k, n: 0,
            _lime,
        ),
        Explainer(
            "kernelshap",
            "KernelSHAP",
            "Shapley values estimated by the Shapley kernel's regression over sampled coalitions",
            "N + 1: N coalitions drawn from the Shapley kernel and the empty one (fewer once "
            "each distinct coalition is scored once)",
            lambda k, n: n + 1,
            _kernelshap,
            _kernel_block,
        ),
        Explainer(
            "shapley",
            "Shapley",
            f"exact Shapley values over all 2^K coalitions (K <= {SHAPLEY_MAX_K})",
            "2^K: every coalition once",
            lambda k, n: 2**k,
            _shapley,
            _exact_block,
        ),
        Explainer(
            "occlusion",
            "occlusion",
            "the output's drop when each region alone is hidden (explain()'s deltas)",
            "K: each region hidden alone",
            lambda k, n: k,
            _occlusion,
            _hidden_alone,
        ),
        Explainer(
            "rise",
            "RISE",
            "RISE over regions: the mean output of the masks that keep a region, centred",
            "none: the shared sample",
            lambda k, n: 0,
            _rise,
        ),
        Explainer(
            "ig",
            "IG",
            "Integrated Gradients from the fill to the image, summed over each region "
            "(a local torch model)",
            f"{IG_STEPS} forward and backward passes of one image (its path's steps), "
            f"{IG_STEPS + IG_MORE_STEPS} when {IG_STEPS} miss completeness by over "
            f"{IG_TOLERANCE:g} of it; "
            "none from the shared sample",
            lambda k, n: IG_STEPS,
            _ig,
            gradients=True,
        ),
        Explainer(
            "gradcam",
            "Grad-CAM",
            "Grad-CAM on the last convolutional layer, averaged over each region (a local "
            "torch model with a Conv2d)",
            "1 forward and backward pass of the image, none from the shared sample",
            lambda k, n: 1,
            _gradcam,
            gradients=True,
        ),
    )
}


def explainer_of(name: object) -> Explainer:
    """The :class:`Explainer` named ``name``, or a LimecraftError that lists the table."""
    if isinstance(name, Explainer):
        return name
    if isinstance(name, str) and name in EXPLAINERS:
        return EXPLAINERS[name]
    raise LimecraftError(f"explainer must be one of {', '.join(EXPLAINERS)}; got {name!r}")
