"""In the browser: errors said once, and no silences (issue 48, item 6). A refused image upload
is said where the user acted and not carried to the next page; a restore says what it brought
back; a reload (F5) in the middle of an Explain says the Explain was interrupted."""

from __future__ import annotations

import re

import pytest
from e2e_helpers import (
    drive,
    early_stop_off,
    enter,
    explain,
    goto,
    open_app,
    open_expander,
    rerun,
    start,
    upload,
)
from e2e_helpers import shot as _shot
from playwright.sync_api import expect
from toys import LinearPixels

import limecraft_core as lc
from models.samples import load_sample
from pages.lib import analysis as A
from pages.lib import analysis_file as AF

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MAIN, SIDE = "[data-testid='stMain']", "[data-testid='stSidebar']"


def shot(page, name: str) -> None:
    _shot(page, f"errors-{name}")


def test_a_refused_upload_is_said_once(page, app_url, tmp_path):
    bad = tmp_path / "holiday.png"
    bad.write_bytes(b"not an image at all" * 20)
    open_app(page, app_url)
    upload(page, page.locator(f"{SIDE} input[type=file]").first, str(bad), what="holiday.png")
    said = page.locator(f"{MAIN} [data-testid='stAlert']", has_text="holiday.png")
    expect(said).to_have_count(1)
    # one sentence after the other, each with its full stop
    expect(said).to_contain_text("(PNG, JPEG, WebP, BMP, TIFF or GIF). Your current image")
    side = page.locator(f"{SIDE} [data-testid='stAlert']", has_text="holiday.png")
    expect(side).to_have_count(1)
    shot(page, "1-refused-upload")
    # the next page does not carry it on, in the sidebar or the main area
    goto(page, "Export")
    expect(page.get_by_text(re.compile("holiday"))).to_have_count(0)
    shot(page, "2-next-page")
    goto(page, "Explain")
    expect(page.get_by_text(re.compile("holiday"))).to_have_count(0)


def _analysis_file(path) -> None:
    """An analysis of the demo image with one region, a result and Trust's result, written as
    the Export page writes it."""
    sample = load_sample("demo-conflict-1")
    a = A.new(sample.image, "demo-conflict-1", tag_mask=sample.tag_mask, note=sample.note)
    A.add_tag(a)
    regions, _ = lc.prepare_regions(
        lc._validate.as_float_image(a.image),
        A.segmentation_config(a),
        regions_mask=[h.mask for h in a.hand],
        names=[h.name for h in a.hand],
    )
    model = LinearPixels(a.image.shape[:2], classes=3)
    ex = lc.explain(a.image, model, segments=regions, samples=60, seed=0, repeats=2)
    A.set_explanation(a, ex, A.APP_CONFIG.replace(samples=60, repeats=2))
    a.trust_explanation = ex
    path.write_text(AF.to_json(a))


def test_a_restore_says_what_it_brought_back(page, app_url, tmp_path):
    saved = tmp_path / "tagged_analysis.json"
    _analysis_file(saved)
    open_app(page, app_url)
    goto(page, "Export")
    upload(
        page,
        page.locator("input[type=file][accept*='json']"),
        str(saved),
        what="restoring the analysis",
    )
    told = page.get_by_text("Restored tagged_analysis.json: 1 region, results, Trust.")
    expect(told).to_be_visible()
    told.scroll_into_view_if_needed()
    shot(page, "3-restored")
    goto(page, "Explain")  # said once
    expect(page.get_by_text(re.compile("^Restored "))).to_have_count(0)
    expect(page.get_by_text("surrogate fidelity").first).to_be_visible()


def test_a_reload_during_an_explain_says_it_was_interrupted(page, app_url, gate):
    open_app(page, app_url)
    open_expander(page, "Settings")
    samples = page.get_by_role("spinbutton", name="Samples", exact=True)
    enter(page, samples, 200)
    open_expander(page, "Settings")
    early_stop_off(page)
    explain(page)
    result = page.get_by_text(re.compile(r"^Explained \d+ regions .*with 200 samples"))
    expect(result).to_be_visible()
    before = result.inner_text()
    # a long Explain, held at the model's gate until its progress shows; then F5
    open_expander(page, "Settings")
    enter(page, samples, 20000)
    gate.hold()
    start(page, page.get_by_role("button", name="Explain", exact=True).click)
    line = page.get_by_text(re.compile(r"\d+/\d+ model passes"))
    drive(page, gate, lambda: line.count() > 0, what="the progress line")
    rerun(page, page.reload, what="F5 during the Explain")
    gate.release()
    note = page.get_by_text(
        "The last Explain was interrupted by the reload of the page and did not finish: the "
        "previous result is shown."
    )
    expect(note).to_be_visible()
    expect(page.get_by_text(before, exact=True)).to_be_visible()  # the result before it
    expect(page.get_by_text("surrogate fidelity").first).to_be_visible()
    shot(page, "4-interrupted-by-reload")
    goto(page, "Craft regions")  # said once
    goto(page, "Explain")
    expect(page.get_by_text(re.compile("was interrupted by the reload"))).to_have_count(0)
    expect(page.get_by_text(before, exact=True)).to_be_visible()
