"""In the browser: an analyst's Keras/TensorFlow-style model, exported to ONNX (channels last,
labels in its metadata), uploaded through the sidebar and used end to end: explain, inspect
an edit, export."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_e2e_views import download, explain, goto, open_app, shot, uploader, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NAMES = ["reddish", "greenish", "bluish", "bright"]
LABEL = "(?:" + "|".join(NAMES) + ")"


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
    page.get_by_text("Upload your own model").click()
    uploader(page, "Model file").set_input_files(str(model))
    side.get_by_text("keras_model.onnx", exact=True).first.wait_for(timeout=60_000)
    wait_idle(page)
    page.get_by_role("button", name="Use this model").click()
    wait_idle(page)
    note = page.get_by_text("Now using").first
    note.wait_for(timeout=120_000)
    wait_idle(page)
    assert "Now using keras_model.onnx (4 classes)" in note.inner_text(), note.inner_text()
    # the sidebar's model line: what the graph says (ONNX, channels last, labels in metadata)
    facts = side.get_by_text(re.compile(r"ONNX opset")).first.inner_text()
    assert "keras_model.onnx" in facts and "NHWC" in facts, facts
    assert "32×32" in facts and "4 classes" in facts and "labels in metadata" in facts, facts
    assert "reddish" in facts and "model-" not in facts, facts
    # the top-5 speaks the metadata's names (4 classes: four rows), never "class i"
    top = side.get_by_text(re.compile(rf"^{LABEL} · \d\.\d{{3}}$"))
    assert top.count() == 4
    assert side.get_by_text(re.compile(r"^class \d+ · ")).count() == 0
    shot(page, "onnx-model-1400")

    # 2. explain with a few samples
    page.get_by_text("Settings").first.click()
    page.get_by_role("spinbutton", name="Samples").fill("60")
    page.keyboard.press("Tab")
    wait_idle(page)
    explain(page)
    assert page.get_by_text(re.compile(rf"^{LABEL} · model output")).first.is_visible()
    assert page.get_by_text(re.compile(rf"^Weights for {LABEL}$")).first.is_visible()
    assert page.get_by_text("Something went wrong").count() == 0
    shot(page, "onnx-explain-1400")

    # 3. inspect: remove the region the explanation weighs most and see the model's new scores
    goto(page, "Inspect")
    page.get_by_role("combobox", name="Region").click()
    page.get_by_role("option").first.click()
    wait_idle(page)
    page.get_by_text("remove", exact=True).click()
    wait_idle(page)
    summary = page.get_by_text(re.compile(r"^Top class:")).first
    summary.wait_for(timeout=60_000)
    text = summary.inner_text()
    assert re.match(rf"^Top class: {LABEL} \d\.\d{{3}} → \d\.\d{{3}} \([+-]\d\.\d{{3}}\)", text), (
        text
    )
    assert page.get_by_text(re.compile(r"^class \d+")).count() == 0
    shot(page, "onnx-inspect-1400")

    # 4. export: the analysis names the uploaded file, the explanation a metadata label
    goto(page, "Export")
    data = json.loads(download(page, "Analysis (JSON)"))
    assert data["model"]["name"].endswith("keras_model.onnx"), data["model"]
    ex = json.loads(download(page, "Explanation (JSON)"))
    assert ex["target"]["label"] in NAMES, ex["target"]
    assert {c["label"] for c in ex["classes"]} <= set(NAMES)
    assert {t["label"] for t in ex["top_predictions"]} == set(NAMES)
