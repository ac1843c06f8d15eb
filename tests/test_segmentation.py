import numpy as np
import pytest

from limecraft_core import (
    METHODS,
    LimecraftError,
    compose_regions,
    masks_from_label_image,
    merge_regions,
    regions_from_labels,
    relabel,
    segment,
    split_region,
)


def assert_contiguous(labels: np.ndarray) -> None:
    assert labels.dtype == np.int32
    ids = np.unique(labels)
    assert ids[0] == 0
    assert np.array_equal(ids, np.arange(len(ids)))


@pytest.mark.parametrize("method", METHODS)
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
    for method in METHODS:
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
