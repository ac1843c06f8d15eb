"""Errors and silences (issue 48, item 6), in Streamlit's AppTest: a refused image upload is said
once, a restore says what it brought back, a reload in the middle of an Explain says so, and a
cold server shows the title and "Loading the model…" before it loads anything."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from conftest import image_uploader
from streamlit.testing.v1 import AppTest
from toys import LinearPixels

import limecraft_core as lc
from pages.lib import analysis as A
from pages.lib import analysis_file as AF
from pages.lib import loading, sidebar, state
from pages.lib.session import KEY

APP = str(Path(__file__).resolve().parents[2] / "app.py")
CRAFT = "pages/app_pages/craft.py"
EXPLAIN = "pages/app_pages/explain.py"
EXPORT = "pages/app_pages/export.py"


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMECRAFT_STORE_DIR", str(tmp_path / "store"))


def run_app(query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def ses(at):
    return at.session_state[KEY]


def errors(block) -> list[str]:
    """The error boxes' text as shown (markdown's escapes removed)."""
    return [e.value.replace("\\", "") for e in block.error]


# ----------------------------------------------------------------------------- a refused upload


def test_a_refused_upload_is_said_once_in_a_whole_sentence():
    at = run_app()
    name = ses(at).app.image_name
    image_uploader(at).set_value(("holiday.png", b"not an image" * 10, "image/png")).run()
    said = (
        "That upload was not used: 'holiday.png' is not an image that can be read (PNG, JPEG, "
        "WebP, BMP, TIFF or GIF)."
    )
    assert [e for e in errors(at.main) if e.startswith(said)] == [
        said + " Your current image and work are kept."
    ], errors(at.main)
    assert errors(at.sidebar) == [said], errors(at.sidebar)
    assert ses(at).app.image_name == name  # the work is kept
    # the next run, here another page, does not carry it on
    at.switch_page(CRAFT).run()
    assert not at.exception
    assert not [e for e in errors(at) if "holiday" in e], errors(at)
    at.switch_page(EXPLAIN).run()
    assert not [e for e in errors(at) if "holiday" in e], errors(at)


def test_the_engines_message_gets_one_full_stop():
    from pages.lib.display import md_sentence

    assert md_sentence("the file may be truncated") == "the file may be truncated."
    assert md_sentence("it is over.") == r"it is over\."  # escaped, not doubled
    assert md_sentence("why?") == "why?"


# ----------------------------------------------------------------------------- restore


def _analysis_file(quadrants) -> bytes:
    a = A.new(quadrants, "quad.png", source="upload")
    m = np.zeros(quadrants.shape[:2], bool)
    m[2:10, 2:10] = True
    A.add_region(a, m, "square")
    A.set_segmentation(a, A.SegSettings("grid", 9, "segment", ()))
    regions, _ = lc.prepare_regions(
        lc._validate.as_float_image(quadrants),
        A.segmentation_config(a),
        regions_mask=[h.mask for h in a.hand],
        names=[h.name for h in a.hand],
    )
    model = LinearPixels(quadrants.shape[:2], classes=3)
    ex = lc.explain(quadrants, model, segments=regions, samples=60, seed=0, repeats=2)
    A.set_explanation(a, ex, A.APP_CONFIG.replace(samples=60, repeats=2))
    a.trust_explanation = ex
    return AF.to_json(a).encode()


def test_a_restore_says_what_came_back_once(quadrants):
    at = run_app()
    at.switch_page(EXPORT).run()
    data = _analysis_file(quadrants)
    at.file_uploader(key="restore_upload").set_value(("quad_analysis.json", data, "text/json"))
    at.run()
    assert not at.exception, at.exception
    assert [s.value for s in at.success] == [
        r"Restored **quad\_analysis\.json**: 1 region, results, Trust."
    ]
    assert ses(at).app.image_name == "quad.png"
    at.run()  # said once
    assert not [s for s in at.success if "Restored" in s.value]


def test_a_restored_explanation_says_so(quadrants):
    at = run_app()
    s = ses(at).app
    ex = lc.explain(s.image, LinearPixels(s.image.shape[:2], classes=3), samples=30, seed=0)
    at.switch_page(EXPORT).run()
    at.file_uploader(key="restore_upload").set_value(
        ("e.json", ex.to_json().encode(), "application/json")
    ).run()
    assert not at.exception, at.exception
    assert [s.value for s in at.success] == [
        rf"Restored **e\.json**: the explanation of this image over {ex.n_regions} regions."
    ]


def test_what_an_analysis_holds_is_listed_part_by_part(quadrants):
    a = A.new(quadrants, "quad.png")
    assert A.contents(a) == []
    m = np.zeros(quadrants.shape[:2], bool)
    m[:4, :4] = True
    A.add_region(a, m)
    A.add_region(a, ~m)
    assert A.contents(a) == ["2 regions"]
    a.trust_explanation = a.explanation_auto = object()
    assert A.contents(a) == ["2 regions", "LIME versus LIMEcraft", "Trust"]


# ----------------------------------------------------------------------------- a reload


def _aid(at) -> str:
    aid = at.query_params["a"]
    return aid[0] if isinstance(aid, list) else aid


def test_a_reload_during_an_explain_says_it_was_interrupted_once():
    at = run_app()
    at.switch_page(EXPLAIN).run()
    aid = _aid(at)
    # the run that was explaining when the page was reloaded left its mark in the store
    state.store().mark_running(aid, state.owner(), "Explaining")
    again = run_app({"a": aid})  # a new session on the same address: what a reload is
    note = (
        "The last Explain was interrupted by the reload of the page and did not finish: there "
        "was no earlier result to show."
    )
    assert [i.value for i in again.info if "interrupted" in i.value] == [note]
    assert state.store().take_running(aid, state.owner()) is None  # the mark is taken
    again.run()
    assert not [i for i in again.info if "interrupted" in i.value]
    assert not [i for i in run_app({"a": aid}).info if "interrupted" in i.value]


def test_an_explain_marks_its_analysis_while_it_runs_and_clears_the_mark(monkeypatch):
    at = run_app()
    at.switch_page(EXPLAIN).run()
    aid = _aid(at)
    seen: list[str | None] = []
    real = lc.explain

    def looking(*args, **kwargs):
        folder = state.store().folder
        seen.append(json.loads((folder / f"{aid}.running").read_text())["what"])
        return real(*args, **kwargs)

    monkeypatch.setattr(lc, "explain", looking)
    st.cache_data.clear()  # an explanation cached by an earlier test would not call the engine
    next(n for n in at.number_input if n.key.startswith("set_samples")).set_value(53)
    at.run()
    next(b for b in at.button if b.label == "Explain").click().run()
    assert not at.exception, at.exception
    assert seen == ["Explaining"] and ses(at).app.explanation is not None
    assert not (state.store().folder / f"{aid}.running").exists()  # it ended: cleared
    # a run cut short (Cancel, Stop here, an error) leaves the mark to the session's next run
    monkeypatch.setattr(lc, "explain", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("x")))
    next(n for n in at.number_input if n.key.startswith("set_samples")).set_value(61)
    at.run()
    next(b for b in at.button if b.label == "Explain").click().run()
    assert any("Something went wrong" in e for e in errors(at))
    assert ses(at).run_marked == aid and (state.store().folder / f"{aid}.running").exists()
    at.run()
    assert ses(at).run_marked is None and not (state.store().folder / f"{aid}.running").exists()


# ----------------------------------------------------------------------------- a cold server


def test_a_cold_server_shows_the_title_and_a_loading_line_before_the_model(monkeypatch):
    monkeypatch.setattr(loading, "_ready", threading.Event())  # this process has drawn no page
    # the sidebar loads the model: held here, the page shows what it shows before it
    monkeypatch.setattr(sidebar, "sidebar", lambda s: st.stop())
    at = run_app()
    assert [t.value for t in at.main.title] == ["LIMEcraft"]
    assert [c.value for c in at.main.caption] == ["Loading the model…"]
    # once the sidebar is drawn, the page takes over, and a warm process never shows the line
    monkeypatch.undo()
    monkeypatch.setattr(loading, "_ready", threading.Event())
    at = run_app()
    assert "Loading the model…" not in [c.value for c in at.main.caption]
    assert [t.value for t in at.main.title] == ["LIMEcraft"]  # the page's own
    assert loading._ready.is_set() and ses(at).loading is None
    at.switch_page(EXPORT).run()  # warm: no line, not even for a moment
    assert ses(at).loading is None and "Loading the model…" not in [c.value for c in at.caption]
