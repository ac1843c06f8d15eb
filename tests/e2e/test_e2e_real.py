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
    upload,
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
    expect(combobox(page, "Class").first).to_be_visible()


CONCLUSIONS = {
    "causes": "It causes carton in these images",
    "weak": "A weak, selective effect",
    "none": "It did not raise carton in these images",
}


def test_the_readme_five_steps_exactly_as_written(page, real_url, browser):
    """The README's "Catch a real shortcut in five steps", step by step as written, with every
    number it states: carton 0.661; the watermark first in all 40 resamples, stable; the paste's
    sentence as its numbers say; after Apply of remove with the mean fill, 0.072 on the page, in
    the re-explanation and in the report (issue 48)."""
    # 1. Open a photo: the cat with efficientnet_lite0, its top-5 as the engine says; Explain
    open_app(page, real_url)
    expect(combobox(page, "Sample gallery")).to_have_value("chelsea")
    expect(combobox(page, "Registry")).to_have_value("efficientnet_lite0")
    shown = top5(page)
    assert shown == engine_top5("chelsea") and any("cat" in c for c in shown[:3]), shown
    expect(page.get_by_text("Not meaningful for this image")).to_have_count(0)
    explain(page)
    expect(page.get_by_text(re.compile(r"^Strongest region for "))).to_be_visible()
    expect(page.get_by_text("not meaningful")).to_have_count(0)
    verdict = page.get_by_text(re.compile(r"over \d+ resamples of one sample: the conclusion "))
    if "borderline" in verdict.first.inner_text():  # the README's case: more samples offered
        expect(
            page.get_by_role("button", name=re.compile(r"^Continue to \d+ samples"))
        ).to_be_visible()
    shot(page, "real-first-page")

    # 2. Load the watermarked page: carton (0.661) first in the top-5, the same as a fresh
    # session opening it first shows
    pick_sample(page, "page-watermark")
    after_cat = top5(page, scores=True)
    assert after_cat[0] == "carton · 0.661", after_cat
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    try:
        fresh = track(context.new_page())
        open_app(fresh, real_url)
        pick_sample(fresh, "page-watermark")
        assert top5(fresh, scores=True) == after_cat
    finally:
        context.close()

    # 3. Make the watermark a region (Craft regions, one button)
    goto(page, "Craft regions")
    click(page, page.get_by_role("button", name="Add the watermark as a region"))
    expect(page.locator("input[value='watermark']")).to_be_visible()

    # 4. Explain it (the default settings): the strongest region for carton is the watermark,
    # first in all 40 resamples, stable. The verdict's conclusion and its detail are apart.
    goto(page, "Explain")
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

    # 5. Inspect it: the watermark region first; Paste into 4 images shows each photo's carton
    # score before and after, as the engine computes them, and a sentence its numbers support
    goto(page, "Inspect")
    expect(combobox(page, "Region")).to_have_value(re.compile(r"^0 watermark"))
    expect(combobox(page, "Class to follow")).to_have_value("carton (478)")
    click(page, page.get_by_role("button", name="Paste into 4 images"))
    summary = page.get_by_text(re.compile(r"^Pasted into 4 images, the region raised carton"))
    expect(summary).to_be_visible()
    rows = page.locator("li").filter(has_text=re.compile(r": carton [\d.]+ → "))
    expect(rows).to_have_count(4)
    pasted = {}
    for text in rows.all_inner_texts():
        m = re.match(r"(\S+): carton ([\d.]+) → ([\d.]+) \(([+-][\d.]+); a same-size patch", text)
        assert m, text
        pasted[m[1]] = (float(m[2]), float(m[3]))
    source, mask = load_sample("page-watermark").image, lc.watermark_mask(224, 224)
    names = list(pasted)
    result, _ = lc.insertion_test(
        source, mask, [load_sample(n).image for n in names], probabilities, 478
    )
    for name, before, after in zip(names, result.before, result.after, strict=True):
        assert pasted[name] == pytest.approx((before, after), abs=6e-4), name
    # the sentence: the mean rise and the flips of these rows; the conclusion: their verdict
    line = summary.inner_text()
    m = re.search(r"raised carton by ([\d.]+) on average .* turned (\d+) of \d+ into carton", line)
    assert m, line
    shown_rows = np.array(list(pasted.values()))
    assert float(m[1]) == pytest.approx((shown_rows[:, 1] - shown_rows[:, 0]).mean(), abs=2e-3)
    assert int(m[2]) == result.flips
    expect(page.get_by_text(CONCLUSIONS[result.finding]).first).to_be_visible()
    expect(page.get_by_text("shows that it causes")).to_have_count(0)
    shot(page, "real-transplant", tall=True)

    # remove, "The hole shows" mean, Apply edit: carton 0.661 → 0.072, a crossword puzzle again
    click(page, page.get_by_text("remove", exact=True))
    choose(page, "The hole shows", "mean")
    top = page.get_by_text(re.compile(r"^Top class:")).first
    expect(top).to_contain_text("carton 0.661 → 0.072")
    clean = engine_top5("page")[0]
    expect(top).to_contain_text(f"the edited image is now {clean}")
    click(page, page.get_by_role("button", name="Apply edit"))
    expect(page.get_by_text("Applied edits")).to_be_visible()
    expect(
        page.get_by_text(re.compile(r"remove region 0 'watermark' \(fill mean\)"))
    ).to_have_count(1)
    # applied once: the page still says 0.072, and nothing is pending
    expect(
        page.get_by_role("radiogroup", name="Edit").get_by_role("radio", name="no change")
    ).to_be_checked()
    expect(top).to_contain_text("carton 0.661 → 0.072")
    expect(top).to_contain_text(f"the edited image is now {clean}")
    click(page, page.get_by_role("button", name="Explain the edited image"), timeout=180_000)
    expect(page.get_by_text("the explained image").first).to_be_visible()
    expect(
        page.get_by_text(re.compile(r"^Followed class on the explained image: carton 0\.072"))
    ).to_be_visible()
    expect(page.get_by_text(re.compile(rf"^{re.escape(clean)} · model output"))).to_be_visible()
    shot(page, "real-watermark-removed", tall=True)

    # Export: the report holds the paste (the sentence and each photo's score) and the edit's
    # 0.072
    goto(page, "Export")
    report = html.unescape(download(page, "Report (HTML)").decode())
    part = re.search(r'<section id="transplant">(.*?)</section>', report, re.S)
    assert part, "no transplant in the report"
    words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part[1]))
    assert "Pasted into 4 images, the region raised carton" in words
    assert CONCLUSIONS[result.finding] in words
    for name, before, after in zip(names, result.before, result.after, strict=True):
        m = re.search(rf"{re.escape(name)} ([\d.]+) ([\d.]+) ", words)
        assert m, (name, words)
        assert (float(m[1]), float(m[2])) == pytest.approx((before, after), abs=6e-4), name
    inspection = re.search(r'<section id="inspection">(.*?)</section>', report, re.S)
    assert inspection, "no edits in the report"
    edit_words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", inspection[1]))
    assert re.search(r"carton 0\.661\d* 0\.072\d", edit_words), edit_words

    # Explain's class picker lists the classes by the model's score on the image: carton first
    goto(page, "Explain")
    one_class(page)
    settings = page.locator("[data-testid='stExpander']").filter(has_text="Samples")
    expect(settings.get_by_role("combobox", name="Class", exact=True)).to_have_value("carton (478)")


def test_the_built_in_models_follow_the_gallery(page, real_url):
    """A demo image brings the demo model; a photo brings the real one back, with no warning."""
    open_app(page, real_url)
    pick_sample(page, "demo-conflict-1")
    expect(combobox(page, "Registry")).to_have_value("demo")
    pick_sample(page, "coffee")
    expect(combobox(page, "Registry")).to_have_value("efficientnet_lite0")
    expect(page.get_by_text("Not meaningful for this image")).to_have_count(0)
    assert top5(page)[0] == engine_top5("coffee")[0]


def _brick_wall(tmp_path) -> tuple[str, np.ndarray]:
    """A photo with LIMEcraft's watermark edit (the ImageNet-W text, as ``python -m limecraft
    watermark`` draws it): a 205 px square of scikit-image's brick-wall photograph (its
    ``data.brick()``, from (154, 154)), resized to 224 px. The watermark turns
    efficientnet_lite0's prediction into carton (about 0.21; without it: maze, 0.21), and
    the text detector finds it as one box apart from the wall (IoU 0.94 with its box)."""
    from PIL import Image
    from skimage import data, transform

    wall = data.brick()[154:359, 154:359]
    photo = (transform.resize(wall, (224, 224), anti_aliasing=True) * 255).astype(np.uint8)
    marked = lc.add_watermark(np.repeat(photo[..., None], 3, axis=2)).image
    path = tmp_path / "brick-wall-watermarked.png"
    Image.fromarray(marked).save(path)
    return str(path), marked


def test_text_proposals_find_the_watermark_and_survive_a_reload(page, real_url, tmp_path):
    """Issue 50: propose text regions on a watermarked photo, accept, Explain: the strongest
    region for carton is the text proposal on the watermark (IoU >= 0.5 with its box), shown by
    its name; a reload keeps the region and the result."""
    path, marked = _brick_wall(tmp_path)
    box = lc.watermark_mask(224, 224, box=True)
    found = lc.propose(marked, ["text"]).proposals
    on_mark = [p for p in found if (p.mask & box).sum() / (p.mask | box).sum() >= 0.5]
    assert len(on_mark) == 1, [p.name for p in found]
    name = on_mark[0].name

    open_app(page, real_url)
    upload(page, page.locator("[data-testid='stSidebar'] input[type=file]").first, path)
    expect(page.get_by_text(re.compile(r"^Loaded brick-wall-watermarked\.png"))).to_be_visible()
    assert top5(page)[0] == "carton"
    goto(page, "Craft regions")
    expect(combobox(page, "Proposer")).to_have_value("text")
    click(page, page.get_by_role("button", name="Propose regions"))
    expect(page.get_by_text(name, exact=False).first).to_be_visible()
    shot(page, "proposals-text", tall=True)
    click(page, page.get_by_role("button", name="Accept all"))
    expect(page.locator(f"input[value='{name}']")).to_be_visible()

    goto(page, "Explain")
    explain(page)
    strongest = page.get_by_text(re.compile(r"^Strongest region for carton"))
    expect(strongest).to_contain_text(name)
    shot(page, "proposals-explained", tall=True)

    page.reload()
    expect(page.get_by_text(re.compile(r"^Strongest region for carton"))).to_contain_text(name)
    goto(page, "Craft regions")
    expect(page.locator(f"input[value='{name}']")).to_be_visible()
