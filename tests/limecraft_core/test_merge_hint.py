"""From disagreement to a merge (issue 52, item 3): adjacent disputed regions' interaction index,
exact or from the shared sample; the interacting pair is flagged and merging it raises the
agreement; an additive model gets no suggestion; the suggestion rides in the file's block."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from toys import LinearPixels

import limecraft_core as lc
from limecraft_core import ExplainConfig, Explanation, compare_explainers, explain
from limecraft_core.merge_hint import (
    INTERACTION_SHARE,
    MIN_Z,
    adjacent_pairs,
    disputed_regions,
    merge_hint,
    sample_interaction,
)

SIZE = 24


def _grid(rows: int, cols: int) -> np.ndarray:
    r = np.arange(SIZE)[:, None] * rows // SIZE
    c = np.arange(SIZE)[None, :] * cols // SIZE
    return (r * cols + c).astype(np.int64)


class Together(torch.nn.Module):
    """Class 0: 8 x mean(a) x mean(b) + 5.5 x mean(c) + 0.5 x the mean of each other region.
    On a white image with a black fill each mean is 1 kept, 0 hidden: a and b count only
    together (interaction 8), and the rest is additive."""

    def __init__(self, labels: np.ndarray, a: int, b: int, c: int):
        super().__init__()
        self.labels = torch.from_numpy(labels)
        self.a, self.b, self.c = a, b, c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = int(self.labels.max()) + 1
        m = torch.stack([x[:, :, self.labels == r].mean(dim=(1, 2)) for r in range(k)], 1)
        score = 8.0 * m[:, self.a] * m[:, self.b] + 5.0 * m[:, self.c] + 0.5 * m.sum(1)
        score = score - 0.5 * (m[:, self.a] + m[:, self.b])
        return torch.stack([score, torch.zeros_like(score)], 1)


CFG = ExplainConfig.from_flat(output_space="raw", fill="black", samples=300, seed=3)
WHITE = np.ones((SIZE, SIZE, 3), np.float32)
FA = lambda c: float(np.mean([p.feature for p in c.agreement.pairs]))  # noqa: E731


def test_adjacent_pairs_share_an_edge():
    got = {tuple(p) for p in adjacent_pairs(_grid(2, 3)).tolist()}
    assert got == {(0, 1), (1, 2), (3, 4), (4, 5), (0, 3), (1, 4), (2, 5)}
    assert adjacent_pairs(np.zeros((4, 4), int)).shape == (0, 2)


def test_the_disputed_regions_carry_half_the_spread():
    assert disputed_regions(np.array([0.1, 0.5, 0.4, 0.0])) == (1,)
    assert disputed_regions(np.array([0.3, 0.2, 0.3, 0.2])) == (0, 2)
    assert disputed_regions(np.zeros(4)) == ()


def test_the_sample_estimate_is_the_pair_term():
    z = np.random.default_rng(0).random((400, 6)) < 0.5
    y = 1 + 2 * z[:, 0] - z[:, 3] + 3 * (z[:, 1] & z[:, 2])
    index, se = sample_interaction(z, y, np.ones(400), 1, 2)
    assert index == pytest.approx(3.0) and se < 1e-9
    # a pair without a joint term: the unfitted z1 z2 is the only noise, within MIN_Z errors
    index, se = sample_interaction(z, y, np.ones(400), 0, 3)
    assert abs(index) < MIN_Z * se


@pytest.mark.parametrize(
    "rows, cols, a, b, c, estimator", [(2, 3, 1, 4, 2, "exact"), (3, 4, 5, 6, 0, "sample")]
)
def test_the_interacting_pair_is_flagged_and_merging_it_raises_the_agreement(
    rows, cols, a, b, c, estimator
):
    """K = 6 reads the exact 2^K table, K = 12 (above SHAPLEY_MAX_K) the shared sample."""
    labels = _grid(rows, cols)
    model = Together(labels, a, b, c)
    before = compare_explainers(WHITE, model, labels, config=CFG, k=1)
    hint = before.merge
    assert hint is not None and hint.estimator == estimator
    assert hint.pair == (a, b), hint.sentence
    assert hint.index == pytest.approx(8.0, rel=1e-3)
    assert hint.sentence == f"Regions {a} and {b} interact (index 8): merge them and explain again."
    assert hint.threshold > 0 and abs(hint.index) >= hint.threshold
    assert (before.interactions is not None) == (estimator == "exact")
    # compose the merged regions as Craft's "Merge selected" does, and compare again
    merged = lc.merge_regions(lc.regions_from_labels(labels), list(hint.pair))
    after = compare_explainers(WHITE, model, merged, config=CFG, k=1)
    assert FA(after) > FA(before)
    assert after.agreement.sentence.startswith("All 4 methods agree on the top 1")
    assert after.merge is not None and after.merge.pair is None


@pytest.mark.parametrize("rows, cols", [(2, 3), (3, 4)])
def test_an_additive_model_gets_no_suggestion(rows, cols):
    img = np.random.default_rng(0).random((SIZE, SIZE, 3)).astype(np.float32)
    labels = _grid(rows, cols)
    cfg = ExplainConfig.from_flat(output_space="raw", fill="gray", samples=300)
    cmp = compare_explainers(img, LinearPixels((SIZE, SIZE)), labels, config=cfg)
    hint = cmp.merge
    assert hint is not None and hint.pair is None
    assert hint.sentence.startswith(("No adjacent disputed regions", "The methods agree"))
    scale = np.median([np.abs(a.values).max() for a in cmp.attributions])
    assert all(abs(t.index) < 1e-3 * scale for t in hint.tested)
    assert hint.threshold == pytest.approx(INTERACTION_SHARE * scale)


def test_no_disagreement_says_nothing_to_merge_and_one_method_is_not_tested():
    hint = merge_hint(_grid(2, 2), np.zeros(4), [np.ones(4)], interactions=np.zeros((4, 4)))
    assert hint.pair is None and hint.sentence == "The methods agree: nothing to merge."
    one = compare_explainers(WHITE, Together(_grid(2, 3), 1, 4, 2), _grid(2, 3), ("lime",),
                             config=CFG)  # fmt: skip
    assert one.merge is None and one.interactions is None


def test_the_suggestion_rides_in_the_file_and_old_blocks_still_load():
    labels = _grid(2, 3)
    model = Together(labels, 1, 4, 2)
    ex = explain(WHITE, model, segments=labels, config=CFG)
    cmp = compare_explainers(WHITE, model, ex.segments, config=ex.config, target=ex.target)
    with_block = dataclasses.replace(ex, explainers=cmp)
    doc = json.loads(with_block.to_json())
    assert doc["explainers"]["merge"]["pair"] == [1, 4]
    # the report's section says it too
    from limecraft_core.io.report import html_report

    page = html_report(image=(WHITE * 255).astype(np.uint8), explanation=with_block)
    assert (
        "<strong>Regions 1 and 4 interact (index 8): merge them and explain again.</strong>" in page
    )
    back = Explanation.from_dict(doc).explainers.merge
    assert back.to_dict() == cmp.merge.to_dict()
    del doc["explainers"]["merge"]  # a file written before the merge test
    assert Explanation.from_dict(doc).explainers.merge is None
    doc["explainers"]["merge"] = {"pair": [4, 1]}
    with pytest.raises(lc.LimecraftError, match=r"explainers\.merge\.pair"):
        Explanation.from_dict(doc)
