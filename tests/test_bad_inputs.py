"""A table-driven battery of bad files and bad parameters, through the CLI and through the app.

Every row must end in exit code 2 with one line naming the problem (CLI), or in an in-page
error (app), never a traceback; and the app session must keep working afterwards: its image,
regions and earlier results are kept, and a good upload or an Explain still works.
"""

from __future__ import annotations

import ast
import gc
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from bad_files import BAD_IMAGES, JSON_BAD, doc_with, encode, export, good_image, write_bad_files
from bad_files import explanation_doc as make_explanation_doc
from conftest import image_uploader
from PIL import Image
from streamlit.testing.v1 import AppTest
from toys import ChannelMeans

import limecraft_core as lc

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
CRAFT = "pages/app_pages/craft.py"
EXPORT = "pages/app_pages/export.py"
EXPLAIN = "pages/app_pages/explain.py"
TRUST = "pages/app_pages/trust.py"


# ----------------------------------------------------------------------------- bad files


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_bad_files(tmp_path_factory.mktemp("bad"))


# ----------------------------------------------------------------------------- the app


@pytest.fixture(scope="module")
def explanation_doc() -> dict:
    return make_explanation_doc()


def app_state(at):
    return at.session_state["app"]


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
    import re

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
    import re

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
def test_app_bad_model_upload_is_an_in_page_error(at, files, case, file, match):
    import re

    ex = quick_explain(at)
    s = app_state(at)
    at.sidebar.file_uploader(key="model_upload").set_value(
        (file, (files / file).read_bytes(), "application/octet-stream")
    )
    at.run()
    next(b for b in at.sidebar.button if b.label == "Use this model").click().run()
    assert not at.exception, at.exception
    assert re.search(match, errors(at)), errors(at)
    assert s.model_name == "demo" and s.explanation is ex
    assert not (files / "pwned.txt").exists()
    # the upload was written only inside the session's own temporary folder
    # the upload was written only inside the session's own temporary folder, and, refused,
    # not kept there
    assert list(Path(s.tmpdir).iterdir()) == []
    button(at, "Explain").click().run()
    assert not at.exception


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
    from pages.lib import state as state_module

    s = app_state(at)
    s.hand.append(state_module.HandRegion(name="tag", mask=s.tag_mask.copy()))
    ex = quick_explain(at)
    good = state_module.classifier("demo")
    flaky = lc.Classifier(
        _Flaky(good.model, mode), input_size=good.input_size, labels=good.labels, name="flaky"
    )
    monkeypatch.setattr(state_module, "classifier", lambda *a, **k: flaky)
    seed = {"raise": 5, "nan": 6}[mode]  # a new explanation: the cache is shared by sessions
    at.number_input(key="set_seed").set_value(seed).run()
    button(at, "Explain").click().run()
    assert not at.exception, at.exception
    msg = errors(at)
    assert "Explain failed" in msg and ("simulated failure" in msg or "NaN" in msg), msg
    assert s.explanation is ex and [h.name for h in s.hand] == ["tag"]
    monkeypatch.setattr(state_module, "classifier", lambda *a, **k: good)
    button(at, "Explain").click().run()
    assert (
        not at.exception and s.explanation is not ex and s.explanation.config.sampling.seed == seed
    )


# ----------------------------------------------------------------------------- security


@pytest.mark.slow
def test_app_script_region_name_is_escaped_everywhere(at):
    from limecraft_core.report import html_report
    from pages.lib.state import HandRegion

    evil = "<script>alert('x')</script>"
    s = app_state(at)
    s.image_name = evil + ".png"  # a file name is user text too
    s.hand.append(HandRegion(name=evil, mask=s.tag_mask.copy()))
    ex = quick_explain(at)
    assert evil in ex.region_names
    button(at, "Compare with automatic superpixels only").click().run()  # names in a caption
    escaped, as_values = 0, 0
    for page in (EXPLAIN, CRAFT, "pages/app_pages/inspect.py", EXPORT):
        if page != EXPLAIN:
            at.switch_page(page).run()
        assert not at.exception
        for el in [*at.markdown, *at.caption, *at.error, *at.info, *at.warning, *at.success]:
            assert "<script>" not in el.value, (page, el.value)
            escaped += r"\<script\>" in el.value
        for b in at.button:
            assert "<script>" not in (b.help or ""), (page, b.help)
        as_values += sum(t.value == evil for t in at.text_input)  # plain text in an input
    assert escaped >= 2 and as_values >= 1, (escaped, as_values)
    page = html_report(image=s.image, explanation=ex, source=evil)
    assert "<script>" not in page and "&lt;script&gt;" in page


@pytest.mark.slow
def test_app_script_file_name_in_an_error_is_escaped(at):
    image_uploader(at).set_value(
        ("<script>alert(1)</script>.png", b"not an image", "image/png")
    ).run()
    raw = " | ".join([e.value for e in at.error] + [e.value for e in at.sidebar.error])
    assert "not used" in raw and "<script>" not in raw  # the markdown sent holds no live tag
    assert "<script>alert(1)</script>.png" in errors(at)  # and reads as the name, escaped


def test_xsrf_protection_and_upload_limit_are_set():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    server = cfg["server"]
    assert server["enableXsrfProtection"] is True
    assert server.get("enableCORS", True) is True  # turning CORS off would weaken XSRF
    assert 1 <= server["maxUploadSize"] <= 200


def _python_sources():
    for folder in ("limecraft_core", "models", "pages"):
        yield from (ROOT / folder).rglob("*.py")
    yield ROOT / "app.py"


def test_no_eval_exec_shell_or_unrestricted_pickle_in_the_code():
    """Static check: nothing evaluates text, runs a shell, or unpickles without restriction."""
    bad = []
    for path in _python_sources():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = (
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
            owner = (
                f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            )
            kwargs = {k.arg: k.value for k in node.keywords}
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if isinstance(f, ast.Name) and name in ("eval", "exec", "compile", "__import__"):
                bad.append(f"{where} {name}()")
            if (owner == "os" and name in ("system", "popen")) or owner == "subprocess":
                bad.append(f"{where} {owner}.{name}()")
            if "shell" in kwargs:
                bad.append(f"{where} shell=")
            if owner == "pickle" and name in ("load", "loads"):
                bad.append(f"{where} pickle.{name}()")
            if name == "load" and owner == "torch":
                wo = kwargs.get("weights_only")
                if not (isinstance(wo, ast.Constant) and wo.value is True):
                    bad.append(f"{where} torch.load without weights_only=True")
            if name == "load" and owner == "np":
                ap = kwargs.get("allow_pickle")
                if not (isinstance(ap, ast.Constant) and ap.value is False):
                    bad.append(f"{where} np.load without allow_pickle=False")
            if name in ("markdown", "write", "html") and "unsafe_allow_html" in kwargs:
                bad.append(f"{where} unsafe_allow_html")
    # models/train_demo.py is a training script, never given user data
    bad = [b for b in bad if not b.startswith("models/train_demo.py")]
    assert not bad, bad


def test_no_predictable_shared_temporary_paths():
    """Temporary files go through tempfile's unpredictable names, never a fixed /tmp path."""
    bad = []
    for path in _python_sources():
        text = path.read_text()
        tree = ast.parse(text, str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value.startswith(("/tmp", "/var/tmp", "/dev/shm")):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
            if isinstance(node, ast.Attribute) and node.attr in ("mktemp", "gettempdir"):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} tempfile.{node.attr}")
    assert not bad, bad


@pytest.mark.slow
def test_app_session_temporary_folder_is_private():
    import stat
    import tempfile

    a = AppTest.from_file(APP, default_timeout=120)
    a.run()
    b = AppTest.from_file(APP, default_timeout=120)
    b.run()
    ta, tb = Path(app_state(a).tmpdir), Path(app_state(b).tmpdir)
    assert ta != tb and ta.is_dir() and tb.is_dir()
    assert ta.parent == Path(tempfile.gettempdir())
    assert stat.S_IMODE(ta.stat().st_mode) == 0o700


@pytest.mark.slow
def test_app_session_temporary_folder_is_removed_when_the_session_ends():
    a = AppTest.from_file(APP, default_timeout=120)
    a.run()
    tmp = Path(app_state(a).tmpdir)
    (tmp / "model.pt2").write_bytes(b"x")
    del a.session_state["app"]
    del a
    gc.collect()
    assert not tmp.exists()


@pytest.mark.slow
def test_app_second_model_upload_is_the_model_used(at, tmp_path):
    p4 = export(ChannelMeans(classes=4), tmp_path / "four.pt2")
    p2 = export(ChannelMeans(classes=2, seed=1), tmp_path / "two.pt2")
    use = lambda: next(b for b in at.sidebar.button if b.label == "Use this model")  # noqa: E731
    for p in (p4, p2):
        at.sidebar.file_uploader(key="model_upload").set_value((p.name, p.read_bytes(), "x"))
        at.run()
        use().click().run()
        assert not at.exception and not errors(at), errors(at)
    from pages.lib import state as state_module

    s = app_state(at)
    assert state_module.classifier(s).predict(s.image).shape == (2,)
