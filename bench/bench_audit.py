"""The dataset audit: does it find the shortcut, and how many images a minute does it audit?

1. **It finds the shortcut.** ``demo-data --mixed`` makes fresh demo images (half aligned, half
   conflict; seeds never used in training) with the drawn shapes as expected masks; the audit
   runs with its default settings, and its flags are scored against ``labels.json``: the
   positives are the conflict images whose prediction is the tag's class (the model follows the
   tag). Precision and recall are printed, with every miss.
2. **Throughput** of ``python -m limecraft audit`` (the command's own path: reading,
   explaining, writing every image's files), for the demo model at N samples (early stop off,
   so every image scores exactly N), side by side in one run, round-robin over ``--rounds``
   rounds so a slow spell of the machine hits every variant alike:

   * local, one image at a time (``--in-flight 1``: the classifier called directly);
   * local, 4 images in flight through the work queue (their short chunks share passes);
   * Ray Serve on a one-node loopback cluster with 2 replicas (1 CPU each), 4 images in flight
     (``LIMECRAFT_RAY_ADDRESS`` set; every image's weights are checked against the local run's).

   Images per minute count only the explaining and writing (the model is loaded before the
   clock starts; the cluster is started once, before the rounds).

    python bench/bench_audit.py                      # 60 images, N=500, 2 rounds, about 20 min
    python bench/bench_audit.py --images 8 --throughput-images 4 --samples 100 --rounds 1 --no-ray

Writes bench/results/audit.json and audit.md, and prints the Markdown.
"""

from __future__ import annotations

import os
from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)
os.environ.setdefault("LIMECRAFT_CPU_BF16", "0")  # fp32 everywhere: the variants compare alike

import argparse
import contextlib
import io
import json
import platform
import tempfile
import time

import numpy as np
import torch

from limecraft.cli import main as cli
from limecraft_core import Explanation
from models.demo_data import write_demo_mixed

#: Seeds never used to train the demo model (models/train_demo.py uses 20_240_601/2).
ACCEPTANCE_SEED = 515_151
THROUGHPUT_SEED = 616_161


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def audit(images: Path, masks: Path, out: Path, *args: str, ray: str | None = None) -> dict:
    """One ``audit`` run, in this process; returns its audit.json."""
    old = os.environ.pop("LIMECRAFT_RAY_ADDRESS", None)
    if ray:
        os.environ["LIMECRAFT_RAY_ADDRESS"] = ray
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            code = cli(
                ["audit", str(images), "--model", "demo", "--expected-masks", str(masks),
                 "--out", str(out), "--quiet", *args]
            )  # fmt: skip
    finally:
        os.environ.pop("LIMECRAFT_RAY_ADDRESS", None)
        if old is not None:
            os.environ["LIMECRAFT_RAY_ADDRESS"] = old
    if code != 0:
        raise SystemExit(f"the audit into {out} exited with {code}")
    return json.loads((out / "audit.json").read_text())


def score(doc: dict, labels: dict) -> dict:
    truth = {
        r["file"]
        for r in doc["rows"]
        if labels[r["file"]]["mode"] == "conflict"
        and r["predicted"] == labels[r["file"]]["tag_class"]
    }
    flagged = {r["file"] for r in doc["rows"] if r["flags"]}
    tp = len(truth & flagged)
    return {
        "images": len(doc["rows"]),
        "conflict": sum(e["mode"] == "conflict" for e in labels.values()),
        "follows_tag": len(truth),
        "flagged": len(flagged),
        "precision": tp / len(flagged) if flagged else float("nan"),
        "recall": tp / len(truth) if truth else float("nan"),
        "missed": sorted(truth - flagged),
        "false_alarms": sorted(flagged - truth),
        "headline": doc["findings"]["sentences"][0],
        "seconds": doc["run"]["seconds"],
    }


def weights(out: Path, doc: dict) -> dict[str, np.ndarray]:
    return {
        r["file"]: Explanation.from_json(
            (out / "images" / r["key"] / "explanation.json").read_text()
        ).weights
        for r in doc["rows"]
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's options (``bench/bench_gpu.py --dry`` checks its own with this)."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--images", type=int, default=60, help="images of the acceptance run")
    ap.add_argument("--throughput-images", type=int, default=24)
    ap.add_argument("--samples", type=int, default=500, help="N of the throughput runs")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray Serve variant")
    ap.add_argument(
        "--compare-fills",
        default="mean,blur",
        help="the acceptance set again under these fills (the default is inpaint)",
    )
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench/results"))
    ap.add_argument(
        "--work",
        help="folder for the generated images and every audit's files (default: a new "
        "temporary folder, kept)",
    )
    ap.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda", "auto"],
        help="where every audit runs (python -m limecraft audit --device)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """The command line; ``argv`` (default: ``sys.argv[1:]``) lets a test run it in-process."""
    args = parse_args(argv)
    dev = ["--device", args.device]
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="lc-bench-audit-"))
    result: dict = {
        "machine": f"{cpu_name()}, {os.cpu_count()} cores",
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": args.device,
    }

    # 1. the shortcut: the default settings, then the same images under other fills
    data = work / "acceptance"
    labels = {e["file"]: e for e in write_demo_mixed(data, args.images, ACCEPTANCE_SEED)}
    doc = audit(data / "images", data / "masks", work / "acc-audit", *dev)
    result["acceptance"] = {"seed": ACCEPTANCE_SEED, "settings": "defaults", **score(doc, labels)}
    print(json.dumps(result["acceptance"], indent=1), flush=True)
    result["acceptance_by_fill"] = {}
    for fill in filter(None, args.compare_fills.split(",")):
        d = audit(data / "images", data / "masks", work / f"acc-{fill}", "--fill", fill, *dev)
        result["acceptance_by_fill"][fill] = score(d, labels)
        print(fill, {k: result["acceptance_by_fill"][fill][k] for k in ("precision", "recall")})

    # 2. throughput, side by side
    data = work / "throughput"
    write_demo_mixed(data, args.throughput_images, THROUGHPUT_SEED)
    fixed = ["--samples", str(args.samples), "--early-stop", "none", *dev]
    variants = {
        "local, 1 image at a time": (["--in-flight", "1"], None),
        "local, 4 in flight (shared batches)": (["--in-flight", "4"], None),
    }
    cluster = None
    if not args.no_ray:
        from bench_ray import LocalCluster

        t = time.perf_counter()
        cluster = LocalCluster(args.replicas, cluster_cpus=2 * args.replicas)
        result["cluster_start_s"] = round(time.perf_counter() - t, 1)
        variants[f"Ray Serve, {args.replicas} replicas, 4 in flight"] = (
            ["--in-flight", "4"],
            cluster.url,
        )
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    reference: dict[str, np.ndarray] | None = None
    try:
        for r in range(args.rounds):
            for name, (flags, ray) in variants.items():
                out = work / f"tp-{r}-{len(runs[name])}-{abs(hash(name))}"
                d = audit(data / "images", data / "masks", out, *fixed, *flags, ray=ray)
                w = weights(out, d)
                if reference is None:
                    reference = w
                diff = max(float(np.abs(w[k] - reference[k]).max()) for k in reference)
                runs[name].append({**d["run"], "max_weight_diff": diff})
                print(f"round {r + 1}: {name}: {d['run']['images_per_minute']} images/min "
                      f"({d['run']['seconds']} s), max |Δweight| vs the first run {diff:.1e}",
                      flush=True)  # fmt: skip
    finally:
        if cluster is not None:
            cluster.close()
    result["throughput"] = {
        "images": args.throughput_images,
        "samples": args.samples,
        "rounds": args.rounds,
        "variants": {
            name: {
                "images_per_minute": [x["images_per_minute"] for x in rs],
                "median_images_per_minute": float(np.median([x["images_per_minute"] for x in rs])),
                "max_weight_diff": max(x["max_weight_diff"] for x in rs),
                **(
                    {"forward_passes": rs[-1].get("forward_passes"),
                     "shared_passes": rs[-1].get("shared_passes")}
                    if "forward_passes" in rs[-1]
                    else {}
                ),
            }
            for name, rs in runs.items()
        },
    }  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit.json").write_text(json.dumps(result, indent=1))
    md = markdown(result)
    (out / "audit.md").write_text(md)
    print(md)
    return 0


def markdown(r: dict) -> str:
    a, t = r["acceptance"], r["throughput"]
    lines = [
        f"Machine: {r['machine']}; torch {r['torch']} ({r['torch_threads']} threads); fp32.",
        "",
        f"**The shortcut**: {a['images']} fresh demo images ({a['conflict']} conflict, seed "
        f"{a['seed']}), default audit settings: the model follows the tag on "
        f"{a['follows_tag']}; the audit flags {a['flagged']}: precision **{a['precision']:.2f}**, "
        f"recall **{a['recall']:.2f}** (missed: {', '.join(a['missed']) or 'none'}; false "
        f"alarms: {', '.join(a['false_alarms']) or 'none'}); {a['seconds']} s.",
        f'Its headline: "{a["headline"]}"',
        "",
    ]
    if r.get("acceptance_by_fill"):
        lines += [
            "The same images under other fills (how a hidden region is filled):",
            "",
            "| fill | flagged | precision | recall | missed | seconds |",
            "|---|---|---|---|---|---|",
            f"| inpaint (the audit's default) | {a['flagged']} | {a['precision']:.2f} | "
            f"{a['recall']:.2f} | {len(a['missed'])} | {a['seconds']} |",
        ]
        for fill, f in r["acceptance_by_fill"].items():
            lines.append(
                f"| {fill} | {f['flagged']} | {f['precision']:.2f} | {f['recall']:.2f} | "
                f"{len(f['missed'])} | {f['seconds']} |"
            )
        lines.append("")
    lines += [
        f"**Throughput**: {t['images']} images, N={t['samples']} (early stop off), "
        f"{t['rounds']} rounds, variants alternating"
        + (
            f"; cluster started in {r['cluster_start_s']} s, before the rounds"
            if "cluster_start_s" in r
            else ""
        )
        + ".",
        "",
        "| variant | images/min (median) | each round | max \\|Δweight\\| vs the first run |",
        "|---|---|---|---|",
    ]
    for name, v in t["variants"].items():
        lines.append(
            f"| {name} | **{v['median_images_per_minute']:.0f}** | "
            f"{', '.join(f'{x:.0f}' for x in v['images_per_minute'])} | {v['max_weight_diff']:.1e} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
