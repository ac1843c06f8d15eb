"""Trust checks: sampling efficiency per scheme, and what sharing the model passes saves.

1. Samples needed to reach Kendall's W >= 0.9 over 5 repeats, per sampling scheme, on the demo
   model (tag drawn by hand + superpixels, conflict images) and on a zoo architecture (resnet18,
   random weights, raw logits, SLIC regions on a photo). Convergence reuses each repeat's samples.
2. Cost: R repeats in one batched call against R separate calls; a kernel sweep (refits only)
   against one explanation per width.

    python bench/bench_trust.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from limecraft_core import Classifier, explain, segment  # noqa: E402
from models import demo, zoo  # noqa: E402
from models.registry import load_classifier  # noqa: E402
from models.samples import load_sample  # noqa: E402

SIZES = [50, 100, 200, 500, 1000]
SCHEMES = ["bernoulli", "stratified", "antithetic"]


def needed(image, model, repeats, **kw) -> tuple[int | None, list[float]]:
    r = explain(
        image,
        model,
        samples=SIZES[-1],
        repeats=repeats,
        convergence=SIZES,
        compute_deltas=False,
        **kw,
    )
    c = r.trust.convergence
    return c.needed, c.kendall_w


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--images", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=str(ROOT / "bench/results/trust.json"))
    args = ap.parse_args()
    out: dict = {"sizes": SIZES, "repeats": args.repeats, "schemes": {}}

    torch.manual_seed(0)
    demo_model = load_classifier("demo")  # loaded once, at this edge
    resnet = Classifier(
        zoo.build("resnet18", pretrained=False),
        input_size=224,
        normalize="imagenet",
        device="cpu",
        name="resnet18 (random weights)",
    )
    photo = load_sample("chelsea").image
    photo_labels = segment(photo, "slic", 30)
    images = demo.generate(args.images, seed=4243, mode="conflict")
    for scheme in SCHEMES:
        demo_needed, demo_w = [], []
        for s in images:
            n, w = needed(
                s.image, demo_model, args.repeats, regions_mask=s.tag_mask, sampling=scheme
            )
            demo_needed.append(n)
            demo_w.append(w)
        rn, rw = needed(
            photo,
            resnet,
            args.repeats,
            segments=photo_labels,
            sampling=scheme,
            output_space="raw",
            batch_size=16,
        )
        out["schemes"][scheme] = {
            "demo_needed": demo_needed,
            "demo_w": demo_w,
            "resnet18_needed": rn,
            "resnet18_w": rw,
        }

    def fmt(n):
        return str(n) if n is not None else f">{SIZES[-1]}"

    print(f"samples needed for Kendall's W >= 0.9 over {args.repeats} repeats (sizes {SIZES})")
    print(
        "| scheme | demo model, per image | resnet18 (random weights, 112 px), chelsea, SLIC 30 |"
    )
    print("|---|---|---|")
    for scheme, v in out["schemes"].items():
        print(
            f"| {scheme} | {', '.join(fmt(n) for n in v['demo_needed'])} | {fmt(v['resnet18_needed'])} |"
        )

    # --- cost of sharing work (demo model, N=1000)
    s = images[0]
    kw = {"regions_mask": s.tag_mask, "samples": 1000, "compute_deltas": False}
    t = time.perf_counter()
    explain(s.image, demo_model, repeats=args.repeats, **kw)
    batched = time.perf_counter() - t
    t = time.perf_counter()
    for r in range(args.repeats):
        explain(s.image, demo_model, seed=r, **kw)
    separate = time.perf_counter() - t
    widths = [0.1, 0.25, 0.5, 1.0, "uniform"]
    t = time.perf_counter()
    explain(s.image, demo_model, kernel_widths=widths, **kw)
    sweep = time.perf_counter() - t
    t = time.perf_counter()
    for w in widths:
        explain(s.image, demo_model, kernel_width=w, **kw)
    per_width = time.perf_counter() - t
    out["cost"] = {
        "repeats_batched_s": batched,
        "repeats_separate_s": separate,
        "kernel_sweep_s": sweep,
        "one_explain_per_width_s": per_width,
    }
    print(
        f"\n{args.repeats} repeats in one call: {batched:.2f} s; as {args.repeats} calls: {separate:.2f} s "
        f"({separate / batched:.1f}x)"
    )
    print(
        f"kernel sweep over {len(widths)} widths: {sweep:.2f} s; one explain per width: {per_width:.2f} s "
        f"({per_width / sweep:.1f}x)"
    )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
