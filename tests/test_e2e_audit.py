"""The Audit page in a real browser: a demo audit that finds the tag, one flagged image opened on
Inspect with the audit's regions where removing the tag changes the prediction, the audit kept
across pages and a reload; a CLI audit opened in the app; an uploaded zip cancelled and resumed.
Each step asserts what is on the screen and saves a screenshot under test-artifacts/."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import ARTIFACTS
from test_e2e import goto_page, wait_idle
from test_e2e_views import uploader

from limecraft_core.cli import write_demo_mixed
from limecraft_core.io import read_image
from models.registry import load_classifier
from pages.lib.audits import DEMO_SEED

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
N_UPLOAD = 24  # images of the uploaded zip: enough that Cancel comes long before the end
HEADLINE = re.compile(r"In (\d+) of (\d+) images the prediction rests outside the expected region")


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"audit-{name}.png"), full_page=True)


def open_audit_page(page, url: str) -> None:
    page.set_viewport_size({"width": 1400, "height": 1800})
    page.goto(url)
    page.wait_for_selector("h1", timeout=90_000)
    wait_idle(page)
    goto_page(page, "Audit")
    wait_idle(page)


def findings(page, timeout: int = 240_000) -> re.Match:
    """Wait for the findings and return the headline's numbers."""
    page.get_by_text("Every image, flagged first").first.wait_for(timeout=timeout)
    wait_idle(page)
    m = HEADLINE.search(page.inner_text("main"))
    assert m, page.inner_text("main")[:2000]
    return m


def selectbox(page, label: str) -> str:
    """The option a select box shows (its placeholder when none is chosen)."""
    box = page.get_by_role("combobox", name=label, exact=True)
    return box.input_value() or box.get_attribute("placeholder") or ""


def image_options(page) -> list[str]:
    """The "Image" picker's options: '⚑ file · label score' for the flagged ones, first."""
    page.get_by_role("combobox", name="Image", exact=True).click()
    if not page.get_by_role("option").count():  # a click near the page's foot only focuses it
        page.keyboard.press("ArrowDown")
    page.get_by_role("option").first.wait_for(timeout=30000)
    options = page.get_by_role("option").all_inner_texts()
    page.keyboard.press("Escape")
    wait_idle(page)
    return options


def demo_truth(count: int, tmp: Path) -> tuple[dict, set[str]]:
    """The app's demo set, made again here, and the conflict images where the demo model
    follows the tag (what the audit must flag), from the model's own predictions."""
    entries = {e["file"]: e for e in write_demo_mixed(tmp, count, DEMO_SEED)}
    clf = load_classifier("demo", device="cpu")
    follows = set()
    for name, e in entries.items():
        pred = int(np.argmax(clf.predict(read_image(tmp / "images" / name))))
        if e["mode"] == "conflict" and pred == e["tag_class"]:
            follows.add(name)
    return entries, follows


def test_a_demo_audit_finds_the_tag_and_inspect_removes_it(page, app_url, tmp_path):
    entries, follows = demo_truth(8, tmp_path)
    assert follows  # the set has conflict images the model follows the tag on
    open_audit_page(page, app_url)
    box = page.get_by_role("spinbutton", name="Images in the demo set")
    box.fill("8")
    box.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Run the audit").click()
    page.get_by_text(re.compile(r"Auditing: \d+ of 8 images")).first.wait_for(timeout=60000)
    shot(page, "1-running")
    m = findings(page)
    shot(page, "2-findings")
    assert (int(m.group(1)), int(m.group(2))) == (len(follows), 8)
    main = page.inner_text("main")
    assert "Where the model looks across the dataset" in main and "By predicted class" in main
    options = image_options(page)
    flagged = {o.split(" · ")[0].removeprefix("⚑ ") for o in options if o.startswith("⚑ ")}
    assert flagged == follows, options
    assert all(o.startswith("⚑ ") for o in options[: len(flagged)])  # flagged first

    # the first flagged image, on Inspect, with the audit's regions
    picked = options[0].split(" · ")[0].removeprefix("⚑ ")
    page.get_by_role("button", name="Open in Inspect").click()
    page.get_by_role("heading", name="Inspect", exact=True).wait_for(timeout=60000)
    wait_idle(page)
    assert "an image from an audit" in selectbox(page, "Sample gallery")
    region = selectbox(page, "Region")
    assert re.search(r"\b\d+ \(weight \+\d\.\d{3}\)", region), region  # the top region first
    page.get_by_text("remove", exact=True).click()
    wait_idle(page)
    shape = entries[picked]["shape_label"]
    top = page.get_by_text(re.compile(r"^Top class:")).inner_text()
    shot(page, "3-inspect-removed")
    # removing the tag (the audit's top region) makes the model name the drawn shape
    m2 = re.search(r"Top class: (\w+) ([\d.]+) → ([\d.]+)", top)
    assert m2 and m2.group(1) == entries[picked]["tag_label"], top
    assert float(m2.group(3)) < float(m2.group(2)) - 0.3, top
    assert f"the edited image is now {shape}" in top, top
    page.get_by_role("button", name="Apply edit").click()
    page.get_by_text("Applied edits").first.wait_for(timeout=30000)
    wait_idle(page)

    # Explain shows the audit's explanation, measured against the expected mask
    goto_page(page, "Explain")
    wait_idle(page)
    # the localisation panel (under the results) counts the audit's expected mask
    page.get_by_text("is not one you expected").first.wait_for(timeout=60000)
    page.get_by_text("the audit's expected mask").first.wait_for(timeout=30000)
    main = page.inner_text("main")
    assert f"{picked}: from the audit: the top region lies outside the expected region" in main
    shot(page, "4-explain")

    # back on Audit, and after a reload, the audit is still there
    goto_page(page, "Audit")
    assert (int(findings(page).group(1))) == len(follows)
    page.reload()
    assert (int(findings(page).group(1))) == len(follows)
    assert "audit=" in page.url
    shot(page, "5-after-reload")


def _zip_folder(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(folder.parent).as_posix())
    return buf.getvalue()


def test_a_cli_audit_opens_here_and_an_upload_is_cancelled_then_resumed(page, app_url, tmp_path):
    data = tmp_path / "data"
    write_demo_mixed(data, N_UPLOAD, seed=31_337)
    out = tmp_path / "cli-audit"
    p = subprocess.run(
        [sys.executable, "-m", "limecraft_core", "audit", str(data / "images"), "--model",
         "demo", "--expected-masks", str(data / "masks"), "--out", str(out), "--limit", "4",
         "--samples", "200", "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    cli = json.loads((out / "audit.json").read_text())
    zipped = tmp_path / "cli-audit.zip"
    zipped.write_bytes(_zip_folder(out))

    open_audit_page(page, app_url)
    page.get_by_text("Open a finished audit").click()
    wait_idle(page)
    uploader(page, "The audit's folder, zipped").set_input_files(str(zipped))
    wait_idle(page)
    page.get_by_role("button", name="Open the audit").click()
    m = findings(page)
    assert m.group(0) in cli["findings"]["sentences"][0]
    assert int(m.group(2)) == 4
    flagged = {r["file"] for r in cli["rows"] if r["flags"]}
    assert {o.split(" · ")[0].removeprefix("⚑ ") for o in image_options(page) if o[0] == "⚑"} == (
        flagged
    )
    shot(page, "6-opened-cli-audit")

    # a zip of images and their masks, run, cancelled after the first, resumed
    images = tmp_path / "upload.zip"
    with zipfile.ZipFile(images, "w") as z:
        for sub in ("images", "masks"):
            for f in sorted((data / sub).iterdir()):
                z.write(f, f"{sub}/{f.name}")
    page.get_by_text("Upload images").click()
    wait_idle(page)
    uploader(page, "A zip of images").set_input_files(str(images))
    wait_idle(page)
    page.get_by_role("button", name="Run the audit").click()
    page.get_by_text(re.compile(rf"Auditing: [1-9]\d* of {N_UPLOAD} images")).first.wait_for(
        timeout=120000
    )
    page.get_by_role("button", name="Cancel the audit").click()
    stopped = page.get_by_text(
        re.compile(rf"This audit stopped after \d+ of {N_UPLOAD} images")
    ).first
    try:
        stopped.wait_for(timeout=60000)
    except Exception as e:
        shot(page, "7-cancel-failed")
        main = page.inner_text("main")[:1500]
        raise AssertionError(f"Cancel did not stop the audit: {main}") from e
    wait_idle(page)
    kept = int(re.search(r"after (\d+) of", stopped.inner_text()).group(1))
    assert 1 <= kept < N_UPLOAD
    shot(page, "7-cancelled")
    # what was finished is there to read already
    m = HEADLINE.search(page.inner_text("main"))
    assert m and int(m.group(2)) == kept
    page.get_by_role("button", name=re.compile(r"Resume the audit \(\d+ to go\)")).click()
    page.get_by_text(
        re.compile(rf"In \d+ of {N_UPLOAD} images the prediction rests")
    ).first.wait_for(timeout=240_000)
    m = findings(page)
    assert int(m.group(2)) == N_UPLOAD
    assert not page.get_by_text("This audit stopped after").is_visible()
    shot(page, "8-resumed")
