"""A fresh server's first run keeps what is picked in it (issue 36: the app no longer patches
Streamlit). Its first script run goes through Streamlit's pages-folder navigation, because our
``pages/`` package sits beside ``app.py``; a widget made outside a page got another id in that
run than in the next, and the browser dropped the file picked in it. Every widget is now made
inside its page's run (``pages/lib/frame.py``)."""

from __future__ import annotations

from urllib.parse import urlsplit

import numpy as np
import onnx
from conftest import start_app, stop_app
from e2e_helpers import click, open_app, shot, upload, uploader
from onnx import TensorProto, helper, numpy_helper
from playwright.sync_api import expect

from models.gate import ENV as GATE_ENV
from models.gate import GateFiles


def tiny_onnx(path) -> None:
    """(N, 3, 32, 32) -> the mean colour through a 3 -> 4 linear layer."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["m"]),
        helper.make_node("Flatten", ["m"], ["f"]),
        helper.make_node("MatMul", ["f", "w"], ["scores"]),
    ]
    g = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_a_model_picked_in_a_fresh_servers_first_run_is_kept(page, tmp_path):
    model = tmp_path / "first_run.onnx"
    tiny_onnx(model)
    proc, url, _ = start_app()  # a fresh server: this page's run is its first
    try:
        open_app(page, url)  # the first run, and no other until the file is picked
        side = page.locator("[data-testid='stSidebar']")
        page.get_by_text("Upload your own model").click()  # an expander: no rerun
        upload(page, uploader(page, "Model file"), str(model), what="upload in the first run")
        expect(side.get_by_text("first_run.onnx", exact=True).first).to_be_visible()
        click(page, page.get_by_role("button", name="Use this model"))
        expect(page.get_by_text("Now using").first).to_contain_text("Now using first_run.onnx")
        expect(page.get_by_text("Something went wrong")).to_have_count(0)
    finally:
        stop_app(proc)


def test_a_fresh_servers_first_run_opens_the_page_its_address_names(page):
    proc, url, _ = start_app()
    try:
        open_app(page, url, path="audit")
        expect(page.locator("h1").filter(has_text="Audit").first).to_be_visible()
        assert urlsplit(page.url).path.rstrip("/").endswith("/audit")
        # its pages-folder mode found the page (pages/5_audit.py): no "Page not found" over it
        expect(page.get_by_text("Page not found")).to_have_count(0)
    finally:
        stop_app(proc)


def test_a_cold_server_shows_the_title_and_a_loading_line_at_once(page, tmp_path):
    """Issue 48: the main area was blank for the first 6-10 s of a cold server. The model is
    held at its gate from the start, so the page is seen while the model is not ready."""
    gate = GateFiles(tmp_path / "gate")
    gate.hold()  # the first forward call (the sidebar's top-5) waits
    proc, url, _ = start_app({GATE_ENV: str(gate.folder)})
    try:
        page.goto(url)
        main = page.locator("[data-testid='stMain']")
        line = main.get_by_text("Loading the model…")
        expect(line).to_be_visible()
        expect(main.locator("h1").filter(has_text="LIMEcraft")).to_be_visible()
        assert gate.held() or gate.passed() == 0  # the model has not answered yet
        shot(page, "errors-5-cold-server")
        gate.release()
        expect(page.get_by_role("button", name="Explain", exact=True)).to_be_visible()
        expect(line).to_have_count(0)
        expect(main.locator("h1").filter(has_text="LIMEcraft")).to_have_count(1)
    finally:
        gate.release()
        stop_app(proc)
