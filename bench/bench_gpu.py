"""The GPU run (issue 53) in one command: real models against their forward-only floor, and
the audit's pace, on one device.

1. **EfficientNet-Lite0** (timm's ``efficientnet_lite0``) and **resnet50** (torchvision), both
   with random weights (timing only; nothing to download), on a 224 px chelsea with lime's
   quickshift regions, N = 1000, mean fill: LIMEcraft's explanation with its defaults and with
   ``early_stop=None``; the **forward-only floor**, N images already at the model's input size
   through the same Classifier (its preprocessing and autocast) at each of --batch-sizes, the
   best taken; and the **share of the explanation's time above that floor**. The variants run
   round-robin, medians of --repeats rounds.
2. **A small audit's images per minute**: ``bench/bench_audit.py --device DEVICE`` (the demo
   model; the local variants, no Ray), its throughput images at --audit-samples each.

    bash bench/gpu.sh                      # on a one-GPU machine with no network (~5 min)
    python bench/bench_gpu.py --dry        # the same path on the CPU, one tiny case (~2 s)

``--dry`` runs one tiny convolutional model on a 64 px image at N = 40 on the CPU, and checks
the audit's command line without running it (the suite's smoke test runs it, so the script
cannot rot). Writes ``gpu_<device>.json`` and ``.md`` into --out (default bench/results).
"""

from __future__ import annotations

from pathlib import Path

from _common import ROOT, chelsea, median_time  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import json
import platform
import shutil
import statistics
import tempfile
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import limecraft_core as lc


class Tiny(torch.nn.Module):
    """The dry run's model: two small convolutions and a linear head (random weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3)
        )
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x).mean(dim=(2, 3)))


def make_model(name: str, device: str) -> lc.Classifier:
    """The model under test as a Classifier on ``device``, with random weights (seeded)."""
    torch.manual_seed(0)
    if name == "tiny":
        return lc.Classifier(Tiny(), device=device, name=name)
    if name == "efficientnet_lite0":  # timm's architecture: the GPU image has timm, no network
        import timm

        module = timm.create_model("efficientnet_lite0", pretrained=False)
        return lc.Classifier(module, input_size=224, normalize="half", device=device, name=name)
    import torchvision

    module = getattr(torchvision.models, name)(weights=None)
    return lc.Classifier(module, input_size=224, normalize="imagenet", device=device, name=name)


def bench_model(name: str, args, image: np.ndarray, segments: np.ndarray) -> dict[str, Any]:
    """One model: the explanation (defaults, early_stop=None) against the forward-only floor."""
    clf = make_model(name, args.device)
    n = args.samples
    x1 = torch.from_numpy(image.astype(np.float32).transpose(2, 0, 1) / 255.0)[None]
    x1 = x1.to(clf.device)
    x_in = x1 if clf.input_size is None else F.interpolate(x1, size=clf.input_size, mode="area")
    sizes = [int(b) for b in args.batch_sizes.split(",")]

    def floor(bs: int) -> None:
        batch = x_in.repeat(bs, 1, 1, 1)
        for i in range(0, n, bs):
            clf(batch[: min(bs, n - i)])

    def explain(**kw: Any) -> lc.Explanation:
        return lc.explain(image, clf, segments=segments, samples=n, fill="mean", seed=0, **kw)

    variants: dict[str, Any] = {f"floor@{bs}": (lambda bs=bs: floor(bs)) for bs in sizes}
    variants["defaults"] = explain
    variants["early_stop=None"] = lambda: explain(early_stop=None)
    for fn in variants.values():
        fn()  # warm-up: kernels, allocator, the precision decision
    times: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.repeats):
        for v, fn in variants.items():
            times[v].append(median_time(fn, 1)[0])
    sec = {v: statistics.median(ts) for v, ts in times.items()}
    best = min(sizes, key=lambda bs: sec[f"floor@{bs}"])
    fl = sec[f"floor@{best}"]
    used = explain().trust.early_stop
    return {
        "model": name,
        "samples": n,
        "precision": clf.precision_for(to_chw(image, clf.device))[0],
        "seconds": sec,
        "floor_batch_size": best,
        "floor_seconds": fl,
        "floor_images_per_second": n / fl,
        "defaults_seconds": sec["defaults"],
        "none_seconds": sec["early_stop=None"],
        "share_above_floor_defaults": 1 - fl / sec["defaults"],
        "share_above_floor_none": 1 - fl / sec["early_stop=None"],
        "defaults_samples_used": used.samples_used,
    }


def to_chw(image: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(image.astype(np.float32).transpose(2, 0, 1) / 255.0).to(device)


def audit_argv(args, out: Path) -> list[str]:
    """bench_audit.py's command line for a small audit on ``args.device``."""
    return [
        "--device", args.device, "--images", str(args.audit_acceptance),
        "--throughput-images", str(args.audit_images), "--samples", str(args.audit_samples),
        "--rounds", "1", "--no-ray", "--compare-fills", "", "--out", str(out),
        "--work", str(out / "work"),
    ]  # fmt: skip


def bench_audit_pace(args) -> dict[str, Any]:
    """The small audit through bench_audit.py (run; in a dry run, its command line parsed)."""
    import bench_audit

    out = Path(tempfile.mkdtemp(prefix="lc-gpu-audit-"))
    argv = audit_argv(args, out)
    if args.dry:
        out.rmdir()  # the dry run parses the command line only: nothing is left behind
        parsed = bench_audit.parse_args(argv)
        return {"dry": True, "argv": argv, "device": parsed.device}
    t = time.perf_counter()
    try:
        if bench_audit.main(argv) != 0:
            raise SystemExit("bench_audit.py failed")
        res = json.loads((out / "audit.json").read_text())
    finally:
        shutil.rmtree(out, ignore_errors=True)  # its images and work folder; the figures return
    return {
        "argv": argv,
        "seconds": time.perf_counter() - t,
        "images_per_minute": {
            k: v["median_images_per_minute"] for k, v in res["throughput"]["variants"].items()
        },
        "acceptance": {k: res["acceptance"][k] for k in ("images", "precision", "recall")},
    }


def markdown(res: dict[str, Any]) -> str:
    lines = [
        f"{res['machine']}; torch {res['torch']}; N={res['samples']}, {res['image']} px chelsea, "
        f"K={res['regions']} quickshift regions, mean fill; medians of {res['repeats']} rounds",
        "",
        "| model | precision | explanation, defaults (samples used) | `early_stop=None` | "
        "floor (best batch) | floor img/s | share above the floor (defaults, none) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["models"].values():
        lines.append(
            f"| {r['model']} | {r['precision']} | {r['defaults_seconds']:.3f} s "
            f"({r['defaults_samples_used']}) | {r['none_seconds']:.3f} s | "
            f"{r['floor_seconds']:.3f} s ({r['floor_batch_size']}) | "
            f"{r['floor_images_per_second']:.0f} | {100 * r['share_above_floor_defaults']:.0f}%, "
            f"{100 * r['share_above_floor_none']:.0f}% |"
        )
    a = res["audit"]
    if not a.get("dry"):
        lines += ["", f"Audit (`bench/bench_audit.py {' '.join(a['argv'][:10])}`):"]
        lines += [f"- {k}: **{v:.0f} images/min**" for k, v in a["images_per_minute"].items()]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dry", action="store_true", help="one tiny case on the CPU")
    ap.add_argument("--device", default=None, help="default: cuda (cpu with --dry)")
    ap.add_argument("--models", default="efficientnet_lite0,resnet50")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-sizes", default="64,128,256,512")
    ap.add_argument("--audit-images", type=int, default=200, help="throughput images")
    ap.add_argument("--audit-acceptance", type=int, default=8, help="acceptance images")
    ap.add_argument("--audit-samples", type=int, default=500)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args(argv)
    if args.dry:
        args.device = args.device or "cpu"
        args.models, args.samples, args.repeats, args.batch_sizes = "tiny", 40, 1, "8,16"
    args.device = args.device or "cuda"
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("no CUDA device here: run with --dry for the CPU smoke run, or --device cpu")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    size = 64 if args.dry else 224
    image = chelsea(size)
    segments = lc.segment(image, "quickshift", working_size=None)
    res: dict[str, Any] = {
        "machine": torch.cuda.get_device_name() if args.device == "cuda" else platform.machine(),
        "torch": torch.__version__,
        "device": args.device,
        "dry": args.dry,
        "samples": args.samples,
        "image": size,
        "regions": int(segments.max()) + 1,
        "repeats": args.repeats,
        "models": {},
    }
    for name in args.models.split(","):
        res["models"][name] = bench_model(name, args, image, segments)
        print(json.dumps(res["models"][name]), flush=True)
    res["audit"] = bench_audit_pace(args)
    md = markdown(res)
    print(md)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"gpu_{args.device}" + ("_dry" if args.dry else "")
    (out / f"{stem}.json").write_text(json.dumps(res, indent=1))
    (out / f"{stem}.md").write_text(md + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
