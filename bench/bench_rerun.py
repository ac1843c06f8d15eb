"""What one click costs the app server, in a real browser (Debian's Chromium through Playwright),
with and without Streamlit's full garbage collection after every script run
(``runner.postScriptGC``; the app's ``.streamlit/config.toml`` turns it off).

Two app servers start side by side, the same app, one with the collection (Streamlit's default)
and one without. In each, a browser types a new Samples value (a rerun that changes a setting
and nothing else) ``--clicks`` times, alternating between the servers. Each figure is the wall
time from the key press until the script run it caused has finished (counted from the server's
script-finished messages, as the browser tests do), and the CPU seconds the server process used
over all its clicks.

    python bench/bench_rerun.py [--clicks 12]
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
import statistics
import time

VARIANTS = {"with the collection (Streamlit's default)": "true", "without (the app's)": "false"}


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` (Linux /proc), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--clicks", type=int, default=12)
    ap.add_argument("--json", default=str(ROOT / "bench/results/rerun.json"))
    args = ap.parse_args(argv)

    from conftest import CHROMIUM, CHROMIUM_ARGS, start_app, stop_app
    from e2e_helpers import enter, open_app, open_expander, track
    from playwright.sync_api import sync_playwright

    os.environ["LIMECRAFT_DEFAULT_MODEL"] = "demo"
    servers = {}
    try:
        for name, gc in VARIANTS.items():
            proc, url, _ = start_app({"STREAMLIT_RUNNER_POST_SCRIPT_GC": gc})
            servers[name] = (proc, url)
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        cpu: dict[str, float] = {name: 0.0 for name in VARIANTS}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            pages = {}
            for name, (_, url) in servers.items():
                page = track(browser.new_page(viewport={"width": 1400, "height": 1100}))
                open_app(page, url)
                open_expander(page, "Settings")
                pages[name] = page
            for i in range(args.clicks):
                for name, page in pages.items():
                    box = page.get_by_role("spinbutton", name="Samples")
                    before = cpu_seconds(servers[name][0].pid)
                    t = time.monotonic()
                    enter(page, box, 200 + 10 * i, key="Tab", shown=False)
                    times[name].append(time.monotonic() - t)
                    cpu[name] += cpu_seconds(servers[name][0].pid) - before
            browser.close()
    finally:
        for proc, _ in servers.values():
            stop_app(proc)
    out = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "interaction": "type a new Samples value (Tab), demo model, the demo image",
        "clicks": args.clicks,
        "variants": {
            name: {
                "median_click_to_run_finished_s": statistics.median(times[name]),
                "server_cpu_s_per_click": cpu[name] / args.clicks,
                "runs_s": times[name],
            }
            for name in VARIANTS
        },
    }
    for name, v in out["variants"].items():
        print(
            f"{name}: median {v['median_click_to_run_finished_s']:.2f} s from the key press to "
            f"the run finished; server CPU {v['server_cpu_s_per_click']:.2f} s per click"
        )
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
