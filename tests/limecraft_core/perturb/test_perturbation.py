import re

import numpy as np
import pytest
import torch
from scipy import ndimage as ndi
from scipy.stats import binom, chi2
from toys import ChannelMeans, Recorder

from limecraft_core import (
    SEGMENTERS,
    LimecraftError,
    compose_batch,
    compose_regions,
    explain,
    make_fill,
    perturbed_images,
    sample_masks,
    segment,
)


@pytest.mark.parametrize("scheme", ["bernoulli", "stratified", "antithetic", "glime"])
def test_masks_shape_row0_and_seed(scheme):
    a = sample_masks(30, 200, scheme=scheme, rng=5)
    b = sample_masks(30, 200, scheme=scheme, rng=5)
    c = sample_masks(30, 200, scheme=scheme, rng=6)
    assert a.masks.shape == (200, 30) and a.masks.dtype == bool
    assert a.masks[0].all()
    assert np.array_equal(a.masks, b.masks) and np.array_equal(a.weights, b.weights)
    assert not np.array_equal(a.masks, c.masks)


@pytest.mark.parametrize("scheme", ["bernoulli", "stratified", "antithetic", "glime"])
@pytest.mark.parametrize("k", [1, 2, 7, 60])
def test_every_region_is_both_hidden_and_kept(scheme, k):
    for seed in range(20):
        z = sample_masks(k, 50, scheme=scheme, rng=seed).masks[1:]
        assert z.any(axis=0).all() and (~z).any(axis=0).all()


def test_bernoulli_p_is_respected():
    z = sample_masks(50, 4001, p=0.8, rng=0).masks[1:]
    assert abs(z.mean() - 0.8) < 0.01


def test_stratified_counts_are_uniform_and_weights_unbiased():
    k = 12
    s = sample_masks(k, 20001, scheme="stratified", rng=0)
    counts = np.bincount(s.masks[1:].sum(axis=1), minlength=k + 1)
    assert counts.min() > 0.8 * counts.mean()
    # importance weights make the sample equivalent to Bernoulli(0.5): their mean is 1
    assert abs(s.weights[1:].mean() - 1) < 0.05


def test_antithetic_rows_come_in_complementary_pairs():
    z = sample_masks(9, 101, scheme="antithetic", rng=0).masks[1:]
    flips = (z[0::2] != ~z[1::2]).sum()
    assert flips <= 9  # at most the constant-column guard touched a few entries
    # every even prefix is balanced: each region is on in exactly half of its rows
    assert (z[:20].sum(axis=0) == 10).sum() >= 7


def test_bad_sampling_values():
    with pytest.raises(LimecraftError, match="one of"):
        sample_masks(5, 10, scheme="sobol")
    with pytest.raises(LimecraftError, match="samples must be in"):
        sample_masks(5, 1)
    with pytest.raises(LimecraftError, match=r"p = 0\.5"):
        sample_masks(5, 10, scheme="antithetic", p=0.3)


@pytest.mark.parametrize("fill", ["mean", "gray", "black", "blur", "inpaint-each", "#ff8000"])
def test_fills_have_the_image_shape_and_range(photo, fill):
    labels = segment(photo, "slic", n_segments=20)
    before = photo.copy()
    f = make_fill(photo, labels, fill)
    assert f.shape == photo.shape and f.dtype == np.float32
    assert 0 <= f.min() and f.max() <= 1
    assert np.array_equal(before, photo)


def test_mean_and_constant_fills_are_what_they_say(quadrants):
    labels = np.zeros((32, 32), np.int32)
    labels[:, 16:] = 1
    f = make_fill(quadrants, labels, "mean")
    img = quadrants / 255.0
    assert np.allclose(f[0, 0], img[:, :16].reshape(-1, 3).mean(0), atol=1e-5)
    assert np.allclose(f[5, 20], img[:, 16:].reshape(-1, 3).mean(0), atol=1e-5)
    assert np.allclose(make_fill(quadrants, labels, "#ff8000")[3, 3], [1, 128 / 255, 0])
    assert np.allclose(make_fill(quadrants, labels, "gray"), 0.5)


def test_inpaint_fills_a_hole_from_its_surroundings():
    img = np.zeros((40, 40, 3), np.float32)
    img[:, :20] = (1.0, 0, 0)  # red left half
    img[:, 20:] = (0, 0, 1.0)  # blue right half
    labels = np.zeros((40, 40), np.int32)
    labels[15:25, 5:12] = 1  # a hole inside the red half
    labels[15:25, 28:35] = 2  # a hole inside the blue half
    f = make_fill(img, labels, "inpaint-each")
    g = perturbed_images(img, labels, np.array([[True, False, False]]), "inpaint")[0]
    for fill in (f, g):
        assert fill[20, 8, 0] > 0.9 and fill[20, 8, 2] < 0.1
        assert fill[20, 31, 2] > 0.9 and fill[20, 31, 0] < 0.1


def test_bad_fill_is_refused(photo):
    with pytest.raises(LimecraftError, match="fill must be one of"):
        make_fill(photo, np.zeros(photo.shape[:2], int), "purple")


def test_compose_batch_is_where_of_mask_over_labels(quadrants):
    labels = torch.tensor(np.kron(np.arange(4).reshape(2, 2), np.ones((16, 16), int)))
    img = torch.rand(3, 32, 32)
    fill = torch.zeros(3, 32, 32)
    masks = torch.tensor([[True, False, True, False], [False, False, False, True]])
    out = compose_batch(img, fill, labels, masks)
    expected = torch.where(masks[:, labels][:, None], img, fill)
    assert torch.allclose(out, expected, atol=1e-7)
    assert (out[0, :, :16, 16:] == 0).all() and (out[1, :, 16:, 16:] != 0).any()


def test_perturbed_images_match_masks(quadrants):
    labels = np.kron(np.arange(4).reshape(2, 2), np.ones((16, 16), int))
    masks = np.array([[True, True, True, True], [False, True, True, False]])
    out = perturbed_images(quadrants, labels, masks, fill="black")
    assert out.shape == (2, 32, 32, 3)
    assert np.allclose(out[0], quadrants / 255.0, atol=1e-6)
    assert (out[1][:16, :16] == 0).all() and (out[1][16:, 16:] == 0).all()


def _check_every_region_hidden_in_model_input(image, regions_kwargs, fill="#00ff00"):
    """Run explain with a recording model and check, at the pixel level, that every region
    was shown hidden (all its pixels = fill) and kept (its pixels = image) in some sample."""
    model = Recorder(ChannelMeans())
    res = explain(image, model, samples=60, fill=fill, compute_deltas=False, **regions_kwargs)
    seen = torch.cat(model.batches).numpy().transpose(0, 2, 3, 1)  # (N, H, W, 3)
    assert len(seen) == 60
    img = image / 255.0
    green = np.array([0, 1, 0], np.float32)
    for k in range(res.n_regions):
        m = res.segments == k
        hidden = np.all(np.abs(seen[:, m] - green) < 1e-6, axis=(1, 2))
        kept = np.all(np.abs(seen[:, m] - img[m]) < 1e-5, axis=(1, 2))
        assert hidden[1:].any(), f"region {k} is never hidden"
        assert kept[1:].any(), f"region {k} is never kept"
    return res


@pytest.mark.parametrize("method", SEGMENTERS)
def test_every_region_is_perturbed_for_every_method(photo, method):
    res = _check_every_region_hidden_in_model_input(
        photo, {"segmentation": method, "n_segments": 25}
    )
    assert res.n_regions == res.segments.max() + 1


def test_every_region_is_perturbed_with_handcrafted_regions(photo):
    a = np.zeros(photo.shape[:2], bool)
    a[10:50, 20:80] = True
    b = np.zeros(photo.shape[:2], bool)
    b[40:90, 60:120] = True
    res = _check_every_region_hidden_in_model_input(
        photo, {"regions_mask": [a, b], "inner_segments": [None, 4], "segmentation": "slic"}
    )
    assert res.region_keys[0] == "hand:0"


def test_slic_start_label_bug_of_lime_is_absent(photo):
    # lime's SLIC starts at 1 and its last region is never perturbed; ours start at 0, no gaps.
    labels = segment(photo, "slic", n_segments=30)
    regions = compose_regions(photo, labels > 1000)  # no handcrafted pixels: all automatic
    assert labels.min() == 0 and regions.labels.min() == 0


def test_inpaint_keeps_known_pixels_and_fills_the_hole():
    from limecraft_core import inpaint

    img = np.zeros((60, 80, 3), np.uint8)
    img[:, :40] = (255, 0, 0)
    img[:, 40:] = (0, 0, 255)
    hole = np.zeros((60, 80), bool)
    hole[20:40, 10:25] = True
    out = inpaint(img, hole)
    assert np.allclose(out[~hole], img[~hole] / 255.0, atol=1e-6)
    assert out[30, 17, 0] > 0.9 and out[30, 17, 2] < 0.1
    assert np.array_equal(inpaint(img, np.zeros((60, 80), bool)), img / np.float32(255))


# --------------------------------------------------------------------------- union inpaint


def _striped_object(h=48, w=64, n_parts=5):
    """Black/white stripes on an object over a smooth background; the object is split into
    ``n_parts`` vertical regions (ids 1..n_parts), the background is region 0."""
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([0.3 + 0.4 * xx / w, 0.5 + 0.2 * yy / h, 0.6 - 0.3 * xx / w], -1)
    obj = (abs(yy - h / 2) < h / 4) & (abs(xx - w / 2) < w / 3)
    img[obj] = ((xx[obj] // 3) % 2)[:, None].astype(float)  # stripes 3 px wide
    labels = np.zeros((h, w), np.int64)
    x0, x1 = xx[obj].min(), xx[obj].max() + 1
    part = np.minimum((xx - x0) * n_parts // (x1 - x0), n_parts - 1) + 1
    labels[obj] = part[obj]
    return img.astype(np.float32), labels, obj


def test_inpaint_is_a_per_mask_fill_with_no_fill_image(photo):
    """No NaN marker: the table says inpaint is per-mask, scene_fill hands the Fill itself to
    the scorer, and make_fill says why there is no one image (never a fall-through)."""
    from limecraft_core.perturb import FILLS, Fill, scene_fill

    labels = segment(photo, "slic", n_segments=20)
    assert FILLS["inpaint"].is_per_mask and not FILLS["inpaint-each"].is_per_mask
    got = scene_fill(photo / np.float32(255), labels, "inpaint")
    assert isinstance(got, Fill) and got is FILLS["inpaint"]
    with pytest.raises(LimecraftError, match="depends on each perturbation's mask"):
        make_fill(photo, labels, "inpaint")
    static = scene_fill(photo / np.float32(255), labels, "mean")
    assert isinstance(static, torch.Tensor) and static.shape == (3, *photo.shape[:2])
    assert torch.isfinite(static).all()


def test_an_unknown_fill_is_an_error_everywhere(photo):
    """Every check reads one table and says the same: the engine, the settings, the edits."""
    from limecraft_core import Edit, ExplainConfig
    from limecraft_core.perturb import FILLS, Fill, fill_of

    want = re.escape(f"must be one of {', '.join(FILLS)} or a colour like #808080; got 'purple'")
    with pytest.raises(LimecraftError, match=want):
        fill_of("purple")
    with pytest.raises(LimecraftError, match=want):
        ExplainConfig.from_flat(fill="purple")
    with pytest.raises(LimecraftError, match="fill must be one of inpaint, mean, gray, black or"):
        Edit("remove", 0, fill="blur")
    with pytest.raises(ValueError, match="exactly one of"):
        Fill("both", "static and per-mask", static=lambda *a: a[0], per_mask=lambda *a: a[0])


@pytest.mark.parametrize("expand", [0, 2])
def test_union_inpaint_does_not_read_the_hidden_pixels(expand):
    img, labels, obj = _striped_object()
    hide_all = np.array([[True, False, False, False, False, False]])  # the whole object hidden
    recoloured = img.copy()
    recoloured[obj] = np.random.default_rng(0).random((obj.sum(), 3))
    union = [
        perturbed_images(x, labels, hide_all, "inpaint", expand=expand)[0]
        for x in (img, recoloured)
    ]
    each = [
        perturbed_images(x, labels, hide_all, "inpaint-each", expand=expand)[0]
        for x in (img, recoloured)
    ]
    assert np.array_equal(union[0], union[1])  # the hidden pixels' own values never show
    assert np.abs(each[0] - each[1])[obj].max() > 0.05  # per region: the neighbours leak
    # kept pixels, outside the expansion, are the image exactly
    kept = ~ndi.binary_dilation(obj, np.ones((3, 3)), iterations=expand) if expand else ~obj
    assert np.array_equal(union[0][kept], img[kept])
    assert 0 <= union[0].min() and union[0].max() <= 1


def test_union_inpaint_is_smooth_and_nothing_kept_shows_the_mean():
    img, labels, obj = _striped_object()
    out = perturbed_images(img, labels, np.array([[True] + [False] * 5, [False] * 6]), "inpaint")
    # filled from the smooth background alone: no stripes in the hole
    rows = obj.any(axis=1).sum()
    hole = out[0][obj].reshape(rows, -1, 3)  # the object is a rectangle
    assert max(np.abs(np.diff(hole, axis=a)).max() for a in (0, 1)) < 0.05
    assert np.allclose(out[1], img.mean(axis=(0, 1)), atol=1e-6)


@pytest.mark.parametrize("expand", [0, 3])
def test_union_inpaint_batches_are_the_displayed_images(photo, expand):
    from limecraft_core import Classifier
    from limecraft_core.perturb import FILLS, run_masks

    labels = segment(photo, "slic", n_segments=20)
    k = int(labels.max()) + 1
    masks = sample_masks(k, 11, rng=0).masks
    want = perturbed_images(photo, labels, masks, "inpaint", expand=expand)
    model = Recorder(ChannelMeans())
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))  # noqa: E731
    img, fill = t(photo / np.float32(255)), FILLS["inpaint"]
    lab = torch.from_numpy(labels.astype(np.int64))
    run_masks(Classifier(model, device="cpu"), img, fill, lab, masks, 4, expand=expand)
    seen = torch.cat(model.batches).numpy().transpose(0, 2, 3, 1)
    assert np.array_equal(seen, want)
    # a scorer that composes batch by batch (the Ray replica, the work queue): the same pixels
    m = torch.from_numpy(masks)
    direct = compose_batch(img, fill, lab, m, expand=expand)
    assert torch.equal(direct, torch.from_numpy(want).permute(0, 3, 1, 2))


def test_explain_with_union_inpaint_on_a_tiny_model(photo):
    from limecraft_core import Classifier
    from serving.workqueue import QueuedScorer, WorkQueue

    labels = segment(photo, "slic", n_segments=15)
    model = Recorder(ChannelMeans())
    kw = dict(segments=labels, samples=40, fill="inpaint", compare_fills=["inpaint-each"])
    res = explain(photo, model, **kw)
    assert np.isfinite(res.weights).all()
    seen = torch.cat(model.batches)
    assert torch.isfinite(seen).all() and 0 <= seen.min() and seen.max() <= 1
    assert res.trust.fills.fills == ["inpaint", "inpaint-each"]
    # the shared work queue composes through compose_batch too: the same scores
    queue = WorkQueue()
    try:
        clf = Classifier(ChannelMeans(), device="cpu")
        queued = explain(photo, QueuedScorer(clf, queue), **kw)
    finally:
        queue.shutdown()
    assert np.allclose(queued.weights, res.weights, atol=1e-6)


def test_a_fill_function_must_not_return_nan(quadrants):
    labels = np.zeros((32, 32), int)
    with pytest.raises(LimecraftError, match="finite"):
        make_fill(quadrants, labels, lambda img, lab: np.full(img.shape, np.nan, np.float32))


# --------------------------------------------------------------------------- glime sampling


def test_glime_counts_follow_the_kernel_weighted_binomial():
    from limecraft_core.perturb.masks import _glime_counts
    from limecraft_core.surrogate import cosine_distance, make_kernel

    k, n = 12, 40001
    q = _glime_counts(k, 0.5, 0.25)
    ks = np.arange(k + 1)
    d = cosine_distance(ks[:, None] > np.arange(k)[None])
    expected = binom.pmf(ks, k, 0.5) * make_kernel(0.25)(d)
    assert np.allclose(q, expected / expected.sum())
    counts = np.bincount(
        sample_masks(k, n, scheme="glime", rng=0).masks[1:].sum(1), minlength=k + 1
    )
    ok = q * (n - 1) >= 5  # chi-square on the cells with enough expected counts
    stat = (((counts - q * (n - 1)) ** 2) / (q * (n - 1)))[ok].sum()
    assert stat < chi2.ppf(0.999, ok.sum() - 1)
    # a uniform kernel is plain Bernoulli(p) counts, with unit weights
    s = sample_masks(k, 2001, scheme="glime", p=0.3, kernel_width="uniform", rng=0)
    assert np.allclose(_glime_counts(k, 0.3, "uniform"), binom.pmf(ks, k, 0.3))
    assert np.allclose(s.weights, 1.0)


@pytest.mark.parametrize("width", [0.1, 0.25, 0.5])
def test_glime_weights_times_the_kernel_are_constant(width):
    from limecraft_core.surrogate import cosine_distance, make_kernel

    s = sample_masks(30, 3000, scheme="glime", p=0.5, kernel_width=width, rng=1)
    prod = make_kernel(width)(cosine_distance(s.masks[1:])) * s.weights[1:]
    assert np.allclose(prod, prod[0], rtol=1e-9)
    assert abs(s.weights[1:].mean() - 1) < 0.1  # Binom / q has mean 1


def test_glime_weighted_fit_converges_to_bernoullis():
    """Both fits target the Bernoulli(p) kernel-weighted objective: with enough samples they
    agree with its exact solution (every mask enumerated), interactions included."""
    from limecraft_core.surrogate import cosine_distance, fit_ridge, make_kernel

    k, width, p = 6, 0.3, 0.5
    beta = np.array([1.0, -2.0, 0.5, 3.0, 0.0, -1.0])
    f = lambda z: z @ beta + 2.0 * z[:, 0] * z[:, 3] - z[:, 1] * z[:, 2] * z[:, 5]  # noqa: E731
    kern = make_kernel(width)
    every = (np.arange(2**k)[:, None] >> np.arange(k)) & 1 == 1
    prob = p ** every.sum(1) * (1 - p) ** (k - every.sum(1))
    exact = fit_ridge(every, f(every)[:, None], prob * kern(cosine_distance(every)), alpha=1e-9)
    for scheme in ("bernoulli", "glime"):
        s = sample_masks(k, 60000, scheme=scheme, p=p, kernel_width=width, rng=2)
        w = kern(cosine_distance(s.masks)) * s.weights
        got = fit_ridge(s.masks, f(s.masks)[:, None], w, alpha=1e-9)
        assert np.allclose(got.coef, exact.coef, atol=0.05), scheme
    # a purely linear model is recovered exactly by a glime sample
    s = sample_masks(k, 200, scheme="glime", kernel_width=width, rng=3)
    lin = fit_ridge(s.masks, (s.masks @ beta)[:, None], s.weights, alpha=1e-9)
    assert np.allclose(lin.coef[0], beta, atol=1e-6)


def test_glime_draws_with_the_surrogates_kernel_width():
    from limecraft_core._stages import plan_samples
    from limecraft_core.config import ExplainConfig
    from limecraft_core.surrogate import cosine_distance, make_kernel

    cfg = ExplainConfig.from_flat({"sampling": "glime", "kernel_width": 0.15, "samples": 300})
    main = plan_samples(20, cfg).main
    prod = make_kernel(0.15)(cosine_distance(main.masks[1:])) * main.weights[1:]
    assert np.allclose(prod, prod[0])
    with pytest.raises(LimecraftError, match="kernel_width"):
        sample_masks(5, 10, scheme="glime", kernel_width=-1)


def test_a_toy_fill_plugs_in_through_the_table_alone(photo, monkeypatch):
    """Adding a fill is one entry in FILLS (docs/architecture.md, "Where to add"): the settings
    accept it, the engine composes it, and a per-mask toy that hides with black explains exactly
    as the static black fill does, as does a static toy grey as gray."""
    from limecraft_core import ExplainConfig
    from limecraft_core.perturb import FILLS, Fill

    def black_per_mask(image, keep, out):
        return torch.mul(image.expand(keep.shape[0], -1, -1, -1), keep, out=out)

    monkeypatch.setitem(
        FILLS, "toy-black", Fill("toy-black", "black, per mask", per_mask=black_per_mask)
    )
    grey = lambda img, labels, sigma: np.full(img.shape, 0.5, np.float32)  # noqa: E731
    monkeypatch.setitem(FILLS, "toy-grey", Fill("toy-grey", "grey, static", grey))
    assert ExplainConfig.from_flat(fill="toy-black").fill.fill == "toy-black"
    labels = segment(photo, "slic", n_segments=12)
    kw = dict(segments=labels, samples=60, seed=3, compute_deltas=False, early_stop=None)
    for toy, builtin in (("toy-black", "black"), ("toy-grey", "gray")):
        got = explain(photo, ChannelMeans(), fill=toy, **kw)
        want = explain(photo, ChannelMeans(), fill=builtin, **kw)
        np.testing.assert_allclose(got.weights, want.weights, rtol=1e-5, atol=1e-7)
        assert got.config.fill.fill == toy
