"""Fast by default (issue 17): the one-sample verdict, early stop on, partial results, the score
memo, and precision "auto" on a CPU with native bf16."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import limecraft_core as lc
from limecraft_core import _stages as stages
from limecraft_core import trust
from limecraft_core.classifier import BF16_CHECK_ROWS
from limecraft_core.surrogate import cosine_distance, fit_ridge, make_kernel
from tests.toys import ChannelMeans, LinearPixels

KERNEL = make_kernel(0.25)


def _linear_sample(k: int, n: int, seed: int, noise: float, true: np.ndarray | None = None):
    """Bernoulli masks over k regions and a linear response with Gaussian noise."""
    rng = np.random.default_rng(seed)
    ms = lc.sample_masks(k, n, rng=seed)
    true = np.linspace(1.0, 0.0, k) if true is None else true
    y = ms.masks @ true + noise * rng.standard_normal(n)
    return ms, y, KERNEL(cosine_distance(ms.masks)) * ms.weights


# ----------------------------------------------------------------------------- the verdict


def test_ridge_coefs_is_fit_ridge_for_every_weighting():
    ms, y, sw = _linear_sample(12, 300, 0, 0.1)
    rng = np.random.default_rng(1)
    weightings = np.stack([sw * rng.multinomial(300, np.full(300, 1 / 300)) for _ in range(4)])
    got = trust.ridge_coefs(ms.masks, y, weightings, alpha=1.0)
    for w, row in zip(weightings, got, strict=True):
        want = fit_ridge(ms.masks, y[:, None], w, alpha=1.0).coef[0]
        np.testing.assert_allclose(row, want, rtol=1e-9, atol=1e-12)


def test_one_sample_verdict_is_stable_for_a_clean_signal_and_not_for_noise():
    ms, y, sw = _linear_sample(10, 600, 0, 0.01)
    clean = trust.stream_stability(ms.masks, y, sw, 1.0, seed=3)
    assert clean.verdict == "stable" and clean.source == "stream"
    assert clean.stable_share == 1.0 and clean.samples == 600 and clean.repeats == 5
    assert "in all 40 resamples" in clean.reason and "resamples of the sample" not in clean.reason
    noise = np.random.default_rng(5).standard_normal(600)
    judged = trust.stream_stability(ms.masks, noise, sw, 1.0, seed=3)
    assert judged.verdict != "stable"


def test_one_sample_verdict_is_reproducible_and_costs_no_model_pass():
    calls = []

    def model(x):
        calls.append(len(x))
        return x.mean(dim=(2, 3))

    img = np.random.default_rng(0).integers(0, 255, (32, 32, 3), np.uint8)
    kw = dict(samples=200, segmentation="grid", n_segments=9, compute_deltas=False)
    a = lc.explain(img, model, early_stop=None, **kw)
    passes = sum(calls)
    b = lc.explain(img, model, early_stop=None, **kw)
    assert a.trust.stability is not None and a.trust.stability.source == "stream"
    assert a.trust.stability == b.trust.stability
    assert passes == a.run.model_passes <= 200  # the main sample only: no repeat was scored


def test_one_sample_verdict_agrees_with_five_independent_repeats_on_toys():
    """The honesty check in miniature, at a fixed N = 300 over noise levels from clean to
    hopeless: the conclusion judged from one sample (resampled) never makes a dangerous error
    against 5 independent samples of the same size ("stable" where they say "unstable", or a
    stable first region that is not theirs), agrees with them on every case with a clear
    signal, and where they differ it is the cautious side: not stable where the repeats say
    stable (a lead under CONCLUSION_LEAD sd at N = 300, which the default settles by sampling
    on; bench/bench_calibration.py measures that on real models)."""
    k, n = 12, 300
    true = np.r_[np.linspace(1.0, 0.2, 4), np.zeros(k - 4)]
    misses = []
    for noise in (0.02, 0.1, 0.3, 1.0, 3.0):
        for seed in range(4):
            one = _linear_sample(k, n, 100 * seed, noise, true)
            judged = trust.stream_stability(one[0].masks, one[1], one[2], 1.0, seed=seed)
            ws = []
            for r in range(5):
                ms, y, sw = _linear_sample(k, n, 100 * seed + r, noise, true)
                ws.append(fit_ridge(ms.masks, y[:, None], sw, alpha=1.0).coef[0])
            ref = trust.stability(np.stack(ws))
            case = (noise, seed, judged.verdict, ref.verdict)
            if judged.verdict == "stable":  # never a dangerous error
                assert ref.verdict == "stable", case
                assert judged.conclusion[0] == ref.conclusion[0], case
            elif ref.verdict == "stable":
                misses.append(case)  # the cautious side
            if noise <= 0.3:  # a clear signal: the same word, stable
                assert judged.verdict == ref.verdict == "stable", case
    assert all(noise >= 1.0 for noise, *_ in misses), misses


# ----------------------------------------------------------------------------- defaults


def test_the_defaults_stop_early_with_a_verdict_and_no_repeats(quadrants):
    ex = lc.explain(quadrants, LinearPixels((32, 32)), segmentation="grid", n_segments=16)
    cfg = ex.config
    assert cfg.sampling.early_stop == 1.0 and cfg.trust.repeats == 1
    stb = ex.trust.stability
    assert stb.source == "stream" and stb.verdict == "stable"
    assert ex.trust.early_stop.stopped and ex.run.samples_used < cfg.sampling.samples
    # the final verdict is the last early-stop check's (the same sample, the same seed)
    assert ex.trust.early_stop.checks[-1].verdict == stb.verdict
    assert stb.samples == ex.run.samples_used
    assert ex.run.model_passes <= ex.run.samples_used + 2 * ex.n_regions


def test_independent_repeats_are_still_a_setting(quadrants):
    ex = lc.explain(
        quadrants, ChannelMeans(), segmentation="grid", n_segments=9, samples=200, repeats=3
    )
    assert ex.trust.stability.source == "repeats" and ex.trust.stability.repeats == 3
    assert "3 repeats" in ex.trust.stability.runs


def test_the_stream_verdict_round_trips_through_json(quadrants, tmp_path):
    ex = lc.explain(quadrants, ChannelMeans(), segmentation="grid", n_segments=9, samples=300)
    back = lc.Explanation.from_json(ex.to_json())
    assert back.trust.stability == ex.trust.stability
    assert back.run.precision_reason == ex.run.precision_reason


# ----------------------------------------------------------------------------- partial results


def test_partial_results_refine_and_end_before_the_result(quadrants):
    seen: list[lc.Partial] = []
    ex = lc.explain(
        quadrants,
        LinearPixels((32, 32)),
        segmentation="grid",
        n_segments=16,
        samples=600,
        early_stop=None,
        early_stop_step=100,
        partial=seen.append,
    )
    assert [p.samples for p in seen] == [100, 200, 300, 400, 500, 600]
    assert [p.final for p in seen] == [False] * 5 + [True]
    assert all(p.allowed == 600 and p.weights.shape == (16,) for p in seen)
    assert seen[0].stability is None  # under max(200, 4K) = 200 samples: not judged yet
    assert all(p.stability is not None and p.stability.samples == p.samples for p in seen[1:])
    assert not np.allclose(seen[0].weights, seen[-1].weights)  # it refines
    # the final one is the explanation's own weights and verdict, before the deltas
    assert seen[-1].target == ex.target
    np.testing.assert_allclose(seen[-1].weights, ex.weights, rtol=1e-9, atol=1e-12)
    assert seen[-1].stability == ex.trust.stability


def test_partial_results_stop_with_early_stop(quadrants):
    seen: list[lc.Partial] = []
    ex = lc.explain(
        quadrants, LinearPixels((32, 32)), segmentation="grid", n_segments=4, partial=seen.append
    )
    assert ex.trust.early_stop.stopped
    assert [p.final for p in seen][-1] and seen[-1].samples == ex.run.samples_used


# ----------------------------------------------------------------------------- the memo


def test_no_signal_is_never_called_stable(quadrants):
    """ChannelMeans sees only the mean colour, which the mean fill keeps: hiding a region
    changes nothing, the weights are rounding noise, and the verdict says so."""
    ex = lc.explain(quadrants, ChannelMeans(), segmentation="grid", n_segments=16)
    assert ex.trust.stability.verdict != "stable" and not ex.trust.early_stop.stopped


def test_a_memo_keeps_the_scores_of_an_interrupted_run(quadrants):
    calls = []

    def model(x):
        calls.append(len(x))
        return x.mean(dim=(2, 3))

    kw = dict(segmentation="grid", n_segments=16, early_stop=None, compute_deltas=False)
    memo = lc.MaskCache()
    steps = []

    def cancel() -> bool:
        return len(steps) >= 3  # after the third step

    with pytest.raises(lc.Cancelled):
        lc.explain(
            quadrants,
            model,
            samples=1000,
            early_stop_step=100,
            memo=memo,
            partial=steps.append,
            cancel=cancel,
            **kw,
        )
    first = stages.plan_samples(16, lc.ExplainConfig.from_flat(samples=1000)).main.masks[:300]
    assert len(memo) >= len(np.unique(first, axis=0))  # the steps scored before the cancel
    calls.clear()
    ex = lc.explain(quadrants, model, samples=300, memo=memo, **kw)  # "stop here" at 300
    assert sum(calls) == 0 and ex.run.model_passes == 0
    fresh = lc.explain(quadrants, model, samples=300, **kw)
    np.testing.assert_allclose(ex.weights, fresh.weights, rtol=1e-6)


# ----------------------------------------------------------------------------- precision auto


class Quantised(torch.nn.Module):
    """A model whose output hangs on differences far below bf16's resolution: a linear layer
    (which bf16 autocast runs in bf16) adding tiny colour effects to a large bias."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        with torch.no_grad():
            self.fc.weight.copy_(torch.tensor([[1e-2, 2e-2, 3e-2], [0.0, 0.0, 0.0]]))
            self.fc.bias.copy_(torch.tensor([1000.0, 1000.02]))

    def forward(self, x):
        return self.fc(x.mean(dim=(2, 3)))


class Margin(torch.nn.Module):
    """Class 0 against class 1 by red minus green: a photo with red ~ green has its top two
    classes closer together than bf16 can tell apart; a red photo does not."""

    def forward(self, x):
        m = x.mean(dim=(2, 3))
        w = torch.tensor([[20.0, -20.0], [-20.0, 20.0], [0.0, 0.0]], device=x.device)
        return m @ w


def _flat(rgb: tuple[float, float, float], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = np.empty((32, 32, 3), np.float64)
    img[:] = rgb
    return np.clip(img + rng.normal(0, 0.02, img.shape), 0, 1)


@pytest.mark.bf16
def test_auto_precision_on_a_native_bf16_cpu_keeps_bf16_where_the_image_agrees(monkeypatch):
    monkeypatch.setenv("LIMECRAFT_CPU_BF16", "1")
    clf = lc.Classifier(ChannelMeans(), input_size=32)
    assert clf.precision == "fp32" and "decided per image" in clf.precision_reason
    out = clf(torch.rand(BF16_CHECK_ROWS, 3, 32, 32))  # a plain call: fp32, nothing decided
    assert out.shape == (BF16_CHECK_ROWS, 4) and clf.precision == "fp32"
    image = torch.from_numpy(_flat((0.9, 0.1, 0.4), 0).transpose(2, 0, 1)).float()
    precision, reason = clf.decide_precision(image)
    assert precision == "bf16" and "agrees with fp32" in reason, reason
    ex = lc.explain(image.numpy().transpose(1, 2, 0), clf, segmentation="grid", n_segments=4)
    assert ex.run.precision == "bf16" and "decided for this image" in ex.run.precision_reason


@pytest.mark.bf16
def test_auto_precision_falls_back_to_fp32_when_bf16_disagrees(monkeypatch, quadrants):
    monkeypatch.setenv("LIMECRAFT_CPU_BF16", "1")
    clf = lc.Classifier(Quantised(), input_size=32)
    ex = lc.explain(quadrants, clf, segmentation="grid", n_segments=4, samples=50)
    assert ex.run.precision == "fp32"
    assert "does not agree" in ex.run.precision_reason


@pytest.mark.bf16
def test_the_same_image_gets_the_same_answer_whatever_was_explained_before(monkeypatch):
    """Issue 25: bf16 chosen on one image was kept for every later one, so an image whose top
    two classes lie within bf16's error got another top class after a different image. Two
    images, explained in both orders by fresh classifiers: identical results."""
    monkeypatch.setenv("LIMECRAFT_CPU_BF16", "1")
    red = _flat((0.9, 0.1, 0.4), 1)  # class 0 far ahead: bf16 is fine
    tie = _flat((0.5, 0.5, 0.5), 2)  # classes 0 and 1 within bf16's error
    tie[..., 1] = tie[..., 0] + 0.0004  # green a hair above red: class 1 in fp32
    kw = {"segmentation": "grid", "n_segments": 4, "samples": 64, "seed": 3}
    first = lc.Classifier(Margin(), input_size=32, labels=["red", "green"])
    a1, b1 = lc.explain(red, first, **kw), lc.explain(tie, first, **kw)
    second = lc.Classifier(Margin(), input_size=32, labels=["red", "green"])
    b2, a2 = lc.explain(tie, second, **kw), lc.explain(red, second, **kw)
    assert (a1.run.precision, b1.run.precision) == ("bf16", "fp32")
    assert "too coarse" in b1.run.precision_reason or "does not agree" in b1.run.precision_reason
    for x, y in ((a1, a2), (b1, b2)):
        assert x.target == y.target and x.top_predictions == y.top_predictions
        np.testing.assert_array_equal(x.class_weights, y.class_weights)
        assert x.run.precision == y.run.precision
    assert b1.target == 1  # green, as fp32 says
    np.testing.assert_array_equal(first.predict(tie), second.predict(tie))


@pytest.mark.bf16
def test_auto_precision_is_fp32_without_native_bf16_and_as_asked_otherwise(monkeypatch, quadrants):
    monkeypatch.setenv("LIMECRAFT_CPU_BF16", "0")
    clf = lc.Classifier(ChannelMeans(), input_size=32)
    ex = lc.explain(quadrants, clf, segmentation="grid", n_segments=4, samples=50)
    assert ex.run.precision == "fp32" and "no native bf16" in ex.run.precision_reason
    monkeypatch.setenv("LIMECRAFT_CPU_BF16", "1")
    asked = lc.Classifier(ChannelMeans(), input_size=32, precision="fp32")
    ex = lc.explain(quadrants, asked, segmentation="grid", n_segments=4, samples=50)
    assert ex.run.precision == "fp32" and ex.run.precision_reason == "fp32 as asked"


def test_channels_last_is_the_default_for_convolutional_modules_only():
    """It pays for convolutions; for a model without them it would only copy every batch."""
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1))
    assert lc.Classifier(conv).channels_last
    assert not lc.Classifier(ChannelMeans()).channels_last  # no convolution
    assert not lc.Classifier(lambda x: x.mean(dim=(2, 3))).channels_last
    assert lc.Classifier(ChannelMeans(), channels_last=True).channels_last  # as asked


@pytest.mark.bf16
def test_a_server_says_the_precision_of_a_photo_before_it_scores(monkeypatch):
    """A Ray Serve replica reports its precision before any batch: settle_precision answers for
    a photo (chelsea) without changing what any later image gets."""
    monkeypatch.setenv("LIMECRAFT_CPU_BF16", "1")
    clf = lc.Classifier(LinearPixels((32, 32), classes=4), input_size=32)
    assert clf.settle_precision() == "bf16" and clf.precision == "fp32"
    assert "decided per image" in clf.precision_reason
    odd = lc.Classifier(Quantised(), input_size=32)
    assert odd.settle_precision() == "fp32"
    monkeypatch.setenv("LIMECRAFT_CPU_BF16", "0")
    plain = lc.Classifier(LinearPixels((32, 32)), input_size=32)
    assert plain.settle_precision() == "fp32" and "no native bf16" in plain.precision_reason
