"""Stage 6: the trust checks, sharing the model passes already made wherever the work allows.

The checks: stability, convergence, kernel sweep, faithfulness, fills and the literature's
metrics.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .. import trust as _trust
from ..config import ExplainConfig
from ..surrogate import Kernel, SurrogateFit, fit_ridge
from ..tensors import to_chw
from .fit import sample_weights
from .plan import N_RANDOM_ORDERS, RANDOM_ORDER_SEED_OFFSET, ROAD_SEED_OFFSET, _other_fills
from .scene import Scene
from .score import Runner, Scores, _column, stream_verdict


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
        y = _column(run(main.masks, scene.fill_for(f, cfg.fill.blur_sigma), run.new_cache()), tgt)
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
                            to_chw(np.clip(im, 0, 1).astype(np.float32), scene.image.device),
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
