"""Every setting of the schema is reachable from the app, and what the controls show is what runs.

Each field of ``limecraft_core.config.fields()`` is set through its control (Explain, Trust or
Craft regions) to a value other than its default, then the explanation's recorded config is
compared with what was set. A new field without a control fails ``test_every_field_has_a_page``.
"""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import limecraft_core as lc

pytestmark = pytest.mark.slow

APP = str(Path(__file__).resolve().parents[2] / "app.py")
CRAFT, TRUST, EXPLAIN = (f"pages/app_pages/{p}.py" for p in ("craft", "trust", "explain"))

# Explain page: a non-default value per setting, each set through its own widget.
EXPLAIN_VALUES = {
    "samples": 60,
    "sampling": "stratified",
    "fill": "gray",
    "kernel_width": 0.5,
    "seed": 3,
    "repeats": 2,
    "early_stop": 0.95,
    "precision": "fp32",
    "top_labels": 2,
    "p": 0.4,
    "dedup": False,
    "early_stop_step": 30,
    "ridge_alpha": 2.0,
    "blur_sigma": 3.0,
    "output_space": "raw",
    "compute_deltas": False,
    "device": "cpu",
    "channels_last": False,
    "batch_size": 8,
}
TRUST_VALUES = {
    "repeats": 2,
    "samples": 100,
    "mask_expansion": 2,
    "kernel_widths": (0.1, "uniform"),
    "compare_fills": ("blur",),
    "faithfulness": False,
}
# Craft regions: the segmentation group (set through Craft's own controls).
CRAFT_FIELDS = {
    "segmentation",
    "n_segments",
    "segmentation_params",
    "inner_segments",
    "inner_method",
    "outer_segments",
    "working_size",
}


@pytest.fixture
def app(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMECRAFT_STORE_DIR", str(tmp_path / "store"))
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    assert not at.exception
    return at


def _widget(at, key):
    for kind in ("number_input", "selectbox", "checkbox", "multiselect", "slider", "radio"):
        for w in getattr(at, kind):
            if w.key == key:
                return w
    raise AssertionError(f"no widget with key {key!r}")


def _button(at, label):
    return next(b for b in at.button if b.label == label)


def test_every_field_has_a_page():
    pages = {s.name: s.page for s in lc.config.fields()}
    on_explain = set(EXPLAIN_VALUES) | {"target"}
    on_trust = set(TRUST_VALUES) | {"convergence"}
    assert set(pages) == on_explain | on_trust | CRAFT_FIELDS
    assert {n for n, p in pages.items() if p == "craft"} == CRAFT_FIELDS


def test_explain_controls_reach_the_engine(app):
    at = app
    for name, value in EXPLAIN_VALUES.items():
        _widget(at, f"set_{name}").set_value(value)
    at.run()
    assert not at.exception, at.exception
    _button(at, "Explain").click().run()
    assert not at.exception, at.exception
    ex = at.session_state["limecraft_session"].app.explanation
    assert ex is not None
    ran = ex.config.flat()
    assert {n: ran[n] for n in EXPLAIN_VALUES} == EXPLAIN_VALUES
    assert ex.run.samples_used == 60 and ex.trust.stability.repeats == 2


def test_one_class_reaches_the_engine(app):
    at = app
    _widget(at, "set_samples").set_value(60)
    _widget(at, "set_repeats").set_value(1)
    _widget(at, "set_class_mode").set_value("one class").run()
    _widget(at, "set_target").set_value(3).run()
    _button(at, "Explain").click().run()
    ex = at.session_state["limecraft_session"].app.explanation
    assert ex.config.targets.target == 3 and ex.classes == (3,)


def test_trust_controls_reach_the_engine(app):
    at = app
    at.switch_page(TRUST).run()
    for name, value in TRUST_VALUES.items():
        _widget(at, f"set_{name}").set_value(value)
    at.run()
    _widget(at, "tr_conv").set_value(True)
    _button(at, "Check the explanation").click().run()
    assert not at.exception, at.exception
    ex = at.session_state["limecraft_session"].app.trust_explanation
    ran = ex.config.flat()
    assert {n: ran[n] for n in TRUST_VALUES} == TRUST_VALUES
    assert ran["convergence"] == (100,)  # every offered size up to N, with repeats >= 2
    assert ex.trust.convergence is not None and ex.trust.fills.fills == ["mean", "blur"]


def test_craft_controls_reach_the_engine(app):
    at = app
    at.switch_page(CRAFT).run()
    _button(at, "Add the tag as a region").click().run()
    s = at.session_state["limecraft_session"].app
    uid = s.hand[0].uid
    at.number_input(key=f"hinner-{uid}").set_value(2)
    at.run()
    sel = {w.label: w for w in at.selectbox}
    sel["Superpixels"].set_value("slic")
    at.run()
    sel = {w.label: w for w in at.selectbox}
    sel["Inner method"].set_value("felzenszwalb")
    sel["Working size"].set_value(256)
    next(w for w in at.slider if w.label == "Target number of regions").set_value(30)
    next(w for w in at.slider if w.label.startswith("Compactness")).set_value(20.0)
    at.run()
    next(r for r in at.radio if r.label == "Outside your regions").set_value("one").run()
    assert not at.exception, at.exception
    at.switch_page(EXPLAIN).run()
    _widget(at, "set_samples").set_value(60)
    _widget(at, "set_repeats").set_value(1)
    at.run()
    _button(at, "Explain").click().run()
    ex = at.session_state["limecraft_session"].app.explanation
    seg = ex.config.segmentation
    assert (seg.method, seg.n_segments, seg.inner_method, seg.working_size) == (
        "slic",
        30,
        "felzenszwalb",
        256,
    )
    assert dict(seg.params) == {"compactness": 20.0}
    assert seg.inner_segments == (2,) and seg.outer_segments == 1
    assert ex.run.handcrafted == 2  # the tag, in two pieces
