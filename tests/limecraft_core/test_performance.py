"""The engine's speed options (issue 6), checked for correctness on the CPU.

Speed itself is measured in bench/ (ratios side by side), never timed here. These tests check
that each option is exact or bounded in its effect, and the device logic that the CPU can
exercise: only masks travel host-to-device per batch, autocast and channels_last reach the
model.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from limecraft_core import Classifier, LimecraftError, MaskCache, explain, trust
from limecraft_core.perturb import run_masks
from tests.toys import ChannelMeans, LinearPixels, Recorder


def test_mask_cache_scores_each_distinct_mask_once():
    cache = MaskCache()
    masks = np.array([[1, 0, 1], [1, 0, 1], [0, 0, 0], [1, 0, 1]], bool)
    todo, keys, all_keys = cache.missing(masks)
    assert todo.tolist() == [[True, False, True], [False, False, False]]
    cache.add(keys, torch.tensor([[1.0], [2.0]]))
    assert cache.gather(all_keys).ravel().tolist() == [1.0, 1.0, 2.0, 1.0]
    todo, keys, all_keys = cache.missing(np.array([[0, 0, 0], [1, 1, 1]], bool))
    assert todo.tolist() == [[True, True, True]] and len(cache) == 2
    cache.add(keys, torch.tensor([[3.0]]))
    assert cache.gather(all_keys).ravel().tolist() == [2.0, 3.0]
    with pytest.raises(ValueError):
        cache.add([b"x"], torch.zeros(2, 1))


def test_dedup_is_exact_and_skips_repeated_masks(photo):
    model = Recorder(LinearPixels((64, 64)))
    kw = dict(samples=300, segmentation="grid", n_segments=4, seed=3, input_size=64)
    plain = explain(photo, model, dedup=False, **kw)
    passes_plain = sum(len(b) for b in model.batches)
    model.batches.clear()
    fast = explain(photo, model, **kw)
    passes_fast = sum(len(b) for b in model.batches)
    assert passes_plain == 300 + 2 * 4 == plain.run.model_passes
    assert passes_fast == fast.run.model_passes <= 2**4
    np.testing.assert_allclose(fast.weights, plain.weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fast.deltas, plain.deltas, rtol=1e-5, atol=1e-6)


def test_early_stop_stops_when_halves_agree_and_keeps_the_ranking(photo):
    model = LinearPixels((64, 64), seed=1)
    kw = dict(
        samples=3000, segmentation="grid", n_segments=16, seed=0, input_size=64, output_space="raw"
    )
    full = explain(photo, model, **kw)
    early = explain(photo, model, early_stop=0.9, early_stop_step=200, **kw)
    info = early.trust.early_stop
    assert info.stopped and early.run.samples_used == info.samples_used < 3000
    assert info.checks[-1].kendall_w >= 0.9
    assert early.config.sampling.samples == 3000
    rho = spearmanr(early.weights, full.weights).statistic
    assert rho >= 0.9


def test_early_stop_runs_to_the_end_when_the_model_is_noise(photo, monkeypatch):
    """A model of noise never settles: it is sampled to the end. From 200 on, each scheduled
    check is first screened by the one-fit lead (trust.quick_lead), far under half the firm
    lead here, so none of the 40-fit checks is made before the end (the screen's estimate
    schedules the next, as a made check's lead does), and the end is judged in full."""
    import importlib

    score_stage = importlib.import_module("limecraft_core._stages.score")  # the module

    class Noise(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.rand(x.shape[0], 3)

    screened: list[tuple[int, float]] = []
    judged: list[int] = []
    real_quick, real_verdict = trust.quick_lead, score_stage.stream_verdict

    def quick(masks, *a):
        screened.append((len(masks), real_quick(masks, *a)))
        return screened[-1][1]

    def verdict(masks, *a):
        judged.append(len(masks))
        return real_verdict(masks, *a)

    monkeypatch.setattr(trust, "quick_lead", quick)
    monkeypatch.setattr(score_stage, "stream_verdict", verdict)
    e = explain(
        photo,
        Noise(),
        samples=600,
        segmentation="grid",
        n_segments=16,
        input_size=32,
        early_stop=0.95,
        early_stop_step=100,
        output_space="raw",
    )
    info = e.trust.early_stop
    assert not info.stopped and info.samples_used == 600
    assert screened[0][0] == 200  # checked from 200 on, not at the end
    assert all(lead < trust.SCREEN_LEAD for _, lead in screened)
    for (n, lead), (m, _) in itertools.pairwise(screened):
        assert m == trust.next_check(n, 100, lead)  # a lead far under the firm one skips more
    assert len(screened) < 600 // 100 - 2
    assert info.checks == [] and judged == [600]  # no 40-fit check but the end's verdict


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, "x"])
def test_early_stop_range(photo, bad):
    with pytest.raises(LimecraftError, match="early_stop"):
        explain(photo, ChannelMeans(), samples=50, segmentation="grid", early_stop=bad)


def test_only_masks_travel_to_the_device_per_batch(photo, monkeypatch):
    """Perturbed images are composed next to the model: per batch, only (B, K) masks move."""
    moves: list[tuple[tuple[int, ...], torch.dtype]] = []
    real_to = torch.Tensor.to

    def spy(self, *args, **kwargs):
        if "device" in kwargs or any(isinstance(a, (str, torch.device)) for a in args):
            moves.append((tuple(self.shape), self.dtype))  # a transfer, not a dtype cast
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", spy)
    counts = {}
    for n in (100, 400):
        moves.clear()
        explain(
            photo,
            ChannelMeans(),
            samples=n,
            batch_size=25,
            segmentation="grid",
            n_segments=9,
            input_size=48,
            dedup=False,
            device="cpu",
        )
        big = [m for m in moves if m[1] != torch.bool and np.prod(m[0]) >= 48 * 48]
        masks = [m for m in moves if m[1] == torch.bool and len(m[0]) == 2 and m[0][1] == 9]
        batches = [m for m in masks if m[0][0] <= 25]
        counts[n] = (len(big), len(batches))
        # besides the batches, the (N, K) masks go once to the surrogate fit
        assert len(masks) - len(batches) <= 1
    # image-sized transfers do not grow with N; mask transfers do, one per batch
    assert counts[100][0] == counts[400][0] <= 4
    assert counts[100][1] == -(-(100 + 18) // 25) and counts[400][1] == -(-(400 + 18) // 25)


def test_run_masks_composes_on_the_images_device():
    seen = []

    def model(x):
        seen.append((x.device.type, x.dtype, tuple(x.shape)))
        return x.mean(dim=(2, 3))

    image = torch.rand(3, 8, 8)
    labels = torch.arange(64).reshape(8, 8) // 16
    out = run_masks(model, image, torch.zeros(3, 8, 8), labels, np.ones((10, 4), bool), 4)
    assert out.shape == (10, 3)
    assert seen == [("cpu", torch.float32, (4, 3, 8, 8))] * 2 + [
        ("cpu", torch.float32, (2, 3, 8, 8))
    ]


@pytest.mark.bf16
def test_bf16_autocast_and_channels_last_reach_the_model_on_cpu(photo):
    torch.manual_seed(0)
    conv = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 4),
    )
    seen = []

    class Probe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = conv

        def forward(self, x):
            seen.append((x.is_contiguous(memory_format=torch.channels_last), self.net[0](x).dtype))
            return self.net(x)

    kw = dict(samples=400, segmentation="grid", n_segments=9, input_size=32, device="cpu")
    fp32 = explain(photo, Probe(), precision="fp32", channels_last=False, **kw)
    assert seen[-1] == (False, torch.float32)
    fast = explain(photo, Probe(), precision="bf16", channels_last=True, **kw)
    assert seen[-1] == (True, torch.bfloat16)
    assert fast.run.precision == "bf16" and fast.run.channels_last is True
    assert fast.config.speed.precision == "bf16" and fast.config.speed.channels_last is True
    assert spearmanr(fast.weights, fp32.weights).statistic >= 0.8


def test_classifier_defaults_on_a_cpu_without_native_bf16_are_fp32_and_channels_last():
    # tests/conftest.py sets LIMECRAFT_CPU_BF16=0; tests/limecraft_core/test_fast.py covers native bf16
    clf = Classifier(torch.nn.Conv2d(3, 2, 1), device="cpu")
    assert clf.precision == "fp32" and clf.channels_last is True
