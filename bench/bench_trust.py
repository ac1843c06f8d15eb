"""Trust checks: samples to a stable verdict per sampling scheme, and what sharing passes saves.

1. **Samples to a stable verdict, per sampling scheme** (bernoulli, stratified, antithetic,
   glime). For each scheme and image, one ``explain`` call with ``repeats`` repeats and
   ``convergence=sizes``: every repeat is refitted on the first n of its own samples for each
   size (no new model passes), and ``trust.convergence.needed`` is the smallest size from which
   the stability verdict (the rule of ``limecraft_core/trust/stability.py``) stays "stable" (None: not
   within the largest size). Every scheme gets the same seeds, images and regions, in one run.

   - demo model: fresh conflict images (``models.demo.generate(..., mode="conflict")``), the tag
     drawn as a region (``regions_mask=tag_mask``), default segmentation for the rest;
   - resnet18 with random weights (never pretrained), at a reduced input size (112 px by default),
     on scikit-image photos with SLIC regions (about 35 asked), probability outputs (the default).

2. **Cost of sharing work** (demo model, N=1000): R repeats in one batched call against R
   separate calls; a kernel sweep (refits only) against one explanation per width.

    python bench/bench_trust.py                      # everything, about 9 min on 2 CPU cores
    python bench/bench_trust.py --models demo        # one model; the JSON's other keys are kept
    python bench/bench_trust.py --quick --json /tmp/t.json   # tiny settings (the test)
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

import torch

from limecraft_core import Classifier, explain, segment
from models import demo, zoo
from models.registry import load_classifier
from models.samples import load_sample

SCHEMES = ["bernoulli", "stratified", "antithetic", "glime"]
DEMO_SIZES = [20, 30, 50, 100, 200, 400]
RESNET_SIZES = [50, 100, 200, 400, 800]
PHOTOS = ["chelsea", "coffee"]
DEMO_SEED = 4243


def run_needed(image, model, sizes, repeats, scheme, **kw) -> dict:
    """One explain call: the convergence of ``repeats`` repeats over ``sizes``, one scheme."""
    t = time.perf_counter()
    r = explain(
        image,
        model,
        samples=sizes[-1],
        repeats=repeats,
        convergence=sizes,
        compute_deltas=False,
        sampling=scheme,
        **kw,
    )
    c = r.trust.convergence
    return {
        "needed": c.needed,
        "verdicts": list(c.verdicts),
        "n_regions": r.n_regions,
        "model_passes": r.run.model_passes,
        "seconds": time.perf_counter() - t,
    }


def summarise(needed: list[int | None]) -> dict:
    """Median over images, a never-stable image counted as larger than every size."""
    reached = sorted(n for n in needed if n is not None)
    never = len(needed) - len(reached)
    ordered = reached + [float("inf")] * never
    med = statistics.median(ordered) if ordered else None
    return {
        "median": None if med is None or med == float("inf") else med,
        "median_beyond_largest": med == float("inf"),
        "never": never,
        "images": len(needed),
    }


def schemes_on(name, cases, model, sizes, repeats, **kw) -> dict:
    """Every scheme on every case (image, explain keywords), scheme-major within one image so
    a slow spell of the machine hits every scheme alike."""
    per = {s: [] for s in SCHEMES}
    for label, image, extra in cases:
        for scheme in SCHEMES:
            row = run_needed(image, model, sizes, repeats, scheme, **kw, **extra)
            row["image"] = label
            per[scheme].append(row)
            print(
                f"  {name} {label} {scheme}: needed {row['needed']} {row['verdicts']} "
                f"({row['seconds']:.1f} s)",
                flush=True,
            )
    return {
        "sizes": sizes,
        "images": [c[0] for c in cases],
        "schemes": {
            s: {"rows": rows, **summarise([r["needed"] for r in rows])} for s, rows in per.items()
        },
    }


def fmt_summary(v: dict, largest: int) -> str:
    med = f">{largest}" if v["median_beyond_largest"] else f"{v['median']:g}"
    return f"{med} ({v['never']}/{v['images']} never)"


def cost(model, image, tag_mask, repeats: int, samples: int) -> dict:
    kw = {"regions_mask": tag_mask, "samples": samples, "compute_deltas": False}
    t = time.perf_counter()
    explain(image, model, repeats=repeats, **kw)
    batched = time.perf_counter() - t
    t = time.perf_counter()
    for r in range(repeats):
        explain(image, model, seed=r, **kw)
    separate = time.perf_counter() - t
    widths = [0.1, 0.25, 0.5, 1.0, "uniform"]
    t = time.perf_counter()
    explain(image, model, kernel_widths=widths, **kw)
    sweep = time.perf_counter() - t
    t = time.perf_counter()
    for w in widths:
        explain(image, model, kernel_width=w, **kw)
    per_width = time.perf_counter() - t
    print(
        f"\n{repeats} repeats in one call: {batched:.2f} s; as {repeats} calls: {separate:.2f} s "
        f"({separate / batched:.1f}x)"
    )
    print(
        f"kernel sweep over {len(widths)} widths: {sweep:.2f} s; one explain per width: "
        f"{per_width:.2f} s ({per_width / sweep:.1f}x)"
    )
    return {
        "samples": samples,
        "repeats_batched_s": batched,
        "repeats_separate_s": separate,
        "kernel_sweep_s": sweep,
        "one_explain_per_width_s": per_width,
    }


def main(argv: list[str] | None = None) -> int:
    """The command line; ``argv`` (default: ``sys.argv[1:]``) lets a test run it in-process."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--images", type=int, default=6, help="demo conflict images")
    ap.add_argument("--photos", default=",".join(PHOTOS), help="photos for resnet18")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--input-size", type=int, default=112, help="resnet18's input size")
    ap.add_argument("--slic", type=int, default=35, help="SLIC regions asked on the photos")
    ap.add_argument("--models", default="demo,resnet18", help="comma list: demo, resnet18")
    ap.add_argument("--no-cost", action="store_true", help="skip the cost of sharing work")
    ap.add_argument("--quick", action="store_true", help="tiny settings, for the tests")
    ap.add_argument("--json", default=str(ROOT / "bench/results/trust.json"))
    args = ap.parse_args(argv)
    demo_sizes, resnet_sizes, cost_samples = DEMO_SIZES, RESNET_SIZES, 1000
    photos = [p for p in args.photos.split(",") if p]
    if args.quick:
        demo_sizes, resnet_sizes, cost_samples = [20, 40], [20, 40], 40
        args.images, args.repeats, args.input_size, args.slic = 1, 2, 64, 12
        photos = photos[:1]
    models = {m.strip() for m in args.models.split(",") if m.strip()}
    if not models <= {"demo", "resnet18"}:
        ap.error(f"--models takes demo and/or resnet18, got {args.models!r}")

    path = Path(args.json)
    out: dict = {}
    if path.exists() and not args.quick:
        try:  # a partial run (--models, --no-cost) keeps the other keys of the last full one
            out = json.loads(path.read_text())
        except json.JSONDecodeError:
            out = {}
        if "needed" not in out:
            out = {}  # the older layout
    out.update({"repeats": args.repeats, "schemes_measured": SCHEMES, "quick": args.quick})
    out.setdefault("needed", {})

    torch.manual_seed(0)
    demo_model = load_classifier("demo")  # loaded once, at this edge
    images = demo.generate(args.images, seed=DEMO_SEED, mode="conflict")
    if "demo" in models:
        cases = [
            (f"conflict {DEMO_SEED}/{i}", s.image, {"regions_mask": s.tag_mask})
            for i, s in enumerate(images)
        ]
        res = schemes_on("demo", cases, demo_model, demo_sizes, args.repeats)
        res["model"] = "demo CNN (128 px), tag drawn as a region + default segmentation"
        out["needed"]["demo"] = res
    if "resnet18" in models:
        resnet = Classifier(
            zoo.build("resnet18", pretrained=False),
            input_size=args.input_size,
            normalize="imagenet",
            device="cpu",
            name="resnet18 (random weights)",
        )
        cases = []
        for name in photos:
            photo = load_sample(name).image
            cases.append((name, photo, {"segments": segment(photo, "slic", args.slic)}))
        res = schemes_on("resnet18", cases, resnet, resnet_sizes, args.repeats)
        res["model"] = (
            f"resnet18, random weights, {args.input_size} px, SLIC {args.slic} asked, "
            "probability outputs"
        )
        out["needed"]["resnet18"] = res

    print(
        f"\nsamples to a stable verdict over {args.repeats} repeats "
        "(median over images; images never stable within the largest size)"
    )
    keys = [k for k in ("demo", "resnet18") if k in out["needed"]]
    print("| scheme | " + " | ".join(out["needed"][k]["model"] for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for scheme in SCHEMES:
        cells = [
            fmt_summary(out["needed"][k]["schemes"][scheme], out["needed"][k]["sizes"][-1])
            for k in keys
            if scheme in out["needed"][k]["schemes"]
        ]
        print(f"| {scheme} | " + " | ".join(cells) + " |")
    for k in keys:
        print(f"{k} per image (sizes {out['needed'][k]['sizes']}):")
        for scheme in SCHEMES:
            rows = out["needed"][k]["schemes"][scheme]["rows"]
            print(f"  {scheme:<11} " + ", ".join(str(r["needed"]) for r in rows))

    if not args.no_cost:
        s = images[0]
        out["cost"] = cost(demo_model, s.image, s.tag_mask, args.repeats, cost_samples)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
