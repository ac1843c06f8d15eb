"""In the browser, as a new user opens it: a real photo with the real ImageNet model
(efficientnet_lite0, offline) on the first page, and the published ImageNet-W watermark shortcut
caught on the gallery's watermarked photo: the watermark as a region in one click, explained
first for carton, removed on Inspect (issue 25).

These tests start their own app server with the app's own defaults: the shared one opens on the
demo images with the demo model (tests/conftest.py).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import start_app, stop_app
from e2e_helpers import choose, click, explain, goto, open_app, pick, pick_sample, shot, track
from playwright.sync_api import expect

import limecraft_core as lc
from models import registry
from models.samples import load_sample

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def real_url():
    """An app server as `streamlit run app.py` starts it: no default model set."""
    proc, url, _ = start_app({"LIMECRAFT_DEFAULT_MODEL": None})
    yield url
    stop_app(proc)


def combobox(page, label: str):
    return page.get_by_role("combobox", name=label, exact=True)


def top5(page, *, scores: bool = False) -> list[str]:
    """The sidebar's top-5, in order: the class names (with their scores: ``scores``)."""
    bars = page.locator("[data-testid='stSidebar'] [data-testid='stProgress']")
    expect(bars).to_have_count(5)
    shown = [t.strip() for t in bars.all_inner_texts()]
    return shown if scores else [re.sub(r" · [\d.]+$", "", t) for t in shown]


def engine_top5(name: str) -> list[str]:
    clf = registry.load_classifier("efficientnet_lite0")
    p = clf.predict(load_sample(name).image)
    return [clf.label(int(i)) for i in np.argsort(-p)[:5]]


def test_the_first_page_is_a_real_photo_and_the_real_models_explanation(page, real_url):
    open_app(page, real_url)
    expect(combobox(page, "Sample gallery")).to_have_value("chelsea")
    expect(combobox(page, "Registry")).to_have_value("efficientnet_lite0")
    # the real model's top-5 for the cat photo: cats, as the engine says
    shown = top5(page)
    assert shown == engine_top5("chelsea"), shown
    assert any("cat" in c for c in shown[:3]), shown
    # no "not meaningful" warning for the real model on a photo
    expect(page.get_by_text("Not meaningful for this image")).to_have_count(0)
    explain(page)
    expect(page.get_by_text(re.compile(r"^Strongest region for "))).to_be_visible()
    expect(page.get_by_text("not meaningful")).to_have_count(0)
    shot(page, "real-first-page")
    # the gallery's demo images bring the demo model, and its warning follows it to a photo
    pick_sample(page, "demo-conflict-1")
    expect(combobox(page, "Registry")).to_have_value("demo")
    expect(page.get_by_text("Not meaningful for this image")).to_have_count(0)
    pick_sample(page, "coffee")
    expect(combobox(page, "Registry")).to_have_value("efficientnet_lite0")
    expect(page.get_by_text("Not meaningful for this image")).to_have_count(0)


def test_the_watermark_is_the_carton_shortcut_and_removing_it_restores_the_page(page, real_url):
    """The watermarked gallery photo; the watermark as a region in one click; explained for
    carton, the watermark comes first; removed on Inspect, carton falls and the clean photo's
    class returns."""
    open_app(page, real_url)
    pick_sample(page, "page-watermark")
    assert top5(page)[0] == "carton"
    goto(page, "Craft regions")
    click(page, page.get_by_role("button", name="Add the watermark as a region"))
    expect(page.locator("input[value='watermark']")).to_be_visible()
    goto(page, "Explain")
    page.get_by_text("Settings", exact=True).click()
    click(page, page.get_by_text("one class", exact=True))
    # the class picker lists the classes by the model's score: carton first here
    expect(combobox(page, "Class")).to_have_value("carton (478)")
    explain(page)
    strongest = page.get_by_text(re.compile(r"^Strongest region for carton"))
    expect(strongest).to_contain_text("watermark")
    shot(page, "real-watermark-explained", tall=True)
    # Inspect: remove the watermark (mean fill, as LIME hides a region)
    goto(page, "Inspect")
    page.get_by_role("combobox", name="Region").click()
    pick(page, page.get_by_role("option", name=re.compile(r"^\d+ watermark")))
    click(page, page.get_by_text("remove", exact=True))
    choose(page, "The hole shows", "mean")
    summary = page.get_by_text(re.compile(r"^Top class:")).first
    expect(summary).to_contain_text("the edited image is now")
    text = summary.inner_text()
    m = re.match(r"Top class: carton ([\d.]+) → ([\d.]+)", text)
    assert m and float(m[2]) < float(m[1]) / 2, text
    clean = engine_top5("page")[0]
    assert f"the edited image is now {clean}" in text, (text, clean)
    shot(page, "real-watermark-removed")


def test_an_image_gets_the_same_answer_whatever_was_explained_before(page, real_url, browser):
    """Explain photo A, then open the watermarked photo B: B's top-5 (names and scores) is the
    one a fresh session that opens B first shows."""
    open_app(page, real_url)
    explain(page)  # chelsea, the first page
    pick_sample(page, "page-watermark")
    after_a = top5(page, scores=True)
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    try:
        fresh = track(context.new_page())
        open_app(fresh, real_url)
        pick_sample(fresh, "page-watermark")
        assert top5(fresh, scores=True) == after_a
    finally:
        context.close()
    assert after_a[0].startswith("carton")


def test_the_watermark_pasted_into_four_clean_photos_moves_them_towards_carton(page, real_url):
    """Transplant: the watermark region pasted into 4 clean gallery photos; the page shows each
    photo's carton score before and after, as the engine computes them."""
    open_app(page, real_url)
    pick_sample(page, "page-watermark")
    goto(page, "Craft regions")
    click(page, page.get_by_role("button", name="Add the watermark as a region"))
    goto(page, "Inspect")
    expect(combobox(page, "Region")).to_have_value(re.compile(r"^0 watermark"))
    click(page, page.get_by_role("button", name="Paste into 4 images"))
    summary = page.get_by_text(re.compile(r"^Pasted into 4 images, the region raised carton"))
    expect(summary).to_be_visible()
    rows = page.locator("li").filter(has_text=re.compile(r": carton [\d.]+ → "))
    expect(rows).to_have_count(4)
    shown = {}
    for text in rows.all_inner_texts():
        m = re.match(r"(\S+): carton ([\d.]+) → ([\d.]+) \(([+-][\d.]+)\)", text)
        assert m, text
        shown[m[1]] = (float(m[2]), float(m[3]))
    clf = registry.load_classifier("efficientnet_lite0")
    source, mask = load_sample("page-watermark").image, lc.watermark_mask(224, 224)

    def probabilities(image):
        z = clf.predict(image).astype(np.float64)
        e = np.exp(z - z.max())
        return e / e.sum()

    names = list(shown)
    result, _ = lc.insertion_test(
        source, mask, [load_sample(n).image for n in names], probabilities, 478
    )
    for name, before, after in zip(names, result.before, result.after, strict=True):
        assert shown[name] == pytest.approx((before, after), abs=6e-4), name
    assert (result.after > result.before).sum() >= 3  # the watermark pulls towards carton
    shot(page, "real-transplant", tall=True)
