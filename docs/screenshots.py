"""The README's and the docs' screenshots, taken from the running app, so they stay true.

    python docs/screenshots.py      # about 2 min on a 2-core CPU

The README's pictures go to ``docs/images/`` (JPEG, the top of the page, where the result is);
every page at 1400 px and at 800 px wide, whole, goes to ``test-artifacts/screenshots/`` (not
kept in git: they are for looking at after a change). ``--out`` and ``--pages-out`` change
where.

It starts ``streamlit run app.py`` with the app's own defaults (a real photo and the real
ImageNet model, EfficientNet-Lite0, offline) on a free port and a store of its own, and drives
Debian's Chromium (``/usr/bin/chromium``; never a downloaded browser) with Playwright through the
published watermark story: the cat explained, ``page-watermark`` with the watermark added as a
region on Craft, explained (the watermark drives ``carton``), pasted into four clean photos and
removed on Inspect, checked on Trust, then Export and a demo audit. Every page is taken at
1400 px and at 800 px wide. It waits for what the page shows (the browser tests' helpers in
``tests/e2e_helpers.py``), never for a fixed time.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
]
PAGES = ("Explain", "Craft regions", "Inspect", "Trust", "Export", "Audit")


def _drawn(page) -> None:
    """Every picture and every chart on the page is drawn (a chart's first frame is an empty
    placeholder)."""
    from e2e_helpers import images_loaded

    images_loaded(page)
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=\"stVegaLiteChart\"]')]"
        ".every(c => c.querySelector('canvas, svg'))"
    )


def _readme_picture(page, path: Path, height: int = 1500) -> None:
    """The top ``height`` px of the page, as a JPEG small enough for a README."""
    from PIL import Image

    full = path.with_suffix(".png")
    _shot(page, full)
    with Image.open(full) as im:
        im.convert("RGB").crop((0, 0, im.width, min(height, im.height))).save(
            path, quality=80, optimize=True
        )
    full.unlink()
    print(f"wrote {path}")


def _shot(page, path: Path) -> None:
    """The whole main area, its pictures and charts drawn."""
    from e2e_helpers import tall_shot

    tall_shot(page, path, least=700, most=6000, ready=_drawn)
    print(f"wrote {path}")


def story(page, url: str, out: Path, pages_out: Path) -> None:
    """The README's pictures (the shortcut explained, and caught on Inspect), and the story's
    other steps as whole pages."""
    from e2e_helpers import choose, click, explain, goto, open_app, pick_sample
    from playwright.sync_api import expect

    open_app(page, url)
    explain(page)
    _shot(page, pages_out / "explain-real-model.png")
    pick_sample(page, "page-watermark")
    goto(page, "Craft regions")
    click(page, page.get_by_role("button", name="Add the watermark as a region"))
    expect(page.locator("input[value='watermark']")).to_be_visible()
    _shot(page, pages_out / "craft-watermark-region.png")
    goto(page, "Explain")
    explain(page)
    expect(page.get_by_text(re.compile(r"^Strongest region for carton"))).to_contain_text(
        "watermark"
    )
    _readme_picture(page, out / "explain-watermark.jpg", height=2080)
    goto(page, "Inspect")
    click(page, page.get_by_role("button", name="Paste into 4 images"))
    expect(page.get_by_text(re.compile(r"^Pasted into 4 images"))).to_be_visible()
    click(page, page.get_by_text("remove", exact=True))
    choose(page, "The hole shows", "mean")
    expect(page.get_by_text(re.compile(r"^Top class:")).first).to_contain_text(
        "the edited image is now"
    )
    _readme_picture(page, out / "inspect-watermark.jpg", height=1150)
    goto(page, "Trust")
    click(page, page.get_by_role("button", name="Check the explanation"), timeout=600_000)
    expect(page.get_by_text(re.compile(r"^(stable|borderline|unstable)")).first).to_be_visible()
    _shot(page, pages_out / "trust.png")
    goto(page, "Audit")
    click(page, page.get_by_role("button", name="Run the audit"), timeout=600_000)
    expect(page.get_by_text(re.compile(r"^In \d+ of \d+ images")).first).to_be_visible(
        timeout=600_000
    )
    _shot(page, pages_out / "audit.png")


def every_page(page, width: int, out: Path) -> None:
    """Each page at ``width`` px, as the story left the analysis."""
    from e2e_helpers import goto

    page.set_viewport_size({"width": width, "height": 1000})
    for title in PAGES:
        goto(page, title)
        name = title.lower().replace(" ", "-")
        _shot(page, out / f"page-{name}-{width}.png")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    ap.add_argument("--pages-out", type=Path, default=ROOT / "test-artifacts" / "screenshots")
    ap.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    args.pages_out.mkdir(parents=True, exist_ok=True)
    from conftest import start_app, stop_app
    from e2e_helpers import NARROW, WIDE, track
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as store:
        proc, url, _ = start_app(
            {"LIMECRAFT_DEFAULT_MODEL": None, "LIMECRAFT_STORE_DIR": store, "LIMECRAFT_AUTH": None}
        )
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=args.chromium, args=FLAGS)
                page = track(browser.new_page(viewport={"width": WIDE, "height": 1000}))
                page.set_default_timeout(120_000)
                story(page, url, args.out, args.pages_out)
                every_page(page, WIDE, args.pages_out)
                every_page(page, NARROW, args.pages_out)
                browser.close()
        finally:
            stop_app(proc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
