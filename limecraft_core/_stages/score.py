"""Stage 4: the model's outputs per block, in steps; and the classes to explain.

Each step gives the live result, and the early-stop rule is checked after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .. import trust as _trust
from .._validate import check_int
from ..config import ExplainConfig
from ..perturb import Fill, MaskCache, MaskSample
from ..scorer import Scorer
from ..surrogate import Kernel, cosine_distance, fit_ridge
from .plan import (
    EARLY_STOP_MIN_SAMPLES,
    EARLY_STOP_SAMPLES_PER_REGION,
    STREAM_SEED_OFFSET,
    Plan,
    _cut,
)
from .scene import Scene


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
        self, masks: np.ndarray, fill: torch.Tensor | Fill | None = None, memo: Any = "main"
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
    # judged from this size on; with early stopping, at the sizes trust.next_check picks (a
    # check that cannot pass is skipped), else at every step when showing partial results
    next_at = max(EARLY_STOP_MIN_SAMPLES, EARLY_STOP_SAMPLES_PER_REGION * k)
    while done < s.samples:
        # nothing is judged or shown before the next check: score up to it in one call (the
        # same rows, in whole steps, so the checks land on the same sample sizes)
        ahead = 1 if partial is not None else max(1, -(-(next_at - done) // step))
        stop = min(done + step * ahead, s.samples)
        parts.append(run(ms.masks[done:stop]))
        done = stop
        judge = done >= next_at or done == s.samples
        if not (partial is not None or (judge and s.early_stop is not None)):
            continue
        tgt = _early_target(cfg, parts[0][0])
        y = torch.cat(parts)[:, tgt].double().cpu().numpy()
        sw = kernel(cosine_distance(ms.masks[:done])) * ms.weights[:done]
        early = s.early_stop is not None and judge and done < s.samples
        # an early-stop check whose one-fit estimate of the lead is far from firm cannot pass:
        # it is not made (trust.quick_lead), and the next is scheduled from that estimate
        alpha = cfg.surrogate.ridge_alpha
        quick = _trust.quick_lead(ms.masks[:done], y, sw, alpha) if early else None
        if judge and (quick is None or quick >= _trust.SCREEN_LEAD):
            stream = stream_verdict(ms.masks[:done], y, sw, cfg)
            if early:
                checks.append(_trust.EarlyStopCheck.of(stream))
                next_at = _trust.next_check(done, step, stream.conclusion_lead)
        elif early:
            next_at = _trust.next_check(done, step, quick)
        halt = bool(s.early_stop is not None and checks and checks[-1].passes(s.early_stop))
        if partial is not None:  # the final one comes before the deltas and other checks
            w = fit_ridge(ms.masks[:done], y[:, None], sw, alpha=cfg.surrogate.ridge_alpha)
            final = halt or done == s.samples
            # between checks, the last check's verdict (its own sample size says which)
            partial(Partial(done, s.samples, tgt, w.coef[0], stream, final))
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


def choose_classes(original: torch.Tensor, cfg: ExplainConfig) -> list[int]:
    """The explained classes: the target, or the top classes of the original image."""
    n_classes = original.shape[0]
    t = cfg.targets
    if t.target is not None:
        return [check_int("target", t.target, 0, n_classes - 1)]
    return torch.argsort(original, descending=True)[: min(t.top_labels, n_classes)].tolist()


def _column(out: torch.Tensor, cls: int) -> np.ndarray:
    return out[:, cls].double().cpu().numpy()
