import functools
import itertools

import numpy as np
import pytest

from limecraft_core import (
    SEGMENTERS,
    LimecraftError,
    compose_regions,
    masks_from_label_image,
    merge_regions,
    regions_from_labels,
    relabel,
    segment,
    split_region,
)
from limecraft_core.regions import COUNT_TOLERANCE, segment_regions


def assert_contiguous(labels: np.ndarray) -> None:
    assert labels.dtype == np.int32
    ids = np.unique(labels)
    assert ids[0] == 0
    assert np.array_equal(ids, np.arange(len(ids)))


@pytest.mark.parametrize("method", SEGMENTERS)
def test_every_method_gives_contiguous_labels_at_image_size(photo, method):
    before = photo.copy()
    labels = segment(photo, method, n_segments=30)
    assert labels.shape == photo.shape[:2]
    assert_contiguous(labels)
    assert labels.max() + 1 >= 5
    assert np.array_equal(photo, before), "input must not be mutated"


@pytest.mark.parametrize("method", ["slic", "watershed", "grid", "quickshift", "felzenszwalb"])
@pytest.mark.parametrize("target", [20, 80])
def test_target_region_count_is_roughly_met(photo, method, target):
    k = segment(photo, method, n_segments=target).max() + 1
    assert target / 3 <= k <= target * 3, (method, target, k)


def test_more_segments_asked_gives_more_regions(photo):
    for method in SEGMENTERS:
        few = segment(photo, method, n_segments=10).max() + 1
        many = segment(photo, method, n_segments=100).max() + 1
        assert many > few, method


def test_quickshift_default_is_limes(photo):
    from skimage.segmentation import quickshift

    ours = segment(photo, "quickshift", working_size=None)
    theirs = quickshift(photo / 255.0, kernel_size=4, max_dist=200, ratio=0.2, rng=0)
    assert np.array_equal(ours, relabel(theirs))


def test_working_size_scales_labels_back_to_full_resolution():
    rng = np.random.default_rng(1)
    big = np.kron(rng.integers(0, 255, (30, 40, 3)), np.ones((40, 40, 1))).astype(np.uint8)
    labels = segment(big, "slic", n_segments=40, working_size=200)
    assert labels.shape == big.shape[:2]
    assert_contiguous(labels)


def test_grid_is_exact():
    img = np.zeros((40, 60, 3), np.uint8)
    labels = segment(img, "grid", n_segments=6)
    assert labels.max() + 1 == 6
    assert np.bincount(labels.ravel()).tolist() == [400] * 6


def test_bad_values_say_what_to_do(photo):
    with pytest.raises(LimecraftError, match="one of"):
        segment(photo, "kmeans")
    with pytest.raises(LimecraftError, match=r"n_segments must be in \[1, 5000\]"):
        segment(photo, "slic", n_segments=0)
    with pytest.raises(LimecraftError, match="unknown parameter"):
        segment(photo, "slic", params={"bogus": 1})
    with pytest.raises(LimecraftError, match=r"\(H, W, 3\)"):
        segment(photo[..., :2], "slic")


def test_relabel_closes_gaps_and_keeps_order():
    labels = np.array([[5, 5, 9], [1, 9, 100]])
    assert relabel(labels).tolist() == [[1, 1, 2], [0, 2, 3]]


# ----------------------------------------------------------------- handcrafted regions


def two_masks(shape=(96, 128)):
    a = np.zeros(shape, bool)
    a[10:50, 20:80] = True
    b = np.zeros(shape, bool)
    b[40:90, 60:120] = True
    return a, b


def test_composition_one_feature_regions_are_exactly_their_masks(photo):
    a, b = two_masks()
    regions = compose_regions(photo, [a, b], names=["cat", "box"])
    labels = regions.labels
    assert_contiguous(labels)
    assert np.bincount(labels.ravel()).sum() == photo.shape[0] * photo.shape[1]
    # later mask wins where they overlap
    assert np.array_equal(labels == 0, a & ~b)
    assert np.array_equal(labels == 1, b)
    assert regions.names[:2] == ("cat", "box")
    assert regions.keys[:2] == ("hand:0", "hand:1")
    assert all(k.startswith("auto:") for k in regions.keys[2:])


def test_composition_inner_segments_split_inside_the_mask_only(photo):
    a, b = two_masks()
    regions = compose_regions(photo, [a, b], inner_segments=[6, None], outer_segments=1)
    labels = regions.labels
    assert_contiguous(labels)
    inner = [k for k, key in enumerate(regions.keys) if key.startswith("hand:0.")]
    assert len(inner) >= 2
    assert np.array_equal(np.isin(labels, inner), a & ~b)
    assert regions.keys[-1] == "background"
    assert np.array_equal(labels == regions.n_regions - 1, ~(a | b))


def test_composition_accepts_a_label_image_and_merges_tiny_fragments(photo):
    lab = np.zeros(photo.shape[:2], np.uint8)
    lab[10:40, 10:40] = 7
    lab[50:80, 60:100] = 3
    regions = compose_regions(photo, lab, outer_segments=40, min_fragment=30)
    labels = regions.labels
    assert_contiguous(labels)
    # value 3 comes first (increasing value order)
    assert np.array_equal(labels == 0, lab == 3)
    assert np.array_equal(labels == 1, lab == 7)
    counts = np.bincount(labels.ravel())
    outer = counts[2:]
    assert outer.min() >= 30 or len(outer) == 1


def test_composition_rejects_mismatched_masks(photo):
    with pytest.raises(LimecraftError, match="must have the image's width and height"):
        compose_regions(photo, np.zeros((10, 10), bool))


def test_masks_from_label_image():
    lab = np.array([[0, 2, 2], [5, 0, 2]])
    masks = masks_from_label_image(lab)
    assert len(masks) == 2
    assert masks[0].tolist() == [[False, True, True], [False, False, True]]


# ----------------------------------------------------------------- merge and split


def test_merge_then_split_restores_ids_and_keys(photo):
    regions = regions_from_labels(segment(photo, "slic", n_segments=30))
    keys = regions.keys
    merged = merge_regions(regions, [3, 7, 12], name="ear")
    assert merged.n_regions == regions.n_regions - 2
    assert_contiguous(merged.labels)
    mid = merged.names.index("ear")
    assert np.array_equal(merged.labels == mid, np.isin(regions.labels, [3, 7, 12]))
    # a region's identity survives the relabelling a merge causes
    for key in keys:
        if key not in {keys[3], keys[7], keys[12]}:
            assert np.array_equal(
                merged.labels == merged.index_of(key), regions.labels == regions.index_of(key)
            )
    back = split_region(merged, mid)
    assert back.keys == keys
    assert np.array_equal(back.labels, regions.labels)


def test_merge_and_split_refuse_nonsense(photo):
    regions = regions_from_labels(segment(photo, "grid", n_segments=4))
    with pytest.raises(LimecraftError, match="at least two"):
        merge_regions(regions, [1])
    with pytest.raises(LimecraftError, match="must be in"):
        merge_regions(regions, [1, 99])
    with pytest.raises(LimecraftError, match="nothing to split"):
        split_region(regions, 0)


# ----------------------------------------------------------------- the count asked for, any size


def gradient(w: int, h: int) -> np.ndarray:
    """Issue 14's smooth gradient, ``np.stack([x/w*255, y/h*255, (x+y)%256], -1)``, with the
    diagonal ramp repeating every 256 px; built in uint8 so that 6000x4000 takes no time."""
    x, y = np.arange(w), np.arange(h)
    img = np.empty((h, w, 3), np.uint8)
    img[..., 0] = (x / w * 255).astype(np.uint8)[None, :]
    img[..., 1] = (y / h * 255).astype(np.uint8)[:, None]
    np.add(
        (x % 256).astype(np.uint8)[None, :], (y % 256).astype(np.uint8)[:, None], out=img[..., 2]
    )
    return img


def noise(w: int, h: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)


@functools.cache
def _demo_image() -> np.ndarray:
    from models.samples import load_sample

    return load_sample("demo-conflict-1").image


def demo(w: int, h: int) -> np.ndarray:
    from skimage import transform

    return (transform.resize(_demo_image(), (h, w), order=1) * 255).astype(np.uint8)


# The app's working sizes (pages/lib/analysis.py); the engine's "auto" is tested above.
APP_WORKING_SIZES = {"quickshift": 192, "felzenszwalb": 192}


def count_met(k: int, n: int) -> bool:
    return n / COUNT_TOLERANCE - 1 <= k <= n * COUNT_TOLERANCE + 1


@pytest.mark.parametrize("size", [(64, 48), (600, 400), (4000, 200), (200, 4000)])
@pytest.mark.parametrize("image", [gradient, noise, demo])
@pytest.mark.parametrize("method", SEGMENTERS)
def test_the_count_asked_for_is_met_at_any_size(method, image, size):
    img = image(*size)
    labels = segment(img, method, n_segments=30, working_size=APP_WORKING_SIZES.get(method, 512))
    assert labels.shape == img.shape[:2]
    assert_contiguous(labels)
    assert count_met(labels.max() + 1, 30), (labels.max() + 1, method, image.__name__, size)


@pytest.mark.parametrize("method", ["grid", "watershed", "felzenszwalb"])
def test_the_count_is_met_on_a_large_image_at_a_few_sizes_of_n(method):
    img = gradient(2000, 1500)
    for n in (4, 150):
        k = segment(img, method, n_segments=n).max() + 1
        assert count_met(k, n), (method, n, k)


@pytest.mark.slow
def test_issue_14_a_6000x4000_gradient_gives_the_regions_asked_for_at_the_apps_size():
    img = gradient(6000, 4000)
    labels = segment(img, "slic", n_segments=40, working_size=512)
    assert labels.shape == (4000, 6000) and labels.dtype == np.int32
    assert labels.min() == 0 and (np.bincount(labels.ravel()) > 0).all()  # 0..K-1, no gaps
    assert count_met(labels.max() + 1, 40), labels.max() + 1


def test_grid_is_exact_on_a_very_wide_or_tall_image():
    for shape in ((200, 4000, 3), (4000, 200, 3)):
        assert segment(np.zeros(shape, np.uint8), "grid", n_segments=40).max() + 1 == 40


def test_a_flat_image_says_why_the_count_is_not_met():
    flat = np.full((64, 64, 3), 128, np.uint8)
    regions = segment_regions(flat, "felzenszwalb", n_segments=40)
    assert regions.n_regions == 1
    assert "flat colour" in regions.note and "grid" in regions.note and "40" in regions.note
    # merges and splits keep the note
    assert merge_regions(segment_regions(flat, "grid", 4), [0, 1]).note == ""
    for method in SEGMENTERS:
        r = segment_regions(flat, method, n_segments=40)
        assert count_met(r.n_regions, 40) or "flat colour" in r.note, method
        assert_contiguous(r.labels)
    mask = np.zeros((64, 64), bool)
    mask[:10, :10] = True
    composed = compose_regions(flat, mask, outer_segments=40, outer_method="felzenszwalb")
    assert "flat colour" in composed.note


def test_a_count_met_has_no_note(photo):
    assert segment_regions(photo, "slic", n_segments=20).note == ""
    assert compose_regions(photo, np.zeros(photo.shape[:2], bool), outer_segments=20).note == ""


def test_more_regions_than_pixels_is_refused_with_what_to_do():
    img = noise(40, 30)
    with pytest.raises(LimecraftError, match=r"more regions than the image has pixels.*fewer"):
        segment(img, "slic", n_segments=1201)
    with pytest.raises(LimecraftError, match="more regions than the image has pixels"):
        compose_regions(img, np.zeros((30, 40), bool), outer_segments=1201)
    k = segment(img, "grid", n_segments=1200).max() + 1
    assert count_met(k, 1200)


def test_explicit_scale_parameters_are_not_refitted():
    from skimage.segmentation import quickshift

    img = gradient(60, 40)
    ours = segment(img, "quickshift", 40, params={"kernel_size": 4.0}, working_size=None)
    theirs = quickshift(img / 255.0, kernel_size=4, max_dist=200, ratio=0.2, rng=0)
    assert np.array_equal(ours, relabel(theirs))


def test_progress_is_told_each_stage_with_increasing_fractions():
    img = gradient(1200, 800)
    calls = []
    labels = segment(img, "slic", 40, working_size=256, progress=lambda f, m: calls.append((f, m)))
    fractions = [f for f, _ in calls]
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert all(a < b for a, b in itertools.pairwise(fractions)), calls
    assert all(m for _, m in calls)
    assert any("down" in m for _, m in calls) and any("up" in m for _, m in calls)
    assert np.array_equal(labels, segment(img, "slic", 40, working_size=256))

    mask = np.zeros(img.shape[:2], bool)
    mask[100:400, 100:500] = True
    calls.clear()
    regions = compose_regions(
        img,
        mask,
        inner_segments=3,
        outer_segments=20,
        outer_method="slic",
        working_size=256,
        progress=lambda f, m: calls.append((f, m)),
    )
    fractions = [f for f, _ in calls]
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert all(a < b for a, b in itertools.pairwise(fractions)), calls
    assert any("region 1" in m for _, m in calls)
    assert_contiguous(regions.labels)
