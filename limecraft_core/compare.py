"""Explainers side by side over the same regions: :func:`compare_explainers`.

The shared sample is explain()'s main sample (the same seed, scheme and N), so LIME's weights
are explain()'s without early stopping. Every method's own block (:data:`EXPLAINERS`) is
scored with it in one call through the engine's scoring path (:class:`_stages.Runner`), each
distinct mask once: the exact table holds the shared sample's rows and occlusion's, so with
exact Shapley they cost nothing more.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _stages
from ._validate import LimecraftError, as_float_image
from .agreement import agreement
from .comparison import Comparison
from .config import ExplainConfig
from .explain import as_scorer
from .explainer_table import Attribution, Explainer, Scored, explainer_of
from .gradients import gradient_model_for, gradient_scene
from .merge_hint import merge_hint
from .regions import Regions
from .shapley import SHAPLEY_MAX_K, all_coalitions, shapley_interactions
from .surrogate import make_kernel

__all__ = ["Comparison", "compare_explainers"]

DEFAULT_METHODS = ("lime", "kernelshap", "occlusion", "rise")


def _methods(methods: Sequence[str | Explainer]) -> list[Explainer]:
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    out = [explainer_of(m) for m in methods]
    if not out:
        raise LimecraftError("compare_explainers needs at least one method")
    if len({e.name for e in out}) != len(out):
        raise LimecraftError(f"each method once, got {[e.name for e in out]}")
    return out


def _attribute(
    e: Explainer, shared: Scored, masks: np.ndarray | None, y: np.ndarray | None
) -> Attribution:
    """``e``'s attribution from the shared sample and its own block, checked: K finite values."""
    scored = shared if masks is None else dataclasses.replace(shared, own_masks=masks, own_y=y)
    a = e.attribute(scored)
    k = shared.k
    v = np.asarray(a.values, dtype=np.float64)
    if v.shape != (k,) or not np.isfinite(v).all():
        raise LimecraftError(f"explainer {e.name!r} must give {k} finite values, got {v.shape}")
    return Attribution(e.name, v, a.note)


def compare_explainers(
    image: np.ndarray,
    model: Any,
    regions: np.ndarray | Regions,
    methods: Sequence[str | Explainer] = DEFAULT_METHODS,
    *,
    config: ExplainConfig | None = None,
    target: int | None = None,
    k: int = 3,
    region_names: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    suggest_merge: bool = True,
) -> Comparison:
    """Explain one class with several methods over the same regions, and compare them.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float ndarray in [0, 1]
    model : Scorer (e.g. a Classifier), torch.nn.Module, or callable (see :func:`explain`)
    regions : (H, W) int ndarray (ids 0..K-1, no gaps) or Regions, used as is
    methods : names from :data:`~limecraft_core.explainer_table.EXPLAINERS` (or a
        comma-separated string), or Explainer entries
    config : ExplainConfig, optional; the sample (N, seed, scheme, p), the kernel, the ridge
        penalty, the fill and the output space, as for :func:`explain`
    target : int, optional; the class to explain (default: the config's, else the top class)
    k : int, the top regions the agreement compares (at most K)
    region_names : K names for the agreement's sentence, optional (default: the regions' own
        names, else ``region 0``, ``region 1``, ...)
    progress, cancel : callable(done, total) after each model batch; callable() -> bool that
        stops with ``Cancelled`` when True (as for :func:`explain`)
    suggest_merge : bool, test whether adjacent disputed regions interact enough to merge
        (:func:`~limecraft_core.merge_hint.merge_hint`; two methods or more): from the exact
        2^K table when K <= SHAPLEY_MAX_K (at most 2^K passes in all, the shared sample's
        among them), else from the shared sample at no extra pass

    Returns
    -------
    Comparison

    Raises
    ------
    LimecraftError : an unknown method (the message lists the table), exact Shapley over more
        regions than :data:`~limecraft_core.shapley.SHAPLEY_MAX_K` (the message gives the cost),
        or any invalid input
    """
    cfg = config or ExplainConfig()
    if target is not None:
        cfg = cfg.replace(target=target)
    chosen = _methods(methods)
    img = as_float_image(image)
    scorer = as_scorer(model, cfg.speed)
    regs, _ = _stages.prepare_regions(img, cfg.segmentation, regions, None)
    kk, n, seed = regs.n_regions, cfg.sampling.samples, cfg.sampling.seed
    # before any model pass, what cannot run raises: exact Shapley, K too large; gradients, none
    own = {e.name: e.own_masks(kk, n, seed) for e in chosen if e.own_masks is not None}
    grads = gradient_model_for(scorer, [e.name for e in chosen if e.gradients])
    # the merge test reads the exact table when K is small enough: at most 2^K distinct masks,
    # the shared sample's among them
    table = suggest_merge and len(chosen) > 1 and "shapley" not in own and kk <= SHAPLEY_MAX_K
    main = _stages.plan_samples(kk, cfg).main
    blocks = [main.masks, *own.values(), *([all_coalitions(kk)] if table else [])]
    y, tgt, passes = _score(img, regs, scorer, cfg, blocks, progress, cancel)
    shared = _shared(main, y[0], cfg, grads and _gradient_scene(grads, img, regs, scorer, cfg, tgt))
    own_y = dict(zip(own, y[1 : 1 + len(own)], strict=True))
    attributions = tuple(_attribute(e, shared, own.get(e.name), own_y.get(e.name)) for e in chosen)
    names = region_names or [n or f"region {i}" for i, n in enumerate(regs.names or [""] * kk)]
    agree = agreement(
        {e.title: a.values for e, a in zip(chosen, attributions, strict=True)}, min(k, kk), names
    )
    exact = own_y.get("shapley", y[-1] if table else None)
    inter = shapley_interactions(exact, kk) if exact is not None else None
    hint = None
    if suggest_merge and len(chosen) > 1:
        sample = (shared.masks, shared.y, shared.weights)
        hint = merge_hint(
            regs.labels, agree.spread, [a.values for a in attributions],
            interactions=inter, sample=sample, region_names=names,
        )  # fmt: skip
    return Comparison(tgt, scorer.label(tgt), attributions, agree, inter, passes, kk, hint)


def _shared(main: Any, y: np.ndarray, cfg: ExplainConfig, scene: Any = None) -> Scored:
    """The shared sample (explain()'s main sample), scored, with LIME's weights (and the
    gradient methods' scene, when one is chosen)."""
    return Scored(
        masks=main.masks,
        y=y,
        weights=main.weights,
        p=main.p,
        lime_weights=_stages.sample_weights(main, make_kernel(cfg.surrogate.kernel_width)),
        ridge_alpha=cfg.surrogate.ridge_alpha,
        own_masks=np.zeros((0, main.masks.shape[1]), bool),
        scene=scene,
    )


def _score(
    img: np.ndarray,
    regs: Regions,
    scorer: Any,
    cfg: ExplainConfig,
    blocks: list[np.ndarray],
    progress: Callable[[int, int], None] | None,
    cancel: Callable[[], bool] | None,
) -> tuple[list[np.ndarray], int, int]:
    """Every block scored in one call (each distinct mask once): the explained class's outputs
    per block, the class, and the model passes spent."""
    scene = _stages.prepare_scene(img, regs, scorer, cfg.fill, cfg.speed.batch_size)
    run = _stages.Runner(scorer, scene, cfg, sum(len(b) for b in blocks), progress, cancel)
    out = run(np.concatenate(blocks))
    tgt = _stages.choose_classes(out[0], cfg)[0]
    y = out[:, tgt].double().cpu().numpy()
    ends = np.cumsum([len(b) for b in blocks])[:-1]
    return np.split(y, ends), tgt, run.passes


def _gradient_scene(
    grads: Any, img: np.ndarray, regs: Regions, scorer: Any, cfg: ExplainConfig, tgt: int
) -> Any:
    """The scene the gradient methods attribute from: the scored one, aimed at class ``tgt``."""
    scene = _stages.prepare_scene(img, regs, scorer, cfg.fill, cfg.speed.batch_size)
    probability = cfg.targets.output_space == "probability"
    return gradient_scene(
        grads, scene.image, scene.fill, scene.labels, regs.n_regions,
        probability=probability, batch_size=scene.batch_size,
    ).aimed(tgt)  # fmt: skip
