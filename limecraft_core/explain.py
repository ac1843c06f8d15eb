"""LIME over regions, end to end: :func:`explain`, a short orchestrator of named _stages.

The stages live in :mod:`limecraft_core.stages`, the settings in :mod:`limecraft_core.config`,
the result and its JSON in :mod:`limecraft_core.result`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import _stages
from ._validate import LimecraftError, as_float_image
from .classifier import Classifier
from .config import OUTPUT_SPACES, ExplainConfig, SpeedConfig, fields
from .perturb import MaskCache
from .regions import Regions
from .result import Explanation
from .scorer import Scorer
from .surrogate import Kernel, make_kernel

__all__ = ["OUTPUT_SPACES", "Explanation", "as_scorer", "explain"]


def as_scorer(
    model: Any,
    speed: SpeedConfig | None = None,
    *,
    labels: Sequence[str] | None = None,
    input_size: int | tuple[int, int] | None = None,
    normalize: str | None = None,
) -> Scorer:
    """A :class:`Scorer` for what the caller gave as ``model``.

    A Scorer (a Classifier, a queued or remote scorer) is used as is; a torch Module or a
    callable is wrapped in a :class:`Classifier` on ``speed``'s device and precision. Registry
    names and model files are loaded at the edges (``models.registry.load_classifier``), not here.
    """
    if isinstance(model, Scorer):
        return model
    if isinstance(model, (str, Path)):
        raise LimecraftError(
            f"model {str(model)!r} is a name or a path: load it first with "
            "models.registry.load_classifier(name_or_file), then pass the classifier"
        )
    speed = speed or SpeedConfig()
    return Classifier(
        model,
        input_size=input_size,
        normalize=normalize or "none",
        labels=labels,
        device=speed.device,
        precision=speed.precision,
        channels_last=speed.channels_last,
    )


def explain(
    image: np.ndarray,
    model: Any,
    segments: np.ndarray | Regions | None = None,
    regions_mask: Any = None,
    *,
    config: ExplainConfig | None = None,
    region_names: Sequence[str] | None = None,
    region_origins: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
    input_size: int | None = None,
    normalize: str | None = None,
    kernel: Kernel | None = None,
    expected_mask: np.ndarray | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    partial: Callable[[_stages.Partial], None] | None = None,
    memo: MaskCache | None = None,
    **settings: Any,
) -> Explanation:
    """Explain a classifier's prediction on an image over regions.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float ndarray in [0, 1]
    model : Scorer (e.g. a Classifier), torch.nn.Module, or callable
        A Module or callable maps float32 (N, 3, H, W) in [0, 1] to (N, C) scores.
    segments : (H, W) int ndarray or Regions, optional; a finished label map, used as is
    regions_mask : (H, W) bool/int ndarray or list of bool masks, optional
        Handcrafted regions, composed with the segmentation settings ``inner_segments`` and
        ``outer_segments`` (see :func:`limecraft_core.compose_regions`).
    config : ExplainConfig, optional; every setting at once (``settings`` then change it)
    region_names, region_origins : the handcrafted regions' names, and where each comes from
        (``drawn``, the default; ``uploaded``; ``proposed:<proposer>``: ``region_origins``)
    labels, input_size, normalize : how a Module or callable ``model`` is wrapped
    kernel : callable(distances) -> weights, optional; replaces ``kernel_width``
    expected_mask : (H, W) bool ndarray, optional; the area the analyst expects the model to
        rely on: adds ``trust.localisation`` (no model pass)
    progress, cancel : callable(done, total) after each model batch; callable() -> bool that
        stops with ``Cancelled`` when True
    partial : callable(_stages.Partial) after each step of the main sample: the weights and
        one-sample verdict so far (the last one final), for a front end to show them refining
    memo : MaskCache of scores by mask, kept by the caller across runs of one image, regions,
        model, fill and speed settings (and only those): its masks are not scored again
    **settings
        Any setting by its name, e.g. ``samples=1000, seed=0, fill="mean"``; the list with
        defaults and ranges follows, generated from :mod:`limecraft_core.config`.

    Returns an Explanation. Raises LimecraftError on any invalid input (the message says how to
    fix it), ModelError when the model failed or returned unusable scores.
    """
    timer = _stages.Timer()
    cfg = _resolved(config, settings)
    img = as_float_image(image)
    scorer = as_scorer(model, cfg.speed, labels=labels, input_size=input_size, normalize=normalize)
    with timer("segmentation_s"):
        regions, seg = _stages.prepare_regions(
            img, cfg.segmentation, segments, regions_mask, region_names, cfg.sampling.seed,
            origins=region_origins,
        )  # fmt: skip
    cfg = dataclasses.replace(cfg, segmentation=seg)  # what really made the regions
    kern = kernel or make_kernel(cfg.surrogate.kernel_width)
    with timer("sampling_s"):
        scene = _stages.prepare_scene(img, regions, scorer, cfg.fill, cfg.speed.batch_size)
        plan = _stages.plan_samples(regions.n_regions, cfg)
        planned = plan.rows(cfg.sampling.samples)
        run = _stages.Runner(scorer, scene, cfg, planned, progress, cancel, memo)
        scores = _stages.score(run, plan, cfg, kern, partial)
    with timer("fit_s"):
        classes = _stages.choose_classes(scores.original, cfg)
        surrogate = _stages.fit(scores, classes, kern, cfg.surrogate.ridge_alpha)
    with timer("trust_s"):
        trust = _stages.run_trust_checks(
            run, scene, scores, surrogate, classes[0], cfg, kern, (regions.labels, expected_mask)
        )
    parts = dict(cfg=cfg, scorer=scorer, regions=regions, scene=scene, scores=scores)
    return _stages.summarise(
        **parts, classes=classes, surrogate=surrogate, trust=trust, run=run, kernel=kern,
        timings=timer.done(),
    )  # fmt: skip


def _resolved(config: ExplainConfig | None, settings: dict[str, Any]) -> ExplainConfig:
    """The run's settings: ``config`` changed by ``settings``, or ``settings`` alone. A config is
    valid once built, so it is validated again only when settings change it."""
    if config is None:
        return ExplainConfig.from_flat(settings)
    return config.replace(**settings) if settings else config


def _settings_doc() -> str:
    rows = []
    for s in fields():
        lim = s.limit
        rng = f" in {lim.describe()}" if lim is not None else ""
        choices = f" ({', '.join(s.choices)})" if s.choices else ""
        rows.append(f"    {s.name} = {s.default!r}{rng}{choices}: {s.help}")
    return "\n\n    Settings\n    --------\n" + "\n".join(rows) + "\n"


explain.__doc__ = (explain.__doc__ or "") + _settings_doc()
