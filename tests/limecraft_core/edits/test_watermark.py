"""The ImageNet-W watermark edit: the package's exact pixels at its sizes, the mask, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from imagenet_w import AddWatermark
from PIL import Image

import limecraft_core as lc
from limecraft_core.edits.watermark import watermark_font_size


def photo(h: int, w: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("size", [224, 384])
def test_the_pixels_are_the_packages_at_its_sizes(size):
    img = photo(size, size)
    ours = lc.add_watermark(img)
    theirs = np.asarray(AddWatermark(size)(Image.fromarray(img)))
    assert np.array_equal(ours.image, theirs)
    assert ours.font_size == {224: 36, 384: 62}[size]


def test_a_non_square_image_scales_by_its_shorter_side():
    img = photo(300, 500)
    ours = lc.add_watermark(img)
    assert ours.font_size == int(300 / 6.22) == watermark_font_size(300, 500)
    # the package with the shorter side as its size draws the same pixels
    assert np.array_equal(ours.image, np.asarray(AddWatermark(300)(Image.fromarray(img))))
    top, left, bottom, _ = ours.box
    assert left == pytest.approx(0.01 * 500, abs=3) and top >= int(0.4 * 300) - 2
    assert bottom - top <= ours.font_size * 1.5


def test_opacity_and_text_size_are_the_packages_parameters():
    img = photo(224, 224, 1)
    ours = lc.add_watermark(img, opacity=1.0)
    theirs = np.asarray(AddWatermark(224, opacity=1.0)(Image.fromarray(img)))
    assert np.array_equal(ours.image, theirs)
    big = lc.add_watermark(img, font_size=60)
    assert big.font_size == 60 and big.mask.sum() > ours.mask.sum()


def test_the_mask_is_where_the_text_is_and_the_same_at_every_opacity():
    img = np.zeros((224, 224, 3), np.uint8)
    half, faint = lc.add_watermark(img), lc.add_watermark(img, opacity=0.05)
    assert np.array_equal(half.mask, faint.mask)
    changed = (half.image != img).any(2)
    assert np.array_equal(changed, half.mask & (half.alpha > 0)) or changed.sum() <= half.mask.sum()
    assert changed[half.mask].mean() > 0.95  # on black, every covered pixel brightens
    top, left, bottom, right = half.box
    assert not half.mask[:top].any() and not half.mask[bottom:].any()
    assert not half.mask[:, :left].any() and not half.mask[:, right:].any()
    assert half.box_mask().sum() == (bottom - top) * (right - left)
    grown = half.grown_mask(2)
    assert grown[half.mask].all() and grown.sum() > half.mask.sum()


def test_watermark_mask_needs_no_image():
    m = lc.watermark_mask(224, 224)
    assert m.shape == (224, 224) and m.dtype == bool
    assert np.array_equal(m, lc.add_watermark(photo(224, 224)).grown_mask(2))
    box = lc.watermark_mask(224, 224, box=True)
    assert box.sum() >= m.sum() * 0.9 and box[m].mean() > 0.8


def test_the_edit_is_reversible_like_every_edit():
    img = photo(224, 224, 2)
    labels = np.zeros((224, 224), np.int32)
    labels[:, 112:] = 1
    edit = lc.Edit("watermark", 0)
    assert edit.opacity == 0.5 and edit.text_size == 0
    out = lc.apply_edits(img, labels, [edit])
    assert np.array_equal(out.image, lc.add_watermark(img).image)
    assert np.array_equal(out.labels, labels) and out.changed.any()
    assert np.array_equal(lc.apply_edits(img, labels, []).image, img)  # undo: the stack without it
    assert "watermark" in edit.describe() and "0.5" in edit.describe()


def test_input_is_not_mutated():
    img = photo(224, 224, 3)
    before = img.copy()
    lc.add_watermark(img)
    assert np.array_equal(img, before)


def test_a_tiny_image_gets_a_sentence():
    with pytest.raises(lc.LimecraftError, match=r"too small for the watermark.*at least 38 px"):
        lc.add_watermark(photo(20, 30))
    with pytest.raises(lc.LimecraftError, match="opacity"):
        lc.add_watermark(photo(224, 224), opacity=1.5)
    with pytest.raises(lc.LimecraftError, match="uint8"):
        lc.add_watermark(np.zeros((224, 224), np.uint8))


def test_the_watermark_without_its_package_names_it(monkeypatch):
    import sys

    from limecraft_core.edits import fonts

    monkeypatch.setitem(sys.modules, "imagenet_w", None)  # the import now fails
    monkeypatch.setitem(sys.modules, "imagenet_w.watermark_transform", None)
    fonts.watermark_font.cache_clear()
    try:
        with pytest.raises(lc.LimecraftError, match="pip install imagenet-w"):
            lc.watermark_mask(224, 224)
    finally:
        fonts.watermark_font.cache_clear()
