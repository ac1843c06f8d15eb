import numpy as np
import pytest

from limecraft_core import LimecraftError, boundaries, delta_map, heatmap, region_map, top_regions
from limecraft_core.render import POSITIVE, colorbar, diverging_colors


@pytest.fixture
def setup(quadrants):
    labels = np.kron(np.arange(4).reshape(2, 2), np.ones((16, 16), int)).astype(np.int32)
    return quadrants, labels, np.array([0.5, -0.25, 0.0, 0.1])


def test_outputs_are_uint8_images_of_the_input_size(setup):
    img, labels, w = setup
    for out in (
        boundaries(img, labels),
        top_regions(img, labels, w, k=1),
        region_map(img, labels),
        heatmap(img, labels, w).image,
        delta_map(img, labels, w).image,
    ):
        assert out.shape == (32, 32, 3) and out.dtype == np.uint8


def test_boundaries_are_drawn_between_regions(setup):
    img, labels, _ = setup
    out = boundaries(img, labels, color=(1, 0, 1))
    assert (out[5, 15] == [255, 0, 255]).all() or (out[5, 16] == [255, 0, 255]).all()
    assert not (out[5, 5] == [255, 0, 255]).all()


def test_heatmap_is_signed_and_symmetric(setup):
    img, labels, w = setup
    hm = heatmap(img, labels, w, alpha=1.0)
    assert hm.vmax == 0.5 and hm.vmin == -0.5
    assert hm.colorbar.shape == (24, 256, 3)
    pos, neg, zero = (
        hm.image[5, 5].astype(int),
        hm.image[5, 20].astype(int),
        hm.image[20, 5].astype(int),
    )
    assert pos[1] > pos[0]  # green for positive
    assert neg[0] > neg[1]  # magenta for negative
    assert abs(zero[0] - zero[1]) < 5  # white-ish for zero
    assert np.allclose(diverging_colors(np.array([0.0]), 1.0), 247 / 255, atol=1e-6)
    assert (colorbar()[:, 0] != colorbar()[:, -1]).any()


def test_top_regions_tint_only_the_top_k(setup):
    img, labels, w = setup
    out = top_regions(img, labels, w, k=1, alpha=1.0, show_boundaries=False).astype(int)
    assert np.allclose(out[8, 8], POSITIVE * 255, atol=1)  # region 0: top positive
    assert out[8, 24][0] > 200 and out[8, 24][1] < 40  # region 1: top negative, red
    dimmed = (img[24, 24] * 0.65).astype(int)
    assert np.abs(out[24, 24] - dimmed).max() <= 2  # region 3 is neither: only dimmed


def test_mismatched_inputs_are_refused(setup):
    img, labels, w = setup
    with pytest.raises(LimecraftError, match="values given for 4 regions"):
        heatmap(img, labels, w[:3])
    with pytest.raises(LimecraftError, match="do not match"):
        boundaries(img, labels[:10])


def test_id_positions_fall_inside_their_regions():
    from limecraft_core.render import id_positions

    labels = np.zeros((20, 20), np.int32)
    labels[5:15, 5:15] = 1  # a square inside a ring: the ring's centroid is outside it
    got = id_positions(labels)
    assert [r for r, _, _ in got] == [0, 1]
    for region, x, y in got:
        assert labels[int(y), int(x)] == region


def test_outline_masks_tints_only_the_masks_and_keeps_the_input():
    from limecraft_core.render import outline_masks

    img = np.full((10, 10, 3), 100, np.uint8)
    keep = img.copy()
    m = np.zeros((10, 10), bool)
    m[2:6, 2:6] = True
    out = outline_masks(img, [m], [(255, 0, 0)])
    assert np.array_equal(img, keep)
    assert (out[~m] == 100).all()
    assert tuple(out[2, 2]) == (255, 0, 0)  # the outline is the colour
    assert out[3, 3, 0] > 100 and out[3, 3, 1] < 100  # the inside is tinted
    with pytest.raises(LimecraftError):
        outline_masks(img, [m], [])


def test_softmax_is_a_distribution_and_stable():
    from limecraft_core.render import softmax

    p = softmax(np.array([1000.0, 1000.0, -1000.0]))
    assert np.isclose(p.sum(), 1) and np.allclose(p[:2], 0.5) and p[2] >= 0
