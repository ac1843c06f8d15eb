"""A large photo in the app, in a real browser (Debian's Chromium through Playwright): how long
after its "Explained ..." line the page is done, and how long a reload (F5) takes to show the
result again.

A 6000x4000 JPEG (gradients and noise) is uploaded, explained with 100 samples (the model is
the demo model, so that the model's time does not hide the page's), and the page reloaded.
Each figure is the wall time from the click (or the reload) as the browser sees it, until the
script run it caused has finished (counted from the server's script-finished messages, as the
browser tests do) or until the result is on the screen.

    python bench/bench_large_image.py [--repeats 2]
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

sys.path.insert(0, str(ROOT / "tests"))

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import json
import os
import platform
import re
import statistics
import tempfile
import time

import numpy as np
from PIL import Image


def photo(path: Path) -> None:
    rng = np.random.default_rng(3)
    x, y = np.arange(6000), np.arange(4000)
    img = np.empty((4000, 6000, 3), np.uint8)
    img[..., 0] = (x * 255 // 6000).astype(np.uint8)[None, :]
    img[..., 1] = (y * 255 // 4000).astype(np.uint8)[:, None]
    img[..., 2] = rng.integers(0, 60, (4000, 6000), dtype=np.uint8)
    Image.fromarray(img).save(path, quality=90)


def once(browser, url: str, path: Path) -> dict[str, float]:
    from e2e_helpers import enter, open_app, open_expander, rerun, start, track
    from playwright.sync_api import expect

    page = track(browser.new_page(viewport={"width": 1400, "height": 1100}))
    try:
        open_app(page, url)
        files = page.locator("[data-testid='stSidebar'] input[type=file]").first
        t = time.monotonic()
        loaded = start(page, lambda: files.set_input_files(str(path)))
        loaded(timeout=600_000)
        load_s = time.monotonic() - t
        open_expander(page, "Settings")
        enter(page, page.get_by_role("spinbutton", name="Samples"), 100, key="Tab", shown=False)
        t = time.monotonic()
        button = page.get_by_role("button", name="Explain", exact=True)
        done = start(page, button.click)
        line = page.get_by_text(re.compile(r"^Explained \d+ regions"))
        expect(line).to_be_visible(timeout=600_000)
        line_s = time.monotonic() - t
        said = float(re.search(r"in ([\d.]+) s", line.inner_text()).group(1))
        done(timeout=600_000)
        done_s = time.monotonic() - t
        t = time.monotonic()
        rerun(page, page.reload, timeout=600_000)
        expect(page.get_by_text("surrogate fidelity").first).to_be_visible(timeout=600_000)
        reload_s = time.monotonic() - t
    finally:
        page.close()
    return {
        "load_s": load_s,
        "explain_says_s": said,
        "explained_line_s": line_s,
        "page_done_s": done_s,
        "done_after_line_s": done_s - line_s,
        "reload_s": reload_s,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", default=str(ROOT / "bench/results/large_image.json"))
    args = ap.parse_args(argv)

    from conftest import CHROMIUM, CHROMIUM_ARGS, start_app, stop_app
    from playwright.sync_api import sync_playwright

    os.environ["LIMECRAFT_DEFAULT_MODEL"] = "demo"
    proc, url, _ = start_app({})
    runs = []
    try:
        with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
            path = Path(tmp) / "large.jpg"
            photo(path)
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            for i in range(args.repeats):
                runs.append(once(browser, url, path))
                print(f"run {i + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in runs[-1].items()))
            browser.close()
    finally:
        stop_app(proc)
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print("median: " + ", ".join(f"{k} {v:.1f}" for k, v in median.items()))
    out = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "image": "6000x4000 JPEG, demo model, 100 samples",
        "runs": runs,
        "median": median,
    }
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
