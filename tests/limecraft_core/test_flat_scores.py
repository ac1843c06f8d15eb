"""A class whose score is the same for every sample (a flat image, a model blind to the regions,
ChannelMeans under the mean fill): no region carries weight, and every surface says so rather
than ranking the rounding of the ridge's centring (about 1e-29) as if it were a weight."""

from __future__ import annotations

import numpy as np
import torch
from toys import ChannelMeans, ChannelMoments

import limecraft_core as lc
from limecraft_core.agreement import agreement
from limecraft_core.limits import flat_scores
from limecraft_core.merge_hint import merge_hint
from limecraft_core.surrogate import fit_ridge
from limecraft_core.trust import quick_lead
from limecraft_core.trust.stability import ridge_coefs, stream_stability


def _sample(n: int = 300, k: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.random((n, k)) < 0.5, rng.random(n) + 0.1


def test_a_constant_score_gets_no_weights_and_a_varying_one_keeps_its_own():
    masks, w = _sample()
    varying = masks @ np.array([0.3, -0.2, 0.1, 0.0, 0.05, -0.4]) + 0.2
    constant = np.full(len(masks), 0.5331294536590576)
    both = fit_ridge(masks, np.stack([varying, constant], 1), w)
    alone = fit_ridge(masks, varying[:, None], w)
    assert np.array_equal(both.coef[1], np.zeros(6))  # not ~1e-29: exactly none
    # the other column is the fit alone (to the solver's rounding of two right-hand sides)
    assert np.allclose(both.coef[0], alone.coef[0], rtol=1e-12, atol=1e-15)
    assert abs(both.intercept[1] - constant[0]) < 1e-15
    # the same for the stability's refits, B weightings at once
    b = np.vstack([w, w * 2])
    assert np.array_equal(ridge_coefs(masks, constant, b, 1.0), np.zeros((2, 6)))
    assert np.abs(ridge_coefs(masks, varying, b, 1.0)).max() > 0.1


def test_the_flat_rule_is_float32s_resolution_no_more():
    """Four float32 steps of the largest |score| are flat; a change of a millionth of a
    probability near 0.5 is not."""
    eps = float(np.finfo(np.float32).eps)
    assert flat_scores(0.0, 0.5) and flat_scores(4 * eps * 0.5, 0.5)
    assert not flat_scores(1e-6, 0.5) and not flat_scores(5 * eps * 0.5, 0.5)
    masks, w = _sample()
    tiny = 0.5 + 1e-6 * masks[:, 0]  # a real, tiny effect of region 0
    coef = fit_ridge(masks, tiny[:, None], w, alpha=0.0).coef[0]
    assert abs(coef[0] - 1e-6) < 1e-8 and np.abs(coef[1:]).max() < 1e-8


def test_a_fit_with_no_weight_has_nothing_to_fit_and_any_weight_is_judged_by_r2():
    """trust.fidelity: the R² of a score that never moved (0/0, reported as 0) is no "low" fit."""
    from limecraft_core.trust import fidelity

    assert fidelity(0.0, np.zeros(5)) == "none"
    assert fidelity(0.0, np.array([0.0, 1e-9, 0.0])) == "low"  # a tiny weight is still a fit
    assert fidelity(0.9, np.ones(3)) == "good" and fidelity(0.6) == "fair"
    assert fidelity(0.0) == "low"  # without the weights, R² alone decides


def test_a_flat_area_stays_exactly_flat_when_resized():
    """tensors.resize_chw: torch's float32 antialiased kernel leaves a flat grey 1 float32 step
    off in places (224 -> 128: two values); computed in float64 it stays one value, and every
    pixel is the float64 resize rounded to float32 (the float32 kernel's own error, about 2e-6
    here, is the size of the change)."""
    import torch.nn.functional as F

    from limecraft_core.tensors import resize_chw

    grey = torch.full((3, 224, 224), 128 / 255)
    for size in ((128, 128), (64, 64), (300, 451), (7, 500)):
        assert torch.unique(resize_chw(grey, size)).tolist() == [grey[0, 0, 0].item()], size
        assert torch.unique(resize_chw(grey[None].expand(3, -1, -1, -1), size)).numel() == 1
    x = torch.rand(2, 3, 97, 131, generator=torch.Generator().manual_seed(0))
    kw = {"size": (40, 50), "mode": "bilinear", "antialias": True, "align_corners": False}
    ours, f32 = resize_chw(x, (40, 50)), F.interpolate(x, **kw)
    assert ours.dtype == torch.float32 and ours.shape == f32.shape
    assert torch.equal(ours, F.interpolate(x.double(), **kw).float())
    assert (ours - f32).abs().max().item() < 1e-5


def test_a_flat_upload_at_another_size_than_the_model_has_no_weight():
    """A flat grey 224 px image and the demo model (128 px): the image is resized once to the
    model's size, and its regions' mean fill is then the image again, so the score never moves.
    (Resized in float32, the fill was one float32 step off the image in places, and the
    verdict called a region "stable" on weights of 1e-8.)"""
    from models.registry import load_classifier

    img = np.full((224, 224, 3), 128, np.uint8)
    cfg = lc.ExplainConfig.from_flat(segmentation="slic", n_segments=36, precision="fp32")
    ex = lc.explain(img, load_classifier("demo"), config=cfg)
    assert ex.n_regions > 1 and not ex.weights.any()
    assert ex.trust.stability.reason == "unstable: no region carries any weight"


def test_inpainting_a_flat_image_gives_the_image_back_exactly():
    """Pull-push is a convex combination of the kept pixels, so a flat image's fill is its
    colour. In float32 it came back a step or two off in places (the area averages, the
    divisions, the bilinear upsampling), and those steps were scored as if they were the
    regions. Every inpainting path: a perturbation's kept pixels (``inpaint``, nothing kept
    too), each region alone (``inpaint-each``), one hole (the edits' fill)."""
    from limecraft_core.perturb import inpaint
    from limecraft_core.perturb.inpaint import _inpaint_union, inpaint_regions

    for value, shape in ((128, (200, 260)), (37, (224, 224)), (255, (97, 131))):
        img = np.full((*shape, 3), value, np.uint8)
        flat = torch.from_numpy(img.astype(np.float32) / 255).permute(2, 0, 1)
        keep = (torch.rand(9, 1, *shape, generator=torch.Generator().manual_seed(0)) < 0.3).float()
        keep[0] = 0.0  # nothing kept: the image's mean colour
        assert torch.equal(_inpaint_union(flat, keep), flat.expand(9, -1, -1, -1)), value
        f32 = img.astype(np.float32) / 255
        labels = (np.arange(shape[0] * shape[1]).reshape(shape) // 997) % 20
        assert np.array_equal(inpaint_regions(f32, labels), f32)
        hole = np.zeros(shape, bool)
        hole[20:80, 30:90] = True
        assert np.array_equal(inpaint(img, hole), f32)
        assert np.array_equal(inpaint(img, np.ones(shape, bool)), f32)


def test_a_flat_upload_has_no_weight_under_the_inpainting_fills():
    """A flat grey upload explained with ``--fill inpaint`` (or ``inpaint-each``) was called
    "stable" with region 9 first, on the rounding of the fill."""
    from models.registry import load_classifier

    img = np.full((200, 260, 3), 128, np.uint8)
    for fill in ("inpaint", "inpaint-each"):
        cfg = lc.ExplainConfig.from_flat(
            segmentation="slic", n_segments=36, precision="fp32", fill=fill, samples=200
        )
        ex = lc.explain(img, load_classifier("demo"), config=cfg)
        assert ex.n_regions > 1 and not ex.weights.any(), fill
        assert ex.trust.stability.reason == "unstable: no region carries any weight", fill


def test_the_verdict_of_a_constant_score_says_no_region_carries_weight():
    masks, w = _sample()
    assert quick_lead(masks, np.full(len(masks), 0.25), w, 1.0) == 0.0  # no lead to screen
    s = stream_stability(masks, np.full(len(masks), 0.25), w, alpha=1.0)
    assert s.matter == [] and s.verdict == "unstable"
    assert s.reason == "unstable: no region carries any weight"


def test_methods_that_give_every_region_zero_are_named_and_nothing_is_merged():
    zero, some = np.zeros(4), np.array([0.0, 0.3, -0.1, 0.05])
    everyone = agreement({"LIME": zero, "occlusion": zero, "RISE": zero})
    assert everyone.sentence == (
        "No method finds a region that matters: every method gives every region 0 (hiding "
        "regions does not change the score)."
    )
    assert everyone.disagreeing == ()
    part = agreement({"LIME": some, "occlusion": zero, "RISE": some * 2})
    assert part.sentence == (
        "All 2 methods agree on the top 3 and their signs (region 1 first); occlusion gives "
        "every region 0."
    )
    labels = np.repeat(np.arange(4), 4).reshape(4, 4)
    hint = merge_hint(labels, everyone.spread, [zero, zero, zero])
    assert hint.pair is None
    assert hint.sentence == "No method finds a region that matters: nothing to merge."


def test_channel_means_under_the_mean_fill_explains_to_no_weight_and_moments_do_not(photo):
    """Each hidden region takes its own mean colour, so the channel means never move: the score
    is the same for every sample. The mean squares move (a hidden region loses its texture)."""
    flat = lc.explain(photo, ChannelMeans(), segmentation="slic", n_segments=8, samples=100)
    assert not flat.weights.any()
    assert flat.trust.stability.reason == "unstable: no region carries any weight"
    live = lc.explain(photo, ChannelMoments(), segmentation="slic", n_segments=8, samples=100)
    assert np.abs(live.weights).max() > 1e-3


def test_a_flat_image_compared_across_explainers_says_no_method_finds_a_region():
    img = np.full((32, 32, 3), 128, np.uint8)
    labels = np.repeat(np.arange(4), 256).reshape(32, 32)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(3))
    model(torch.zeros(1, 3, 32, 32))  # materialise the lazy layer
    cmp = lc.compare_explainers(
        img, model, labels, ("lime", "occlusion", "rise", "kernelshap"),
        config=lc.ExplainConfig.from_flat(samples=100),
    )  # fmt: skip
    for a in cmp.attributions:
        assert not a.values.any(), a.method
    assert cmp.agreement.sentence.startswith("No method finds a region that matters")
    assert cmp.merge is not None and cmp.merge.pair is None


def test_the_report_of_a_flat_image_names_no_strongest_region(photo):
    """The report's explainers section and its side-by-side comparison say "none (every region
    0)" where the page would otherwise name region 0 as the strongest."""
    import dataclasses
    import re

    from limecraft_core.io.report import html_report

    img = np.full((48, 48, 3), 128, np.uint8)
    model = ChannelMoments()
    ex = lc.explain(img, model, segmentation="grid", n_segments=4, samples=60)
    assert not ex.weights.any()
    cmp = lc.compare_explainers(img, model, ex.segments, ("lime", "occlusion"), config=ex.config)
    ex = dataclasses.replace(ex, explainers=cmp)
    page = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html_report(image=img, explanation=ex)))
    assert page.count("strongest none (every region 0)") == 2, page
    assert "No method finds a region that matters" in page
    # the conclusion and the checks say there was nothing to fit, not that the fit is low
    assert "no region carries any weight: its score is the same for every sample" in page, page
    assert "Surrogate fit low" not in page and "R² 0.000" not in page, page
    assert "Surrogate fit nothing to fit the class 2 score is the same for every one of" in page
    assert "a merge needs |index| >= 0" not in page  # no scale: no bar to quote
    both = re.sub(
        r"\s+", " ", re.sub(r"<[^>]+>", " ", html_report(image=img, explanation=ex, comparison=ex))
    )
    assert "strongest region 0" not in both
