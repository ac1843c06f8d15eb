import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import ndimage as ndi

from limecraft_core import LimecraftError, relabel
from limecraft_core.edits import (
    EDIT_FILLS,
    EDIT_KINDS,
    Edit,
    EditResult,
    apply_edit,
    apply_edits,
    transform_mask,
)

H, W = 40, 60
OBJ = 6  # the object's id: after the 2x3 grid of background regions 0..5
OBJ_RGB = (220, 40, 40)
ROWS, COLS = slice(10, 20), slice(15, 25)  # a 10x10 square; centroid (x, y) = (19.5, 14.5)


@pytest.fixture
def scene():
    """A 40x60 gradient with a flat red square object; labels: 2x3 background grid + object."""
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[:H, :W]
    img = np.stack([xx * 3, yy * 5, 60 + 0 * xx], axis=2).astype(float)
    img += rng.integers(-8, 9, img.shape)
    img = np.clip(img, 0, 255).astype(np.uint8)
    img[ROWS, COLS] = OBJ_RGB
    labels = (yy // 20 * 3 + xx // 20).astype(np.int32)
    labels[ROWS, COLS] = OBJ
    return img, labels


def assert_contiguous(labels, shape):
    assert labels.shape == shape and labels.dtype == np.int32
    ids = np.unique(labels)
    assert np.array_equal(ids, np.arange(len(ids)))
    assert np.bincount(labels.ravel()).sum() == shape[0] * shape[1]


def shifted(mask, dx, dy):
    out = np.zeros_like(mask)
    h, w = mask.shape
    rows, cols = np.nonzero(mask)
    r, c = rows + dy, cols + dx
    keep = (r >= 0) & (r < h) & (c >= 0) & (c < w)
    out[r[keep], c[keep]] = True
    return out


# --------------------------------------------------------------------------- Edit


def test_edit_kinds_and_fills_are_public():
    assert EDIT_KINDS == ("color", "move", "rotate", "scale", "blur", "remove", "watermark")
    assert "inpaint" in EDIT_FILLS


def test_edit_normalises_numbers_and_is_hashable():
    e = Edit("move", np.int64(3), dx=2.0, dy=np.int32(-1), rgb_shift=np.array([0.1, 0, 0]))
    assert e.region == 3 and type(e.region) is int
    assert e.dx == 2 and type(e.dx) is int and e.dy == -1
    assert e.rgb_shift == (0.1, 0.0, 0.0) and all(type(v) is float for v in e.rgb_shift)
    assert hash(e) == hash(Edit("move", 3, dx=2, dy=-1, rgb_shift=(0.1, 0, 0)))


@pytest.mark.parametrize(
    ("edit", "text"),
    [
        (Edit("move", 3, dx=12, dy=-4), "move region 3 by (+12, -4) px"),
        (Edit("move", 3, dx=1, fill="gray"), "move region 3 by (+1, +0) px, fill gray"),
        (Edit("rotate", 0, angle=30), "rotate region 0 by 30° counter-clockwise"),
        (Edit("rotate", 0, angle=-45.5), "rotate region 0 by 45.5° clockwise"),
        (Edit("scale", 2, factor=1.5), "scale region 2 by x1.5"),
        (Edit("blur", 1, sigma=2.5), "blur region 1 (sigma 2.5 px)"),
        (Edit("remove", 4, fill="#00ff00"), "remove region 4 (fill #00ff00)"),
        (Edit("color", 5), "recolour region 5 (no change)"),
        (
            Edit("color", 5, hue=-30, brightness=0.5),
            "recolour region 5 (hue -30°, brightness x0.5)",
        ),
        (Edit("color", 5, rgb_shift=(0.1, 0, -0.2)), "recolour region 5 (RGB +0.10 +0.00 -0.20)"),
    ],
)
def test_describe(edit, text):
    assert edit.describe() == text


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"kind": "twist"}, "color, move, rotate"),
        ({"region": -1}, ">= 0"),
        ({"region": 1.5}, "integer"),
        ({"hue": 200}, "[-180.0, 180.0]"),
        ({"saturation": -0.1}, "[0.0, 4.0]"),
        ({"brightness": 4.5}, "[0.0, 4.0]"),
        ({"angle": 400}, "[-360.0, 360.0]"),
        ({"factor": 0.05}, "[0.1, 5.0]"),
        ({"factor": 6}, "[0.1, 5.0]"),
        ({"sigma": 101}, "[0.0, 100.0]"),
        ({"sigma": float("nan")}, "[0.0, 100.0]"),
        ({"dx": 1.5}, "integer"),
        ({"rgb_shift": (2, 0, 0)}, "[-1.0, 1.0]"),
        ({"rgb_shift": (0, 0)}, "three numbers"),
        ({"fill": "blur"}, "#808080"),
        ({"fill": "#12345"}, "#808080"),
        ({"fill": "teal"}, "inpaint, mean, gray, black"),
    ],
)
def test_bad_edit_parameters_raise_with_the_range(kwargs, needle):
    args = {"kind": "move", "region": 0, **kwargs}
    with pytest.raises(LimecraftError) as err:
        Edit(**args)
    assert needle in str(err.value)


# --------------------------------------------------------------------------- move / rotate / scale


@pytest.mark.parametrize(("dx", "dy"), [(12, -4), (-7, 9), (0, 5), (30, 0)])
def test_move_shifts_mask_and_object_exactly(scene, dx, dy):
    img, labels = scene
    old = labels == OBJ
    res = apply_edit(img, labels, Edit("move", OBJ, dx=dx, dy=dy))
    assert isinstance(res, EditResult)
    new = res.labels == res.region
    assert np.array_equal(new, shifted(old, dx, dy))
    assert np.array_equal(res.image[new], img[old][: new.sum()])
    hole = old & ~new
    assert hole.any()
    assert not (res.image[hole] == OBJ_RGB).all(axis=1).any()
    assert res.changed[hole].all()
    assert_contiguous(res.labels, (H, W))
    assert res.image.dtype == np.uint8 and res.image.shape == (H, W, 3)
    # the background regions keep everything the object did not cover or vacate
    untouched = ~old & ~new
    assert np.array_equal(res.labels[untouched], labels[untouched])
    # each vacated pixel goes to a region at the smallest distance from it (brute force)
    out_r, out_c = np.nonzero(~old)
    for r, c in zip(*np.nonzero(hole), strict=True):
        d2 = (out_r - r) ** 2 + (out_c - c) ** 2
        nearest = set(labels[out_r[d2 == d2.min()], out_c[d2 == d2.min()]].tolist())
        assert res.labels[r, c] in nearest
    assert not res.changed[untouched].any()


def test_move_back_restores_the_mask(scene):
    img, labels = scene
    first = apply_edit(img, labels, Edit("move", OBJ, dx=9, dy=-6))
    back = apply_edit(first.image, first.labels, Edit("move", first.region, dx=-9, dy=6))
    assert np.array_equal(back.labels == back.region, labels == OBJ)
    assert np.array_equal(back.image[labels == OBJ], img[labels == OBJ])


def test_move_out_of_the_image_drops_pixels(scene):
    img, labels = scene
    res = apply_edit(img, labels, Edit("move", OBJ, dx=40))  # cols 55..64: half survives
    new = res.labels == res.region
    assert new.sum() == 50 and new[ROWS, 55:].all()
    assert_contiguous(res.labels, (H, W))


def test_move_fully_out_makes_the_region_vanish(scene):
    img, labels = scene
    res = apply_edit(img, labels, Edit("move", OBJ, dx=-100, fill="black"))
    assert res.region == -1
    assert_contiguous(res.labels, (H, W))
    assert res.labels.max() == 5  # the six background regions remain
    assert (res.image[labels == OBJ] == 0).all()


def test_a_region_covered_entirely_disappears(scene):
    img, labels = scene
    labels = labels.copy()
    labels[0:2, 40:42] = 7  # a small region inside grid region 2
    labels = relabel(labels)
    obj = int(labels[ROWS, COLS][0, 0])
    res = apply_edit(img, labels, Edit("move", obj, dx=40 - 15, dy=-10))  # covers rows 0..9
    assert res.labels.max() == labels.max() - 1
    assert res.region == obj  # the vanished region came after the object: ids below keep
    assert_contiguous(res.labels, (H, W))


def test_covering_a_lower_id_shifts_the_object_down():
    img = np.full((20, 20, 3), 100, np.uint8)
    labels = np.zeros((20, 20), np.int32)  # background 0
    labels[2:4, 2:4] = 1  # a tiny region
    labels[10:16, 10:16] = 2  # the object
    img[10:16, 10:16] = OBJ_RGB
    res = apply_edit(img, labels, Edit("move", 2, dx=-8, dy=-8))  # covers rows/cols 2..7
    assert res.region == 1
    assert_contiguous(res.labels, (20, 20))
    assert res.labels.max() == 1
    assert np.array_equal(res.labels == 1, shifted(labels == 2, -8, -8))


def test_rotate_90_keeps_a_square_and_its_colour(scene):
    img, labels = scene
    res = apply_edit(img, labels, Edit("rotate", OBJ, angle=90))
    new, old = res.labels == res.region, labels == OBJ
    assert (new & old).sum() / (new | old).sum() >= 0.95
    assert (res.image[new] == OBJ_RGB).all()


@pytest.mark.parametrize("angle", [30, -45, 137])
def test_rotate_keeps_area_and_no_background_bleeds_in(scene, angle):
    img, labels = scene
    res = apply_edit(img, labels, Edit("rotate", OBJ, angle=angle))
    new = res.labels == res.region
    assert abs(int(new.sum()) - 100) <= 12
    assert np.abs(res.image[new].astype(int) - OBJ_RGB).max() <= 1
    assert_contiguous(res.labels, (H, W))


def test_rotate_is_counter_clockwise():
    mask = np.zeros((21, 21), bool)
    mask[10, 10:15] = True  # a bar pointing right from (10, 10)
    out = transform_mask(mask, angle=90, center=(10, 10))
    assert out[6:11, 10].all() and out.sum() == 5  # now pointing up


@pytest.mark.parametrize(("factor", "ratio"), [(2.0, 4.0), (0.5, 0.25), (1.5, 2.25)])
def test_scale_changes_area_by_the_factor_squared(scene, factor, ratio):
    img, labels = scene
    res = apply_edit(img, labels, Edit("scale", OBJ, factor=factor))
    area = (res.labels == res.region).sum()
    assert abs(area / 100 - ratio) <= 0.2 * ratio
    assert (res.image[res.labels == res.region] == OBJ_RGB).all()
    cy, cx = ndi.center_of_mass(res.labels == res.region)
    assert abs(cx - 19.5) <= 0.5 and abs(cy - 14.5) <= 0.5
    assert_contiguous(res.labels, (H, W))


@pytest.mark.parametrize(
    "edit",
    [
        Edit("rotate", OBJ, angle=0),
        Edit("scale", OBJ, factor=1),
        Edit("move", OBJ),
        Edit("color", OBJ),
        Edit("blur", OBJ, sigma=0),
    ],
)
def test_no_op_edits_are_identities(scene, edit):
    img, labels = scene
    res = apply_edit(img, labels, edit)
    assert np.array_equal(res.image, img)
    assert np.array_equal(res.labels, labels)
    assert res.region == OBJ and not res.changed.any()


@pytest.mark.parametrize("fill", ["gray", "black", "#0000ff", "mean", "inpaint"])
def test_move_fills_the_hole(scene, fill):
    img, labels = scene
    res = apply_edit(img, labels, Edit("move", OBJ, dx=20, fill=fill))
    hole = (labels == OBJ) & (res.labels != res.region)
    got = res.image[hole].astype(int)
    expected = {"gray": (128, 128, 128), "black": (0, 0, 0), "#0000ff": (0, 0, 255)}
    if fill in expected:
        assert (got == expected[fill]).all()
    elif fill == "mean":  # the object's mean colour, as LIME's "mean" fill shows it
        assert (got == OBJ_RGB).all()
    else:  # inpainted from the background around: far from the object's red
        assert np.abs(got - OBJ_RGB).sum(axis=1).min() > 100


@pytest.mark.parametrize("fill", ["inpaint", "mean"])
def test_a_small_move_does_not_smear_the_object_into_its_hole(scene, fill):
    img, labels = scene
    res = apply_edit(img, labels, Edit("move", OBJ, dx=3, dy=2, fill=fill))
    hole = (labels == OBJ) & (res.labels != res.region)
    assert hole.sum() == 100 - 7 * 8
    got = res.image[hole].astype(int)
    if fill == "inpaint":
        assert np.abs(got - OBJ_RGB).sum(axis=1).min() > 100
    else:  # the mean of the whole object, not of the vacated strip
        assert (got == OBJ_RGB).all()


def test_geometric_edits_of_the_quadrants(quadrants):
    labels = np.zeros((32, 32), np.int32)
    labels[:16, 16:], labels[16:, :16], labels[16:, 16:] = 1, 2, 3
    for edit in [
        Edit("move", 0, dx=5, dy=5),
        Edit("rotate", 3, angle=45),
        Edit("scale", 1, factor=0.5),
    ]:
        res = apply_edit(quadrants, labels, edit)
        assert_contiguous(res.labels, (32, 32))
        assert res.region >= 0 and res.changed.any()


# --------------------------------------------------------------------------- color / blur / remove


def test_hue_180_changes_only_the_region(scene):
    img, labels = scene
    res = apply_edit(img, labels, Edit("color", OBJ, hue=180))
    mask = labels == OBJ
    assert np.array_equal(res.changed, mask)
    assert np.array_equal(res.image[~mask], img[~mask])
    r, g, b = res.image[mask][0].astype(int)
    assert b > r and g > r  # red turns cyan
    assert np.array_equal(res.labels, labels) and res.region == OBJ


def test_brightness_0_makes_black_and_saturation_0_makes_gray(scene):
    img, labels = scene
    mask = labels == OBJ
    dark = apply_edit(img, labels, Edit("color", OBJ, brightness=0))
    assert (dark.image[mask] == 0).all()
    gray = apply_edit(img, labels, Edit("color", OBJ, saturation=0)).image[mask]
    assert (gray[:, 0] == gray[:, 1]).all() and (gray[:, 1] == gray[:, 2]).all()


def test_rgb_shift_saturates_red(photo):
    labels = np.zeros(photo.shape[:2], np.int32)
    labels[20:60, 30:90] = 1
    res = apply_edit(photo, labels, Edit("color", 1, rgb_shift=(1, 0, 0)))
    assert (res.image[labels == 1, 0] == 255).all()
    assert np.array_equal(res.image[labels == 1, 1:], photo[labels == 1, 1:])
    assert np.array_equal(res.image[labels == 0], photo[labels == 0])


def test_blur_changes_only_region_pixels(photo):
    labels = np.zeros(photo.shape[:2], np.int32)
    labels[20:60, 30:90] = 1
    res = apply_edit(photo, labels, Edit("blur", 1, sigma=3))
    assert res.changed.any() and not res.changed[labels == 0].any()
    assert np.array_equal(res.image[labels == 0], photo[labels == 0])
    assert res.image[labels == 1].std() < photo[labels == 1].std()


@pytest.mark.parametrize(("sigma", "tol"), [(2.0, 1), (5.0, 1), (20.0, 2), (100.0, 2)])
def test_blur_matches_a_full_gaussian_filter(photo, sigma, tol):
    labels = np.zeros(photo.shape[:2], np.int32)
    labels[:50, 70:] = 1  # touches the image's border: border handling matters
    res = apply_edit(photo, labels, Edit("blur", 1, sigma=sigma))
    exact = ndi.gaussian_filter(photo / 255.0, (sigma, sigma, 0), mode="nearest")
    exact = np.round(exact * 255)
    assert np.abs(res.image[labels == 1] - exact[labels == 1]).max() <= tol


def test_remove_fills_with_a_colour(scene):
    img, labels = scene
    res = apply_edit(img, labels, Edit("remove", OBJ, fill="#00ff00"))
    mask = labels == OBJ
    assert (res.image[mask] == (0, 255, 0)).all()
    assert np.array_equal(res.changed, mask)
    assert np.array_equal(res.labels, labels) and res.region == OBJ


def test_remove_inpaints_from_the_surroundings(scene):
    img, labels = scene
    res = apply_edit(img, labels, Edit("remove", OBJ))
    mask = labels == OBJ
    assert np.abs(res.image[mask].astype(int) - OBJ_RGB).sum(axis=1).min() > 100
    assert np.array_equal(res.image[~mask], img[~mask])


# --------------------------------------------------------------------------- inputs


@pytest.mark.parametrize(
    "edit",
    [
        Edit("move", OBJ, dx=5, dy=3),
        Edit("rotate", OBJ, angle=33),
        Edit("scale", OBJ, factor=1.7),
        Edit("color", OBJ, hue=40, rgb_shift=(0.1, 0.1, 0)),
        Edit("blur", OBJ, sigma=4),
        Edit("remove", OBJ),
    ],
)
def test_inputs_are_never_mutated(scene, edit):
    img, labels = scene
    img_before, labels_before = img.copy(), labels.copy()
    res = apply_edit(img, labels, edit)
    assert np.array_equal(img, img_before) and np.array_equal(labels, labels_before)
    assert not np.shares_memory(res.image, img) and not np.shares_memory(res.labels, labels)


def test_float_and_grayscale_images(scene):
    img, labels = scene
    res = apply_edit(img / 255.0, labels, Edit("move", OBJ, dx=3))
    ref = apply_edit(img, labels, Edit("move", OBJ, dx=3))
    assert res.image.dtype == np.uint8
    assert np.array_equal(res.labels, ref.labels)
    assert np.abs(res.image.astype(int) - ref.image).max() <= 1
    gray = apply_edit(img[..., 0], labels, Edit("remove", OBJ, fill="black"))
    assert gray.image.shape == (H, W, 3) and not gray.changed[labels != OBJ].any()


def test_bad_region_and_inputs_raise_helpful_errors(scene):
    img, labels = scene
    with pytest.raises(LimecraftError, match=r"region 7 does not exist.*0\.\.6"):
        apply_edit(img, labels, Edit("move", 7, dx=1))
    with pytest.raises(LimecraftError, match="width and height"):
        apply_edit(img, labels[:, :-1], Edit("move", 0, dx=1))
    with pytest.raises(LimecraftError, match="RGB"):
        apply_edit(np.zeros((H, W, 4), np.uint8), labels, Edit("move", 0, dx=1))
    with pytest.raises(LimecraftError, match="relabel"):
        apply_edit(img, np.where(labels == 3, 9, labels), Edit("move", 0, dx=1))
    with pytest.raises(LimecraftError, match="relabel"):
        apply_edit(img, labels - 1, Edit("move", 0, dx=1))
    with pytest.raises(LimecraftError, match="relabel"):
        apply_edit(img, np.where(labels == 3, 10**12, labels), Edit("move", 0, dx=1))
    with pytest.raises(LimecraftError, match="integers"):
        apply_edit(img, labels.astype(float), Edit("move", 0, dx=1))
    with pytest.raises(LimecraftError, match=r"\[0, 1\]"):
        apply_edit(img * 2.0, labels, Edit("move", 0, dx=1))
    with pytest.raises(LimecraftError, match="Edit"):
        apply_edit(img, labels, {"kind": "move", "region": 0})
    with pytest.raises(LimecraftError, match="at least 1x1"):
        apply_edit(np.zeros((0, 5, 3), np.uint8), np.zeros((0, 5), int), Edit("remove", 0))


# --------------------------------------------------------------------------- apply_edits


def test_apply_edits_stacks_moves(scene):
    img, labels = scene
    two = apply_edits(img, labels, [Edit("move", OBJ, dx=5, dy=2), Edit("move", OBJ, dx=-9, dy=4)])
    one = apply_edit(img, labels, Edit("move", OBJ, dx=-4, dy=6))
    assert np.array_equal(two.labels == two.region, one.labels == one.region)
    assert np.array_equal(two.image[one.labels == one.region], img[labels == OBJ])
    assert_contiguous(two.labels, (H, W))


def test_apply_edits_refers_to_the_previous_label_map():
    img = np.full((20, 20, 3), 90, np.uint8)
    labels = np.zeros((20, 20), np.int32)
    labels[1:3, 1:3] = 1
    labels[10:14, 10:14] = 2
    # the first move covers region 1, so the object is region 1 for the second edit
    edits = [Edit("move", 2, dx=-9, dy=-9), Edit("color", 1, brightness=0)]
    res = apply_edits(img, labels, edits)
    assert res.region == 1
    assert (res.image[res.labels == 1] == 0).all()
    with pytest.raises(LimecraftError, match=r"edit 1 \(recolour region 2.*0\.\.1"):
        apply_edits(img, labels, [edits[0], Edit("color", 2, brightness=0)])


def test_apply_edits_empty_returns_copies(scene):
    img, labels = scene
    res = apply_edits(img, labels, [])
    assert np.array_equal(res.image, img) and np.array_equal(res.labels, labels)
    assert not np.shares_memory(res.image, img) and not np.shares_memory(res.labels, labels)
    assert res.region == -1 and not res.changed.any()


def test_apply_edits_rejects_non_edits(scene):
    img, labels = scene
    with pytest.raises(LimecraftError, match="edit 1: expected an Edit"):
        apply_edits(img, labels, [Edit("move", 0, dx=1), "move"])
    with pytest.raises(LimecraftError, match="apply_edit for a single"):
        apply_edits(img, labels, Edit("move", 0, dx=1))


def test_changed_accumulates_over_edits(scene):
    img, labels = scene
    res = apply_edits(
        img, labels, [Edit("color", 0, brightness=0), Edit("remove", OBJ, fill="black")]
    )
    assert np.array_equal(res.changed, (labels == 0) | (labels == OBJ))


# --------------------------------------------------------------------------- transform_mask


def test_transform_mask_translation_is_exact_and_pure():
    rng = np.random.default_rng(1)
    mask = rng.random((15, 17)) < 0.3
    before = mask.copy()
    out = transform_mask(mask, dx=3, dy=-2)
    assert np.array_equal(out, shifted(mask, 3, -2))
    assert np.array_equal(mask, before) and out is not mask and out.dtype == bool


def test_transform_mask_about_a_center():
    mask = np.zeros((11, 11), bool)
    mask[5, 5] = True  # (x, y) = (5, 5), straight below the center (5, 0)
    out = transform_mask(mask, angle=90, center=(5, 0))
    assert out[0, 10] and out.sum() == 1  # counter-clockwise: below goes to the right
    assert not transform_mask(mask, angle=90, center=(0, 0)).any()  # to (5, -5): outside
    out = transform_mask(mask, factor=2, center=(4, 4))
    assert out[5:7, 5:7].all() and out.sum() == 4  # pixel (5, 5) -> centre (6, 6), 2x2


def test_transform_mask_edge_cases():
    assert not transform_mask(np.zeros((5, 5), bool), angle=30).any()
    one = np.ones((1, 1), bool)
    assert transform_mask(one, angle=45, factor=3).all()
    assert not transform_mask(one, dx=1).any()
    with pytest.raises(LimecraftError, match="2-D"):
        transform_mask(np.zeros(5, bool))
    with pytest.raises(LimecraftError, match=r"\[0.1, 5.0\]"):
        transform_mask(one, factor=0)
    with pytest.raises(LimecraftError, match=r"\(x, y\)"):
        transform_mask(one, center=(1, 2, 3))


# --------------------------------------------------------------------------- any shape


def test_tiny_images_work():
    img = np.array([[[10, 200, 30]]], np.uint8)
    labels = np.zeros((1, 1), np.int32)
    for edit in [
        Edit("move", 0, dx=1),
        Edit("rotate", 0, angle=10),
        Edit("scale", 0, factor=0.1),
        Edit("remove", 0),
        Edit("remove", 0, fill="mean"),
        Edit("blur", 0, sigma=50),
        Edit("color", 0, hue=90),
    ]:
        res = apply_edit(img, labels, edit)
        assert res.image.shape == (1, 1, 3)
        assert_contiguous(res.labels, (1, 1))
    img = np.arange(2 * 5 * 3, dtype=np.uint8).reshape(2, 5, 3) * 8
    labels = np.array([[0, 0, 1, 1, 1], [0, 0, 1, 2, 2]], np.int32)
    res = apply_edit(img, labels, Edit("remove", 1))
    assert res.changed[labels == 1].any() and not res.changed[labels != 1].any()


def test_moving_the_only_region_leaves_a_region_of_its_own():
    img = np.full((10, 10, 3), 50, np.uint8)
    labels = np.zeros((10, 10), np.int32)
    res = apply_edit(img, labels, Edit("move", 0, dx=4, fill="black"))
    assert res.region == 0
    assert np.array_equal(res.labels == 0, shifted(labels == 0, 4, 0))
    assert (res.labels[:, :4] == 1).all()


@settings(max_examples=30, deadline=None)
@given(
    h=st.integers(1, 12),
    w=st.integers(1, 12),
    n_ids=st.integers(1, 5),
    seed=st.integers(0, 2**16),
    kind=st.sampled_from(["move", "rotate", "scale"]),
    dx=st.integers(-14, 14),
    dy=st.integers(-14, 14),
    angle=st.floats(-360, 360),
    factor=st.floats(0.1, 5),
    fill=st.sampled_from(["inpaint", "mean", "gray", "#102030"]),
    data=st.data(),
)
def test_geometric_edits_on_any_shape(h, w, n_ids, seed, kind, dx, dy, angle, factor, fill, data):
    rng = np.random.default_rng(seed)
    labels = relabel(rng.integers(0, n_ids, (h, w)))
    image = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
    region = data.draw(st.integers(0, int(labels.max())))
    params = {"move": {"dx": dx, "dy": dy}, "rotate": {"angle": angle}, "scale": {"factor": factor}}
    edit = Edit(kind, region, fill=fill, **params[kind])
    before = (image.copy(), labels.copy())
    res = apply_edit(image, labels, edit)
    assert_contiguous(res.labels, (h, w))
    assert res.changed.shape == (h, w) and res.changed.dtype == bool
    assert res.image.shape == (h, w, 3) and res.image.dtype == np.uint8
    expected = transform_mask(labels == region, **params[kind])
    if res.region == -1:
        assert not expected.any()
    else:
        assert np.array_equal(res.labels == res.region, expected)
    assert np.array_equal(image, before[0]) and np.array_equal(labels, before[1])
