"""Agreement between explainers (issue 52, item 2): the disagreement problem's four top-k
measures and Spearman on hand-made vectors with known answers, the one colour scale, the
sentence and the regions in dispute."""

from __future__ import annotations

import numpy as np
import pytest

from limecraft_core import LimecraftError
from limecraft_core.agreement import (
    agreement,
    feature_agreement,
    normalise,
    rank_agreement,
    sign_agreement,
    signed_rank_agreement,
    spearman,
    top_k,
)

# a's top 3 by |value|: 0 (+5), 1 (-4), 2 (+3); b's: 0 (+5), 2 (-4), 1 (-3)
A = np.array([5.0, -4.0, 3.0, 0.5, 0.1])
B = np.array([5.0, -3.0, -4.0, 0.2, 1.0])


def test_top_k_by_absolute_value_ties_to_the_lower_id():
    assert top_k(A, 3).tolist() == [0, 1, 2]
    assert top_k(np.array([1.0, -2.0, 2.0]), 2).tolist() == [1, 2]


def test_the_four_measures_on_known_vectors():
    # same three regions; same position only for region 0; same sign for 0 and 1
    assert feature_agreement(A, B, 3) == 1.0
    assert rank_agreement(A, B, 3) == pytest.approx(1 / 3)
    assert sign_agreement(A, B, 3) == pytest.approx(2 / 3)
    assert signed_rank_agreement(A, B, 3) == pytest.approx(1 / 3)
    # top 4: a adds region 3, b adds region 4: three of four shared
    assert feature_agreement(A, B, 4) == 0.75
    assert sign_agreement(A, B, 4) == 0.5
    # a method against itself agrees on everything
    for f in (feature_agreement, rank_agreement, sign_agreement, signed_rank_agreement):
        assert f(A, A, 3) == 1.0
    # the opposite attribution: same regions and ranks, every sign different
    assert rank_agreement(A, -A, 3) == 1.0
    assert sign_agreement(A, -A, 3) == 0.0 and signed_rank_agreement(A, -A, 3) == 0.0


def test_spearman_on_known_vectors():
    assert spearman(A, A) == pytest.approx(1.0)
    assert spearman(A, -A) == pytest.approx(-1.0)
    # ranks of A: [5, 1, 4, 3, 2]; of B: [5, 2, 1, 3, 4]; d^2 = 0+1+9+0+4 = 14
    assert spearman(A, B) == pytest.approx(1 - 6 * 14 / (5 * 24))
    assert np.isnan(spearman(A, np.zeros(5)))


def test_one_colour_scale_divides_by_the_largest_absolute_value():
    np.testing.assert_allclose(normalise(A), A / 5.0)
    np.testing.assert_allclose(normalise(np.array([0.0, -2.0, 1.0])), [0.0, -1.0, 0.5])
    np.testing.assert_array_equal(normalise(np.zeros(3)), np.zeros(3))


def test_the_sentence_names_the_agreeing_group_and_the_odd_one_out():
    lime = np.array([0.1, 2.0, -1.0, 0.5, 0.0])
    values = {"LIME": lime, "KernelSHAP": lime * 3, "occlusion": lime * 2, "RISE": np.array(
        [0.1, 1.0, 0.2, 0.0, 3.0]
    )}  # fmt: skip
    a = agreement(values, k=3)
    assert a.sentence == (
        "LIME, KernelSHAP and occlusion agree on the top 3 and their signs; RISE puts region 4 "
        "first."
    )
    assert a.methods == ("LIME", "KernelSHAP", "occlusion", "RISE")
    assert len(a.pairs) == 6
    first = a.pairs[0]
    assert (first.a, first.b, first.feature, first.signed_rank) == ("LIME", "KernelSHAP", 1, 1)
    # on the shared scale region 4 is 0 for three methods and 1 for RISE (spread 1); region 1
    # is 1 and 1/3 (2/3); region 2 is -1/2 and 1/15 (17/30)
    assert a.disagreeing[:3] == (4, 1, 2)
    np.testing.assert_allclose(a.spread[[1, 2]], [2 / 3, 17 / 30])
    np.testing.assert_allclose(a.spread[4], 1.0)
    assert agreement({"LIME": lime, "Shapley": lime}, k=2).sentence == (
        "All 2 methods agree on the top 2 and their signs (region 1 first)."
    )
    names = ["sky", "dog", "grass", "tag", "watermark"]
    b = agreement({"LIME": lime, "RISE": values["RISE"]}, k=2, region_names=names)
    assert b.sentence == (
        "No two methods agree on the top 2 and their signs: LIME puts dog first; RISE puts "
        "watermark first."
    )


def test_bad_input_says_what_is_wrong():
    with pytest.raises(LimecraftError, match="different numbers of regions"):
        agreement({"a": np.ones(3), "b": np.ones(4)})
    with pytest.raises(LimecraftError, match="k must be"):
        feature_agreement(A, B, 9)
    with pytest.raises(LimecraftError, match="finite"):
        normalise(np.array([1.0, np.nan]))
