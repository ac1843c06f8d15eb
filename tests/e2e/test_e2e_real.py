"""In the browser, as a new user opens it: a real photo with the real ImageNet model
(efficientnet_lite0, offline) on the first page, and the published ImageNet-W watermark shortcut
caught on the gallery's watermarked photo: the same answer whatever came before, the watermark
as a region in one click, explained first for carton, pasted into clean photos, removed on
Inspect (issue 25). One flow, so that the real model explains twice, not once per step.

These tests start their own app server with the app's own defaults: the shared one opens on the
demo images with the demo model (tests/conftest.py).
"""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
from conftest import start_app, stop_app
from e2e_helpers import (
    choose,
    click,
    download,
    explain,
    goto,
    open_app,
    open_expander,
    pick_sample,
    rerun,
    shot,
    track,
)
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

import limecraft_core as lc
from models import registry
from models.samples import load_sample

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.own_server]


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


def probabilities(image: np.ndarray) -> np.ndarray:
    """The real model's class probabilities, as the engine computes them."""
    z = registry.load_classifier("efficientnet_lite0").predict(image).astype(np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def engine_top5(name: str) -> list[str]:
    clf = registry.load_classifier("efficientnet_lite0")
    return [clf.label(int(i)) for i in np.argsort(-probabilities(load_sample(name).image))[:5]]


def one_class(page) -> None:
    """Explain's Settings (an expander: no rerun), then "one class": the class picker appears.
    The expander is opened again if a rerun closed it before the click, and the option is
    clicked again until it is chosen. Two full-suite runs failed here: one click sent no rerun
    request, and another met the options inert (the expander closed under it)."""
    group = page.get_by_role("radiogroup", name="Classes")
    one = group.get_by_text("one class", exact=True)
    chosen = group.get_by_role("radio", name="one class", exact=True)

    def choose_one() -> None:
        for _ in range(3):
            open_expander(page, "Settings")
            try:
                one.click(timeout=10_000)
                expect(chosen).to_be_checked(timeout=10_000)
                return
            except (AssertionError, PlaywrightTimeoutError):
                continue
        expect(chosen).to_be_checked()

    rerun(page, choose_one, what='choosing "one class"')
    expect(combobox(page, "Class")).to_be_visible()


def test_a_new_user_meets_the_real_model_and_catches_its_shortcut(page, real_url, browser):
    # 1. the first page: a real photo, the real model, its top-5 as the engine says, no warning
    open_app(page, real_url)
    expect(combobox(page, "Sample gallery")).to_have_value("chelsea")
    expect(combobox(page, "Registry")).to_have_value("efficientnet_lite0")
    shown = top5(page)
    assert shown == engine_top5("chelsea") and any("cat" in c for c in shown[:3]), shown
    expect(page.get_by_text("Not meaningful for this image")).to_have_count(0)
    explain(page)
    expect(page.get_by_text(re.compile(r"^Strongest region for "))).to_be_visible()
    expect(page.get_by_text("not meaningful")).to_have_count(0)
    shot(page, "real-first-page")

    # 2. history: the watermarked photo after an explanation of the cat shows the top-5 (names
    # and scores) that a fresh session opening it first shows
    pick_sample(page, "page-watermark")
    after_cat = top5(page, scores=True)
    assert after_cat[0].startswith("carton"), after_cat
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    try:
        fresh = track(context.new_page())
        open_app(fresh, real_url)
        pick_sample(fresh, "page-watermark")
        assert top5(fresh, scores=True) == after_cat
    finally:
        context.close()

    # 3. the watermark as a region in one click, explained for carton: it comes first
    goto(page, "Craft regions")
    click(page, page.get_by_role("button", name="Add the watermark as a region"))
    expect(page.locator("input[value='watermark']")).to_be_visible()
    goto(page, "Explain")
    one_class(page)
    # the class picker lists the classes by the model's score: carton first here
    expect(combobox(page, "Class")).to_have_value("carton (478)")
    explain(page)
    strongest = page.get_by_text(re.compile(r"^Strongest region for carton"))
    expect(strongest).to_contain_text("watermark")
    # the verdict in its two parts: the conclusion (the watermark first, in every resample) and
    # the detail (the order of the lesser regions), which does not veto it (issue 26), each on
    # a line of its own (issue 48)
    verdict = page.get_by_text(
        re.compile(r"over 40 resamples of one sample: the conclusion ")
    ).first
    expect(verdict).to_contain_text("stable over 40 resamples of one sample: the conclusion holds")
    expect(verdict).to_contain_text("region 0 (watermark) is first in all 40 resamples")
    expect(verdict).not_to_contain_text("other regions that matter")
    detail = page.get_by_text(
        re.compile(r"^The detail: the order of the \d+ other regions that matter is")
    )
    expect(detail.first).to_be_visible()
    shot(page, "real-watermark-explained", tall=True)

    # 4. Inspect: paste the watermark into 4 clean photos; the page shows each photo's carton
    # score before and after, as the engine computes them
    goto(page, "Inspect")
    expect(combobox(page, "Region")).to_have_value(re.compile(r"^0 watermark"))
    click(page, page.get_by_role("button", name="Paste into 4 images"))
    summary = page.get_by_text(re.compile(r"^Pasted into 4 images, the region raised carton"))
    expect(summary).to_be_visible()
    rows = page.locator("li").filter(has_text=re.compile(r": carton [\d.]+ → "))
    expect(rows).to_have_count(4)
    pasted = {}
    for text in rows.all_inner_texts():
        m = re.match(r"(\S+): carton ([\d.]+) → ([\d.]+) \(([+-][\d.]+)\)", text)
        assert m, text
        pasted[m[1]] = (float(m[2]), float(m[3]))
    source, mask = load_sample("page-watermark").image, lc.watermark_mask(224, 224)
    names = list(pasted)
    result, _ = lc.insertion_test(
        source, mask, [load_sample(n).image for n in names], probabilities, 478
    )
    for name, before, after in zip(names, result.before, result.after, strict=True):
        assert pasted[name] == pytest.approx((before, after), abs=6e-4), name
    assert (result.after > result.before).sum() >= 3  # the watermark pulls towards carton
    shot(page, "real-transplant", tall=True)

    # 5. remove the watermark (mean fill, as LIME hides a region): carton falls, and the clean
    # page's class returns
    click(page, page.get_by_text("remove", exact=True))
    choose(page, "The hole shows", "mean")
    top = page.get_by_text(re.compile(r"^Top class:")).first
    expect(top).to_contain_text("the edited image is now")
    text = top.inner_text()
    m = re.match(r"Top class: carton ([\d.]+) → ([\d.]+)", text)
    assert m and float(m[2]) < float(m[1]) / 2, text
    clean = engine_top5("page")[0]
    assert f"the edited image is now {clean}" in text, (text, clean)
    shot(page, "real-watermark-removed")

    # 6. the report holds the transplant: the sentence and each photo's carton score, as shown
    goto(page, "Export")
    report = html.unescape(download(page, "Report (HTML)").decode())
    part = re.search(r'<section id="transplant">(.*?)</section>', report, re.S)
    assert part, "no transplant in the report"
    words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part[1]))
    assert "Pasted into 4 images, the region raised carton" in words
    for name, before, after in zip(names, result.before, result.after, strict=True):
        m = re.search(rf"{re.escape(name)} ([\d.]+) ([\d.]+) ", words)
        assert m, (name, words)
        assert (float(m[1]), float(m[2])) == pytest.approx((before, after), abs=6e-4), name


def test_the_built_in_models_follow_the_gallery(page, real_url):
    """A demo image brings the demo model; a photo brings the real one back, with no warning."""
    open_app(page, real_url)
    pick_sample(page, "demo-conflict-1")
    expect(combobox(page, "Registry")).to_have_value("demo")
    pick_sample(page, "coffee")
    expect(combobox(page, "Registry")).to_have_value("efficientnet_lite0")
    expect(page.get_by_text("Not meaningful for this image")).to_have_count(0)
    assert top5(page)[0] == engine_top5("coffee")[0]
