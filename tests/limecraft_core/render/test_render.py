import numpy as np
import pytest
from bad_files import good_image

from limecraft_core import LimecraftError, boundaries, delta_map, heatmap, region_map, top_regions
from limecraft_core.render import NEGATIVE, POSITIVE, colorbar, diverging_colors


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
    assert np.abs(zero - img[20, 5]).max() <= 1  # a zero region shows the image itself
    assert np.allclose(diverging_colors(np.array([0.0]), 1.0), 247 / 255, atol=1e-6)
    assert (colorbar()[:, 0] != colorbar()[:, -1]).any()


def test_top_regions_tint_only_the_top_k(setup):
    img, labels, w = setup
    out = top_regions(img, labels, w, k=1, alpha=1.0, show_boundaries=False).astype(int)
    assert np.allclose(out[8, 8], POSITIVE * 255, atol=1)  # region 0: top positive, full strength
    half_red = 0.5 * img[8, 24] + 0.5 * NEGATIVE * 255  # region 1: -0.25, half of max |w|
    assert np.abs(out[8, 24] - half_red).max() <= 1
    assert np.array_equal(out[16:, 16:], img[16:, 16:])  # region 3 is not in the top 1: untouched


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


# ----------------------------------------------------------------------------- weight overlay


def _stripes(n: int, width: int = 10, height: int = 20) -> np.ndarray:
    """(height, n * width) label map of n vertical stripes, ids 0..n-1 from left to right."""
    return np.repeat(np.arange(n, dtype=np.int32), width)[None].repeat(height, axis=0)


GREY = np.full((20, 60, 3), 128, np.uint8)


def _shift(out: np.ndarray, img: np.ndarray, labels: np.ndarray, region: int) -> float:
    """Mean colour change over a region's pixels."""
    return float(np.abs(out.astype(float) - img.astype(float))[labels == region].mean())


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tint_strength_grows_in_proportion_to_the_weight(sign):
    from limecraft_core.render import weight_overlay

    labels = _stripes(6)
    w = sign * np.array([0.1, 0.2, 0.4, 0.6, 0.8, 1.0])
    out = weight_overlay(GREY, labels, w, k=6, ids=False, outline=0, max_alpha=0.5)
    shifts = np.array([_shift(out, GREY, labels, r) for r in range(6)])
    assert (np.diff(shifts) > 0).all(), shifts
    assert np.allclose(shifts / shifts[-1], np.abs(w), atol=0.03)  # alpha ∝ |w| / max|w|
    hue = out[5, 55].astype(int)
    assert (hue[1] > hue[0]) if sign > 0 else (hue[0] > hue[1])  # green for, red against


def test_a_tiny_weight_is_not_drawn_like_a_large_one():
    from limecraft_core.render import weight_overlay

    labels = _stripes(3)[:, :30]
    img = GREY[:, :30]
    out = weight_overlay(img, labels, np.array([0.79, -0.06, 0.001]), ids=False)
    big, small = _shift(out, img, labels, 0), _shift(out, img, labels, 1)
    assert big > 4 * small > 0
    assert np.array_equal(out[labels == 2], img[labels == 2])  # under 5% of 0.79: untouched


def test_regions_under_the_threshold_are_left_alone_unless_asked():
    from limecraft_core.render import tinted_regions, weight_overlay

    labels = _stripes(4)[:, :40]
    img = GREY[:, :40]
    w = np.array([1.0, 0.04, -0.03, 0.06])
    out = weight_overlay(img, labels, w, ids=False)
    for r in (1, 2):
        assert np.array_equal(out[labels == r], img[labels == r]), r
    assert _shift(out, img, labels, 3) > 0
    assert tinted_regions(w).ids == (0, 3) and np.isclose(tinted_regions(w).threshold, 0.05)
    weak = weight_overlay(img, labels, w, ids=False, show_weak=True)
    assert all(_shift(weak, img, labels, r) > 0 for r in range(4))
    assert tinted_regions(w, min_share=0.5).ids == (0,)


def test_k_counts_each_side():
    from limecraft_core.render import tinted_regions, weight_overlay

    labels = _stripes(6)
    w = np.array([0.9, -0.8, 0.7, -0.6, 0.5, -0.4])
    chosen = tinted_regions(w, k=2)
    assert chosen.positive == (0, 2) and chosen.negative == (1, 3)
    assert chosen.ids == (0, 1, 2, 3)  # largest |weight| first
    out = weight_overlay(GREY, labels, w, k=2, ids=False)
    assert [_shift(out, GREY, labels, r) > 0 for r in range(6)] == [True] * 4 + [False] * 2
    assert tinted_regions(w, k=2, negative=False).ids == (0, 2)


def test_all_zero_or_missing_weights_tint_nothing():
    from limecraft_core.render import tinted_regions, weight_overlay

    labels = _stripes(2)[:, :20]
    assert tinted_regions(np.zeros(2)).ids == ()
    out = weight_overlay(GREY[:, :20], labels, np.array([np.nan, 0.0]))
    assert np.array_equal(out, GREY[:, :20])


def test_a_red_tag_with_a_positive_weight_stays_red_inside_a_green_outline():
    from limecraft_core.render import weight_overlay

    img = np.full((64, 64, 3), 150, np.uint8)
    img[20:44, 20:44] = (220, 20, 20)
    labels = np.zeros((64, 64), np.int32)
    labels[20:44, 20:44] = 1
    for long_side in (None, 256):
        out = weight_overlay(img, labels, np.array([0.01, 0.79]), long_side=long_side, ids=False)
        s = out.shape[0] // 64
        inside = out[(20 + 4) * s : (44 - 4) * s, (20 + 4) * s : (44 - 4) * s].reshape(-1, 3)
        r, g, b = inside.astype(float).mean(axis=0)
        assert r > 1.8 * g and r > 1.8 * b, (r, g, b)  # still red, not olive
        rim = out[20 * s, 32 * s].astype(int)  # on the region's outline
        assert rim[1] > rim[0] + 60, rim  # the sign: green


def test_upscaling_sizes_and_nearest_labels():
    from limecraft_core.render import weight_overlay

    labels = _stripes(6)
    out = weight_overlay(GREY, labels, np.linspace(-1, 1, 6), long_side=512, ids=False)
    assert out.shape == (171, 512, 3) and out.dtype == np.uint8
    tall = weight_overlay(GREY.transpose(1, 0, 2), labels.T, np.ones(6), long_side=300)
    assert tall.shape == (300, 100, 3)
    # stripe 0 (-1, red) and stripe 5 (+1, green), sampled well inside each stripe
    assert out[85, 40, 0] > out[85, 40, 1] and out[85, 470, 1] > out[85, 470, 0]
    small = weight_overlay(GREY, labels, np.ones(6), long_side=30, ids=False)
    assert small.shape == (10, 30, 3)


def test_ids_are_written_at_the_tinted_regions():
    from limecraft_core.render import id_positions, weight_overlay

    img = np.full((40, 80, 3), 128, np.uint8)
    labels = np.repeat(np.arange(2, dtype=np.int32), 40)[None].repeat(40, axis=0)
    w = np.array([0.5, 1.0])
    plain = weight_overlay(img, labels, w, long_side=320, ids=False).astype(int)
    named = weight_overlay(img, labels, w, long_side=320).astype(int)
    for region, x, y in id_positions(labels):
        cx, cy = int(x * 4), int(y * 4)
        patch = np.abs(named - plain)[cy - 6 : cy + 6, cx - 6 : cx + 6]
        assert patch.max() > 100, region  # dark text on a light box
    far = np.abs(named - plain)[:, :40]
    assert far.max() == 0  # nothing written away from the ids
    custom = weight_overlay(img, labels, w, long_side=320, names=["hand 1", "background"])
    assert not np.array_equal(custom, named)


def test_overlay_does_not_modify_its_inputs(setup):
    from limecraft_core.render import weight_overlay

    img, labels, w = setup
    keep = img.copy(), labels.copy(), w.copy()
    weight_overlay(img, labels, w, long_side=64)
    top_regions(img, labels, w)
    heatmap(img, labels, w)
    assert all(np.array_equal(a, b) for a, b in zip((img, labels, w), keep, strict=True))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"weights": np.ones(3)}, "3 values given for 4 regions"),
        ({"weights": np.ones((4, 1))}, "1-D array with one value per region"),
        ({"names": ["a", "b"]}, "one text per region: 2 names for 4 regions"),
        ({"names": "abcd"}, "one text per region: a single string"),
        ({"long_side": 3}, r"long_side must be in \[8, 20000\]"),
        ({"k": 0}, ">= 1"),
        ({"min_share": 2}, r"min_share must be in \[0.0, 1.0\]"),
        ({"max_alpha": -0.1}, r"max_alpha must be in \[0.0, 1.0\]"),
        ({"outline": 50}, r"outline must be in \[0, 20\]"),
        ({"vmax": 0}, "vmax"),
        ({"segments": np.zeros((32, 32))}, "integer region ids"),
        ({"segments": np.zeros((10, 10), int)}, "do not match"),
    ],
)
def test_overlay_bad_inputs_say_what_to_fix(setup, kwargs, match):
    from limecraft_core.render import weight_overlay

    img, labels, w = setup
    args = {"segments": labels, "weights": w} | kwargs
    with pytest.raises(LimecraftError, match=match):
        weight_overlay(img, args.pop("segments"), args.pop("weights"), **args)


def test_legend_shows_both_colours_and_the_threshold():
    from limecraft_core.render import overlay_legend

    leg = overlay_legend(512, class_label="circle", k=5, vmax=0.148)
    assert leg.dtype == np.uint8 and leg.shape[1] == 512 and 60 < leg.shape[0] < 300
    px = leg.reshape(-1, 3).astype(int)
    green = (px == np.round(POSITIVE * 255).astype(int)).all(axis=1)
    red = (px == np.round(NEGATIVE * 255).astype(int)).all(axis=1)
    assert green.sum() > 20 and red.sum() > 20  # the swatches' outlines in the overlay's colours
    # the ramp: its left end (under the threshold) untinted, its right end tinted
    ramp_rows = np.nonzero(np.abs(leg[:, 256, 0].astype(int) - leg[:, 256, 1]) > 15)[0]
    assert ramp_rows.size
    row = leg[ramp_rows[0]]
    assert abs(int(row[10, 0]) - int(row[10, 1])) < 3 and row[-12, 1] > row[-12, 0]
    wide = overlay_legend(1200, class_label="a very long class label, with a comma" * 3)
    assert wide.shape[1] == 1200 and wide.shape[0] > leg.shape[0]
    narrow = overlay_legend(200, class_label="circle", show_weak=True)
    assert narrow.shape[1] == 200
    with pytest.raises(LimecraftError, match=r"width must be in \[120, 20000\]"):
        overlay_legend(50)


def test_stack_vertically_pads_to_the_widest():
    from limecraft_core.render import stack_vertically

    a = np.zeros((10, 30, 3), np.uint8)
    b = np.zeros((5, 20, 3), np.uint8)
    out = stack_vertically(a, b, gap=2)
    assert out.shape == (17, 30, 3)
    assert (out[10:12] == 255).all() and (out[12:, 20:] == 255).all() and (out[12:, :20] == 0).all()
    with pytest.raises(LimecraftError, match=r"picture 2 must be an \(H, W, 3\) uint8 array"):
        stack_vertically(a, b.astype(float))
    with pytest.raises(LimecraftError, match="at least one picture"):
        stack_vertically()


def _saturation(rgb: np.ndarray) -> np.ndarray:
    rgb = rgb.astype(float)
    hi, lo = rgb.max(axis=-1), rgb.min(axis=-1)
    return np.where(hi > 0, (hi - lo) / np.maximum(hi, 1), 0.0)


@pytest.mark.parametrize("picture", ["photo", "grey"])
def test_heatmap_and_delta_map_read_as_colour_not_grey(photo, picture):
    if picture == "grey":  # like the demo images: grey noise, nearly no colour of its own
        noise = np.random.default_rng(1).integers(-25, 26, photo.shape[:2])[..., None]
        photo = np.clip(140 + noise, 0, 255).astype(np.uint8).repeat(3, axis=2)
    labels = np.kron(np.arange(12).reshape(3, 4), np.ones((32, 32), int)).astype(np.int32)
    w = np.random.default_rng(0).normal(0, 0.02, 12)
    w[5], w[6] = 0.3, -0.2  # a typical explanation: a few strong regions, many near zero
    base = _saturation(photo)
    for draw in (heatmap, delta_map):
        out = draw(photo, labels, w).image
        sat = _saturation(out)
        top = labels == 5
        gain = 0.05 if picture == "photo" else 0.4  # the cat is already orange
        assert sat[top].mean() > base[top].mean() + gain, draw.__name__
        assert sat.mean() > 0.8 * base.mean()  # the rest keeps its colours: no grey wash
        weak = labels == int(np.argmin(np.abs(w)))
        assert np.abs(out[weak].astype(int) - photo[weak]).mean() < 8  # near zero: the photo


def test_heatmap_draws_missing_values_as_neutral():
    """A restored explanation may hold null deltas (NaN): drawn neutral, never a crash."""
    img = good_image()
    lab = np.repeat(np.arange(4), img.shape[0] * img.shape[1] // 4).reshape(img.shape[:2])
    hm = delta_map(img, lab, np.array([np.nan, 1.0, -1.0, 0.0]))
    zero = delta_map(img, lab, np.array([0.0, 1.0, -1.0, 0.0]))
    assert np.array_equal(hm.image, zero.image) and hm.vmax == 1.0
