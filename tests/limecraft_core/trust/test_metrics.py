"""Unit tests of limecraft_core.trust's metrics (trust/metrics.py, trust/road.py): hand-computed
cases and edge cases (the pytest setup turns every warning into an error, so these also show
that no edge case warns)."""

import json
import math

import numpy as np
import pytest
from scipy.stats import pearsonr

from limecraft_core import LimecraftError
from limecraft_core.trust import (
    ROAD_NOISE,
    expected_regions,
    faithfulness_correlation,
    irof,
    localisation,
    noisy_linear_imputation,
    random_subsets,
    road,
    road_counts,
    road_images,
    road_order,
    sparseness,
)


def _finite_json(result) -> dict:
    """to_dict() is JSON-ready and holds no NaN or inf."""
    d = result.to_dict()
    json.dumps(d, allow_nan=False)
    for key in ("definition", "baseline", "reading"):
        assert isinstance(d[key], str) and d[key]
    assert isinstance(d["steps"], int)
    return d


# --------------------------------------------------------------------------- IROF


def test_irof_by_hand():
    r = irof([2.0, 1.0, 0.5, 0.0], fill="black")
    # ratios 1, .5, .25, 0; K - trapz(.5, .25, 0) = 3 - (.375 + .125)
    assert r.value == pytest.approx(2.5)
    assert r.per_region == pytest.approx(2.5 / 3)
    assert r.curve == pytest.approx([1, 0.5, 0.25, 0])
    assert (r.baseline, r.steps, r.reading) == ("black", 4, "higher is better")
    _finite_json(r)


def test_irof_edge_cases():
    assert irof([0.4, 0.1]).value == 1.0  # K = 1: one point, no area
    assert irof([0.5, 0.5, 0.5]).value == pytest.approx(1.0)  # nothing changes
    flat = irof([0.0, 0.2, 0.3])  # zero original score: taken as no measurable drop
    assert flat.value == pytest.approx(1.0) and flat.curve == [1.0, 1.0, 1.0]
    _finite_json(flat)
    for bad in ([0.3], [0.3, float("nan")], [[0.1, 0.2]]):
        with pytest.raises(LimecraftError):
            irof(bad)


# --------------------------------------------------------------------------- ROAD


def test_imputation_by_hand():
    img = np.zeros((3, 3, 1))
    img[1, 0] = img[1, 2] = img[0, 1] = img[2, 1] = 1.0  # 4-neighbours of the centre
    img[0, 0] = 0.6  # a diagonal
    hole = np.zeros((3, 3), bool)
    hole[1, 1] = True
    out = noisy_linear_imputation(img, hole, noise=0)
    assert out[1, 1, 0] == pytest.approx(4 / 6 + 0.6 / 12)
    # a corner: the missing neighbours' weights are dropped, the others renormalised
    img2 = np.array([[0.0, 1.0], [2.0, 3.0]])[..., None]
    corner = np.array([[True, False], [False, False]])
    got = noisy_linear_imputation(img2, corner, noise=0)[0, 0, 0]
    assert got == pytest.approx((1 / 6 + 2 / 6 + 3 / 12) / (5 / 12))


def test_imputation_solves_joint_holes_and_keeps_ramps():
    """A linear ramp is reproduced exactly inside any interior hole (the weights are symmetric),
    which needs the hole pixels solved jointly."""
    r, c = np.mgrid[:12, :12]
    img = np.stack([r + 2.0 * c, 3.0 - r, 0.5 * c], axis=-1) / 40
    hole = np.zeros((12, 12), bool)
    hole[3:9, 2:10] = True
    out = noisy_linear_imputation(img, hole, noise=0)
    np.testing.assert_allclose(out, img, atol=1e-12)


def test_imputation_noise_dtype_and_inputs_untouched():
    rng = np.random.default_rng(0)
    img = rng.random((20, 20, 3)).astype(np.float32)
    before = img.copy()
    hole = np.zeros((20, 20), bool)
    hole[2:18, 2:18] = True
    a = noisy_linear_imputation(img, hole, noise=0.05, rng=1)
    b = noisy_linear_imputation(img, hole, noise=0.05, rng=1)
    clean = noisy_linear_imputation(img, hole, noise=0)
    np.testing.assert_array_equal(a, b)  # seeded
    np.testing.assert_array_equal(img, before)
    assert a.dtype == np.float32 and clean.dtype == np.float32
    assert np.std(a[hole] - clean[hole]) == pytest.approx(0.05, rel=0.1)
    np.testing.assert_array_equal(a[~hole], img[~hole])
    u8 = noisy_linear_imputation((img * 255).astype(np.uint8), hole, noise=0)
    assert u8.dtype == np.float32 and u8.max() <= 1.0
    np.testing.assert_array_equal(noisy_linear_imputation(img, np.zeros_like(hole), 0.1), img)


def test_imputation_rejects():
    img = np.zeros((4, 4, 3))
    with pytest.raises(LimecraftError, match="whole image"):
        noisy_linear_imputation(img, np.ones((4, 4), bool))
    with pytest.raises(LimecraftError):
        noisy_linear_imputation(img, np.ones((3, 4), bool))
    with pytest.raises(LimecraftError):
        noisy_linear_imputation(img, np.zeros((4, 4), bool), noise=-1)


def test_road_counts_and_order():
    assert road_counts(1).tolist() == []
    assert road_counts(5).tolist() == [1, 2, 3, 4]
    assert road_counts(10).tolist() == list(range(1, 10))
    assert road_counts(16).tolist() == [2, 3, 5, 6, 8, 10, 11, 13, 14]
    assert road_counts(100).tolist() == list(range(10, 100, 10))
    assert road_counts(100, steps=4).tolist() == [25, 50, 75]
    w = np.array([0.1, 0.5, -0.2, 0.3])
    assert road_order(w).tolist() == [1, 3, 0, 2]
    assert road_order(w, "lerf").tolist() == [2, 0, 3, 1]
    with pytest.raises(LimecraftError):
        road_order(w, "random")


def _grid(n: int = 12, side: int = 4) -> np.ndarray:
    return (np.arange(n)[:, None] // side) * (n // side) + np.arange(n)[None, :] // side


def test_road_images_remove_regions_in_order():
    labels = _grid()  # 3x3 regions of 4x4 pixels
    img = np.random.default_rng(0).random((12, 12, 3)).astype(np.float32)
    w = np.array([0.9, 0.1, 0.2, 0.3, 0.8, 0.4, 0.5, 0.6, 0.7])
    morf = road_images(img, labels, w, noise=0)
    lerf = road_images(img, labels, w, order="lerf", noise=0)
    assert morf.shape == lerf.shape == (8, 12, 12, 3)
    changed = np.any(np.abs(morf - img) > 1e-6, axis=-1)
    for step, n in enumerate(road_counts(9)):
        inside = np.isin(labels, road_order(w)[:n])
        assert not changed[step][~inside].any()  # only the removed regions change
        assert changed[step][inside].mean() > 0.9
    np.testing.assert_array_equal(np.any(np.abs(lerf[0] - img) > 1e-6, axis=-1), labels == 1)
    a = road_images(img, labels, w, rng=5)
    np.testing.assert_array_equal(a, road_images(img, labels, w, rng=5))
    assert road_images(img, np.zeros((12, 12), int), [1.0]).shape == (0, 12, 12, 3)
    with pytest.raises(LimecraftError):
        road_images(img, labels, w[:-1])


def test_road_summary_by_hand():
    r = road([0.2, 0.1], [0.8, 0.6], k=3)
    assert r.fractions == pytest.approx([1 / 3, 2 / 3])
    assert (r.morf_area, r.lerf_area, r.value) == pytest.approx((0.15, 0.7, 0.55))
    assert r.steps == 4 and str(ROAD_NOISE) in r.baseline
    _finite_json(r)
    one = road([], [], k=1)
    assert (one.morf_area, one.lerf_area, one.value, one.steps) == (0.0, 0.0, 0.0, 0)
    _finite_json(one)
    with pytest.raises(LimecraftError, match="2 outputs"):
        road([0.1], [0.2, 0.3], k=3)


# --------------------------------------------------------------------------- faithfulness correlation


def test_faithfulness_correlation_by_hand():
    w = np.array([1.0, 2.0, 3.0])
    masks = ~np.eye(3, dtype=bool)  # hide region 0, 1, 2 in turn
    r = faithfulness_correlation(w, masks, np.array([9.0, 8.0, 7.0]), 10.0, fill="blur")
    assert r.value == pytest.approx(1.0)
    assert (r.mean_hidden, r.steps, r.baseline) == (1.0, 3, "blur")
    assert faithfulness_correlation(w, masks, np.array([7.0, 8.0, 9.0]), 10.0).value == (
        pytest.approx(-1.0)
    )
    _finite_json(r)


def test_faithfulness_correlation_is_pearson():
    rng = np.random.default_rng(1)
    w = rng.normal(size=8)
    masks = rng.random((50, 8)) < 0.5
    out = rng.random(50)
    got = faithfulness_correlation(w, masks, out, 0.7).value
    assert got == pytest.approx(pearsonr((~masks) @ w, 0.7 - out).statistic)


def test_faithfulness_correlation_undefined_is_zero():
    masks = random_subsets(6, 10, 2, rng=0)
    out = np.linspace(0, 1, 10)
    assert faithfulness_correlation(np.zeros(6), masks, out, 1.0).value == 0.0  # all-zero weights
    assert faithfulness_correlation(np.ones(6), masks, out, 1.0).value == 0.0  # equal sums
    assert faithfulness_correlation(np.arange(6.0), masks, np.ones(10), 1.0).value == 0.0
    one = faithfulness_correlation([2.0], np.array([[False]]), np.array([0.1]), 0.5)
    assert one.value == 0.0 and one.steps == 1  # K = 1, one subset
    empty = faithfulness_correlation([2.0], np.zeros((0, 1), bool), np.zeros(0), 0.5)
    assert (empty.value, empty.mean_hidden) == (0.0, 0.0)
    with pytest.raises(LimecraftError):
        faithfulness_correlation(np.ones(6), masks, out[:-1], 1.0)


def test_random_subsets():
    m = random_subsets(10, 7, 3, rng=2)
    assert m.shape == (7, 10) and m.dtype == bool
    assert (~m).sum(axis=1).tolist() == [3] * 7
    np.testing.assert_array_equal(m, random_subsets(10, 7, 3, rng=2))
    assert random_subsets(1, 2, 1).tolist() == [[False], [False]]
    with pytest.raises(LimecraftError):
        random_subsets(3, 2, 4)


# --------------------------------------------------------------------------- sparseness


def test_sparseness_by_hand():
    assert sparseness([0, 0, 0, 1.0]).value == pytest.approx(0.75)  # the maximum, 1 - 1/K
    assert sparseness([-1.0, 1.0]).value == 0.0  # signs ignored
    assert sparseness([1.0, 2.0]).value == pytest.approx((-1 * 1 + 1 * 2) / (2 * 3))
    assert sparseness([0.0, 0.0, 0.0]).value == 0.0  # all zero: defined, no warning
    assert sparseness([5.0]).value == 0.0  # K = 1
    _finite_json(sparseness([0.0]))
    with pytest.raises(LimecraftError):
        sparseness([])


# --------------------------------------------------------------------------- localisation


def test_expected_regions():
    labels = _grid()  # regions of 16 pixels
    mask = np.zeros((12, 12), bool)
    mask[:4, :4] = True  # region 0, whole
    mask[:4, 4:6] = True  # region 1, half
    mask[4:8, :1] = True  # region 3, a quarter
    assert np.flatnonzero(expected_regions(labels, mask)).tolist() == [0, 1]
    assert np.flatnonzero(expected_regions(labels, mask, 0.25)).tolist() == [0, 1, 3]
    assert np.flatnonzero(expected_regions(labels, mask, 1.0)).tolist() == [0]
    assert not expected_regions(labels, np.zeros((12, 12), bool)).any()
    with pytest.raises(LimecraftError):
        expected_regions(labels, mask, 0)
    with pytest.raises(LimecraftError):
        expected_regions(labels, mask[:-1])


def test_localisation_by_hand():
    w = np.array([3.0, -1.0, 2.0, 0.5])
    e = np.array([True, False, False, True])
    loc = localisation(w, e)
    assert loc.relevance_mass == pytest.approx(3.5 / 5.5)
    assert loc.relevance_rank_accuracy == 0.5  # top-2 = {0, 2}
    assert loc.pointing_game is True
    assert (loc.expected, loc.positive_mass) == (2, 5.5)
    assert loc.mask_coverage is None and loc.region_purity is None
    assert loc.top == 0 and loc.top_inside is None
    assert localisation(w, ~e).pointing_game is False
    _finite_json(loc)


def test_localisation_coverage():
    labels = _grid()
    mask = np.zeros((12, 12), bool)
    mask[:4, :6] = True  # region 0 whole, region 1 half: 24 pixels
    e = expected_regions(labels, mask)  # regions 0 and 1: 32 pixels
    loc = localisation(np.arange(9.0), e, labels=labels, mask=mask)
    assert loc.mask_coverage == pytest.approx(1.0)
    assert loc.region_purity == pytest.approx(24 / 32)
    small = localisation(
        np.arange(9.0), expected_regions(labels, mask, 1.0), labels=labels, mask=mask
    )
    assert small.mask_coverage == pytest.approx(16 / 24) and small.region_purity == 1.0
    assert (loc.top, loc.top_inside) == (8, 0.0)  # the largest weight: region 8, outside
    half = localisation(np.eye(9)[1], e, labels=labels, mask=mask)
    assert (half.top, half.top_inside) == (1, 0.5)  # region 1: half its pixels inside
    with pytest.raises(LimecraftError):
        localisation(np.arange(9.0), e, labels=labels)


def test_localisation_edge_cases():
    e = np.array([True, False, False])
    none_pos = localisation(np.array([-1.0, -2.0, -3.0]), e)
    assert none_pos.relevance_mass == 0.0 and none_pos.positive_mass == 0.0
    assert none_pos.pointing_game is True  # the top region (-1) is inside
    empty = localisation(np.array([1.0, 2.0, 3.0]), np.zeros(3, bool))
    assert (empty.relevance_mass, empty.relevance_rank_accuracy, empty.pointing_game) == (
        0.0,
        0.0,
        False,
    )
    zeros = localisation(np.zeros(3), e)  # all tied at the top: a hit, as in Quantus
    assert (zeros.relevance_mass, zeros.pointing_game) == (0.0, True)
    k1 = localisation(np.array([0.4]), np.array([True]))
    assert (k1.relevance_mass, k1.relevance_rank_accuracy, k1.pointing_game) == (1.0, 1.0, True)
    for r in (none_pos, empty, zeros, k1):
        d = _finite_json(r)
        assert all(not (isinstance(v, float) and math.isnan(v)) for v in d.values())
    with pytest.raises(LimecraftError):
        localisation(np.ones(3), np.ones(2, bool))
