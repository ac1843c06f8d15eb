"""Stage 7: the :class:`~limecraft_core.result.Explanation`, and the stages' timer.

The timer records each stage's seconds.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import numpy as np
import torch

from .. import trust as _trust
from ..config import ExplainConfig
from ..regions import (
    Regions,
)
from ..result import Explanation, RunInfo, _versions
from ..scorer import Scorer
from ..surrogate import Kernel, SurrogateFit
from .scene import Scene
from .score import Runner, Scores


def _per_class(
    block: torch.Tensor | None, cls_t: torch.Tensor, shape: tuple[int, int]
) -> np.ndarray:
    if block is None:
        return np.full(shape, np.nan)
    return block[:, cls_t].double().cpu().numpy().T


def _precision(scorer: Scorer, scene: Scene) -> tuple[str, str]:
    """The precision this image's perturbations ran in, and why: per image where the scorer
    decides per image (:meth:`~limecraft_core.Classifier.precision_for`)."""
    per_image = getattr(scorer, "precision_for", None)
    if callable(per_image):
        precision, reason = per_image(scene.image)
        return str(precision), str(reason)
    return scorer.precision, str(getattr(scorer, "precision_reason", ""))


def summarise(
    *,
    cfg: ExplainConfig,
    scorer: Scorer,
    regions: Regions,
    scene: Scene,
    scores: Scores,
    classes: list[int],
    surrogate: SurrogateFit,
    trust: _trust.TrustResults,
    run: Runner,
    kernel: Kernel,
    timings: dict[str, float],
) -> Explanation:
    """The explanation: weights, per-region changes, predictions, settings and run facts."""
    original = scores.original
    cls_t = torch.tensor(classes, device=original.device)
    orig = original[cls_t].double().cpu().numpy()
    shape = (len(classes), regions.n_regions)
    hidden = _per_class(scores.hidden_alone, cls_t, shape)
    kept = _per_class(scores.kept_alone, cls_t, shape)
    top5 = torch.argsort(original, descending=True)[:5].tolist()
    keys = regions.keys
    precision, reason = _precision(scorer, scene)
    info = RunInfo(
        model=scorer.name,
        input_size=list(scorer.input_size) if scorer.input_size else None,
        normalize=scorer.normalize,
        device=scorer.device.type,
        precision=precision,
        channels_last=bool(scorer.channels_last),
        batch_size=scene.batch_size,
        samples_used=scores.samples_used,
        model_passes=run.passes,
        n_regions=regions.n_regions,
        handcrafted=sum(
            any(regions.atom_keys[a].startswith("hand:") for a in g) for g in regions.groups
        ),
        merged=sum(len(g) > 1 for g in regions.groups),
        kernel=getattr(kernel, "__name__", "custom"),
        precision_reason=reason,
    )
    assert len(keys) == regions.n_regions
    return Explanation(
        config=cfg,
        run=info,
        segments=regions.labels,
        region_keys=keys,
        region_names=regions.names,
        region_origins=regions.origins,
        region_pixels=regions.pixel_counts(),
        classes=tuple(int(c) for c in classes),
        class_labels=tuple(scorer.label(int(c)) for c in classes),
        class_weights=surrogate.coef,
        intercepts=surrogate.intercept,
        scores=surrogate.score,
        local_predictions=surrogate.local_prediction,
        predictions=orig,
        deltas=orig[:, None] - hidden,
        kept_alone=kept,
        top_predictions=tuple((int(i), scorer.label(int(i)), float(original[i])) for i in top5),
        timings=timings,
        versions=_versions(),
        trust=trust,
    )


class Timer:
    """Named wall-clock timings, e.g. ``with timer("fit_s"): ...``."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start

    def done(self) -> dict[str, float]:
        return {**self.timings, "total_s": time.perf_counter() - self.t0}
