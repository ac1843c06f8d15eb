"""Bad inputs in the app (Streamlit's AppTest): bad image, mask, session and model uploads, and a
model that fails in the middle of a run.

Every one must end in an in-page error, never a traceback; and the session must keep working
afterwards: its image, regions and earlier results are kept, and a good upload or an Explain
still works. The bad files are the shared battery in tests/bad_files.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from bad_files import BAD_IMAGES, JSON_BAD, doc_with, encode, good_image, write_bad_files
from bad_files import explanation_doc as make_explanation_doc
from conftest import image_uploader
from PIL import Image
from toys import ChannelMeans

import limecraft_core as lc

CRAFT = "pages/app_pages/craft.py"
EXPORT = "pages/app_pages/export.py"
EXPLAIN = "pages/app_pages/explain.py"
TRUST = "pages/app_pages/trust.py"


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """The battery's folder, written once for this module (a few seconds of torch.export)."""
    return write_bad_files(tmp_path_factory.mktemp("bad"))


@pytest.fixture(scope="module")
def explanation_doc() -> dict:
    return make_explanation_doc()


def app_state(at):
    return at.session_state["limecraft_session"].app


def button(at, label):
    return next(b for b in at.button if b.label == label)


def errors(at) -> str:
    """The page's error messages as the user reads them (markdown escapes removed)."""
    text = " | ".join([e.value for e in at.error] + [e.value for e in at.sidebar.error])
    return re.sub(r"\\(.)", r"\1", text)


def quick_explain(at) -> lc.Explanation:
    """Explain with cheap settings; returns the session's explanation."""
    at.switch_page(EXPLAIN).run()
    at.number_input(key="set_samples").set_value(50)
    at.number_input(key="set_repeats").set_value(1)
    at.run()
    button(at, "Explain").click().run()
    assert not at.exception, at.exception
    ex = app_state(at).explanation
    assert ex is not None
    return ex


def assert_session_kept(at, image_name, ex):
    s = app_state(at)
    assert not at.exception, at.exception
    assert s.image_name == image_name and s.explanation is ex


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BAD_IMAGES), ids=list(BAD_IMAGES))
def test_app_bad_image_upload_is_an_in_page_error_and_the_session_works_after(at, case):
    data, match = BAD_IMAGES[case]
    ex = quick_explain(at)
    name = app_state(at).image_name
    image_uploader(at).set_value((f"{case}.png", data, "image/png")).run()
    assert not at.exception, at.exception
    assert re.search(match, errors(at)), errors(at)
    assert "Traceback" not in errors(at)
    assert_session_kept(at, name, ex)
    # a good upload afterwards works, and so does Explain
    good = encode(Image.fromarray(good_image()))
    image_uploader(at).set_value(("good.png", good, "image/png")).run()
    assert app_state(at).image_name == "good.png" and not errors(at)
    button(at, "Explain").click().run()
    assert not at.exception and app_state(at).explanation is not None


MASK_BAD = [
    (
        "wrong size",
        lambda shape: encode(Image.fromarray(np.ones((5, 7), np.uint8))),
        "image's size",
    ),
    ("all zero", lambda shape: encode(Image.fromarray(np.zeros(shape, np.uint8))), "no region"),
    ("not an image", lambda shape: b"nope" * 10, "not an image"),
    ("empty", lambda shape: b"", "empty"),
    (
        "truncated",
        lambda shape: encode(Image.fromarray(np.ones(shape, np.uint8)))[:60],
        "truncated|not an image",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "make", "match"), MASK_BAD, ids=[r[0] for r in MASK_BAD])
def test_app_bad_mask_upload_is_an_in_page_error(at, case, make, match):
    from pages.lib.state import HandRegion

    s = app_state(at)
    s.hand.append(
        HandRegion(
            name="kept", mask=np.zeros(s.image.shape[:2], bool) | (np.arange(s.image.shape[1]) < 10)
        )
    )
    at.switch_page(CRAFT).run()
    data = make(s.image.shape[:2])
    at.file_uploader(key="mask_upload").set_value((f"{case}.png", data, "image/png")).run()
    button(at, "Add the mask's regions").click().run()
    assert not at.exception, at.exception
    assert re.search(match, errors(at)), errors(at)
    assert [h.name for h in app_state(at).hand] == ["kept"]
    # a good mask afterwards works
    good = np.zeros(s.image.shape[:2], np.uint8)
    good[10:30, 10:30] = 1
    at.file_uploader(key="mask_upload").set_value(
        ("good.png", encode(Image.fromarray(good)), "image/png")
    ).run()
    button(at, "Add the mask's regions").click().run()
    assert not at.exception and len(app_state(at).hand) == 2


def test_a_mask_file_is_added_once_and_its_button_says_so(at):
    """The mask's button adds its regions once: then it gives way to a line that says they are
    in the list, and comes back when one of them is removed (it adds only that one)."""
    s = app_state(at)
    at.switch_page(CRAFT).run()
    two = np.zeros(s.image.shape[:2], np.uint8)
    two[5:20, 5:20], two[30:45, 30:45] = 1, 2
    at.file_uploader(key="mask_upload").set_value(
        ("two.png", encode(Image.fromarray(two)), "image/png")
    ).run()
    assert not at.exception, at.exception
    button(at, "Add the mask's regions").click().run()
    assert [h.name for h in app_state(at).hand] == ["two.png 1", "two.png 2"]
    assert not [b for b in at.button if b.label == "Add the mask's regions"]
    said = [t for c in at.caption if "two.png" in (t := re.sub(r"\\(.)", r"\1", c.value))]
    assert said and "The 2 regions of 'two.png' are in the list above" in said[0], said
    at.run()  # another rerun adds nothing
    assert len(app_state(at).hand) == 2
    app_state(at).hand.pop(0)  # one removed: the button is back, for that one only
    at.run()
    button(at, "Add the mask's regions").click().run()
    assert sorted(h.name for h in app_state(at).hand) == ["two.png 2", "two.png 2"]
    assert not [b for b in at.button if b.label == "Add the mask's regions"]


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c, _ in JSON_BAD] + ["deep", "infinity", "wrong image"])
def test_app_bad_restore_is_an_in_page_error(at, explanation_doc, case):
    ex = quick_explain(at)
    name = app_state(at).image_name
    makers = dict(JSON_BAD)
    if case == "deep":
        text = "[" * 100_000
    elif case == "infinity":
        text = doc_with(explanation_doc, ("classes", 0, "index"), 1e400)
    elif case == "wrong image":
        text = json.dumps(explanation_doc)  # made for a 64x48 image
    else:
        text = makers[case](explanation_doc)
    at.switch_page(EXPORT).run()
    at.file_uploader(key="restore_upload").set_value(
        ("e.json", text.encode(), "application/json")
    ).run()
    assert not at.exception, at.exception
    assert "not restored" in errors(at) or "load the same image" in errors(at), errors(at)
    assert_session_kept(at, name, ex)


@pytest.mark.slow
def test_app_restore_with_settings_outside_the_controls_keeps_the_pages_working(at):
    """A valid engine value (10 samples, 40 repeats) that the settings widgets would refuse."""
    s = app_state(at)
    ex = lc.explain(
        s.image, ChannelMeans(classes=4), samples=10, repeats=40, segmentation="grid", n_segments=4
    )
    doc = ex.to_dict()
    doc["settings"]["sampling"]["seed"] = 2**40  # valid for the engine, above the seed widget
    at.switch_page(EXPORT).run()
    at.file_uploader(key="restore_upload").set_value(
        ("e.json", json.dumps(doc).encode(), "application/json")
    ).run()
    assert not at.exception and s.explanation is not None, errors(at)
    cfg = s.config
    assert cfg.sampling.samples == 50 and cfg.trust.repeats == 20 and cfg.fill.fill == "mean"
    assert cfg.sampling.seed == 2**31 - 1
    for page in (EXPLAIN, TRUST):
        at.switch_page(page).run()
        assert not at.exception and "went wrong" not in errors(at), errors(at)


def test_app_restore_with_a_setting_the_schema_refuses_is_an_in_page_error(at):
    """Text where a fill belongs is refused by the settings schema, in one sentence; the
    session's own explanation stays."""
    ex = quick_explain(at)
    s = app_state(at)
    doc = ex.to_dict()
    doc["settings"]["fill"]["fill"] = "<script>alert(1)</script>"
    at.switch_page(EXPORT).run()
    at.file_uploader(key="restore_upload").set_value(
        ("e.json", json.dumps(doc).encode(), "application/json")
    ).run()
    assert not at.exception
    assert "fill must be one of" in errors(at), errors(at)
    assert s.explanation is ex


MODEL_BAD = [
    ("booby-trapped pickle", "evil.pt", "refused"),
    ("booby-trapped TorchScript", "evil_ts.pt", "TorchScript|refused"),
    ("junk", "junk.pt2", r"torch\.export"),
    ("returns NaN", "nan.pt2", "NaN"),
    ("wrong output shape", "flat.pt2", r"shape \(N, C\)"),
    ("truncated ONNX", "truncated.onnx", "not an ONNX model|onnxruntime"),
    ("a pickle named .onnx", "pickle.onnx", "not an ONNX model"),
    ("ONNX with a rank-3 input", "rank3.onnx", "rank-3 input"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "file", "match"), MODEL_BAD, ids=[r[0] for r in MODEL_BAD])
def test_app_bad_model_upload_is_an_in_page_error(at, bad_files, case, file, match):
    ex = quick_explain(at)
    s = app_state(at)
    at.sidebar.file_uploader(key="model_upload").set_value(
        (file, (bad_files / file).read_bytes(), "application/octet-stream")
    )
    at.run()
    next(b for b in at.sidebar.button if b.label == "Use this model").click().run()
    assert not at.exception, at.exception
    assert re.search(match, errors(at)), errors(at)
    assert s.model_name == "demo" and s.explanation is ex
    assert not (bad_files / "pwned.txt").exists()
    # the upload was written only inside the session's own temporary folder, and, refused,
    # not kept there
    assert list(Path(s.tmpdir).iterdir()) == []
    button(at, "Explain").click().run()
    assert not at.exception


@pytest.mark.slow
def test_a_refused_model_file_leaves_the_picker_and_is_said_once(at, bad_files):
    """As a refused image: the file is not left in the picker, and the message is said where
    the user acted, not on every page after it."""
    at.sidebar.file_uploader(key="model_upload").set_value(
        ("junk.pt2", (bad_files / "junk.pt2").read_bytes(), "application/octet-stream")
    )
    at.run()
    next(b for b in at.sidebar.button if b.label == "Use this model").click().run()
    assert not at.exception, at.exception
    assert "That model was not used" in errors(at), errors(at)
    pickers = [u for u in at.sidebar.file_uploader if (u.key or "").startswith("model_upload")]
    assert [u.key for u in pickers] == ["model_upload-1"]  # a new, empty picker
    assert not pickers[0].value
    at.switch_page(CRAFT).run()
    assert not at.exception and "That model was not used" not in errors(at), errors(at)


class _Flaky:
    """A model that fails on batches (not on the sidebar's single-image predictions)."""

    def __init__(self, inner, mode: str) -> None:
        self.inner, self.mode = inner, mode

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 1:
            if self.mode == "raise":
                raise RuntimeError("simulated failure in the middle of a run")
            return self.inner(x) * float("nan")
        return self.inner(x)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["raise", "nan"])
def test_app_model_failing_mid_run_keeps_the_session(at, monkeypatch, mode):
    from pages.lib import analysis as A
    from pages.lib import runtime

    s = app_state(at)
    s.hand.append(A.HandRegion(name="tag", mask=s.tag_mask.copy()))
    ex = quick_explain(at)
    good = runtime.classifier("demo")
    flaky = lc.Classifier(
        _Flaky(good.model, mode), input_size=good.input_size, labels=good.labels, name="flaky"
    )
    monkeypatch.setattr(runtime, "classifier", lambda *a, **k: flaky)
    seed = {"raise": 5, "nan": 6}[mode]  # a new explanation: the cache is shared by sessions
    at.number_input(key="set_seed").set_value(seed).run()
    button(at, "Explain").click().run()
    assert not at.exception, at.exception
    msg = errors(at)
    assert "Explain failed" in msg and ("simulated failure" in msg or "NaN" in msg), msg
    assert s.explanation is ex and [h.name for h in s.hand] == ["tag"]
    monkeypatch.setattr(runtime, "classifier", lambda *a, **k: good)
    button(at, "Explain").click().run()
    assert (
        not at.exception and s.explanation is not ex and s.explanation.config.sampling.seed == seed
    )
