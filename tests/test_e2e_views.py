"""What an analyst sees (issue 14), in a real browser: Debian's Chromium driven by Playwright
against ``streamlit run app.py``, at 1400 and 800 px wide.

Each test asserts what is on the screen: the photo's own pixels, the labels of a chart, the
tint of an overlay, where a drawn rectangle lands, the words of a warning. Screenshots of every
page at both widths go to test-artifacts/views-*.png (look at them).
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from conftest import ARTIFACTS
from PIL import Image

import limecraft_core as lc
from models.samples import load_sample
from pages.lib import analysis as A

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WIDE, NARROW = 1400, 800


# ----------------------------------------------------------------------------- helpers


def wait_idle(page, timeout: int = 120_000) -> None:
    """Until Streamlit has finished rerunning (its status widget is gone)."""
    page.wait_for_timeout(500)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout
    )
    page.wait_for_timeout(300)


def open_app(page, url: str, width: int = WIDE, path: str = "") -> None:
    page.set_viewport_size({"width": width, "height": 1000})
    page.goto(f"{url}/{path}")
    page.wait_for_selector("h1", timeout=90_000)
    wait_idle(page)


def goto(page, title: str) -> None:
    page.get_by_role("link", name=title).click()
    heading = "LIMEcraft" if title == "Explain" else title
    page.wait_for_selector(f"h1:has-text('{heading}')", timeout=60_000)
    wait_idle(page)


def shot(page, name: str) -> None:
    """The whole page: Streamlit scrolls inside its main area, so the viewport is made as tall
    as that area's content for the picture."""
    ARTIFACTS.mkdir(exist_ok=True)
    size = page.viewport_size
    tall = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
        " if (m) { m.scrollTo(0, 0); } window.scrollTo(0, 0);"
        " return m ? m.scrollHeight : document.body.scrollHeight; }"
    )
    page.set_viewport_size({"width": size["width"], "height": min(max(tall, 600), 12_000)})
    page.wait_for_timeout(600)
    page.screenshot(path=str(ARTIFACTS / f"views-{name}.png"))
    page.set_viewport_size(size)
    page.wait_for_timeout(300)


def pick_sample(page, name: str) -> None:
    page.get_by_label("Sample gallery").click()
    page.get_by_role("option", name=name, exact=True).click()
    wait_idle(page)


def explain(page, timeout: int = 180_000) -> None:
    page.get_by_role("button", name="Explain", exact=True).click()
    page.get_by_text(re.compile(r"^Explained \d+ regions")).wait_for(timeout=timeout)
    page.get_by_text("surrogate fidelity").first.wait_for(timeout=60_000)
    wait_idle(page)


def image_pixels(page, img) -> np.ndarray:
    """The exact pixels the browser was sent for an <img> (not a screenshot)."""
    src = img.get_attribute("src")
    body = page.request.get(src).body() if not src.startswith("data:") else None
    assert body is not None, "expected a media URL"
    return np.asarray(Image.open(io.BytesIO(body)).convert("RGB"))


def download(page, button: str) -> bytes:
    with page.expect_download(timeout=120_000) as d:
        page.get_by_role("button", name=button).click()
    with open(d.value.path(), "rb") as f:
        return f.read()


def app_regions(sample: str) -> lc.Regions:
    """The regions the app makes for a gallery sample with its default settings (the same
    engine call the app makes), to know which pixel belongs to which region."""
    s = load_sample(sample)
    a = A.new(s.image, s.name, tag_mask=s.tag_mask, note=s.note)
    return lc.stages.prepare_regions(
        lc._validate.as_float_image(s.image), A.segmentation_config(a)
    )[0]


def chart_bars(page) -> tuple[list[str], list[dict[str, str]]]:
    """The weights chart as the browser drew it: its y-axis labels, and each bar's fields (from
    the aria-label Vega gives every mark)."""
    chart = page.locator(".vega-embed").first
    chart.wait_for(timeout=60_000)
    labels = chart.locator(
        "g.role-axis[aria-label^='Y-axis'] .role-axis-label text"
    ).all_text_contents()
    bars = []
    for a in chart.locator(".role-mark path[aria-label]").evaluate_all(
        "els => els.map(e => e.getAttribute('aria-label'))"
    ):
        bars.append(dict(p.split(": ", 1) for p in a.split("; ")))
    return labels, bars


# ----------------------------------------------------------------------------- 1. the image first


def test_explain_shows_the_photo_its_description_and_three_steps(page, app_url):
    open_app(page, app_url)
    assert page.title() == "Explain · LIMEcraft"
    # a first visit shows three short steps
    for step in ("1. Pick the regions", "2. Explain", "3. Inspect"):
        assert page.get_by_text(step).first.is_visible()
    sample = load_sample("demo-conflict-1")
    # the sample's description names the shape and the tag
    assert page.get_by_text(sample.note, exact=False).first.is_visible()
    # the picture is the photo itself (thin outlines and ids aside), not a tinted map
    img = page.locator("[data-testid='stImage'] img").first
    got = image_pixels(page, img).astype(float)
    want = np.asarray(
        Image.fromarray(sample.image).resize((got.shape[1], got.shape[0]), Image.Resampling.NEAREST)
    ).astype(float)
    close = np.abs(got - want).max(axis=2) < 24
    assert close.mean() > 0.8, f"only {close.mean():.0%} of the pixels are the photo's"
    shot(page, "explain-photo-1400")
    # the toggle shows the tinted region map instead, which is not the photo
    page.get_by_text("Region map", exact=True).click()
    wait_idle(page)
    tinted = image_pixels(page, page.locator("[data-testid='stImage'] img").first).astype(float)
    assert (np.abs(tinted - want).max(axis=2) < 24).mean() < close.mean() - 0.2
    page.get_by_text("Photo with outlines", exact=True).click()
    wait_idle(page)
    # "Got it" puts the steps away
    page.get_by_role("button", name="Got it").click()
    wait_idle(page)
    assert page.get_by_text("1. Pick the regions").count() == 0


# ----------------------------------------------------------------------------- 5. model fit


def test_the_demo_model_warns_that_it_means_nothing_on_a_photo(page, app_url):
    open_app(page, app_url)
    assert page.get_by_text("knows only LIMEcraft's synthetic shapes").count() == 0
    pick_sample(page, "chelsea")
    warning = page.get_by_text(re.compile("The demo model knows only LIMEcraft's synthetic shapes"))
    warning.first.wait_for(timeout=30_000)
    assert warning.first.is_visible()
    assert page.get_by_text("Not meaningful for this image").is_visible()  # by the top-5
    explain(page)
    # next to the prediction: the fidelity badge says so too, not a green "good"
    assert page.get_by_text("not meaningful").first.is_visible()
    assert warning.count() >= 2  # under the image and next to the results
    shot(page, "explain-photo-warning-1400")
    pick_sample(page, "demo-conflict-1")
    assert page.get_by_text("knows only LIMEcraft's synthetic shapes").count() == 0


# ----------------------------------------------------------------------------- 4 + 6. overlay, chart


def test_overlay_tint_follows_the_weight_and_every_bar_is_labelled(page, app_url):
    open_app(page, app_url)
    pick_sample(page, "demo-conflict-1")
    explain(page)
    labels, bars = chart_bars(page)
    # every bar has its label: the top k for and against, then "others"
    assert len(bars) == len(labels) >= 3
    assert [b["region"] for b in bars] == labels
    assert labels[-1].startswith("others")
    colours = set(
        page.locator(".vega-embed .role-mark path[aria-label]").evaluate_all(
            "els => els.map(e => e.getAttribute('fill'))"
        )
    )
    assert {"#00bf33", "#e61a1a"} & colours  # the overlays' green and red
    # the tint: turn on weak regions, so that every top-k region is tinted in proportion
    page.get_by_text("Tint weak regions").click()
    wait_idle(page)
    labels, bars = chart_bars(page)
    weights = {
        int(b["region"].split()[0]): float(b["weight"].replace("\u2212", "-"))
        for b in bars
        if b["region"][0].isdigit()
    }
    over = image_pixels(page, page.locator("[data-testid='stImage'] img").nth(1)).astype(float)
    reg = app_regions("demo-conflict-1")
    sample = load_sample("demo-conflict-1")
    h0, w0 = reg.labels.shape
    h = round(over.shape[1] * h0 / w0)
    over = over[:h]  # the legend is under the overlay
    # the photo and the regions at the overlay's size, resized as the renderer does
    photo = np.asarray(
        Image.fromarray(sample.image).resize((over.shape[1], h), Image.Resampling.LANCZOS)
    ).astype(float)
    rows = np.minimum(((np.arange(h) + 0.5) * h0 / h).astype(int), h0 - 1)
    cols = np.minimum(((np.arange(over.shape[1]) + 0.5) * w0 / over.shape[1]).astype(int), w0 - 1)
    lab = reg.labels[rows[:, None], cols[None, :]]
    from scipy.ndimage import binary_erosion

    top = max(abs(w) for w in weights.values())
    for r, w in weights.items():
        inner = binary_erosion(lab == r, iterations=6)
        ys, xs = np.nonzero(inner)
        cy, cx = ys.mean(), xs.mean()
        far = (np.abs(ys - cy) > 16) | (np.abs(xs - cx) > 24)  # not the id written in the middle
        ys, xs = ys[far], xs[far]
        assert len(ys) > 30, r
        colour = 255 * (lc.render.POSITIVE if w > 0 else lc.render.NEGATIVE)
        # over = (1 - a) * photo + a * colour: a by least squares over the region's pixels
        moved, room = over[ys, xs] - photo[ys, xs], colour - photo[ys, xs]
        alpha = (moved * room).sum() / (room * room).sum()
        want = lc.render.MAX_ALPHA * abs(w) / top
        assert alpha == pytest.approx(want, abs=0.02), (r, w, alpha, want)
    # regions that are not in the top k keep their pixels
    others = ~np.isin(lab, list(weights))
    others = binary_erosion(others, iterations=6)
    assert np.abs(over[others] - photo[others]).mean() < 1.0
    shot(page, "explain-results-1400")


# ----------------------------------------------------------------------------- 3. canvas at 800 px


def test_a_rectangle_at_the_right_edge_of_the_canvas_at_800_px(page, app_url):
    open_app(page, app_url, NARROW)
    pick_sample(page, "demo-aligned-1")
    goto(page, "Craft regions")
    canvas = page.locator("canvas.upper-canvas")
    canvas.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)  # the canvas is redrawn at the column's width
    wait_idle(page)
    box = canvas.bounding_box()
    main = page.locator("[data-testid='stMain']").bounding_box()
    assert box["x"] + box["width"] <= main["x"] + main["width"] + 1, "the canvas is clipped"
    page.get_by_label("Drawing tool").click()
    page.get_by_role("option", name="rectangle").click()
    wait_idle(page)
    canvas = page.locator("canvas.upper-canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    # a rectangle over the right fifth of the canvas, from 20% to 60% of its height
    x0, x1 = box["x"] + 0.8 * box["width"], box["x"] + box["width"] - 2
    y0, y1 = box["y"] + 0.2 * box["height"], box["y"] + 0.6 * box["height"]
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x1, y1, steps=8)
    page.mouse.up()
    page.wait_for_timeout(800)
    page.get_by_role("button", name="Add as region").click()
    wait_idle(page)
    shot(page, "craft-800")
    goto(page, "Export")
    a = A.from_json(download(page, "Analysis (JSON)"))
    assert len(a.hand) == 1
    ys, xs = np.nonzero(a.hand[0].mask)
    h, w = a.hand[0].mask.shape
    assert xs.min() / w == pytest.approx(0.8, abs=0.04) and xs.max() / w > 0.95
    assert ys.min() / h == pytest.approx(0.2, abs=0.04) and ys.max() / h == pytest.approx(
        0.6, abs=0.04
    )
