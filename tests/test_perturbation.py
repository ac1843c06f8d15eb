import numpy as np
import pytest
import torch
from toys import ChannelMeans, Recorder

from limecraft_core import (
    METHODS,
    LimecraftError,
    compose_batch,
    compose_regions,
    explain,
    make_fill,
    perturbed_images,
    sample_masks,
    segment,
)


@pytest.mark.parametrize("scheme", ["bernoulli", "stratified", "antithetic"])
def test_masks_shape_row0_and_seed(scheme):
    a = sample_masks(30, 200, scheme=scheme, rng=5)
    b = sample_masks(30, 200, scheme=scheme, rng=5)
    c = sample_masks(30, 200, scheme=scheme, rng=6)
    assert a.masks.shape == (200, 30) and a.masks.dtype == bool
    assert a.masks[0].all()
    assert np.array_equal(a.masks, b.masks) and np.array_equal(a.weights, b.weights)
    assert not np.array_equal(a.masks, c.masks)


@pytest.mark.parametrize("scheme", ["bernoulli", "stratified", "antithetic"])
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


@pytest.mark.parametrize("fill", ["mean", "gray", "black", "blur", "inpaint", "#ff8000"])
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
    f = make_fill(img, labels, "inpaint")
    assert f[20, 8, 0] > 0.9 and f[20, 8, 2] < 0.1
    assert f[20, 31, 2] > 0.9 and f[20, 31, 0] < 0.1


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


@pytest.mark.parametrize("method", METHODS)
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
