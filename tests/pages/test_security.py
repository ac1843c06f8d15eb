"""Security: hostile files never run their code, user text is escaped, the server's protections
stay on, the source has no eval / shell / unrestricted unpickling, and each session's temporary
folder is private."""

from __future__ import annotations

import ast
import gc
import pickle
from pathlib import Path

import pytest
from bad_files import Payload, booby_trapped_pickle, booby_trapped_torchscript, export
from conftest import image_uploader
from streamlit.testing.v1 import AppTest
from test_app_bad_inputs import app_state, button, errors, quick_explain
from toys import ChannelMeans

import limecraft_core as lc

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
CRAFT = "pages/app_pages/craft.py"
EXPORT = "pages/app_pages/export.py"
EXPLAIN = "pages/app_pages/explain.py"


@pytest.fixture(scope="module")
def booby_traps(tmp_path_factory):
    """A folder with a booby-trapped whole-model pickle and a booby-trapped TorchScript file,
    which write ``pwned.txt`` beside them if their code ever runs."""
    d = tmp_path_factory.mktemp("traps")
    marker = d / "pwned.txt"
    (d / "evil.pt").write_bytes(booby_trapped_pickle(marker))
    (d / "evil_ts.pt").write_bytes(booby_trapped_torchscript(marker))
    return d


def test_booby_trapped_files_never_run_their_code(booby_traps):
    from models.custom import load_model_file

    files = booby_traps
    marker = files / "pwned.txt"
    for name in ("evil.pt", "evil_ts.pt"):
        with pytest.raises(lc.LimecraftError):
            load_model_file(files / name)
    # the payloads are live: plain unpickling would run them
    pickle.loads(pickle.dumps(Payload(marker)))
    assert marker.exists()
    marker.unlink()


@pytest.mark.slow
def test_app_script_region_name_is_escaped_everywhere(at):
    from limecraft_core.io.report import html_report
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
    del a.session_state["limecraft_session"].app
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
    from pages.lib import runtime

    s = app_state(at)
    assert runtime.classifier(s).predict(s.image).shape == (2,)
