"""Recent analyses and a new image's settings in a real browser (issue 48, items 3 and 5): the
list survives a page change and a reload, a burst of explained uploads never hides a crafted
analysis, and a new image's settings are said on screen. Screenshots go under test-artifacts/."""

import io
import re

import numpy as np
import pytest
from e2e_helpers import (
    click,
    early_stop_off,
    enter,
    explain,
    goto,
    open_expander,
    rerun,
    upload,
)
from e2e_helpers import open_app as _open_app
from e2e_helpers import shot as _shot
from PIL import Image
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HEIGHT = 1100
FIRST = "demo-conflict-1"  # the image the app opens on in the tests


def shot(page, name: str, *, tall: bool = False) -> None:
    _shot(page, f"recents-{name}", tall=tall)


def open_app(page, url: str) -> None:
    _open_app(page, url, height=HEIGHT)
    expect(page.locator("h1")).to_have_text("LIMEcraft")


def sidebar(page):
    return page.locator("[data-testid='stSidebar']")


def _photo(tmp_path, name: str, seed: int) -> str:
    """A small new picture (noise), never seen by the app."""
    noise = np.random.default_rng(seed).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    path = tmp_path / name
    buf = io.BytesIO()
    Image.fromarray(noise).save(buf, format="PNG")
    path.write_bytes(buf.getvalue())
    return str(path)


def upload_image(page, path: str, *, new=()) -> None:
    name = path.rsplit("/", 1)[-1]
    upload(
        page,
        sidebar(page).locator("input[type=file]").first,
        path,
        new=new,
        what=f"uploading {name}",
    )
    expect(page.get_by_text(re.compile(rf"^Loaded {re.escape(name)}"))).to_be_visible()


def recent(page, pattern: str):
    return sidebar(page).get_by_role("button", name=re.compile(pattern))


def test_recent_analyses_survive_a_page_change_and_a_reload(page, app_url, tmp_path):
    open_app(page, app_url)
    goto(page, "Craft regions")
    click(page, page.get_by_role("button", name="Add the tag as a region"))
    expect(page.locator("input[value='tag']")).to_be_visible()
    goto(page, "Explain")
    upload_image(page, _photo(tmp_path, "other.png", 1))
    crafted = recent(page, rf"^{FIRST} · 1 region$")
    expect(crafted).to_be_visible()
    # another page, then F5: Streamlit's navigation drops the address' other parameters, so
    # the list is kept beside the analysis in the store, not in the address
    goto(page, "Trust")
    expect(page).to_have_url(re.compile(r"/trust\?a=[\w-]+$"))
    rerun(page, page.reload, what="reload")
    expect(page.locator("h1").filter(has_text="Trust").first).to_be_visible()
    expect(crafted).to_be_visible()
    crafted.scroll_into_view_if_needed()
    shot(page, "1-after-page-change-and-reload")
    click(page, crafted)
    # it is back: its image, and its region on Craft; the upload waits in the list in turn
    expect(recent(page, r"^other\.png · no changes$")).to_be_visible()
    goto(page, "Craft regions")
    expect(page.locator("input[value='tag']")).to_be_visible()


def test_six_explained_uploads_never_hide_a_crafted_analysis(page, app_url, tmp_path):
    open_app(page, app_url)
    open_expander(page, "Settings")
    # few samples: the settings go with each new image (item 5), so every Explain is quick
    enter(page, page.get_by_role("spinbutton", name="Samples", exact=True), 200)
    goto(page, "Craft regions")
    click(page, page.get_by_role("button", name="Add the tag as a region"))
    goto(page, "Explain")
    explain(page)
    click(page, page.get_by_role("button", name="Compare with automatic superpixels only"))
    lime = page.get_by_text(re.compile(r"^Automatic superpixels \(LIME\)")).first
    expect(lime).to_be_visible()
    for i in range(6):
        upload_image(page, _photo(tmp_path, f"burst-{i}.png", 10 + i))
        explain(page)
    # five explained uploads and the crafted analysis wait: the crafted one, with more work,
    # is shown; the oldest explained upload is under "More", still one click away
    crafted = recent(page, rf"^{FIRST} · 1 region, results, Compare$")
    expect(crafted).to_be_visible()
    for i in (1, 2, 3, 4):
        expect(recent(page, rf"^burst-{i}\.png · results$")).to_be_visible()
    more = open_expander(page, "More (1)")
    oldest = more.get_by_role("button", name=re.compile(r"^burst-0\.png · results$"))
    expect(oldest).to_be_visible()
    crafted.scroll_into_view_if_needed()
    shot(page, "2-crafted-kept-after-six-uploads")
    click(page, oldest)
    expect(page.get_by_text(re.compile(r"^Explained \d+ regions"))).to_be_visible()
    click(page, crafted)
    expect(
        page.get_by_text(re.compile(r"^Explained \d+ regions \(1 handcrafted\)"))
    ).to_be_visible()
    expect(lime).to_be_visible()


def test_a_new_image_says_its_settings_were_carried_over(page, app_url, tmp_path):
    open_app(page, app_url)
    box = open_expander(page, "Settings")
    enter(page, box.get_by_role("spinbutton", name="Samples", exact=True), 3000)
    early_stop_off(page)
    note = page.get_by_text("Settings not the defaults: Samples 3000, Early stop off.")
    expect(note).to_be_visible()
    upload_image(page, _photo(tmp_path, "next.png", 2))
    carried = page.get_by_text(f"Settings carried over from {FIRST}: Samples 3000, Early stop off.")
    expect(carried).to_be_visible()
    # the closed box says it too
    marked = page.locator("[data-testid='stExpander'] summary").filter(
        has_text="Settings · not the defaults"
    )
    expect(marked).to_have_count(1)
    marked.click()  # closed: the box's label and the note beside Explain say it (no rerun)
    details = page.locator("[data-testid='stExpander']").filter(
        has=page.locator("summary", has_text="Settings · not the defaults")
    )
    inner = details.locator("[data-testid='stExpanderDetails']").first
    expect(inner).to_have_attribute("inert", re.compile(".*"))
    expect(inner).to_be_hidden()  # folded away (it folds with an animation)
    shot(page, "3-settings-carried-over", tall=True)
    click(page, page.get_by_role("button", name="Back to the defaults"))
    expect(carried).to_have_count(0)
    expect(marked).to_have_count(0)
    box = open_expander(page, "Settings")
    expect(box.get_by_role("spinbutton", name="Samples", exact=True)).to_have_value("1600")
    expect(box.get_by_role("checkbox", name="Early stop", exact=True)).to_be_checked()
    shot(page, "4-back-to-the-defaults")
