"""Property-based tests: segmentation, composition, merge and split, edits' mask transforms, and
label maps from arbitrary masks, on any shape from 1x1 up.

Invariants: region ids are contiguous (0..K-1, every id present, every pixel assigned), pixel
counts are conserved, inputs are never mutated, and nothing crashes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import limecraft_core as lc
from limecraft_core._validate import MIN_SIDE
from limecraft_core.edits import Edit, apply_edits, transform_mask
from limecraft_core.regions import masks_from_label_image, relabel

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_contiguous(labels: np.ndarray, shape: tuple[int, int]) -> None:
    assert labels.shape == shape
    assert np.issubdtype(labels.dtype, np.integer)
    ids = np.unique(labels)
    assert ids[0] == 0 and np.array_equal(ids, np.arange(len(ids)))


def images(min_side: int = 1, max_side: int = 24):
    """(H, W, 3) uint8 images, from flat colours to noise."""
    return st.tuples(
        st.integers(min_side, max_side), st.integers(min_side, max_side), st.integers(0, 2**16)
    ).map(_image)


def _image(args: tuple[int, int, int]) -> np.ndarray:
    h, w, seed = args
    rng = np.random.default_rng(seed)
    levels = int(rng.integers(1, 6))
    palette = rng.integers(0, 256, (levels, 3))
    return palette[rng.integers(0, levels, (h, w))].astype(np.uint8)


def label_maps(max_side: int = 16, max_ids: int = 8):
    """Arbitrary integer maps: negative values, gaps and huge values included."""
    return st.tuples(
        st.integers(1, max_side), st.integers(1, max_side), st.integers(1, max_ids)
    ).flatmap(
        lambda t: arrays(
            np.int64,
            (t[0], t[1]),
            elements=st.sampled_from(
                sorted({-7, 0, 3, 10**9, *range(t[2])}, key=lambda v: (abs(v), v))[: t[2] + 1]
            ),
        )
    )


# ----------------------------------------------------------------------------- label maps


@FAST
@given(labels=label_maps())
def test_relabel_gives_contiguous_ids_and_keeps_the_partition(labels):
    before = labels.copy()
    out = relabel(labels)
    assert_contiguous(out, labels.shape)
    assert np.array_equal(labels, before)
    # the same pixels share a label before and after (a bijection on the values)
    pairs = np.unique(np.stack([labels.ravel(), out.ravel()]), axis=1)
    assert len(np.unique(pairs[0])) == len(np.unique(pairs[1])) == pairs.shape[1]
    # order of the original values is kept
    assert np.array_equal(np.argsort(pairs[0]), np.argsort(pairs[1]))


@FAST
@given(labels=label_maps())
def test_masks_from_any_label_image_cover_the_non_zero_pixels_once(labels):
    masks = masks_from_label_image(labels)
    assert len(masks) == len(np.setdiff1d(np.unique(labels), [0]))
    total = np.zeros(labels.shape, int)
    for m in masks:
        assert m.dtype == bool and m.shape == labels.shape and m.any()
        total += m
    assert np.array_equal(total, (labels != 0).astype(int))


@FAST
@given(labels=label_maps())
def test_regions_from_any_label_map_conserve_pixels(labels):
    r = lc.regions_from_labels(labels)
    assert_contiguous(r.labels, labels.shape)
    counts = r.pixel_counts()
    assert counts.sum() == labels.size and (counts > 0).all()
    assert len(set(r.keys)) == r.n_regions


# ----------------------------------------------------------------------------- segmentation


@FAST
@given(
    image=images(1, 24),
    method=st.sampled_from(lc.SEGMENTERS),
    n=st.one_of(st.none(), st.integers(1, 40)),
)
def test_segment_any_image_gives_contiguous_labels(image, method, n):
    """From 1x1 up: contiguous labels, or (under the minimum side) an error that names it."""
    before = image.copy()
    if min(image.shape[:2]) < MIN_SIDE:
        with pytest.raises(lc.LimecraftError, match=f"at least {MIN_SIDE}"):
            lc.segment(image, method, n)
        return
    labels = lc.segment(image, method, n)
    assert_contiguous(labels, image.shape[:2])
    assert np.array_equal(image, before)


@st.composite
def compositions(draw):
    image = draw(images(MIN_SIDE, 20))
    h, w = image.shape[:2]
    n_masks = draw(st.integers(0, 3))
    masks = []
    for _ in range(n_masks):
        r0, c0 = draw(st.integers(0, h - 1)), draw(st.integers(0, w - 1))
        r1, c1 = draw(st.integers(r0 + 1, h)), draw(st.integers(c0 + 1, w))
        m = np.zeros((h, w), bool)
        m[r0:r1, c0:c1] = True
        if draw(st.booleans()):  # an arbitrary shape, possibly in several pieces
            m &= np.random.default_rng(draw(st.integers(0, 99))).random((h, w)) < 0.7
        masks.append(m)
    inner = draw(st.lists(st.sampled_from([None, 1, 2, 4]), min_size=n_masks, max_size=n_masks))
    outer = draw(st.sampled_from([None, 1, 3, 12]))
    method = draw(st.sampled_from(["slic", "grid", "felzenszwalb", "watershed"]))
    return image, masks, inner, outer, method


@FAST
@given(case=compositions())
def test_composition_contiguous_conserves_pixels_and_keeps_one_feature_masks(case):
    image, masks, inner, outer, method = case
    copies = [m.copy() for m in masks]
    r = lc.compose_regions(
        image, masks, inner_segments=inner, outer_segments=outer, outer_method=method
    )
    shape = image.shape[:2]
    assert_contiguous(r.labels, shape)
    assert_contiguous(r.atoms, shape)
    assert r.pixel_counts().sum() == shape[0] * shape[1]
    assert all(np.array_equal(a, b) for a, b in zip(masks, copies, strict=True))
    # each mask's pixels (minus later masks) belong to its own regions only
    owner = np.zeros(shape, int)
    for i, m in enumerate(masks):
        owner[m] = i + 1
    for i in range(len(masks)):
        mine = [k for k, key in enumerate(r.keys) if key.split(".")[0] == f"hand:{i}"]
        assert np.array_equal(np.isin(r.labels, mine), owner == i + 1)
        if inner[i] in (None, 1) and (owner == i + 1).any():
            assert len(mine) == 1  # kept as one feature: exactly its mask
    rest = [k for k, key in enumerate(r.keys) if not key.startswith("hand:")]
    assert np.array_equal(np.isin(r.labels, rest), owner == 0)
    if outer == 1 and (owner == 0).any():
        assert r.keys.count("background") == 1


# ----------------------------------------------------------------------------- merge and split


@st.composite
def merges(draw):
    labels = relabel(draw(label_maps(max_side=12, max_ids=8)))
    r = lc.regions_from_labels(labels)
    steps = draw(st.lists(st.tuples(st.booleans(), st.data()), max_size=6))
    return r, steps


@FAST
@given(case=merges())
def test_any_sequence_of_merges_and_splits_keeps_ids_contiguous_and_pixels(case):
    r, steps = case
    start = r
    total = r.labels.size
    for is_merge, data in steps:
        merged = [i for i, g in enumerate(r.groups) if len(g) > 1]
        if is_merge and r.n_regions >= 2:
            ids = data.draw(
                st.lists(
                    st.integers(0, r.n_regions - 1), min_size=2, max_size=r.n_regions, unique=True
                )
            )
            before = r.pixel_counts()
            new = lc.merge_regions(r, ids, name="m")
            assert new.n_regions == r.n_regions - len(ids) + 1
            assert new.pixel_counts().sum() == total
            # the merged region holds exactly the pixels of its parts
            k = new.labels[r.labels == ids[0]][0]
            assert new.pixel_counts()[k] == before[ids].sum()
            assert np.array_equal(new.labels == k, np.isin(r.labels, ids))
            r = new
        elif merged:
            target = data.draw(st.sampled_from(merged))
            new = lc.split_region(r, target)
            assert new.n_regions == r.n_regions + len(r.groups[target]) - 1
            r = new
        assert_contiguous(r.labels, start.labels.shape)
        assert r.pixel_counts().sum() == total
        assert np.array_equal(r.atoms, start.atoms)  # atoms never change
    # splitting everything gives back the start, ids and keys included
    while any(len(g) > 1 for g in r.groups):
        r = lc.split_region(r, next(i for i, g in enumerate(r.groups) if len(g) > 1))
    assert np.array_equal(r.labels, start.labels) and r.keys == start.keys


# ----------------------------------------------------------------------------- edits


masks_2d = st.tuples(st.integers(1, 14), st.integers(1, 14), st.integers(0, 2**16)).map(
    lambda t: np.random.default_rng(t[2]).random((t[0], t[1])) < 0.4
)


@FAST
@given(mask=masks_2d, dx=st.integers(-20, 20), dy=st.integers(-20, 20))
def test_translation_conserves_the_pixels_that_stay_inside(mask, dx, dy):
    h, w = mask.shape
    before = mask.copy()
    out = transform_mask(mask, dx=dx, dy=dy)
    rows, cols = np.nonzero(mask)
    inside = (rows + dy >= 0) & (rows + dy < h) & (cols + dx >= 0) & (cols + dx < w)
    assert out.sum() == inside.sum()
    assert np.array_equal(mask, before)
    # and moving back restores every pixel that stayed inside
    back = transform_mask(out, dx=-dx, dy=-dy)
    assert np.array_equal(back, mask & transform_mask(np.ones_like(mask), dx=-dx, dy=-dy))


@FAST
@given(
    mask=masks_2d,
    angle=st.floats(-360, 360, allow_nan=False),
    factor=st.floats(0.1, 5, allow_nan=False),
)
def test_rotate_and_scale_any_mask_without_crashing(mask, angle, factor):
    out = transform_mask(mask, angle=angle, factor=factor)
    assert out.shape == mask.shape and out.dtype == bool
    if not mask.any():
        assert not out.any()
    if angle in (0.0, 360.0, -360.0) and factor == 1.0:
        assert np.array_equal(out, mask)


@st.composite
def edit_stacks(draw):
    h, w = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    labels = relabel(rng.integers(0, draw(st.integers(1, 5)), (h, w)))
    image = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
    # every kind but the watermark: these images are 1-12 px, under the watermark's smallest
    # image (38 px), which it refuses with a sentence (tests/limecraft_core/edits/test_watermark.py)
    region_kinds = [k for k in lc.EDIT_KINDS if k != "watermark"]
    kinds = draw(st.lists(st.sampled_from(region_kinds), min_size=1, max_size=3))
    return image, labels, kinds, draw(st.data())


@FAST
@given(case=edit_stacks())
def test_any_stack_of_edits_keeps_label_maps_contiguous(case):
    image, labels, kinds, data = case
    before = (image.copy(), labels.copy())
    edits = []
    lab = labels
    for kind in kinds:
        region = data.draw(st.integers(0, int(lab.max())))
        params = {
            "color": {"hue": data.draw(st.floats(-180, 180))},
            "move": {"dx": data.draw(st.integers(-15, 15)), "dy": data.draw(st.integers(-15, 15))},
            "rotate": {"angle": data.draw(st.floats(-360, 360))},
            "scale": {"factor": data.draw(st.floats(0.1, 5))},
            "blur": {"sigma": data.draw(st.floats(0, 12))},
            "remove": {},
        }[kind]
        edits.append(Edit(kind, region, **params))
        lab = apply_edits(image, labels, edits).labels  # ids refer to the latest map
    res = apply_edits(image, labels, edits)
    assert_contiguous(res.labels, labels.shape)
    assert res.image.shape == image.shape and res.image.dtype == np.uint8
    assert np.bincount(res.labels.ravel()).sum() == labels.size
    assert np.array_equal(image, before[0]) and np.array_equal(labels, before[1])
    if all(k in ("color", "blur", "remove") for k in kinds):
        assert np.array_equal(res.labels, labels)  # only geometric edits change the map


# ----------------------------------------------------------------------------- canvas


@FAST
@given(
    mask=masks_2d,
    shape=st.tuples(st.integers(1, 30), st.integers(1, 30)),
)
def test_canvas_strokes_become_a_mask_of_the_image_size(mask, shape):
    from limecraft_core.regions import mask_from_canvas, region_at

    rgba = np.zeros((*mask.shape, 4), np.uint8)
    rgba[mask, 3] = 255
    out = mask_from_canvas(rgba, shape)
    assert out.shape == shape and out.dtype == bool
    if not mask.any():
        assert not out.any()
    labels = relabel(out.astype(int))
    h, w = shape
    for x, y in ((0, 0), (w * 7.3, h * 3.1), (-5, -5)):
        assert 0 <= region_at(labels, x, y, w, h) <= labels.max()
