"""``compose_regions`` leaves no slivers: a thin handcrafted region (the ImageNet-W watermark's
strokes) cuts superpixels, and the small pieces it leaves join automatic superpixels, never the
handcrafted region."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import ndimage as ndi
from skimage import data, transform

from limecraft_core import (
    LimecraftError,
    Regions,
    compose_regions,
    merge_regions,
    segment,
    split_region,
    watermark_mask,
)

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _small_auto(regions, min_size: int) -> tuple[list[str], list[str]]:
    """Automatic regions under ``min_size`` pixels: those that touch another automatic region
    (slivers), and those that touch none (kept by the rule)."""
    labels, counts = regions.labels, regions.pixel_counts()
    auto = np.array([not k.startswith("hand:") for k in regions.keys])
    touching, alone = [], []
    for k in np.flatnonzero(auto & (counts < min_size)):
        mine = labels == k
        ring = ndi.binary_dilation(mine) & ~mine
        (touching if auto[labels[ring]].any() else alone).append(regions.keys[k])
    return touching, alone


@pytest.fixture(scope="module")
def cat224() -> np.ndarray:
    return (transform.resize(data.chelsea(), (224, 224), anti_aliasing=True) * 255).astype(np.uint8)


@pytest.mark.parametrize("method", ["slic", "quickshift"])
def test_watermark_strokes_leave_no_slivers(cat224, method):
    mask = watermark_mask(224, 224)
    n = 40 if method == "slic" else None
    regions = compose_regions(cat224, [mask], outer_method=method, outer_segments=n)
    superpixels = int(segment(cat224, method, n).max()) + 1
    documented = 224 * 224 // (4 * superpixels)  # a quarter of the mean superpixel
    # The insides of the letters join the superpixel they were cut from: none stays alone.
    assert _small_auto(regions, documented) == ([], [])
    # The handcrafted region is exactly its mask.
    assert np.array_equal(regions.labels == regions.index_of("hand:0"), mask)


def test_app_settings_on_the_watermark_give_few_regions(cat224):
    """The app's 40 SLIC superpixels plus the watermark: about 40 regions, not 58."""
    mask = watermark_mask(224, 224)
    regions = compose_regions(cat224, [mask], outer_method="slic", outer_segments=40)
    alone = int(segment(cat224, "slic", 40).max()) + 1
    assert regions.n_regions <= alone + 1


def test_an_explicit_min_fragment_is_the_bound(cat224):
    mask = watermark_mask(224, 224)
    regions = compose_regions(
        cat224, [mask], outer_method="slic", outer_segments=40, min_fragment=600
    )
    assert _small_auto(regions, 600) == ([], [])


def test_a_piece_with_no_automatic_neighbour_stays():
    """A rest of the image that the handcrafted region cuts in two, each part alone: both stay."""
    img = np.zeros((20, 20, 3), np.uint8)
    img[:, 10:] = 255
    mask = np.ones((20, 20), bool)
    mask[0:2, 0:2] = False  # a 4-pixel corner, all its neighbours handcrafted
    regions = compose_regions(img, [mask], outer_method="slic", outer_segments=4)
    assert regions.n_regions == 2
    assert np.array_equal(regions.labels == 0, mask)


@FAST
@given(
    seed=st.integers(0, 2**16),
    strokes=st.integers(1, 6),
    min_fragment=st.integers(0, 120),
)
def test_composing_random_strokes_keeps_every_pixel_and_the_hand_region(
    seed, strokes, min_fragment
):
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (32, 40, 3)).astype(np.uint8)
    mask = np.zeros((32, 40), bool)
    for _ in range(strokes):  # thin lines, one or two pixels wide, across the image
        if rng.random() < 0.5:
            r = int(rng.integers(0, 31))
            mask[r : r + int(rng.integers(1, 3)), :] = True
        else:
            c = int(rng.integers(0, 39))
            mask[:, c : c + int(rng.integers(1, 3))] = True
    before = mask.copy()
    regions = compose_regions(
        img, [mask], outer_method="slic", outer_segments=12, min_fragment=min_fragment
    )
    labels = regions.labels
    assert np.array_equal(np.unique(labels), np.arange(regions.n_regions))
    assert np.array_equal(labels == regions.index_of("hand:0"), mask)
    assert np.array_equal(mask, before)
    assert _small_auto(regions, min_fragment)[0] == []


def _two_masks() -> tuple[np.ndarray, list[np.ndarray]]:
    img = np.random.default_rng(0).integers(0, 256, (32, 32, 3)).astype(np.uint8)
    a, b = np.zeros((32, 32), bool), np.zeros((32, 32), bool)
    a[2:10, 2:10] = True
    b[20:30, 20:30] = True
    return img, [a, b]


def test_each_region_records_its_origin_through_merges_and_splits():
    img, masks = _two_masks()
    regions = compose_regions(
        img, masks, origins=["uploaded", "proposed:text"], outer_method="slic", outer_segments=6
    )
    auto = ("superpixel",) * (regions.n_regions - 2)
    assert regions.origins == ("uploaded", "proposed:text", *auto)
    merged = merge_regions(regions, [0, 2])
    assert merged.origins[0] == "merged" and merged.origins[1] == "proposed:text"
    assert split_region(merged, 0).origins == regions.origins
    assert compose_regions(img, masks, outer_segments=1).origins == ("drawn", "drawn", "superpixel")


def test_origins_default_from_the_keys():
    atoms = np.arange(4, dtype=np.int32).reshape(2, 2)
    regions = Regions(atoms, ("hand:0", "auto:0", "background", "merge(auto:1+auto:2)"), ("",) * 4)
    assert regions.atom_origins == ("drawn", "superpixel", "superpixel", "merged")


@pytest.mark.parametrize(
    "origins",
    [
        ["superpixel", "drawn"],
        ["drawn"],
        ["drawn", "proposed:"],
        ["drawn", "proposed:a b"],
        "drawn",
    ],
)
def test_a_bad_origin_says_what_is_allowed(origins):
    img, masks = _two_masks()
    with pytest.raises(LimecraftError, match="origin"):
        compose_regions(img, masks, origins=origins, outer_segments=1)
