"""Trust 2.0 as an analyst walks it (issue 15), in a real browser (Debian's Chromium).

The flow: load a demo conflict image, add the planted tag as a region and upload a mask of
the drawn shape as another, explain, mark the shape as the region the model *should* rely on
(the pointing game misses: the model reads the tag), change one's mind and mark the tag
(it hits), reload (the mark is kept), then run the Trust checks and read the verdict sentence,
the sign consistency, the field's metrics, the fills side by side and the localisation, and
download the analysis to find the same numbers in its JSON. Screenshots go to
test-artifacts/views-trust-*.png.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from PIL import Image
from test_e2e_views import download, explain, goto, open_app, pick_sample, shot, wait_idle

from models.samples import load_sample

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SAMPLE = "demo-conflict-1"


def shape_area(sample) -> np.ndarray:
    """The drawn shape's pixels, without the tag's (the demo data's own shape mask)."""
    return sample.shape_mask & ~sample.tag_mask  # they never overlap; kept explicit


def set_samples(page, n: int) -> None:
    page.get_by_text("Settings").first.click()
    page.get_by_role("spinbutton", name="Samples").first.fill(str(n))
    page.keyboard.press("Tab")
    wait_idle(page)


def expect_regions(page, names: list[str]) -> None:
    """Set the "Expected regions" box to exactly these handcrafted regions."""
    # clear what is chosen: each chosen item has its own "Remove <item>" button
    chips = page.locator("[data-testid='stMultiSelect'] button[aria-label^='Remove ']:visible")
    while chips.count():
        chips.first.click()
        wait_idle(page)
    for name in names:
        option = page.get_by_role("option", name=re.compile(rf"^{re.escape(name)} \(\d+\)$"))
        for attempt in range(3):  # a rerun can take the focus away from the box mid-typing
            box = page.get_by_role("combobox", name="Expected regions").first
            box.click()
            box.fill(name)  # the box filters its options as one types
            try:
                option.first.wait_for(timeout=15_000)
                break
            except Exception:
                if attempt == 2:
                    raise
                page.keyboard.press("Escape")
                wait_idle(page)
        page.keyboard.press("Enter")
        wait_idle(page)
    page.keyboard.press("Escape")
    wait_idle(page)


def metric(page, label: str) -> str:
    m = page.locator("[data-testid='stMetric']", has_text=label).first
    m.wait_for(timeout=60_000)
    return m.locator("[data-testid='stMetricValue']").inner_text().strip()


def test_does_the_model_look_where_i_look_then_can_i_trust_it(page, app_url, tmp_path):
    sample = load_sample(SAMPLE)
    mask = tmp_path / "shape.png"
    Image.fromarray((shape_area(sample) * 255).astype(np.uint8)).save(mask)

    open_app(page, app_url)
    pick_sample(page, SAMPLE)
    goto(page, "Craft regions")
    page.get_by_role("button", name="Add the tag as a region").click()
    wait_idle(page)
    page.locator("[data-testid='stFileUploader']", has_text="Upload a mask").locator(
        "input[type=file]"
    ).set_input_files(str(mask))
    page.get_by_role("button", name="Add the mask's regions").click()
    wait_idle(page)

    goto(page, "Explain")
    set_samples(page, 400)
    explain(page)
    panel = page.get_by_text("Does the model look where you look?")
    panel.first.wait_for(timeout=60_000)

    # the analyst expects the drawn shape: the model's top region (the tag) is not in it
    expect_regions(page, ["shape.png 2"])
    assert metric(page, "Pointing game") == "miss"
    mass = int(metric(page, "Relevance mass").rstrip("%"))
    assert mass < 20
    warning = page.get_by_text(
        re.compile(r"The model's top region, 0 tag, is not one you expected")
    )
    assert warning.first.is_visible()
    shot(page, "trust-expected-shape-1400")

    # they change their mind: the tag is what they expect the model to read
    expect_regions(page, ["tag"])
    assert metric(page, "Pointing game") == "hit"
    assert int(metric(page, "Relevance mass").rstrip("%")) > 80
    assert page.get_by_text(
        re.compile(r"The model's top region, 0 tag, is one you expected")
    ).first.is_visible()

    # a reload keeps the mark and the measure
    page.reload()
    page.wait_for_selector("h1", timeout=90_000)
    wait_idle(page)
    page.get_by_text("Does the model look where you look?").first.wait_for(timeout=60_000)
    assert metric(page, "Pointing game") == "hit"

    # Trust: the checks, with few samples to keep the test short
    goto(page, "Trust")
    page.get_by_role("spinbutton", name="Samples").first.fill("300")
    page.keyboard.press("Tab")
    wait_idle(page)
    page.get_by_role("button", name="Check the explanation").click()
    verdict = page.get_by_text(re.compile(r"^(Stable|Borderline|Unstable): .*repeats"))
    verdict.first.wait_for(timeout=300_000)
    wait_idle(page)
    sentence = verdict.first.inner_text()
    assert "region" in sentence and "matter" in sentence, sentence
    assert page.get_by_text(re.compile(r"^Regions that matter \d+")).first.is_visible()
    # sign consistency, greyed out by default
    assert page.get_by_text("Sign consistency").first.is_visible()
    grey = page.get_by_role("checkbox", name="Grey out regions whose sign is not consistent")
    assert grey.is_checked()
    flips = page.get_by_text(re.compile(r"^\d+ of \d+ regions change sign across the \d+ repeats"))
    if flips.count():  # near-zero regions usually do; the tag never
        assert "(greyed out)" in flips.first.inner_text()
        assert not re.search(r"\b0 tag \d", flips.first.inner_text())
        grey.click(force=True)
        wait_idle(page)
        assert "(greyed out)" not in flips.first.inner_text()
        grey.click(force=True)
        wait_idle(page)
    else:
        assert page.get_by_text(re.compile(r"^Every region keeps one sign")).first.is_visible()
    # the field's metrics, each with a reading and a definition
    table = page.locator("[data-testid='stTable']", has_text="IROF").first
    table.wait_for(timeout=60_000)
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
    assert caps.count() == 2
    # the localisation on Trust too
    assert metric(page, "Pointing game") == "hit"
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
