"""The app's latency per interaction, on a 512x512 photo, driven through Streamlit's AppTest.

Each figure is the wall time of the full rerun that an interaction causes (AppTest's own
overhead included, so it is an upper bound on what the server spends). Every repeat uses a new
value, so no cache answers it. Budget: 0.5 s per interaction (Explain excepted).

    python bench/bench_app_latency.py
"""

from __future__ import annotations

from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import json
import statistics
import time

import numpy as np
from streamlit.testing.v1 import AppTest

from pages.lib.session import KEY as SESSION_KEY

BUDGET_S = 0.5


def timed(at: AppTest, widget=None, value=None) -> float:
    if widget is not None:
        widget.set_value(value)
    t = time.perf_counter()
    at.run()
    dt = time.perf_counter() - t
    if at.exception:
        raise RuntimeError(at.exception)
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=str(ROOT / "bench/results/app_latency.json"))
    args = ap.parse_args()

    from pages.lib.state import HandRegion

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.selectbox(key="sample_pick").set_value("astronaut")
    at.run()
    s = at.session_state[SESSION_KEY].app
    assert s.image.shape[:2] == (512, 512), s.image.shape
    at.switch_page("pages/app_pages/craft.py")
    at.run()
    at.run()  # warm: imports, model, first segmentation

    results: dict[str, list[float]] = {}
    n_values = [30, 34, 38, 42, 46, 50, 54, 58][: args.repeats]
    results["segmentation preview (slic, new region count)"] = [
        timed(at, at.slider(key="seg_n"), n) for n in n_values
    ]
    for method in ("quickshift", "felzenszwalb", "watershed", "grid"):
        at.selectbox(key="seg_method").set_value(method)
        results[f"segmentation preview ({method}, new region count)"] = [
            timed(at, at.slider(key="seg_n"), n + 1) for n in n_values
        ]
    at.selectbox(key="seg_method").set_value("slic")
    at.run()
    keys = list(dict.fromkeys(f"auto:{i}" for i in range(1, 40, 3)))
    clicks = []
    for k in keys[: args.repeats]:
        s.selected = s.selected ^ {k}  # what the click callback does, then the rerun
        clicks.append(timed(at))
    results["click a region (select)"] = clicks
    strokes = []
    rng = np.random.default_rng(0)
    for i in range(args.repeats):
        mask = np.zeros((512, 512), bool)
        y, x = rng.integers(50, 400, 2)
        mask[y : y + 80, x : x + 60] = True
        s.hand.append(HandRegion(name=f"r{i}", mask=mask))  # what "Add as region" does
        strokes.append(timed(at))
    results["add a drawn region (canvas stroke)"] = strokes
    at.switch_page("pages/app_pages/inspect.py")
    at.run()
    at.radio(key="edit_kind").set_value("move")
    at.run()
    results["edit preview (move, inpainted hole)"] = [
        timed(at, at.slider(key="e_dx"), dx)
        for dx in (10, 20, 30, 40, 50, 60, 70, 80)[: args.repeats]
    ]
    at.radio(key="edit_kind").set_value("colour")
    at.run()
    results["edit preview (hue)"] = [
        timed(at, at.slider(key="e_hue"), h)
        for h in (20, 40, 60, 80, 100, 120, 140)[: args.repeats]
    ]

    print(f"app interactions on a 512x512 image, AppTest-driven, {args.repeats} repeats each")
    print("| interaction | median s | max s | within 0.5 s |")
    print("|---|---|---|---|")
    out = {}
    for name, ts in results.items():
        med, mx = statistics.median(ts), max(ts)
        out[name] = {"median_s": med, "max_s": mx, "all_s": ts}
        print(f"| {name} | {med:.3f} | {mx:.3f} | {'yes' if mx <= BUDGET_S else 'NO'} |")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
