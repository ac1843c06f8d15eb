"""The demo story in numbers: does LIME find the planted shortcut (the tag)?

On fresh conflict images (the tag names one class, the shape another), for the model's predicted
class:

- with the tag drawn by hand (``regions_mask``) and the rest as automatic superpixels: how often
  the tag is the top-ranked region;
- with automatic superpixels only (lime's default quickshift, and SLIC): how often the top-ranked
  superpixel covers most (>= 50%) of the tag, and how often the tag is split over several
  superpixels.

    python bench/bench_demo.py --count 40 --samples 500
"""

from __future__ import annotations

from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import json
import time

import numpy as np

from limecraft_core import explain
from models import demo
from models.registry import load_classifier


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--seed", type=int, default=4242, help="seed of the fresh conflict images")
    ap.add_argument("--repeats", type=int, default=5, help="repeats for Kendall's W")
    ap.add_argument("--json", default=str(ROOT / "bench/results/demo.json"))
    args = ap.parse_args()

    images = demo.generate(args.count, seed=args.seed, mode="conflict")
    model = load_classifier("demo")  # loaded once, at this edge
    t0 = time.perf_counter()
    hand_hits = follows = 0
    auto = {m: {"top_covers_tag": 0, "tag_split": 0, "w": []} for m in ("quickshift", "slic")}
    hand_w: list[float] = []
    for s in images:
        res = explain(
            s.image,
            model,
            regions_mask=s.tag_mask,
            samples=args.samples,
            seed=0,
            compute_deltas=False,
            repeats=args.repeats,
        )
        hand_w.append(res.trust.stability.kendall_w)
        hand_hits += int(np.argmax(res.weights) == 0)
        follows += int(res.target == s.tag_class)
        for method in auto:
            r = explain(
                s.image,
                model,
                segmentation=method,
                samples=args.samples,
                seed=0,
                compute_deltas=False,
                repeats=args.repeats,
            )
            auto[method]["w"].append(r.trust.stability.kendall_w)
            top = int(np.argmax(r.weights))
            covered = (r.segments[s.tag_mask] == top).mean()
            auto[method]["top_covers_tag"] += int(covered >= 0.5)
            _, counts = np.unique(r.segments[s.tag_mask], return_counts=True)
            auto[method]["tag_split"] += int((counts >= 0.2 * s.tag_mask.sum()).sum() >= 2)
    n = len(images)
    out = {
        "images": n,
        "samples": args.samples,
        "model_follows_tag": follows / n,
        "tag_drawn_by_hand_ranked_first": hand_hits / n,
        "tag_drawn_by_hand_median_kendall_w": float(np.median(hand_w)),
        **{f"{m}_median_kendall_w": float(np.median(v["w"])) for m, v in auto.items()},
        **{f"{m}_top_superpixel_covers_tag": v["top_covers_tag"] / n for m, v in auto.items()},
        **{f"{m}_tag_split_over_superpixels": v["tag_split"] / n for m, v in auto.items()},
        "seconds": time.perf_counter() - t0,
    }
    print(
        f"{n} fresh conflict images, N={args.samples}; the model follows the tag on {follows}/{n}"
    )
    print(
        f"| regions | the tag is found (top region) | median Kendall's W, {args.repeats} repeats |"
    )
    print("|---|---|---|")
    print(
        f"| tag drawn by hand + superpixels | {hand_hits}/{n} ({hand_hits / n:.0%}) | "
        f"{np.median(hand_w):.3f} |"
    )
    for m, v in auto.items():
        print(
            f"| {m} superpixels only | {v['top_covers_tag']}/{n} ({v['top_covers_tag'] / n:.0%}); "
            f"tag split over 2+ superpixels in {v['tag_split']}/{n} | {np.median(v['w']):.3f} |"
        )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
