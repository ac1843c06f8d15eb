"""End to end in a real browser: Debian's Chromium driven by Playwright against `streamlit run app.py`.

Screenshots of every step are saved under test-artifacts/ (look at them).
"""

import re

import numpy as np
import pytest
from conftest import ARTIFACTS
from test_e2e_fast import early_stop_off

from models.samples import load_sample, sample_names

pytestmark = [pytest.mark.browser, pytest.mark.slow]

COORDS = 'iframe[title="streamlit_image_coordinates.streamlit_image_coordinates"]'


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"e2e-{name}.png"), full_page=True)


def goto_page(page, title: str) -> None:
    page.get_by_role("link", name=title).click()
    page.wait_for_selector(
        f"h1:has-text('{title if title != 'Explain' else 'LIMEcraft'}')", timeout=30000
    )


def wait_idle(page, timeout: int = 60000) -> None:
    """Wait until Streamlit has finished rerunning (its status widget disappears)."""
    page.wait_for_timeout(400)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout
    )


def choose(page, label: str, option: str) -> None:
    page.get_by_label(label).click()
    page.get_by_role("option", name=option).click()
    wait_idle(page)


def test_the_whole_analyst_flow(page, app_url):
    page.goto(app_url)
    page.wait_for_selector("h1:has-text('LIMEcraft')", timeout=60000)
    wait_idle(page)
    shot(page, "1-open")

    # --- craft: draw a rectangle around the demo image's tag
    goto_page(page, "Craft regions")
    canvas = page.locator("canvas.upper-canvas")
    canvas.wait_for(timeout=30000)
    choose(page, "Drawing tool", "rectangle")
    sample = load_sample(sample_names()[0])
    ys, xs = np.nonzero(sample.tag_mask)
    h, w = sample.tag_mask.shape
    box = canvas.bounding_box()
    sx, sy = box["width"] / w, box["height"] / h
    x0, y0 = box["x"] + (xs.min() - 2) * sx, box["y"] + (ys.min() - 2) * sy
    x1, y1 = box["x"] + (xs.max() + 3) * sx, box["y"] + (ys.max() + 3) * sy
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x1, y1, steps=12)
    page.mouse.up()
    page.mouse.move(5, 5)  # away from the canvas toolbar
    page.wait_for_timeout(800)
    page.get_by_label("Name of the next region").fill("tag")
    page.get_by_label("Name of the next region").press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Add as region").click()
    wait_idle(page)
    page.wait_for_selector("input[value='tag']", timeout=30000)
    shot(page, "2-drawn")

    # --- craft: click two superpixels and merge them
    frame = page.frame_locator(COORDS).locator("#image")
    frame.wait_for(timeout=30000)
    ib = frame.bounding_box()
    for fx, fy in ((0.08, 0.08), (0.08, 0.30)):
        frame.click(position={"x": ib["width"] * fx, "y": ib["height"] * fy})
        wait_idle(page)
    merge = page.get_by_role("button", name=re.compile(r"Merge selected \(2\)"))
    merge.wait_for(timeout=30000)
    caption = page.get_by_text(re.compile(r"^\d+ regions; the ids match"))
    before = int(caption.inner_text().split()[0])
    merge.click()
    wait_idle(page)
    page.wait_for_function(
        f"() => [...document.querySelectorAll('p')].some(p => /^{before - 1} regions; the ids match/.test(p.innerText))",
        timeout=30000,
    )
    shot(page, "3-merged")

    # --- explain
    goto_page(page, "Explain")
    page.get_by_role("button", name="Explain", exact=True).click()
    page.wait_for_selector("text=surrogate fidelity", timeout=180000)
    wait_idle(page)
    # the overlay with its legend, and the weights chart of the explained class
    assert page.get_by_text(re.compile(r"^Weights for \w+")).first.is_visible()
    assert page.get_by_text("Top k for and k against").is_visible()
    shot(page, "4-explained")

    # --- inspect: move the tag region and watch the prediction change
    goto_page(page, "Inspect")
    summary = page.get_by_text(re.compile(r"^Top class:"))
    summary.wait_for(timeout=30000)
    assert "(+0.000)" in summary.inner_text()  # nothing edited yet
    page.get_by_text("move", exact=True).click()
    page.get_by_text("Right (px)").wait_for(timeout=30000)
    slider = page.get_by_role("slider").first
    slider.focus()
    for _ in range(30):
        slider.press("ArrowLeft")
    page.wait_for_function(
        "() => [...document.querySelectorAll('input[type=range][aria-label=\"Right (px)\"]')]"
        ".some(e => e.value === '-30')",
        timeout=30000,
    )
    # the rerun for the last value has finished when the summary shows a real change
    page.wait_for_function(
        "() => [...document.querySelectorAll('p')].some(p => p.innerText.startsWith('Top class:')"
        " && Math.abs(parseFloat((p.innerText.match(/\\(([+-][0-9.]+)\\)/) || [0, 0])[1])) >= 0.001)",
        timeout=60000,
    )
    text = summary.inner_text()
    change = float(re.search(r"\(([+-][0-9.]+)\)", text).group(1))
    assert abs(change) > 1e-3, text
    page.get_by_role("button", name="Apply edit").click()
    page.get_by_text("Applied edits").wait_for(timeout=30000)
    shot(page, "5-inspect")

    # --- export: download the report
    goto_page(page, "Export")
    with page.expect_download() as dl:
        page.get_by_role("button", name="Report (HTML)").click()
    with open(dl.value.path(), encoding="utf-8") as f:
        html = f.read()
    assert "LIMEcraft report" in html and "tag" in html and "move region" in html
    shot(page, "6-export")


def test_explain_shows_progress_and_can_be_cancelled(page, app_url):
    page.goto(app_url)
    page.wait_for_selector("h1:has-text('LIMEcraft')", timeout=60000)
    wait_idle(page)  # the first run's width probe reruns once; a value typed during it is lost
    page.get_by_text("Settings").click()
    samples = page.get_by_role("spinbutton", name="Samples", exact=True)
    samples.fill("20000")
    samples.press("Enter")
    wait_idle(page)
    assert samples.input_value() == "20000"
    early_stop_off(page)  # the demo image would be stable after a few hundred samples
    page.get_by_role("button", name="Explain", exact=True).click()
    # one steady line: passes done, then the time left once a few passes are timed
    # the time left reads "about 40 s left" or "about 4 min left", as the machine allows
    page.get_by_text(re.compile(r"\d+/\d+ model passes · about \d+ (s|min) left")).wait_for(
        timeout=60000
    )
    shot(page, "7-progress")
    page.get_by_role("button", name="Cancel").click()
    page.get_by_text("Explain was cancelled").wait_for(timeout=60000)
    assert not page.get_by_text("surrogate fidelity").is_visible()
    shot(page, "8-cancelled")


def test_trust_page_in_the_browser(page, app_url):
    page.goto(app_url)
    page.wait_for_selector("h1:has-text('LIMEcraft')", timeout=60000)
    goto_page(page, "Trust")
    samples = page.get_by_role("spinbutton", name="Samples", exact=True)
    samples.fill("300")
    samples.press("Enter")
    page.wait_for_timeout(1000)
    page.get_by_role("button", name="Check the explanation").click()
    page.get_by_text(re.compile(r"over \d+ repeats")).first.wait_for(timeout=180000)
    for heading in (
        "Convergence",
        "Kernel width",
        "Faithfulness",
        "Does the conclusion depend on the fill?",
    ):
        page.get_by_text(heading, exact=True).first.wait_for(timeout=30000)
    page.wait_for_timeout(1500)
    shot(page, "9-trust")


def test_the_viewer_toolbar_hides_deploy_and_clear_cache(page, app_url):
    """.streamlit/config.toml sets toolbarMode = "viewer": no Deploy button, and the main menu
    offers no "Clear cache"."""
    page.goto(app_url)
    page.wait_for_selector("h1:has-text('LIMEcraft')", timeout=60000)
    wait_idle(page)
    assert page.get_by_role("button", name="Deploy").count() == 0
    menu = page.locator('[data-testid="stMainMenu"]')
    if menu.count():
        menu.first.click()
        page.wait_for_timeout(300)
        assert page.get_by_text("Clear cache").count() == 0
    shot(page, "10-viewer-toolbar")
