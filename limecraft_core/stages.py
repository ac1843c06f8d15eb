"""The stages of an explanation, in order; :func:`limecraft_core.explain` calls them.

1. :func:`prepare_regions`: the regions (given, handcrafted and composed, or segmented), and
   the segmentation settings that really made them.
2. :func:`prepare_scene`: the image, fill and label map at the model's input size, on its device.
3. :func:`plan_samples`: the masks to score, as named blocks.
4. :func:`score`: the model's outputs per block (early stopping included).
5. :func:`fit`: the weighted ridge surrogate per explained class.
6. :func:`run_trust_checks`: stability, convergence, kernel sweep, faithfulness, fills.
7. :func:`summarise`: the :class:`~limecraft_core.result.Explanation`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from . import trust as _trust
from ._validate import LimecraftError, check_int, check_label_map
from .config import ExplainConfig, FillConfig, SegmentationConfig
from .perturb import MaskCache, MaskSample, default_batch_size, make_fill, sample_masks
from .regions import (
    Regions,
    compose_regions,
    regions_from_labels,
    resize_nearest,
    segment_regions,
)
from .result import Explanation, RunInfo, _versions
from .scorer import Scorer
from .surrogate import Kernel, SurrogateFit, cosine_distance, fit_ridge

__all__ = [
    "Partial",
    "Plan",
    "Scene",
    "Scores",
    "choose_classes",
    "fit",
    "plan_samples",
    "prepare_regions",
    "prepare_scene",
    "run_trust_checks",
    "score",
    "summarise",
]

# Repeat r (1..R-1) draws its masks with seed + r: independent, reproducible streams.
REPEAT_SEED_STEP = 1
# Held-out masks use a seed a large prime away, so they never coincide with a repeat's stream.
HOLDOUT_SEED_OFFSET = 1_000_003
# Likewise for the random deletion/insertion orders of the faithfulness baseline.
RANDOM_ORDER_SEED_OFFSET = 2_000_003
# ROAD's imputation noise draws its own stream too.
ROAD_SEED_OFFSET = 3_000_017
# Random orders averaged as the faithfulness baseline: smooths one unlucky order; each costs
# 2(K+1) model passes.
N_RANDOM_ORDERS = 3
# Held-out samples for the surrogate's R^2: a steady estimate without doubling N.
MAX_HOLDOUT = 500
# The first verdict on a partial sample (the early-stop check) waits for max(200, 4K) samples.
EARLY_STOP_MIN_SAMPLES, EARLY_STOP_SAMPLES_PER_REGION = 200, 4
# The one-stream verdict's resamples draw their own stream.
STREAM_SEED_OFFSET = 4_000_037


# ----------------------------------------------------------------------------- 1. regions


def prepare_regions(
    image: np.ndarray,
    seg: SegmentationConfig,
    segments: np.ndarray | Regions | None = None,
    regions_mask: Any = None,
    names: Sequence[str] | None = None,
    seed: int = 0,
    progress: Callable[[float, str], None] | None = None,
) -> tuple[Regions, SegmentationConfig]:
    """The regions to explain, and the segmentation settings that really made them.

    Parameters
    ----------
    image : (H, W, 3) float ndarray in [0, 1]
    seg : the segmentation settings asked for
    segments : (H, W) int ndarray or Regions, optional; a finished label map. Regions made by
        this function carry their ``source`` and keep it through merges; a bare label map is
        recorded as ``segmentation="given"``.
    regions_mask : (H, W) bool/int ndarray or list of bool masks, optional; handcrafted regions
    names : names of the handcrafted regions
    progress : callable(fraction, message), optional; called as the segmentation advances

    Returns
    -------
    (Regions with ``source`` set, and ``note`` when the count asked for could not be met;
    the SegmentationConfig to record)
    """
    shape = image.shape[:2]
    if segments is not None and regions_mask is not None:
        raise LimecraftError(
            "give either segments (a finished label map) or regions_mask, not both"
        )
    if isinstance(segments, Regions):
        check_label_map(segments.atoms, shape, "segments")
        if segments.source is not None:
            return segments, SegmentationConfig(**segments.source)
        return segments, SegmentationConfig(method="given")
    if segments is not None:
        segments = np.asarray(segments)
        check_label_map(segments, shape, "segments")
        seg = SegmentationConfig(method="given")
        return dataclasses.replace(regions_from_labels(segments), source=_source(seg)), seg
    if seg.method == "given":
        raise LimecraftError(
            "segmentation 'given' needs a label map (segments, or a segments file)"
        )
    if regions_mask is not None:
        regions = compose_regions(
            image,
            regions_mask,
            names=names,
            inner_segments=list(seg.inner_segments)
            if isinstance(seg.inner_segments, tuple)
            else seg.inner_segments,
            inner_method=seg.inner_method,
            outer_segments=seg.outer_segments,
            outer_method=seg.method,
            outer_params=dict(seg.params) or None,
            working_size=seg.working_size,
            seed=seed,
            progress=progress,
        )
    else:
        regions = segment_regions(
            image,
            seg.method,
            seg.n_segments,
            params=dict(seg.params) or None,
            working_size=seg.working_size,
            seed=seed,
            progress=progress,
        )
    return dataclasses.replace(regions, source=_source(seg)), seg


def _source(seg: SegmentationConfig) -> dict[str, Any]:
    return {f.name: getattr(seg, f.name) for f in dataclasses.fields(seg)}


# ----------------------------------------------------------------------------- 2. scene


@dataclass(frozen=True, eq=False)
class Scene:
    """The image, fill and label map at the model's input size, on its device.

    Attributes
    ----------
    image, fill : (3, h, w) float32 tensors in [0, 1]
    labels : (h, w) int64 tensor, region ids 0..K-1
    work_image : (h, w, 3) float32 ndarray, the image at that size (for other fills)
    work_labels : (h, w) int ndarray
    n_regions : int, K
    batch_size : int
    """

    image: torch.Tensor
    fill: torch.Tensor
    labels: torch.Tensor
    work_image: np.ndarray
    work_labels: np.ndarray
    n_regions: int
    batch_size: int

    def fill_tensor(self, fill: Any, blur_sigma: float | None) -> torch.Tensor:
        """Another fill of the same scene (for the fill comparison)."""
        return _to_device(
            make_fill(self.work_image, self.work_labels, fill, blur_sigma=blur_sigma),
            self.image.device,
        )


def _to_device(a: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1))).to(device)


def prepare_scene(
    image: np.ndarray, regions: Regions, scorer: Scorer, fill: FillConfig, batch_size: int | None
) -> Scene:
    """Compose at the model's input size: the model would resize anyway, and it is far cheaper."""
    h, w = image.shape[:2]
    dev = scorer.device
    size = scorer.input_size or (h, w)
    labels = regions.labels
    work_labels = labels if size == (h, w) else resize_nearest(labels, size)
    image_t = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))).to(dev)
    if size != (h, w):
        image_t = F.interpolate(
            image_t[None], size=size, mode="bilinear", antialias=True, align_corners=False
        )[0]
    work_image = image_t.cpu().numpy().transpose(1, 2, 0)
    return Scene(
        image=image_t,
        fill=_to_device(
            make_fill(work_image, work_labels, fill.fill, blur_sigma=fill.blur_sigma), dev
        ),
        labels=torch.from_numpy(work_labels.astype(np.int64)).to(dev),
        work_image=work_image,
        work_labels=work_labels,
        n_regions=regions.n_regions,
        batch_size=batch_size or default_batch_size(dev, size[0] * size[1]),
    )


# ----------------------------------------------------------------------------- 3. plan


@dataclass(frozen=True)
class Plan:
    """The masks to score, as named blocks (repeats and the hold-out are drawn up front).

    Attributes
    ----------
    main : MaskSample, the explanation's own N samples (row 0 is the original)
    repeats : R-1 MaskSamples, seeds seed+1.. (cut to the samples used after early stopping)
    holdout : MaskSample or None, fresh masks for the held-out R^2
    deltas : bool, score each region hidden alone and kept alone
    n_fills : int, other fills to score the main sample with
    """

    main: MaskSample
    repeats: tuple[MaskSample, ...]
    holdout: MaskSample | None
    deltas: bool
    faithfulness: bool
    n_fills: int

    def rows(self, n: int) -> int:
        """Model passes planned (before dedup) when the main sample has ``n`` rows."""
        k = self.main.masks.shape[1]
        rows = n * (1 + len(self.repeats)) + (2 * k if self.deltas else 0)
        rows += len(self.holdout.masks) if self.holdout is not None else 0
        rows += (
            2 * (k + 1) * (1 + N_RANDOM_ORDERS) + 2 * len(_trust.road_counts(k))
            if self.faithfulness
            else 0
        )
        return rows + self.n_fills * n


def plan_samples(k: int, cfg: ExplainConfig) -> Plan:
    """Draw every sample the configuration asks for."""
    s = cfg.sampling

    def draw(n: int, seed: int) -> MaskSample:
        return sample_masks(
            k, n, scheme=s.scheme, p=s.p, rng=seed, kernel_width=cfg.surrogate.kernel_width
        )

    faith = cfg.trust.faithfulness
    return Plan(
        main=draw(s.samples, s.seed),
        repeats=tuple(
            draw(s.samples, s.seed + r * REPEAT_SEED_STEP) for r in range(1, cfg.trust.repeats)
        ),
        holdout=draw(min(s.samples, MAX_HOLDOUT), s.seed + HOLDOUT_SEED_OFFSET) if faith else None,
        deltas=cfg.targets.compute_deltas,
        faithfulness=faith,
        n_fills=len(_other_fills(cfg)),
    )


def _other_fills(cfg: ExplainConfig) -> list[Any]:
    return [f for f in cfg.trust.compare_fills if f != cfg.fill.fill]


def _cut(m: MaskSample, n: int) -> MaskSample:
    return MaskSample(m.masks[:n], m.weights[:n], m.scheme, m.p)


# ----------------------------------------------------------------------------- 4. score


class Runner:
    """Scores masks through a scorer: dedup, progress over every pass, the output space."""

    def __init__(
        self,
        scorer: Scorer,
        scene: Scene,
        cfg: ExplainConfig,
        planned: int,
        progress: Callable[[int, int], None] | None,
        cancel: Callable[[], bool] | None,
        memo: MaskCache | None = None,
    ) -> None:
        self.scorer, self.scene, self.cfg = scorer, scene, cfg
        self.progress, self.cancel = progress, cancel
        self.total, self.done, self.passes = planned, 0, 0
        # a caller's memo holds the scores of an earlier (e.g. interrupted) run of this scene
        self.cache = (memo if memo is not None else MaskCache()) if cfg.sampling.dedup else None

    def new_cache(self) -> MaskCache | None:
        return MaskCache() if self.cfg.sampling.dedup else None

    def _part(self, n: int) -> Callable[[int, int], None] | None:
        if self.progress is None:
            return None
        base = self.done
        self.done += n
        return lambda done, _n: self.progress(base + done, self.total)

    def __call__(
        self, masks: np.ndarray, fill: torch.Tensor | None = None, memo: Any = "main"
    ) -> torch.Tensor:
        """Scores of ``masks`` in the output space, (N, C); ``memo`` is a MaskCache, "main" or None."""
        memo = self.cache if memo == "main" else memo
        todo, keys, all_keys = (masks, None, None) if memo is None else memo.missing(masks)
        self.total -= len(masks) - len(todo)
        out = self.scorer.run_masks(
            self.scene.image,
            self.scene.fill if fill is None else fill,
            self.scene.labels,
            todo,
            self.scene.batch_size,
            progress=self._part(len(todo)),
            cancel=self.cancel,
            expand=self.cfg.fill.mask_expansion,
        )
        self.passes += len(todo)
        if len(todo) < len(masks) and self.progress is not None:
            self.progress(self.done, self.total)  # the skipped rows count as done
        if memo is not None:
            if len(todo):
                memo.add(keys, out)
            out = memo.gather(all_keys)
        # once over all rows: per-batch softmax calls cost more on CPU
        return torch.softmax(out, dim=1) if self.cfg.targets.output_space == "probability" else out


@dataclass(frozen=True, eq=False)
class Scores:
    """The model's outputs, by block. Tensors are (rows, C) in the output space.

    Attributes
    ----------
    main : MaskSample used (cut to ``samples_used``) and ``main_out``, its outputs
    hidden_alone, kept_alone : (K, C) tensors, or None without deltas
    repeats : the repeats' samples (cut) and outputs
    holdout : the held-out sample and outputs, or None
    early_stop : the early-stop record, or None
    stream : the one-stream verdict on the last partial sample judged, or None
    """

    main: MaskSample
    main_out: torch.Tensor
    hidden_alone: torch.Tensor | None
    kept_alone: torch.Tensor | None
    repeats: tuple[tuple[MaskSample, torch.Tensor], ...]
    holdout: tuple[MaskSample, torch.Tensor] | None
    early_stop: _trust.EarlyStop | None
    stream: _trust.Stability | None = None

    @property
    def original(self) -> torch.Tensor:
        """(C,) outputs for the unperturbed image (row 0 of the main sample)."""
        return self.main_out[0]

    @property
    def samples_used(self) -> int:
        return len(self.main.masks)


def _early_target(cfg: ExplainConfig, first: torch.Tensor) -> int:
    if cfg.targets.target is not None:
        return check_int("target", cfg.targets.target, 0, first.shape[0] - 1)
    return int(torch.argmax(first))


@dataclass(frozen=True)
class Partial:
    """An explanation in progress, as the main sample is scored (``explain(partial=...)``).

    Attributes
    ----------
    samples : int, samples scored so far
    allowed : int, the samples asked for (sampling may stop earlier)
    target : int, the explained class
    weights : (K,) float ndarray, the surrogate's weights on the samples so far
    stability : the one-stream verdict on them, or None before the first check size
    final : bool, the main sample is complete (the explanation's own weights and verdict; the
        per-region deltas, repeats and other checks are scored after it)
    """

    samples: int
    allowed: int
    target: int
    weights: np.ndarray
    stability: _trust.Stability | None
    final: bool = False


def stream_verdict(
    masks: np.ndarray, y: np.ndarray, sw: np.ndarray, cfg: ExplainConfig
) -> _trust.Stability:
    """The one-stream verdict (:func:`limecraft_core.trust.stream_stability`) of a sample."""
    return _trust.stream_stability(
        masks, y, sw, cfg.surrogate.ridge_alpha, seed=cfg.sampling.seed + STREAM_SEED_OFFSET
    )


def _score_main_steps(
    run: Runner,
    plan: Plan,
    cfg: ExplainConfig,
    kernel: Kernel,
    partial: Callable[[Partial], None] | None,
) -> tuple[list[torch.Tensor], _trust.EarlyStop | None, _trust.Stability | None]:
    """Score the main sample in steps: judge it as it grows (the one-stream verdict), show it
    (``partial``), and stop once it is stable when early stopping is on."""
    s, ms, k = cfg.sampling, plan.main, plan.main.masks.shape[1]
    parts: list[torch.Tensor] = []
    checks: list[_trust.EarlyStopCheck] = []
    stream = None
    done = 0
    step = s.step
    if s.early_stop_step is None:  # the default step, rounded up to whole batches
        b = run.scene.batch_size
        step = min(-(-step // b) * b, s.samples)
    first_check = max(EARLY_STOP_MIN_SAMPLES, EARLY_STOP_SAMPLES_PER_REGION * k)
    while done < s.samples:
        stop = min(done + step, s.samples)
        parts.append(run(ms.masks[done:stop]))
        done = stop
        judge = done >= first_check or done == s.samples
        if not (partial is not None or (judge and s.early_stop is not None)):
            continue
        tgt = _early_target(cfg, parts[0][0])
        y = torch.cat(parts)[:, tgt].double().cpu().numpy()
        sw = kernel(cosine_distance(ms.masks[:done])) * ms.weights[:done]
        if judge:
            stream = stream_verdict(ms.masks[:done], y, sw, cfg)
        if s.early_stop is not None and judge and done < s.samples:
            checks.append(_trust.EarlyStopCheck.of(stream))
        halt = bool(s.early_stop is not None and checks and checks[-1].passes(s.early_stop))
        if partial is not None:  # the final one comes before the deltas and other checks
            w = fit_ridge(ms.masks[:done], y[:, None], sw, alpha=cfg.surrogate.ridge_alpha)
            final = halt or done == s.samples
            partial(Partial(done, s.samples, tgt, w.coef[0], stream if judge else None, final))
        if halt:
            break
    record = None
    if s.early_stop is not None:
        record = _trust.EarlyStop(
            threshold=s.early_stop,
            step=step,
            samples_requested=s.samples,
            samples_used=done,
            stopped=done < s.samples,
            checks=checks,
        )
    return parts, record, stream


def score(
    run: Runner,
    plan: Plan,
    cfg: ExplainConfig,
    kernel: Kernel,
    partial: Callable[[Partial], None] | None = None,
) -> Scores:
    """Score every block of the plan; the main sample in steps when stopping early or showing
    partial results.

    Blocks go to the scorer in one call where they can (one pass over every row), in the
    order main, hidden alone, kept alone, repeats, hold-out.
    """
    k = plan.main.masks.shape[1]
    early = stream = None
    parts: list[torch.Tensor] = []
    stepped = cfg.sampling.early_stop is not None or partial is not None
    n = cfg.sampling.samples
    if stepped:
        parts, early, stream = _score_main_steps(run, plan, cfg, kernel, partial)
        n = sum(len(p) for p in parts)
        if n < cfg.sampling.samples:
            run.total -= plan.rows(cfg.sampling.samples) - plan.rows(n)
    main = _cut(plan.main, n)
    repeats = [_cut(r, n) for r in plan.repeats]
    blocks: list[tuple[str, np.ndarray]] = []
    if not stepped:
        blocks.append(("main", main.masks))
    if plan.deltas:
        blocks += [("hidden", ~np.eye(k, dtype=bool)), ("kept", np.eye(k, dtype=bool))]
    blocks += [(f"repeat{i}", r.masks) for i, r in enumerate(repeats)]
    if plan.holdout is not None:
        blocks.append(("holdout", plan.holdout.masks))
    got: dict[str, torch.Tensor] = {}
    if blocks:
        out = run(np.concatenate([b for _, b in blocks]))
        start = 0
        for name, b in blocks:
            got[name] = out[start : start + len(b)]
            start += len(b)
    main_out = torch.cat(parts) if stepped else got["main"]
    return Scores(
        main=main,
        main_out=main_out,
        hidden_alone=got.get("hidden"),
        kept_alone=got.get("kept"),
        repeats=tuple((r, got[f"repeat{i}"]) for i, r in enumerate(repeats)),
        holdout=(plan.holdout, got["holdout"]) if plan.holdout is not None else None,
        early_stop=early,
        stream=stream,
    )


# ----------------------------------------------------------------------------- 5. fit


def choose_classes(original: torch.Tensor, cfg: ExplainConfig) -> list[int]:
    """The explained classes: the target, or the top classes of the original image."""
    n_classes = original.shape[0]
    t = cfg.targets
    if t.target is not None:
        return [check_int("target", t.target, 0, n_classes - 1)]
    return torch.argsort(original, descending=True)[: min(t.top_labels, n_classes)].tolist()


def _column(out: torch.Tensor, cls: int) -> np.ndarray:
    return out[:, cls].double().cpu().numpy()


def sample_weights(sample: MaskSample, kernel: Kernel) -> np.ndarray:
    """The surrogate's sample weights: kernel similarity times the scheme's importance weights."""
    return kernel(cosine_distance(sample.masks)) * sample.weights


def fit(scores: Scores, classes: list[int], kernel: Kernel, alpha: float) -> SurrogateFit:
    """The weighted ridge surrogate on the main sample, one column per explained class."""
    cls_t = torch.tensor(classes, device=scores.main_out.device)
    return fit_ridge(
        scores.main.masks,
        scores.main_out[:, cls_t],
        sample_weights(scores.main, kernel),
        alpha=alpha,
    )


# ----------------------------------------------------------------------------- 6. trust


def _stability(
    scores: Scores, surrogate: SurrogateFit, tgt: int, cfg: ExplainConfig, kernel: Kernel
):
    alpha = cfg.surrogate.ridge_alpha
    samples = [scores.main] + [r for r, _ in scores.repeats]
    ys = [_column(scores.main_out, tgt)] + [_column(o, tgt) for _, o in scores.repeats]
    sws = [sample_weights(m, kernel) for m in samples]
    rep_w = np.stack(
        [surrogate.coef[0]]
        + [
            fit_ridge(m.masks, y[:, None], w, alpha=alpha).coef[0]
            for m, y, w in zip(samples[1:], ys[1:], sws[1:], strict=True)
        ]
    )
    stability = _trust.stability(rep_w)
    sizes = [n for n in cfg.trust.convergence if n <= scores.samples_used]
    conv = _trust.convergence([m.masks for m in samples], ys, sws, sizes, alpha) if sizes else None
    return stability, conv


def _faithfulness(
    run: Runner,
    scores: Scores,
    surrogate: SurrogateFit,
    tgt: int,
    cfg: ExplainConfig,
    kernel: Kernel,
) -> _trust.Faithfulness:
    k = scores.main.masks.shape[1]
    hold, hold_out = scores.holdout
    pred = surrogate.intercept[0] + hold.masks @ surrogate.coef[0]
    heldout = _trust.weighted_r2(pred, _column(hold_out, tgt), sample_weights(hold, kernel))
    order = np.argsort(-surrogate.coef[0], kind="stable")
    rng = np.random.default_rng(cfg.sampling.seed + RANDOM_ORDER_SEED_OFFSET)
    orders = [order] + [rng.permutation(k) for _ in range(N_RANDOM_ORDERS)]
    curves = np.concatenate([np.concatenate(_trust.deletion_insertion_masks(o, k)) for o in orders])
    y = _column(run(curves), tgt).reshape(len(orders), 2, k + 1)
    return _trust.Faithfulness(
        deletion=y[0, 0].tolist(),
        insertion=y[0, 1].tolist(),
        deletion_auc=_trust.auc(y[0, 0]),
        insertion_auc=_trust.auc(y[0, 1]),
        random_deletion_auc=float(np.mean([_trust.auc(c) for c in y[1:, 0]])),
        random_insertion_auc=float(np.mean([_trust.auc(c) for c in y[1:, 1]])),
        heldout_r2=heldout,
    )


def _fills(
    run: Runner,
    scene: Scene,
    scores: Scores,
    surrogate: SurrogateFit,
    tgt: int,
    cfg: ExplainConfig,
    kernel: Kernel,
) -> _trust.FillComparison:
    main, sw = scores.main, sample_weights(scores.main, kernel)
    others = _other_fills(cfg)
    weights = [surrogate.coef[0]]
    seconds: list[float | None] = [None]
    for f in others:
        start = time.perf_counter()  # the fill made and the whole sample scored under it
        y = _column(
            run(main.masks, scene.fill_tensor(f, cfg.fill.blur_sigma), run.new_cache()), tgt
        )
        seconds.append(time.perf_counter() - start)
        weights.append(
            fit_ridge(main.masks, y[:, None], sw, alpha=cfg.surrogate.ridge_alpha).coef[0]
        )
    return _trust.fill_comparison(
        [_fill_name(cfg)] + [str(f) for f in others], np.stack(weights), seconds
    )


def _fill_name(cfg: ExplainConfig) -> str:
    return cfg.fill.fill if isinstance(cfg.fill.fill, str) else "custom"


def _road(run: Runner, scene: Scene, weights: np.ndarray, tgt: int, seed: int) -> _trust.Road:
    """ROAD's MoRF and LeRF curves: each step's image is imputed (noisy linear imputation) at
    the model's input size and scored as the fill of a mask that hides every region, so every
    scorer (local, queued or remote) scores it unchanged; 2 model passes per step."""
    k = scene.n_regions
    hidden = np.zeros((1, k), bool)
    rng = np.random.default_rng(seed + ROAD_SEED_OFFSET)
    curves = []
    for order in ("morf", "lerf"):
        images = _trust.road_images(
            scene.work_image, scene.work_labels, weights, order=order, rng=rng
        )
        curves.append(
            [
                float(
                    _column(
                        run(
                            hidden,
                            _to_device(np.clip(im, 0, 1).astype(np.float32), scene.image.device),
                            None,
                        ),
                        tgt,
                    )[0]
                )
                for im in images
            ]
        )
    return _trust.road(curves[0], curves[1], k)


def _field_metrics(
    run: Runner,
    scene: Scene,
    scores: Scores,
    surrogate: SurrogateFit,
    faith: _trust.Faithfulness,
    tgt: int,
    cfg: ExplainConfig,
) -> dict[str, Any]:
    """The field's faithfulness metrics, reusing the passes already made: IROF on the deletion
    curve, faithfulness correlation on the held-out sample, sparseness on the weights (no pass);
    only ROAD scores new images."""
    w = surrogate.coef[0]
    hold, hold_out = scores.holdout
    return {
        "irof": _trust.irof(faith.deletion, fill=_fill_name(cfg)),
        "road": _road(run, scene, w, tgt, cfg.sampling.seed),
        "faithfulness_correlation": _trust.faithfulness_correlation(
            w,
            hold.masks,
            _column(hold_out, tgt),
            float(_column(scores.main_out, tgt)[0]),
            fill=_fill_name(cfg),
        ),
        "sparseness": _trust.sparseness(w),
    }


def run_trust_checks(
    run: Runner,
    scene: Scene,
    scores: Scores,
    surrogate: SurrogateFit,
    target: int,
    cfg: ExplainConfig,
    kernel: Kernel,
    expected: tuple[np.ndarray, np.ndarray | None] | None = None,
) -> _trust.TrustResults:
    """Every trust check the configuration asks for, on the scores already made where possible.

    ``expected`` is (the regions' label map, the analyst's expected area or None): with an area,
    localisation is measured against it (no model pass).
    """
    t = cfg.trust
    stability = conv = None
    if t.repeats > 1:
        stability, conv = _stability(scores, surrogate, target, cfg, kernel)
    elif scores.stream is not None and scores.stream.samples == scores.samples_used:
        stability = scores.stream  # judged on exactly this sample while it was scored
    else:
        stability = stream_verdict(
            scores.main.masks,
            _column(scores.main_out, target),
            sample_weights(scores.main, kernel),
            cfg,
        )
    sweep = None
    if t.kernel_widths:
        sweep = _trust.kernel_sweep(
            scores.main.masks,
            _column(scores.main_out, target),
            scores.main.weights,
            list(t.kernel_widths),
            cfg.surrogate.ridge_alpha,
        )
    faith = _faithfulness(run, scores, surrogate, target, cfg, kernel) if t.faithfulness else None
    more = _field_metrics(run, scene, scores, surrogate, faith, target, cfg) if faith else {}
    fills = (
        _fills(run, scene, scores, surrogate, target, cfg, kernel) if _other_fills(cfg) else None
    )
    return _trust.TrustResults(
        stability=stability,
        convergence=conv,
        kernel_sweep=sweep,
        faithfulness=faith,
        fills=fills,
        early_stop=scores.early_stop,
        localisation=(
            _trust.localise(surrogate.coef[0], *expected)
            if expected is not None and expected[1] is not None
            else None
        ),
        **more,
    )


# ----------------------------------------------------------------------------- 7. summarise


def _per_class(
    block: torch.Tensor | None, cls_t: torch.Tensor, shape: tuple[int, int]
) -> np.ndarray:
    if block is None:
        return np.full(shape, np.nan)
    return block[:, cls_t].double().cpu().numpy().T


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
    info = RunInfo(
        model=scorer.name,
        input_size=list(scorer.input_size) if scorer.input_size else None,
        normalize=scorer.normalize,
        device=scorer.device.type,
        precision=scorer.precision,
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
        precision_reason=str(getattr(scorer, "precision_reason", "")),
    )
    assert len(keys) == regions.n_regions
    return Explanation(
        config=cfg,
        run=info,
        segments=regions.labels,
        region_keys=keys,
        region_names=regions.names,
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
