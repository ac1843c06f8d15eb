"""Transplant: a region pasted into other images, and the insertion test."""

from __future__ import annotations

import numpy as np
import pytest

import limecraft_core as lc
from limecraft_core.edits.transplant import CAUSE_MARGIN, null_source


def image(h, w, value):
    return np.full((h, w, 3), value, np.uint8)


def test_relative_pastes_at_the_same_place_and_scale():
    src = image(100, 100, 10)
    src[20:40, 50:70] = 200
    mask = np.zeros((100, 100), bool)
    mask[20:40, 50:70] = True
    t = lc.transplant(src, mask, image(200, 200, 0))
    assert t.mask.sum() == 40 * 40 and not t.clipped
    assert t.mask[40:80, 100:140].all()
    assert (t.image[t.mask] == 200).all() and (t.image[~t.mask] == 0).all()


def test_absolute_keeps_the_pixels_and_clips():
    src = image(100, 100, 10)
    mask = np.zeros((100, 100), bool)
    mask[60:90, 60:90] = True
    t = lc.transplant(src, mask, image(80, 80, 0), place="absolute")
    assert t.clipped and t.mask.sum() == 20 * 20
    assert t.mask[60:80, 60:80].all()
    with pytest.raises(lc.LimecraftError, match="falls outside the target"):
        lc.transplant(src, mask, image(50, 50, 0), place="absolute")


def test_inputs_are_not_mutated_and_bad_input_is_a_sentence():
    src, tgt = image(32, 32, 5), image(32, 32, 9)
    mask = np.ones((32, 32), bool)
    a, b = src.copy(), tgt.copy()
    lc.transplant(src, mask, tgt)
    assert np.array_equal(src, a) and np.array_equal(tgt, b)
    with pytest.raises(lc.LimecraftError, match="same size"):
        lc.transplant(src, np.ones((10, 10), bool), tgt)
    with pytest.raises(lc.LimecraftError, match="empty"):
        lc.transplant(src, np.zeros((32, 32), bool), tgt)
    with pytest.raises(lc.LimecraftError, match="uint8"):
        lc.transplant(src, mask, np.zeros((32, 32)))
    with pytest.raises(lc.LimecraftError, match="place"):
        lc.transplant(src, mask, tgt, place="middle")


def red_share(img: np.ndarray) -> np.ndarray:
    """A toy model over two classes: 'red' with the share of pure-red pixels, else 'other'."""
    p = float((img[..., 0] > 200).mean())
    return np.array([1 - p, p])


def test_the_insertion_test_counts_gains_and_flips():
    src = image(50, 50, 0)
    src[:, :40, 0] = 255  # 80% red
    mask = np.zeros((50, 50), bool)
    mask[:, :40] = True
    targets = [image(50, 50, 0), image(100, 100, 0), image(50, 50, 0)]
    targets[2][:, :, 0] = 255  # already red
    result, pasted = lc.insertion_test(src, mask, targets, red_share, 1)
    assert len(pasted) == 3
    np.testing.assert_allclose(result.before, [0, 0, 1])
    np.testing.assert_allclose(result.after, [0.8, 0.8, 1])
    assert result.flips == 2 and result.flip_rate == 1.0
    assert result.mean_gain == pytest.approx(1.6 / 3)
    assert "turned 2 of 2 into red" in result.sentence("red")
    with pytest.raises(lc.LimecraftError, match="at least one image"):
        lc.insertion_test(src, mask, [], red_share, 1)
    with pytest.raises(lc.LimecraftError, match="not one of the model's 2 classes"):
        lc.insertion_test(src, mask, targets[:1], red_share, 5)


def gray_with_red_square(h: int = 60, w: int = 60) -> tuple[np.ndarray, np.ndarray]:
    src = np.full((h, w, 3), 120, np.uint8)
    mask = np.zeros((h, w), bool)
    mask[10:40, 5:55] = True
    src[mask] = (255, 0, 0)
    return src, mask


def test_the_null_patch_has_the_regions_shape_area_and_place_not_its_content():
    src, mask = gray_with_red_square()
    rng = np.random.default_rng(0)
    for _ in range(20):
        null = null_source(src, mask, rng)
        assert null.shape == src.shape and sorted(null.reshape(-1, 3).tolist()) == sorted(
            src.reshape(-1, 3).tolist()
        )  # a shift of the same pixels
        assert not (null[mask] == (255, 0, 0)).all(axis=1).any()  # clear of the red square
    assert np.array_equal(src, gray_with_red_square()[0])  # the source is not changed


def test_the_insertion_verdict_follows_the_margin_over_the_null():
    """A red square that drives 'red': it beats a same-size gray patch (causes); a region no
    different from the rest of its image: the null rises as much (none); a small rise over the
    null that turns nothing: weak."""
    targets = [np.full((60, 60, 3), v, np.uint8) for v in (30, 90, 150)]
    src, mask = gray_with_red_square()
    result, _ = lc.insertion_test(src, mask, targets, red_share, 1)
    assert result.null_draws == 3 and result.null_after is not None
    np.testing.assert_allclose(result.null_after, 0)  # gray patches are never red
    assert result.finding == "causes"
    assert "(a same-size patch of the same image at the same place: +0.000)" in result.sentence(
        "red"
    )
    assert result.conclusion("red").startswith("It causes red in these images")

    all_red = np.zeros((60, 60, 3), np.uint8)
    all_red[..., 0] = 255
    same, _ = lc.insertion_test(all_red, mask, targets, red_share, 1)
    np.testing.assert_allclose(same.margin, 0)  # the patch is as red as the region
    assert same.finding == "none"
    assert same.conclusion("red").startswith("It did not raise red in these images")

    def faint(img: np.ndarray) -> np.ndarray:  # 'red' rises by a tenth of the red share
        p = 0.1 * float((img[..., 0] > 200).mean())
        return np.array([1 - p, p])

    weak, _ = lc.insertion_test(src, mask, targets, faint, 1)
    assert weak.flips == 0 and 0 < weak.margin.mean() < CAUSE_MARGIN
    assert weak.finding == "weak"
    assert weak.conclusion("red").startswith("A weak, selective effect")

    # no null: the rise is compared with nothing, and the sentence says no patch
    plain, _ = lc.insertion_test(src, mask, targets, red_share, 1, null_draws=0)
    assert plain.null_after is None and "patch" not in plain.sentence("red")
    assert plain.finding == "causes" and "than nothing" in plain.conclusion("red")
