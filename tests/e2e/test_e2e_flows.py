"""The analysis in a real browser: the edited image that is explained, reload, a new image, and
export then restore in a fresh browser. Each test asserts what the user sees (text on screen,
pixels of the pictures) and saves screenshots under test-artifacts/ (look at them)."""

import io
import re

import numpy as np
import pytest
from e2e_helpers import (
    CANVAS,
    T,
    choose,
    click,
    enter,
    goto,
    open_expander,
    rerun,
    track,
    upload,
)
from e2e_helpers import open_app as _open_app
from e2e_helpers import shot as _shot
from PIL import Image
from playwright.sync_api import expect

from limecraft_core import _stages as stages
from limecraft_core import boundaries
from limecraft_core._validate import as_float_image
from limecraft_core.edits import Edit, apply_edits
from models.samples import load_sample
from pages.lib import analysis as A

pytestmark = [pytest.mark.browser, pytest.mark.slow]

COORDS = 'iframe[title="streamlit_image_coordinates.streamlit_image_coordinates"]'
HEIGHT = 1100
#: A gallery image whose explainers, over the app's default superpixels (SLIC, 36 regions),
#: disagree over two adjacent regions that interact: with the demo model and 60 samples the
#: merge test flags regions 18 and 21 (index 0.18, the threshold 0.022)
COMPARE_SAMPLE = "page-watermark"


def shot(page, name: str) -> None:
    _shot(page, f"flows-{name}")


def open_app(page, url: str) -> None:
    _open_app(page, url, height=HEIGHT)
    expect(page.locator("h1")).to_have_text("LIMEcraft")


def add_tag(page) -> None:
    goto(page, "Craft regions")
    click(page, page.get_by_role("button", name="Add the tag as a region"))
    expect(page.locator("input[value='tag']")).to_be_visible()


def picture(page, caption: str) -> np.ndarray:
    """The pixels the browser shows for the picture with this caption (fetched from its src)."""
    label = page.get_by_text(caption, exact=True).first
    img = label.locator("xpath=ancestor::*[.//img][1]").locator("img").first
    expect(img).to_be_visible()
    src = img.get_attribute("src")
    data = page.request.get(
        src if src.startswith("http") else page.url.split("/?")[0].rstrip("/") + src
    )
    return np.asarray(Image.open(io.BytesIO(data.body())).convert("RGB")).astype(np.int16)


def slider(page, label: str):
    return page.locator(f'input[type=range][aria-label="{label}"]')


def set_slider(page, label: str, key: str, value: int) -> None:
    """Move the slider ``label`` (the app's widget ``key``) to ``value``, one key press at a
    time (each sends its value); waits for the run of the last one."""
    el = slider(page, label)
    el.focus()
    now = int(float(el.input_value()))
    press = "ArrowRight" if value > now else "ArrowLeft"

    def move() -> None:
        for _ in range(abs(value - now)):
            el.press(press)

    rerun(page, move, values={key: [value]}, what=f"{label} to {value}")
    expect(el).to_have_value(str(value))


def explain_now(page) -> None:
    goto(page, "Explain")
    click(page, page.get_by_role("button", name="Explain", exact=True), timeout=180_000)
    expect(page.get_by_text("surrogate fidelity").first).to_be_visible()


def test_the_explained_edited_image_is_the_preview(page, app_url):
    open_app(page, app_url)
    choose(page, "Sample gallery", "demo-conflict-2")
    add_tag(page)
    goto(page, "Inspect")
    kind = page.get_by_role("radiogroup", name="Edit")
    expect(kind.get_by_role("radio", name="no change")).to_be_checked()  # nothing pending
    click(page, kind.get_by_text("colour", exact=True))
    expect(slider(page, "Hue (degrees)")).to_be_visible()
    set_slider(page, "Hue (degrees)", r"e_hue-\d+", 60)
    expect(page.get_by_text(re.compile(r"^Top class:.*now")).first).to_be_visible()
    shot(page, "a1-pending-hue-60")
    click(page, page.get_by_role("button", name="Apply edit"))
    expect(page.get_by_text("Applied edits")).to_be_visible()
    # the pending edit is "no change" again (issue 48): nothing to apply twice
    expect(kind.get_by_role("radio", name="no change")).to_be_checked()
    expect(slider(page, "Hue (degrees)")).to_have_count(0)
    expect(page.get_by_role("button", name="Apply edit")).to_be_disabled()
    click(page, page.get_by_role("button", name="Explain the edited image"), timeout=180_000)
    expect(page.get_by_text("the explained image").first).to_be_visible()
    shot(page, "a2-explained-edited")

    # exactly one applied edit, named
    items = page.locator("li").filter(
        has_text=re.compile(r"recolour region \d+( '[^']*')? \(hue \+\d+°\)")
    )
    expect(items).to_have_count(1)
    expect(items.first).to_contain_text("hue +60°")
    expect(items.first).to_contain_text("tag")
    expect(page.get_by_text("The edits changed since that explanation")).to_be_hidden()

    # the explained image is the preview: the same pixels, and the tag at +60°, not +120°
    explained = picture(page, "the explained image")
    preview = picture(page, "edited (no edit pending)")
    sample = load_sample("demo-conflict-2")
    seg = A.segmentation_config(_with_tag(sample))
    labels = stages.prepare_regions(
        as_float_image(sample.image), seg, regions_mask=[sample.tag_mask], names=["tag"]
    )[0].labels
    want = {
        h: apply_edits(sample.image, labels, [Edit("color", 0, hue=h)]).image for h in (60, 120)
    }
    disp = {h: _shown(w, explained.shape[1]) for h, w in want.items()}
    ys, xs = np.nonzero(_scaled(sample.tag_mask, explained.shape[:2]))
    box = (slice(ys.min(), ys.max() + 1), slice(xs.min(), xs.max() + 1))
    err60 = np.abs(explained[box] - disp[60][box]).mean()
    err120 = np.abs(explained[box] - disp[120][box]).mean()
    # (the browser gets JPEGs of a noisy picture: a few levels of error per pixel are JPEG's)
    assert err60 < 20 and err120 > 4 * err60, (err60, err120)
    # the preview differs from the explained image only by its thin orange outline
    outline = _shown(boundaries(want[60], (labels == 0).astype(np.int32), color=(1, 0.5, 0)), 280)
    near = np.abs(outline - disp[60]).sum(axis=2) > 60  # the outline's pixels
    same = np.abs(preview - explained)[box][~near[box]].mean()
    assert same < 20 and err120 > 4 * same, (same, err120)
    print(f"tag box: explained vs +60 {err60:.1f}, vs +120 {err120:.1f}, vs preview {same:.1f}")


def _with_tag(sample) -> A.Analysis:
    a = A.new(sample.image, sample.name, tag_mask=sample.tag_mask)
    A.add_tag(a)
    return a


def _shown(image: np.ndarray, width: int) -> np.ndarray:
    im = Image.fromarray(image)
    resample = Image.Resampling.LANCZOS if im.width > width else Image.Resampling.NEAREST
    im = im.resize((width, max(1, round(im.height * width / im.width))), resample)
    return np.asarray(im).astype(np.int16)


def _scaled(mask: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    return np.asarray(Image.fromarray(mask.astype(np.uint8) * 255).resize(shape[::-1])) > 127


def test_a_reload_brings_back_regions_edits_and_results(page, app_url):
    open_app(page, app_url)
    add_tag(page)
    enter(page, page.get_by_label(re.compile(r"Region 1 name")), "the tag")
    expect(page.locator("input[value='the tag']")).to_be_visible()
    goto(page, "Inspect")
    click(page, page.get_by_text("remove", exact=True))
    click(page, page.get_by_role("button", name="Apply edit"))
    expect(page.get_by_text("Applied edits")).to_be_visible()
    explain_now(page)
    expect(page).to_have_url(re.compile(r"\?a="))
    # settings typed after the Explain, not explained yet (issue 29, item 4)
    open_expander(page, "Settings")
    samples = page.get_by_role("spinbutton", name="Samples", exact=True)
    seed = page.get_by_role("spinbutton", name="Seed", exact=True)
    explained = samples.input_value()
    # (a rerun may fold the Settings away: each value is read back once the box is open again)
    enter(page, samples, 500, key="Tab", shown=False)
    open_expander(page, "Settings")
    expect(samples).to_have_value("500")
    enter(page, seed, 7, key="Tab", shown=False)
    open_expander(page, "Settings")
    expect(seed).to_have_value("7")
    assert explained != "500"
    shot(page, "b1-before-reload")

    rerun(page, page.reload, what="reload")
    expect(page.get_by_text("surrogate fidelity").first).to_be_visible()
    expect(
        page.get_by_text(re.compile(r"^Explained \d+ regions \(1 handcrafted\)"))
    ).to_be_visible()
    open_expander(page, "Settings")
    expect(samples).to_have_value("500")  # typed, not explained: kept all the same
    expect(seed).to_have_value("7")
    # the result is still the one explained with the earlier settings
    ran = rf"with ({explained} samples|\d+ samples \(stopped early, {explained} allowed)"
    expect(page.get_by_text(re.compile(ran)).first).to_be_visible()
    shot(page, "b2-after-reload-explain")
    # (goto waits for Craft's canvas to report its size, a rerun: a link clicked during that
    # rerun was undone by it once in CI)
    goto(page, "Craft regions")
    expect(page.locator("input[value='the tag']")).to_be_visible()
    goto(page, "Inspect")
    expect(page.get_by_text("Applied edits")).to_be_visible()
    expect(page.get_by_text(re.compile(r"remove region 0 .*the tag"))).to_be_visible()
    shot(page, "b3-after-reload-inspect")
    # another model, then back: the demo model's result is shown again (issue 29, item 5)
    goto(page, "Explain")
    result = page.get_by_text(re.compile(r"^Explained \d+ regions \(1 handcrafted\)"))
    choose(page, "Registry", "efficientnet_lite0")
    expect(
        page.get_by_text(re.compile(r"^Now using|model: efficientnet_lite0")).first
    ).to_be_visible()
    expect(result).to_have_count(0)
    choose(page, "Registry", "demo")
    expect(result).to_be_visible()
    expect(page.get_by_text("surrogate fidelity").first).to_be_visible()


def _png(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG")
    return buf.getvalue()


def test_a_new_image_keeps_the_previous_analysis(page, app_url, tmp_path):
    open_app(page, app_url)
    add_tag(page)
    photo = tmp_path / "coffee.png"
    photo.write_bytes(_png(load_sample("coffee").image[:160, :240]))
    # on Craft: the new image gets a fresh canvas, which reports its size (a rerun)
    upload(
        page,
        page.locator("[data-testid='stSidebar'] input[type=file]").first,
        str(photo),
        new=[CANVAS],
        what="uploading coffee.png",
    )
    expect(page.get_by_text("No handcrafted regions yet.")).to_be_visible()
    page.get_by_role("button", name="Start fresh").scroll_into_view_if_needed()
    shot(page, "c1-new-image-recent-list")
    recent = page.get_by_role("button", name=re.compile(r"demo-conflict-1 · 1 region"))
    expect(recent).to_be_visible()
    # a reload (F5) keeps the list: it is saved beside the analysis (issues 29 and 48, item 3)
    rerun(page, page.reload, new=[CANVAS], what="reload")
    expect(page.get_by_text("No handcrafted regions yet.")).to_be_visible()
    expect(recent).to_be_visible()
    click(page, recent, new=[CANVAS])
    expect(page.locator("input[value='tag']")).to_be_visible()
    # the uploaded image waits in the list in turn (it cannot be picked from the gallery)
    expect(
        page.get_by_role("button", name=re.compile(r"^coffee\.png · no changes"))
    ).to_be_visible()
    shot(page, "c2-back-to-the-earlier-analysis")


def test_export_then_restore_in_a_fresh_browser(page, app_url, browser, tmp_path):
    open_app(page, app_url)
    add_tag(page)
    # merge two superpixels into a named region
    frame = page.frame_locator(COORDS).locator("#image")
    expect(frame).to_be_visible()
    ib = frame.bounding_box()
    for fx, fy in ((0.5, 0.08), (0.5, 0.30)):
        pos = {"x": ib["width"] * fx, "y": ib["height"] * fy}
        rerun(page, lambda pos=pos: frame.click(position=pos), what="picking a superpixel")
    enter(page, page.get_by_label("Name for the merged region"), "pair")
    merge = page.get_by_role("button", name=re.compile(r"Merge selected \(2\)"))
    expect(merge).to_be_enabled()
    caption = page.get_by_text(re.compile(r"^\d+ regions; the ids match"))
    n_regions = int(caption.inner_text().split()[0]) - 1
    click(page, merge)
    expect(page.get_by_text(re.compile(rf"^{n_regions} regions; the ids match"))).to_be_visible()
    goto(page, "Inspect")
    click(page, page.get_by_text("blur", exact=True))
    click(page, page.get_by_role("button", name="Apply edit"))
    expect(page.get_by_text("Applied edits")).to_be_visible()
    explain_now(page)
    result = page.get_by_text(re.compile(r"^Explained \d+ regions"))
    expect(result).to_be_visible()
    result_line = result.inner_text()
    goto(page, "Export")
    with page.expect_download(timeout=T) as dl:
        click(page, page.get_by_role("button", name="Analysis (JSON)"))
    assert dl.value.suggested_filename == "demo-conflict-1_analysis.json"
    path = str(tmp_path / dl.value.suggested_filename)
    dl.value.save_as(path)
    shot(page, "d1-exported")

    fresh = browser.new_context(viewport={"width": 1400, "height": HEIGHT})
    other = track(fresh.new_page())
    open_app(other, page.url.split("/export")[0].split("?")[0])
    expect(other.get_by_text("surrogate fidelity")).to_be_hidden()
    goto(other, "Export")
    upload(
        other,
        other.locator("input[type=file][accept*='json']"),
        path,
        what="restoring the analysis",
    )
    expect(other.get_by_role("button", name=re.compile(r"^Analysis \(JSON\)"))).to_be_visible()
    shot(other, "d2-restored-export")
    goto(other, "Explain")
    expect(other.get_by_text("surrogate fidelity").first).to_be_visible()
    expect(other.get_by_text(result_line, exact=True)).to_be_visible()
    shot(other, "d3-restored-explain")
    goto(other, "Craft regions")
    expect(other.locator("input[value='tag']")).to_be_visible()
    expect(other.get_by_text(re.compile(rf"^{n_regions} regions; the ids match"))).to_be_visible()
    split = other.locator("[data-testid='stSelectbox']").filter(
        has_text="Merged region to split back"
    )
    split.scroll_into_view_if_needed()
    shot(other, "d4-restored-craft")
    shown = (
        split.inner_text()
        + " "
        + " ".join(split.locator("input").evaluate_all("els => els.map(e => e.value)"))
    )
    assert re.search(r"\d+ pair", shown), shown  # the merge, with its name
    goto(other, "Inspect")
    expect(other.get_by_text("Applied edits")).to_be_visible()
    expect(other.get_by_text(re.compile(r"blur region \d+"))).to_have_count(1)
    shot(other, "d5-restored-inspect")
    fresh.close()


def test_signing_out_leaves_nothing_and_hides_the_pages(browser):
    from conftest import start_app, stop_app

    from pages.lib import auth

    # its own server: the sign-in mode (LIMECRAFT_AUTH) is read when the server starts
    proc, url, _ = start_app(
        {"LIMECRAFT_AUTH": "password", "LIMECRAFT_PASSWORD_HASH": auth.hash_password("pw")}
    )
    ctx = browser.new_context(viewport={"width": 1400, "height": HEIGHT})
    try:
        page = track(ctx.new_page())
        rerun(page, lambda: page.goto(url), what="opening the app")
        expect(page.get_by_label("Team password")).to_be_visible()
        expect(page.get_by_role("link", name="Craft regions")).to_have_count(0)

        def sign_in(new=()) -> None:
            page.get_by_label("Team password").fill("pw")
            click(page, page.get_by_role("button", name="Sign in"), new=new)
            expect(page.locator("h1").first).to_be_visible()

        sign_in()
        expect(page.locator("h1")).to_have_text("LIMEcraft")
        add_tag(page)
        before = page.url
        # a reload asks for the password again, then comes back to the same page and analysis
        rerun(page, page.reload, what="reload")
        expect(page.get_by_label("Team password")).to_be_visible()
        expect(page.get_by_text("Page not found")).to_be_hidden()
        sign_in(new=[CANVAS])  # back on Craft: its canvas reports its size (a rerun)
        expect(page.locator("input[value='tag']")).to_be_visible()
        expect(page).to_have_url(before)
        click(page, page.get_by_role("button", name="Sign out"))
        expect(page.get_by_label("Team password")).to_be_visible()
        shot(page, "e1-signed-out")
        expect(page.get_by_role("link", name="Craft regions")).to_have_count(0)
        expect(page).not_to_have_url(re.compile(r"\?a="))
        sign_in(new=[CANVAS])
        expect(page).not_to_have_url(before)
        expect(page.get_by_text("No handcrafted regions yet.")).to_be_visible()  # still on Craft
        goto(page, "Explain")
        expect(page.get_by_text(re.compile(r"\(0 handcrafted"))).to_be_visible()
        shot(page, "e2-signed-in-again")
    finally:
        ctx.close()
        stop_app(proc)


def test_the_paste_is_kept_after_a_reload_a_switch_and_a_restore(page, app_url, browser, tmp_path):
    """Issue 48, item 2: the paste is part of the analysis, as Trust and Compare are: after F5,
    after another image and back, and after export and restore, Inspect shows the same result
    and the report holds it."""
    open_app(page, app_url)
    choose(page, "Sample gallery", "demo-conflict-1")
    add_tag(page)
    explain_now(page)  # the report needs an explanation
    goto(page, "Inspect")
    expect(page.get_by_role("combobox", name="Region")).to_have_value(re.compile(r"^\d+ tag"))
    click(page, page.get_by_role("button", name="Paste into 4 images"))
    summary = page.get_by_text(re.compile(r"^Pasted into 4 images, the region"))
    expect(summary).to_be_visible()
    rows = page.locator("li").filter(has_text=re.compile(r"→ .*; top class "))
    expect(rows).to_have_count(4)
    shown = (summary.inner_text(), rows.all_inner_texts())

    def same_paste(p) -> None:
        s = p.get_by_text(re.compile(r"^Pasted into 4 images, the region"))
        expect(s).to_have_text(shown[0])
        r = p.locator("li").filter(has_text=re.compile(r"→ .*; top class "))
        expect(r).to_have_count(4)
        assert r.all_inner_texts() == shown[1]
        expect(p.get_by_text("with the region", exact=False)).to_have_count(4)

    shot(page, "e1-pasted")
    # F5: the same result, and the report exported after it holds the paste
    rerun(page, page.reload, what="reload")
    same_paste(page)
    goto(page, "Export")
    with page.expect_download(timeout=T) as dl:
        click(page, page.get_by_role("button", name="Report (HTML)"))
    with open(dl.value.path(), encoding="utf-8") as f:
        assert '<section id="transplant">' in f.read()
    # another image, then back to this one: the same result
    choose(page, "Sample gallery", "chelsea")
    goto(page, "Inspect")
    expect(page.get_by_text(re.compile(r"^Pasted into"))).to_have_count(0)
    choose(page, "Sample gallery", "demo-conflict-1")
    same_paste(page)
    shot(page, "e2-back")
    # export, then restore in a fresh browser: the same result
    goto(page, "Export")
    with page.expect_download(timeout=T) as dl:
        click(page, page.get_by_role("button", name="Analysis (JSON)"))
    path = str(tmp_path / "pasted.json")
    dl.value.save_as(path)
    fresh = browser.new_context(viewport={"width": 1400, "height": HEIGHT})
    other = track(fresh.new_page())
    open_app(other, page.url.split("/export")[0].split("?")[0])
    goto(other, "Export")
    upload(
        other,
        other.locator("input[type=file][accept*='json']"),
        path,
        what="restoring the analysis",
    )
    expect(other.get_by_role("button", name=re.compile(r"^Analysis \(JSON\)"))).to_be_visible()
    goto(other, "Inspect")
    same_paste(other)
    shot(other, "e3-restored")
    fresh.close()


def test_compare_explainers_then_accept_the_merge_and_compare_again(page, app_url):
    """Issue 52: Compare explainers on a gallery image shows the agreement sentence; the merge
    suggestion's button preselects the pair on Craft, one click merges it, and after Explain
    and Compare again the page sets the agreement before the merge beside the one now."""
    open_app(page, app_url)
    choose(page, "Sample gallery", COMPARE_SAMPLE)
    choose(page, "Registry", "demo")  # after the photo, which brings the real model with it
    open_expander(page, "Settings")
    enter(page, page.get_by_role("spinbutton", name="Samples", exact=True), 60)
    click(page, page.get_by_role("button", name="Explain", exact=True), timeout=180_000)
    expect(page.get_by_text("surrogate fidelity").first).to_be_visible()
    click(page, page.get_by_role("button", name="Compare explainers"), timeout=180_000)
    expect(page.get_by_text(re.compile(r"^Agreement on the top 3: .+\.$"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"^One colour scale for every method"))).to_be_visible()
    accept = page.get_by_role(
        "button", name=re.compile(r"^Select regions \d+ and \d+ for merging$")
    )
    pair = re.findall(r"\d+", accept.inner_text())
    shot(page, "f1-compared")
    click(page, accept, new=[CANVAS])  # opens Craft regions, the pair selected
    expect(page.locator("h1").filter(has_text="Craft regions")).to_be_visible()
    expect(page.get_by_text(f"Selected: {', '.join(sorted(pair, key=int))}")).to_be_visible()
    caption = page.get_by_text(re.compile(r"^\d+ regions; the ids match"))
    n_regions = int(caption.inner_text().split()[0]) - 1
    click(page, page.get_by_role("button", name="Merge selected (2)"))
    expect(page.get_by_text(re.compile(rf"^{n_regions} regions; the ids match"))).to_be_visible()
    explain_now(page)
    click(page, page.get_by_role("button", name="Compare explainers"), timeout=180_000)
    expect(page.get_by_text(re.compile(r"^Agreement on the top 3: .+\.$"))).to_be_visible()
    expect(
        page.get_by_text(re.compile(r"^Mean feature agreement before the merge"))
    ).to_be_visible()
    shot(page, "f2-compared-again")
