"""An explanation carries several explainers' results (issue 52): the file's ``explainers``
block is written only when they ran, read back through the schema, and a file without it
still loads."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from toys import LinearPixels

from limecraft_core import (
    EXPLAINERS,
    ExplainConfig,
    Explanation,
    LimecraftError,
    compare_explainers,
    explain,
)
from limecraft_core.comparison import NORMALISATION

SIZE = 20


# every method but Grad-CAM, which needs a convolutional layer that LinearPixels has not
METHODS = tuple(m for m in EXPLAINERS if m != "gradcam")


@pytest.fixture(scope="module")
def explained() -> Explanation:
    img = np.random.default_rng(0).random((SIZE, SIZE, 3)).astype(np.float32)
    labels = (np.arange(SIZE)[:, None] * 2 // SIZE) * 2 + np.arange(SIZE)[None, :] * 2 // SIZE
    model = LinearPixels((SIZE, SIZE))
    cfg = ExplainConfig.from_flat(samples=60, seed=1, output_space="raw", fill="gray")
    ex = explain(img, model, segments=labels, config=cfg)
    cmp = compare_explainers(img, model, ex.segments, METHODS, config=ex.config, target=ex.target)
    return dataclasses.replace(ex, explainers=cmp)


def test_the_block_round_trips_through_the_file(explained):
    doc = json.loads(explained.to_json())
    block = doc["explainers"]
    assert list(block["methods"]) == list(METHODS)
    assert block["normalisation"] == NORMALISATION
    assert {"k", "pairs", "spread", "disagreeing", "sentence"} <= set(block["agreement"])
    # the class entries keep their keys (the goldens compare them exactly)
    assert "explainers" not in doc["classes"][0]
    back = Explanation.from_json(json.dumps(doc)).explainers
    cmp = explained.explainers
    assert back is not None and back.target == cmp.target and back.label == cmp.label
    for name in METHODS:
        np.testing.assert_array_equal(back.values(name), cmp.values(name))
    assert back.agreement.methods == cmp.agreement.methods
    assert back.agreement.sentence == cmp.agreement.sentence
    assert back.agreement.disagreeing == cmp.agreement.disagreeing
    for a, b in zip(back.agreement.pairs, cmp.agreement.pairs, strict=True):
        assert (a.a, a.b, a.feature, a.rank, a.sign, a.signed_rank) == (
            b.a,
            b.b,
            b.feature,
            b.rank,
            b.sign,
            b.signed_rank,
        )
        np.testing.assert_equal(a.spearman, b.spearman)
    np.testing.assert_array_equal(back.interactions, cmp.interactions)
    assert back.passes == cmp.passes and back.n_regions == cmp.n_regions == 4
    assert Explanation.from_dict(doc).to_dict()["explainers"] == block


def test_a_file_without_the_block_still_loads(explained):
    plain = dataclasses.replace(explained, explainers=None)
    doc = plain.to_dict()
    assert "explainers" not in doc
    assert Explanation.from_dict(doc).explainers is None


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda b: b["methods"]["lime"].update(values=[1.0]), "explainers.methods.lime.values"),
        (lambda b: b.update(methods={}), "explainers.methods must be a non-empty object"),
        (lambda b: b["agreement"]["pairs"][0].update(rank=2), "a share in [0, 1]"),
        (lambda b: b["agreement"].update(disagreeing=[9]), "region ids in [0, 4)"),
    ],
)
def test_a_bad_block_is_one_line_naming_where(explained, change, words):
    doc = explained.to_dict()
    change(doc["explainers"])
    with pytest.raises(LimecraftError, match="explanation JSON is malformed") as e:
        Explanation.from_dict(doc)
    assert words in str(e.value) and "\n" not in str(e.value)
