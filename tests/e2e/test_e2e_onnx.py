"""In the browser: an analyst's Keras/TensorFlow-style model, exported to ONNX (channels last,
labels in its metadata), uploaded through the sidebar and used end to end: explain, inspect
an edit, export."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from e2e_helpers import (
    click,
    download,
    enter,
    explain,
    goto,
    open_app,
    open_expander,
    pick,
    upload,
    uploader,
)
from e2e_helpers import shot as _shot
from onnx import TensorProto, helper, numpy_helper
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NAMES = ["reddish", "greenish", "bluish", "bright"]
LABEL = "(?:" + "|".join(NAMES) + ")"


def shot(page, name: str) -> None:
    _shot(page, f"views-{name}", tall=True)


def keras_like_onnx(path) -> None:
    """x: float32 [N, 32, 32, 3] (NHWC, symbolic batch) -> [N, 4] scores from the mean R, G, B
    and the brightness; the class names in metadata_props["labels"] as a JSON list."""
    w = (
        np.array(
            [
                [1.0, -0.5, -0.5],  # reddish
                [-0.5, 1.0, -0.5],  # greenish
                [-0.5, -0.5, 1.0],  # bluish
                [1 / 3, 1 / 3, 1 / 3],  # bright
            ],
            np.float32,
        )
        * 20
    )  # sharp enough that hiding a region moves the scores
    b = np.array([0.0, 0.0, 0.0, -6.0], np.float32)
    nodes = [
        helper.make_node("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("GlobalAveragePool", ["nchw"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["feats"]),
        helper.make_node("Gemm", ["feats", "w", "b"], ["scores"], transB=1),
    ]
    g = helper.make_graph(
        nodes,
        "keras_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32, 32, 3])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    model.metadata_props.add(key="labels", value=json.dumps(NAMES))
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_a_keras_style_onnx_model_with_metadata_labels_end_to_end(page, app_url, tmp_path):
    model = tmp_path / "keras_model.onnx"
    keras_like_onnx(model)

    # 1. upload it through the sidebar
    open_app(page, app_url)
    side = page.locator("[data-testid='stSidebar']")
    page.get_by_text("Upload your own model").click()  # an expander: no rerun
    upload(page, uploader(page, "Model file"), str(model), what="upload")
    expect(side.get_by_text("keras_model.onnx", exact=True).first).to_be_visible()
    click(page, page.get_by_role("button", name="Use this model"))
    note = page.get_by_text("Now using").first
    expect(note).to_contain_text("Now using keras_model.onnx (4 classes)")
    # the sidebar's model line: what the graph says (ONNX, channels last, labels in metadata)
    line = side.get_by_text(re.compile(r"ONNX opset")).first
    expect(line).to_be_visible()
    facts = line.inner_text()
    assert "keras_model.onnx" in facts and "NHWC" in facts, facts
    assert "32×32" in facts and "4 classes" in facts and "labels in metadata" in facts, facts
    assert "reddish" in facts and "model-" not in facts, facts
    # the top-5 speaks the metadata's names (4 classes: four rows), never "class i"
    top = side.get_by_text(re.compile(rf"^{LABEL} · \d\.\d{{3}}$"))
    expect(top).to_have_count(4)
    expect(side.get_by_text(re.compile(r"^class \d+ · "))).to_have_count(0)
    shot(page, "onnx-model-1400")

    # 2. explain with a few samples
    open_expander(page, "Settings")
    enter(page, page.get_by_role("spinbutton", name="Samples"), 60, key="Tab")
    explain(page)
    expect(page.get_by_text(re.compile(rf"^{LABEL} · model output")).first).to_be_visible()
    expect(page.get_by_text(re.compile(rf"^Weights for {LABEL}$")).first).to_be_visible()
    expect(page.get_by_text("Something went wrong")).to_have_count(0)
    shot(page, "onnx-explain-1400")

    # 3. inspect: remove the region the explanation weighs most and see the model's new scores
    goto(page, "Inspect")
    page.get_by_role("combobox", name="Region").click()
    pick(page, page.get_by_role("option").first)
    click(page, page.get_by_text("remove", exact=True))
    summary = page.get_by_text(re.compile(r"^Top class:")).first
    expect(summary).to_have_text(
        re.compile(rf"^Top class: {LABEL} \d\.\d{{3}} → \d\.\d{{3}} \([+-]\d\.\d{{3}}\)")
    )
    expect(page.get_by_text(re.compile(r"^class \d+"))).to_have_count(0)
    shot(page, "onnx-inspect-1400")

    # 4. export: the analysis names the uploaded file, the explanation a metadata label
    goto(page, "Export")
    data = json.loads(download(page, "Analysis (JSON)"))
    assert data["model"]["name"].endswith("keras_model.onnx"), data["model"]
    ex = json.loads(download(page, "Explanation (JSON)"))
    assert ex["target"]["label"] in NAMES, ex["target"]
    assert {c["label"] for c in ex["classes"]} <= set(NAMES)
    assert {t["label"] for t in ex["top_predictions"]} == set(NAMES)
