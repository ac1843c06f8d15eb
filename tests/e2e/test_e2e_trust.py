"""Trust 2.0 as an analyst walks it (issue 15), in a real browser (Debian's Chromium).

The flow: load a demo conflict image, add the planted tag as a region and upload a mask of
the drawn shape as another, explain, mark the shape as the region the model *should* rely on
(the pointing game misses: the model reads the tag), change one's mind and mark the tag
(it hits), reload (the mark is kept), then run the Trust checks and read the verdict sentence,
the sign consistency, the field's metrics, the fills side by side and the localisation, and
download the analysis to find the same numbers in its JSON. Screenshots go to
test-artifacts/views-trust-*.jpg.
"""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest
from e2e_helpers import (
    click,
    download,
    enter,
    explain,
    goto,
    open_app,
    open_expander,
    pick_sample,
    rerun,
    upload,
    uploader,
)
from e2e_helpers import shot as _shot
from PIL import Image
from playwright.sync_api import expect

from models.samples import load_sample

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SAMPLE = "demo-conflict-1"


def shot(page, name: str) -> None:
    _shot(page, f"views-{name}", tall=True)


def shape_area(sample) -> np.ndarray:
    """The drawn shape's pixels, without the tag's (the demo data's own shape mask)."""
    return sample.shape_mask & ~sample.tag_mask  # they never overlap; kept explicit


def set_samples(page, n: int) -> None:
    open_expander(page, "Settings")
    enter(page, page.get_by_role("spinbutton", name="Samples").first, n, key="Tab")


def expect_regions(page, names: list[str]) -> None:
    """Set the "Expected regions" box to exactly these handcrafted regions."""
    # clear what is chosen: each chosen item has its own "Remove <item>" button
    # (this box's only: Explain's "Explainers side by side" has chips of its own)
    box = page.locator("[data-testid='stMultiSelect']", has_text="Expected regions").first
    chips = box.locator("button[aria-label^='Remove ']:visible")
    left = chips.count()
    while left:
        click(page, chips.first)
        left -= 1
        expect(chips).to_have_count(left)
    for name in names:
        option = page.get_by_role("option", name=re.compile(rf"^{re.escape(name)} \(\d+\)$"))
        box = page.get_by_role("combobox", name="Expected regions").first
        box.click()
        box.fill(name)  # the box filters its options as one types
        expect(option.first).to_be_visible()
        rerun(page, lambda: page.keyboard.press("Enter"), what=f"choosing {name}")
    page.keyboard.press("Escape")  # closes the list: no rerun
    expect(chips).to_have_count(len(names))


def metric(page, label: str):
    """The value of the metric labelled ``label`` (a locator: expect(...) reads it)."""
    m = page.locator("[data-testid='stMetric']", has_text=label).first
    return m.locator("[data-testid='stMetricValue']")


def test_does_the_model_look_where_i_look_then_can_i_trust_it(page, app_url, tmp_path):
    sample = load_sample(SAMPLE)
    mask = tmp_path / "shape.png"
    Image.fromarray((shape_area(sample) * 255).astype(np.uint8)).save(mask)

    open_app(page, app_url)
    pick_sample(page, SAMPLE)
    goto(page, "Craft regions")
    click(page, page.get_by_role("button", name="Add the tag as a region"))
    upload(page, uploader(page, "Upload a mask"), str(mask), what="uploading the mask")
    click(page, page.get_by_role("button", name="Add the mask's regions"))
    expect(page.locator("input[value='shape.png 2']")).to_be_visible()
    # added once: the button gives way to a line that says so (a second press added it twice)
    expect(page.get_by_role("button", name="Add the mask's regions")).to_have_count(0)
    expect(page.get_by_text("The region of 'shape.png' is in the list above")).to_be_visible()

    goto(page, "Explain")
    set_samples(page, 400)
    explain(page)
    panel = page.get_by_text("Does the model look where you look?")
    expect(panel.first).to_be_visible()

    # the analyst expects the drawn shape: the model's top region (the tag) is not in it
    expect_regions(page, ["shape.png 2"])
    expect(metric(page, "Pointing game")).to_have_text("miss")
    mass = metric(page, "Relevance mass")
    expect(mass).to_have_text(re.compile(r"^\d+%$"))
    assert int(mass.inner_text().strip().rstrip("%")) < 20
    warning = page.get_by_text(
        re.compile(r"The model's top region \(0 tag\) is outside the area you expected")
    )
    expect(warning.first).to_be_visible()
    shot(page, "trust-expected-shape-1400")

    # they change their mind: the tag is what they expect the model to read
    expect_regions(page, ["tag"])
    expect(metric(page, "Pointing game")).to_have_text("hit")
    expect(mass).to_have_text(re.compile(r"^\d+%$"))
    assert int(mass.inner_text().strip().rstrip("%")) > 80
    expect(
        page.get_by_text(
            "The top region is inside the expected area and carries most of the positive weight"
        ).first
    ).to_be_visible()

    # a reload keeps the mark and the measure
    rerun(page, page.reload, what="reload")
    expect(page.locator("h1").first).to_be_visible()
    expect(page.get_by_text("Does the model look where you look?").first).to_be_visible()
    expect(metric(page, "Pointing game")).to_have_text("hit")

    # Trust: the checks, with few samples to keep the test short
    goto(page, "Trust")
    enter(page, page.get_by_role("spinbutton", name="Samples").first, 300, key="Tab")
    click(page, page.get_by_role("button", name="Check the explanation"), timeout=300_000)
    verdict = page.get_by_text(re.compile(r"^(Stable|Borderline|Unstable): .*repeats"))
    expect(verdict.first).to_be_visible()
    sentence = verdict.first.inner_text()
    assert "region" in sentence and "matter" in sentence, sentence
    expect(page.get_by_text(re.compile(r"^Regions that matter \d+")).first).to_be_visible()
    # sign consistency, greyed out by default
    expect(page.get_by_text("Sign consistency").first).to_be_visible()
    grey = page.get_by_role("checkbox", name="Grey out regions whose sign is not consistent")
    expect(grey).to_be_checked()
    flips = page.get_by_text(re.compile(r"^\d+ of \d+ regions change sign across the \d+ repeats"))
    if flips.count():  # near-zero regions usually do; the tag never
        expect(flips.first).to_contain_text("(greyed out)")
        expect(flips.first).not_to_have_text(re.compile(r"\b0 tag \d"))
        rerun(page, lambda: grey.click(force=True), what="ungreying")
        expect(flips.first).not_to_contain_text("(greyed out)")
        rerun(page, lambda: grey.click(force=True), what="greying")
        expect(flips.first).to_contain_text("(greyed out)")
    else:
        expect(page.get_by_text(re.compile(r"^Every region keeps one sign")).first).to_be_visible()
    # the field's metrics, each with a reading and a definition
    table = page.locator("[data-testid='stTable']", has_text="IROF").first
    expect(table).to_be_visible()
    rows = table.locator("tbody tr").all_inner_texts()
    for name, reading in (
        ("IROF", "higher is better"),
        ("ROAD", "gap: higher is better"),
        ("Faithfulness correlation", "higher is better"),
        ("Sparseness (Gini)", "higher is sparser"),
    ):
        row = next(r for r in rows if r.startswith(name))
        assert len(row) > 80, row  # the one-line definition and the baseline are there too
        assert reading in row, row
        assert re.search(r"\d\.\d{2,3}", row), row  # a value
    # both inpaint fills side by side, each with its time
    caps = page.get_by_text(re.compile(r"^inpaint(-each)?: top region \d+.*scored in [\d.]+ s"))
    expect(caps).to_have_count(2)
    # the localisation on Trust too
    expect(metric(page, "Pointing game")).to_have_text("hit")
    shot(page, "trust-checks-1400")

    # the downloaded analysis carries the same numbers
    goto(page, "Export")
    data = json.loads(download(page, "Analysis (JSON)"))
    tr = data["results"]["trust"]
    assert tr["localisation"]["pointing_game"] is True
    assert {"irof", "road", "faithfulness_correlation", "sparseness", "stability"} <= set(tr)
    assert tr["stability"]["reason"].split(": ")[0] in ("stable", "borderline", "unstable")
    assert len(tr["stability"]["sign_entropy"]) == len(tr["stability"]["mean"])
    assert [r["expected"] for r in data["regions"]] == [False, True] or [
        r["expected"] for r in data["regions"]
    ] == [True, False]
    # and so does the report: the Trust page's repeats, faithfulness and the field's metrics
    # beside the explanation's own checks (issue 29, item 1)
    report = html.unescape(download(page, "Report (HTML)").decode())
    trust = report.split('<section id="trust">', 1)[1].split("</section>", 1)[0]
    verdict = tr["stability"]["verdict"]
    head = re.search(r"<h3>The Trust page's checks \((\d+) samples × (\d+) repeats", trust)
    assert head, trust[:2000]
    checks = trust[head.end() :]
    assert re.search(
        rf"<td>Stability over {head.group(2)} repeats</td><td><span [^>]+>{verdict}<", checks
    )
    assert "<td>Faithfulness</td>" in checks and "<td>Fills</td>" in checks
    assert "<td>IROF</td>" in trust and "<td>Sparseness (Gini)</td>" in trust
