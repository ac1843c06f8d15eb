"""End to end in a real browser: Debian's Chromium driven by Playwright against `streamlit run app.py`.

Screenshots of every step are saved under test-artifacts/ (look at them).
"""

import re

import numpy as np
import pytest
from e2e_helpers import (
    CANVAS,
    T,
    choose,
    click,
    drive,
    early_stop_off,
    enter,
    goto,
    open_app,
    open_expander,
    rerun,
    start,
)
from e2e_helpers import shot as _shot
from playwright.sync_api import expect

from models.samples import load_sample, sample_names

pytestmark = [pytest.mark.browser, pytest.mark.slow]

COORDS = 'iframe[title="streamlit_image_coordinates.streamlit_image_coordinates"]'
HEIGHT = 1100


def shot(page, name: str) -> None:
    _shot(page, f"e2e-{name}")


def test_the_whole_analyst_flow(page, app_url):
    open_app(page, app_url, height=HEIGHT)
    expect(page.locator("h1")).to_have_text("LIMEcraft")
    shot(page, "1-open")

    # --- craft: draw a rectangle around the demo image's tag
    goto(page, "Craft regions")
    canvas = page.locator("canvas.upper-canvas")
    expect(canvas).to_be_visible()
    choose(page, "Drawing tool", "rectangle")
    sample = load_sample(sample_names()[0])
    ys, xs = np.nonzero(sample.tag_mask)
    h, w = sample.tag_mask.shape
    box = canvas.bounding_box()
    sx, sy = box["width"] / w, box["height"] / h
    x0, y0 = box["x"] + (xs.min() - 2) * sx, box["y"] + (ys.min() - 2) * sy
    x1, y1 = box["x"] + (xs.max() + 3) * sx, box["y"] + (ys.max() + 3) * sy

    def draw() -> None:
        page.mouse.move(x0, y0)
        page.mouse.down()
        page.mouse.move(x1, y1, steps=12)
        page.mouse.up()

    rerun(page, draw, what="drawing a rectangle")  # the canvas sends it: a rerun
    page.mouse.move(5, 5)  # away from the canvas toolbar
    enter(page, page.get_by_label("Name of the next region"), "tag")
    # the region is added, and the next region's fresh canvas reports its size (a rerun)
    click(page, page.get_by_role("button", name="Add as region"), new=[CANVAS])
    expect(page.locator("input[value='tag']")).to_be_visible()
    shot(page, "2-drawn")

    # --- craft: click two superpixels and merge them
    frame = page.frame_locator(COORDS).locator("#image")
    expect(frame).to_be_visible()
    ib = frame.bounding_box()
    for fx, fy in ((0.08, 0.08), (0.08, 0.30)):
        pos = {"x": ib["width"] * fx, "y": ib["height"] * fy}
        rerun(page, lambda pos=pos: frame.click(position=pos), what="picking a superpixel")
    merge = page.get_by_role("button", name=re.compile(r"Merge selected \(2\)"))
    expect(merge).to_be_enabled()
    caption = page.get_by_text(re.compile(r"^\d+ regions; the ids match"))
    before = int(caption.inner_text().split()[0])
    click(page, merge)
    expect(page.get_by_text(re.compile(rf"^{before - 1} regions; the ids match"))).to_be_visible()
    shot(page, "3-merged")

    # --- explain
    goto(page, "Explain")
    click(page, page.get_by_role("button", name="Explain", exact=True), timeout=180_000)
    expect(page.get_by_text("surrogate fidelity").first).to_be_visible()
    # the overlay with its legend, and the weights chart of the explained class
    expect(page.get_by_text(re.compile(r"^Weights for \w+")).first).to_be_visible()
    expect(page.get_by_text("Top k for and k against")).to_be_visible()
    shot(page, "4-explained")

    # --- inspect: move the tag region and watch the prediction change
    goto(page, "Inspect")
    summary = page.get_by_text(re.compile(r"^Top class:"))
    expect(summary).to_contain_text("(+0.000)")  # nothing edited yet
    click(page, page.get_by_text("move", exact=True))
    expect(page.get_by_text("Right (px)")).to_be_visible()
    slider = page.locator('input[type=range][aria-label="Right (px)"]')
    slider.focus()

    def thirty_left() -> None:
        for _ in range(30):
            slider.press("ArrowLeft")

    # one rerun per key press: wait for the run of the last one (the value -30)
    rerun(page, thirty_left, values={r"e_dx-\d+": [-30]}, what="moving the region 30 px left")
    expect(slider).to_have_value("-30")
    expect(summary).not_to_contain_text("(+0.000)")
    text = summary.inner_text()
    change = float(re.search(r"\(([+-][0-9.]+)\)", text).group(1))
    assert abs(change) > 1e-3, text
    click(page, page.get_by_role("button", name="Apply edit"))
    expect(page.get_by_text("Applied edits")).to_be_visible()
    shot(page, "5-inspect")

    # --- export: download the report
    goto(page, "Export")
    with page.expect_download(timeout=T) as dl:
        click(page, page.get_by_role("button", name="Report (HTML)"))
    with open(dl.value.path(), encoding="utf-8") as f:
        html = f.read()
    assert "LIMEcraft report" in html and "tag" in html and "move region" in html
    shot(page, "6-export")


def test_explain_shows_progress_and_can_be_cancelled(page, app_url, gate):
    open_app(page, app_url, height=HEIGHT)
    open_expander(page, "Settings")
    samples = page.get_by_role("spinbutton", name="Samples", exact=True)
    enter(page, samples, 20000)
    early_stop_off(page)  # the demo image would be stable after a few hundred samples
    # the model is held at the gate and let through call by call: the Explain is still running
    # when Cancel is pressed, however fast the machine
    gate.hold()
    start(page, page.get_by_role("button", name="Explain", exact=True).click)
    # one steady line: passes done, then the time left once a few passes are timed
    # the time left reads "about 40 s left" or "about 4 min left", as the machine allows
    line = page.get_by_text(re.compile(r"\d+/\d+ model passes · about \d+ (s|min) left"))
    drive(page, gate, lambda: line.count() > 0, what="the progress line")
    expect(line).to_be_visible()
    shot(page, "7-progress")
    # Cancel stops the Explain's run (at its next batch); the run it starts says so
    cancelled = start(page, page.get_by_role("button", name="Cancel").click, what="Cancel")
    told = page.get_by_text("Explain was cancelled")
    drive(page, gate, lambda: told.count() > 0, what="the cancel")
    cancelled()
    gate.release()
    expect(told).to_be_visible()
    expect(page.get_by_text("surrogate fidelity")).to_be_hidden()
    shot(page, "8-cancelled")


def test_trust_page_in_the_browser(page, app_url):
    """Trust on the demo image: the verdict and the numbers of every check, as the page shows
    them."""
    open_app(page, app_url, height=HEIGHT)
    goto(page, "Trust")
    enter(page, page.get_by_role("spinbutton", name="Samples", exact=True), 300)
    check = page.get_by_role("button", name="Check the explanation")
    click(page, check, timeout=300_000)
    # what ran: the class, the regions, the samples times the 5 repeats
    expect(
        page.get_by_text(
            re.compile(r"^\w+ \(class \d+\) · \d+ regions · \d+ samples × 5 repeats · [\d.]+ s$")
        )
    ).to_be_visible()
    # the verdict, as a heading, and the sentence that says why, with the same verdict
    heading = page.get_by_role("heading", name=re.compile(r"^(stable|borderline|unstable) over 5"))
    expect(heading).to_be_visible()
    verdict = heading.inner_text().split()[0]
    expect(
        page.get_by_text(re.compile(rf"^{verdict.capitalize()}: .*\d+ repeats", re.S)).first
    ).to_be_visible()
    expect(
        page.get_by_text(
            re.compile(
                r"^Regions that matter \d+ · over them: Kendall's W \d\.\d\d, top-\d overlap "
                r"\d\.\d\d, sign flips \d+%"
            )
        )
    ).to_be_visible()
    for heading in (
        "Convergence",
        "Kernel width",
        "Faithfulness",
        "Does the conclusion depend on the fill?",
    ):
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    # convergence: from how many samples the verdict's rule holds, or that more are needed
    expect(
        page.get_by_text(
            re.compile(
                r"^(Stable \(the verdict's rule\) from \d+ samples on"
                r"|Not stable within \d+ samples: use more)\.$"
            )
        )
    ).to_be_visible()
    # kernel width: the surrogate's R² at each width (0.1, 0.25, 0.5, 1.0 and more)
    kernels = page.get_by_text(re.compile(r"^[\d.]+: R² -?\d\.\d{3}, top .* · [\d.]+: R²"))
    expect(kernels).to_be_visible()
    assert kernels.inner_text().count("R²") >= 4, kernels.inner_text()
    # faithfulness: both areas under the curves, beside a random order's, and the held-out R²
    expect(
        page.get_by_text(
            re.compile(
                r"^Deletion AUC \d\.\d{3} \(random order \d\.\d{3}; lower is better\) · "
                r"insertion AUC \d\.\d{3} \(random \d\.\d{3}; higher is better\) · "
                r"surrogate R² on held-out perturbations -?\d\.\d{3}$"
            )
        )
    ).to_be_visible()
    expect(
        page.get_by_text(
            re.compile(r"^The explanation's order (beats|does not beat) random orders both ways")
        )
    ).to_be_visible()
    # the fills: each with its top region and how far it agrees; then the conclusion
    fills = page.get_by_text(
        re.compile(r"^[\w-]+: top region \d+, rank agreement -?\d\.\d\d, top-5 overlap \d+%")
    )
    expect(fills.first).to_be_visible()
    assert fills.count() >= 3, fills.all_inner_texts()  # blur, inpaint, inpaint-each
    expect(
        page.get_by_text(
            re.compile(
                r"^(Every fill puts the same region first\.|The fills disagree on the top region)"
            )
        )
    ).to_be_visible()
    shot(page, "9-trust")


def test_the_viewer_toolbar_hides_deploy_and_clear_cache(page, app_url):
    """.streamlit/config.toml sets toolbarMode = "viewer": no Deploy button, and the main menu
    offers no "Clear cache"."""
    open_app(page, app_url, height=HEIGHT)
    expect(page.get_by_role("button", name="Deploy")).to_have_count(0)
    menu = page.locator('[data-testid="stMainMenu"]')
    if menu.count():
        menu.first.click()
        # the menu is open once its items show
        expect(page.get_by_role("menuitem").first).to_be_visible()
        expect(page.get_by_text("Clear cache")).to_have_count(0)
    shot(page, "10-viewer-toolbar")
