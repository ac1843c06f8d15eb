"""Explain's "Compare explainers" (issue 52) under AppTest with the demo model: one overlay per
method on one stated scale, the agreement and its table; the comparison kept through a reload;
a merge suggestion preselects its pair for Craft's "Merge selected"; exact Shapley over too
many regions is a message with KernelSHAP offered, never a traceback."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_analysis import button, explain, image_captions, run_app

import limecraft_core as lc
from limecraft_core.comparison import NORMALISATION
from limecraft_core.merge_hint import MergeHint
from pages.lib import analysis as A
from pages.lib.compare_view import DEFAULT_METHODS


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMECRAFT_STORE_DIR", str(tmp_path / "store"))


def _app(at):
    return at.session_state["limecraft_session"].app


def _plain(text: str) -> str:
    return text.replace("\\", "")


def _grid(at, n: int) -> None:
    """Craft's superpixels set to a grid of about ``n`` regions (the widgets' effect)."""
    A.set_segmentation(_app(at), A.SegSettings(method="grid", n_segments=n))


def _methods(at):
    return next(m for m in at.multiselect if m.label == "Explainers")


def test_compare_explainers_is_kept_through_a_reload_and_a_suggestion_preselects_its_pair():
    at = run_app()
    _grid(at, 6)
    ex = explain(at, samples=60)
    assert ex.n_regions <= lc.SHAPLEY_MAX_K
    # K is small: exact Shapley joins the default methods
    assert _methods(at).value == ["lime", "kernelshap", "shapley", "occlusion", "rise"]
    button(at, "Compare explainers").click().run()
    assert not at.exception, at.exception
    s = _app(at)
    cmp = s.explanation.explainers
    assert cmp is not None and [a.method for a in cmp.attributions] == _methods(at).value
    assert cmp.target == ex.target and cmp.n_regions == ex.n_regions
    text = [_plain(m.value) for m in at.markdown]
    assert any(cmp.agreement.sentence in t for t in text)
    assert any(NORMALISATION in _plain(c.value) for c in at.caption)
    assert sum(c.startswith("first: region") for c in image_captions(at)) == 5
    table = at.dataframe[-1].value
    assert len(table) == 10 and list(table.columns)[:2] == ["methods", "feature"]
    assert cmp.merge is not None  # the merge test ran: its outcome is on the page
    assert any(_plain(cmp.merge.sentence) in _plain(x.value) for x in [*at.caption, *at.info])

    again = run_app({"a": s.id})  # a new session on the same URL: what a reload is
    back = _app(again).explanation.explainers
    assert back is not None and back.agreement.sentence == cmp.agreement.sentence
    assert back.merge.to_dict() == cmp.merge.to_dict()
    assert any(cmp.agreement.sentence in _plain(m.value) for m in again.markdown)

    # a suggestion (made here for a chosen pair) preselects the pair for "Merge selected"
    hint = MergeHint((1, 2), 0.5, "exact", 0.1, (), "Regions 1 and 2 interact (index 0.5): "
                     "merge them and explain again.")  # fmt: skip
    A.set_comparison(_app(again), dataclasses.replace(back, merge=hint))
    again.run()
    assert any("Regions 1 and 2 interact" in _plain(i.value) for i in again.info)
    button(again, "Select regions 1 and 2 for merging").click().run()
    assert not again.exception, again.exception
    s = _app(again)
    keys = s.explanation.region_keys
    assert s.selected == {keys[1], keys[2]}
    assert again.title[0].value == "Craft regions"  # the button opens Craft regions
    assert not button(again, "Merge selected (2)").disabled  # one click merges them


def test_exact_shapley_over_too_many_regions_says_the_cost_and_offers_kernelshap():
    at = run_app()
    _grid(at, 16)
    ex = explain(at, samples=60)
    assert ex.n_regions > lc.SHAPLEY_MAX_K
    assert _methods(at).value == list(DEFAULT_METHODS)
    _methods(at).set_value(["lime", "shapley"]).run()
    button(at, "Compare explainers").click().run()
    assert not at.exception, at.exception
    err = _plain(at.error[-1].value)
    assert f"2^{ex.n_regions}" in err and "model passes" in err and "kernelshap" in err
    assert _app(at).explanation.explainers is None
    button(at, "Use KernelSHAP instead of exact Shapley").click().run()
    assert _methods(at).value == ["lime", "kernelshap"]
    button(at, "Compare explainers").click().run()
    assert _app(at).explanation.explainers is not None
    assert np.isfinite(_app(at).explanation.explainers.values("kernelshap")).all()


def test_gradient_methods_compare_through_the_apps_work_queue():
    """The app scores through its work queue; Integrated Gradients and Grad-CAM take the
    queued local model's gradients (the demo model is a torch CNN): no error, one overlay each."""
    at = run_app()
    _grid(at, 6)
    explain(at, samples=60)
    _methods(at).set_value(["lime", "ig", "gradcam"]).run()
    button(at, "Compare explainers").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    cmp = _app(at).explanation.explainers
    assert cmp is not None and [a.method for a in cmp.attributions] == ["lime", "ig", "gradcam"]
    for m in ("ig", "gradcam"):
        assert np.isfinite(cmp.values(m)).all() and np.abs(cmp.values(m)).max() > 0, m
    assert sum(c.startswith("first: region") for c in image_captions(at)) == 3


def test_compare_explainers_on_a_flat_image_says_no_method_finds_a_region():
    """A flat grey image: each hidden region takes its own mean colour, which is the image, so
    the demo model's score never moves. The page says no method finds a region that matters,
    each overlay says every region is 0 (not "first: region 0"), and nothing is merged."""
    import io

    from conftest import image_uploader
    from PIL import Image

    at = run_app()
    buf = io.BytesIO()
    Image.fromarray(np.full((128, 128, 3), 128, np.uint8)).save(buf, format="PNG")
    image_uploader(at).set_value(("flat.png", buf.getvalue(), "image/png")).run()
    _grid(at, 6)
    ex = explain(at, samples=60)
    assert not ex.weights.any()
    button(at, "Compare explainers").click().run()
    assert not at.exception, at.exception
    cmp = _app(at).explanation.explainers
    assert cmp.agreement.sentence.startswith("No method finds a region that matters")
    assert any(cmp.agreement.sentence in _plain(m.value) for m in at.markdown)
    captions = image_captions(at)
    assert captions.count("every region 0") == len(cmp.attributions)
    assert not any(c.startswith("first: region") for c in captions)
    assert cmp.merge.pair is None
    assert any("nothing to merge" in _plain(x.value) for x in [*at.caption, *at.info])
