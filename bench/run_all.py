"""All of LIMEcraft's speed benchmarks in one run: a Markdown table and a JSON file.

Every figure that matters is a ratio of two timings taken side by side in this one run, on the
same model, image, regions, fill (mean) and N, because these machines are noisy:

* LIMEcraft against ``lime_image.explain_instance`` (its best batch size of those tried) and
  ``captum.attr.Lime`` (with ``feature_mask``, its best ``perturbations_per_eval``);
* against the floor: N forward passes of the model at its best batch size, with nothing else;
* each speed option (bf16 autocast + channels_last, early stopping, deduplicated masks) against
  LIMEcraft's fp32 default, with its effect on the weights as Spearman's rank correlation;
* segmentation of a 12-megapixel photo at the working size (absolute seconds, target < 1 s);
* peak RSS of a resnet50 explanation at N=5000 against N=500 (each in a fresh process);
* the app's latency per interaction (bench/bench_app_latency.py).

Models: an almost free one (channel means through a linear layer; overhead dominates), the demo
model, and resnet18 and resnet50 with random weights (timing only). Image: scikit-image's
chelsea at 224x224; regions: lime's default quickshift.

    python bench/run_all.py                       # everything (about 30 min on 2 CPU cores)
    python bench/run_all.py --models free,demo --skip memory,app --samples 300   # a quick look

Writes bench/results/run_all.json and bench/results/run_all.md, and puts the table into
bench/README.md between its ``results`` markers.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import ROOT, chelsea, median_time, spearman  # first: puts the repo on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import subprocess
import time
import warnings
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from skimage import data, transform

import limecraft_core as lc

MODELS = ("free", "demo", "resnet18", "resnet50")
PARTS = ("models", "segmentation", "memory", "app")


def make_classifier(name: str, device: str, **kw: Any) -> lc.Classifier:
    """The model under test as LIMEcraft's Classifier (random weights for the resnets)."""
    if name == "free":
        # bench_engine's signal-everywhere model at torch's default scale: each channel's mean
        # and mean square through a linear layer (the channel means alone do not move under the
        # mean fill: each hidden region takes its own mean colour)
        from bench_engine import ChannelMoments

        torch.manual_seed(0)
        return lc.Classifier(ChannelMoments(), input_size=224, device=device, name=name, **kw)
    if name == "demo":
        from models.registry import load_classifier

        return load_classifier("demo", device=device, **kw)
    import torchvision

    torch.manual_seed(0)
    module = getattr(torchvision.models, name)(weights=None)
    return lc.Classifier(
        module, input_size=224, normalize="imagenet", device=device, name=name, **kw
    )


def bench_model(name: str, args, image: np.ndarray, segments: np.ndarray) -> dict[str, Any]:
    """One model: lime, captum, the floor and LIMEcraft with each option, side by side.

    Every variant runs once per round, round after round (round-robin), so that a slow spell of
    the machine hits all of them alike; each figure is the median over the rounds.
    """
    from captum._utils.models.linear_model import SkLearnRidge
    from captum.attr import Lime
    from lime import lime_image

    device = lc.resolve_device(args.device)
    n = args.samples
    heavy = name in ("resnet18", "resnet50")
    rounds = args.heavy_repeats if heavy else args.repeats
    clf = make_classifier(name, device.type)
    fast = make_classifier(name, device.type, precision="bf16", channels_last=True)
    img_f = image.astype(np.float32) / 255.0
    x1 = torch.from_numpy(img_f.transpose(2, 0, 1).copy())[None].to(device)
    for c in (clf, fast):
        c(x1.repeat(16, 1, 1, 1))  # warm-up: first-call allocations, kernels, thread pools
    top = int(torch.argmax(clf(x1)[0]))
    k = int(segments.max()) + 1
    h, w = segments.shape
    rows_, cols_ = np.mgrid[0:h, 0:w]
    hand = ((rows_ * 2 // h) * 4 + cols_ * 4 // w).astype(np.int32)  # 8 drawn-like regions

    def explain(c=clf, segs=segments, **kw):
        return lc.explain(
            image,
            c,
            segments=segs,
            samples=n,
            fill="mean",
            seed=0,
            target=top,
            compute_deltas=False,
            **kw,
        )

    def classifier_fn(batch: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(np.ascontiguousarray(batch.transpose(0, 3, 1, 2), np.float32))
        return torch.softmax(clf(x.to(device)), dim=1).cpu().numpy()

    def run_lime(bs: int):
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")  # lime's tqdm bar and its sklearn warnings
            return lime_image.LimeImageExplainer(random_state=0).explain_instance(
                img_f.astype(np.float64),
                classifier_fn,
                labels=(top,),
                top_labels=None,
                hide_color=None,
                num_samples=n,
                batch_size=bs,
                segmentation_fn=lambda _: segments,
                random_seed=0,
            )

    fill = lc.make_fill(img_f, segments, "mean")
    base = torch.from_numpy(fill.transpose(2, 0, 1).copy())[None].to(device)
    fmask = torch.from_numpy(segments.astype(np.int64))[None, None].to(device)
    captum_lime = Lime(
        lambda x: torch.softmax(clf(x), dim=1), interpretable_model=SkLearnRidge(alpha=1.0)
    )

    def run_captum(ppe: int):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return captum_lime.attribute(
                x1,
                baselines=base,
                target=top,
                feature_mask=fmask,
                n_samples=n,
                perturbations_per_eval=ppe,
            )

    # The floor's batch is already at the model's input size, so that it pays no resize.
    x_in = x1 if clf.input_size is None else F.interpolate(x1, size=clf.input_size, mode="area")

    def run_floor(bs: int):
        batch = x_in.repeat(bs, 1, 1, 1)
        return [clf(batch) for _ in range(0, n, bs)]

    variants: dict[str, Any] = {"limecraft (fp32)": explain}
    for bs in args.floor_batch_sizes:
        variants[f"floor@{bs}"] = lambda bs=bs: run_floor(bs)
    for bs in args.heavy_lime_batch_sizes if heavy else args.lime_batch_sizes:
        variants[f"lime@{bs}"] = lambda bs=bs: run_lime(bs)
    for ppe in args.heavy_captum_batch_sizes if heavy else args.captum_batch_sizes:
        variants[f"captum@{ppe}"] = lambda p=ppe: run_captum(p)
    if device.type == "cpu":
        variants["limecraft bf16 + channels_last"] = lambda: explain(c=fast)
    variants["limecraft early stop (W >= 0.9)"] = lambda: explain(early_stop=0.9)
    variants["limecraft, 8 drawn regions, no dedup"] = lambda: explain(segs=hand, dedup=False)
    variants["limecraft, 8 drawn regions, dedup"] = lambda: explain(segs=hand)

    times: dict[str, list[float]] = {v: [] for v in variants}
    outs: dict[str, Any] = {}
    for _ in range(rounds):
        for v, fn in variants.items():
            t, outs[v] = median_time(fn, 1)
            times[v].append(t)
    sec = {v: statistics.median(ts) for v, ts in times.items()}

    def best(prefix: str) -> tuple[int, float]:
        opts = {int(v.split("@")[1]): t for v, t in sec.items() if v.startswith(prefix + "@")}
        b = min(opts, key=opts.get)
        return b, opts[b]

    ours = outs["limecraft (fp32)"]
    t_ours = sec["limecraft (fp32)"]
    (bf, t_floor), (bl, t_lime), (bc, t_captum) = best("floor"), best("lime"), best("captum")
    rows: dict[str, dict[str, Any]] = {
        "limecraft (fp32)": {"seconds": t_ours},
        "floor: model only": {"seconds": t_floor, "batch_size": bf},
        "lime_image": {"seconds": t_lime, "batch_size": bl},
        "captum Lime": {"seconds": t_captum, "perturbations_per_eval": bc},
    }
    ratios = {
        "lime / limecraft": t_lime / t_ours,
        "captum / limecraft": t_captum / t_ours,
        "limecraft / floor": t_ours / t_floor,
        "lime overhead / limecraft overhead": (t_lime - t_floor) / max(t_ours - t_floor, 1e-9),
        "captum overhead / limecraft overhead": (t_captum - t_floor) / max(t_ours - t_floor, 1e-9),
    }
    v = "limecraft bf16 + channels_last"
    if v in sec:
        rows[v] = {"seconds": sec[v], "spearman_vs_fp32": spearman(outs[v].weights, ours.weights)}
        ratios["bf16 + channels_last speedup"] = t_ours / sec[v]
    v = "limecraft early stop (W >= 0.9)"
    rows[v] = {
        "seconds": sec[v],
        "spearman_vs_fp32": spearman(outs[v].weights, ours.weights),
        "samples_used": outs[v].run.samples_used,
    }
    ratios["early stop speedup"] = t_ours / sec[v]
    nd, dd = "limecraft, 8 drawn regions, no dedup", "limecraft, 8 drawn regions, dedup"
    rows[nd] = {"seconds": sec[nd]}
    rows[dd] = {
        "seconds": sec[dd],
        "spearman_vs_no_dedup": spearman(outs[dd].weights, outs[nd].weights),
        "max_abs_diff_vs_no_dedup": float(np.max(np.abs(outs[dd].weights - outs[nd].weights))),
        "model_passes": outs[dd].run.model_passes,
    }
    ratios["dedup speedup (8 regions)"] = sec[nd] / sec[dd]
    return {
        "model": name,
        "device": device.type,
        "samples": n,
        "regions": k,
        "rounds": rounds,
        "rows": rows,
        "ratios": ratios,
        "seconds_by_variant": sec,
    }


def bench_segmentation(repeats: int) -> dict[str, Any]:
    """A 12-megapixel photo (4000x3000) at each method's working size."""
    img = (transform.resize(data.astronaut(), (3000, 4000), order=1) * 255).astype(np.uint8)
    out: dict[str, Any] = {}
    for method in lc.SEGMENTERS:
        t, labels = median_time(lambda m=method: lc.segment(img, m), repeats)
        out[method] = {
            "seconds": t,
            "regions": int(labels.max()) + 1,
            "full_resolution": list(labels.shape) == [3000, 4000],
        }
    mask = np.zeros(img.shape[:2], bool)
    mask[500:1500, 1000:2500] = True
    for outer in ("slic", "quickshift"):
        t, r = median_time(lambda o=outer: lc.compose_regions(img, mask, outer_method=o), repeats)
        out[f"compose: 1 drawn region + {outer}"] = {
            "seconds": t,
            "regions": r.n_regions,
            "full_resolution": list(r.labels.shape) == [3000, 4000],
        }
    return out


def memory_child(samples: int, device: str) -> None:
    """Run in a fresh process: peak RSS of one resnet50 explanation of N samples."""
    clf = make_classifier("resnet50", device)
    image = chelsea()
    segments = lc.segment(image, "quickshift", working_size=None)
    before = _proc_status_mb("VmHWM")
    t = time.perf_counter()
    lc.explain(image, clf, segments=segments, samples=samples, seed=0, compute_deltas=False)
    print(
        json.dumps(
            {
                "samples": samples,
                # VmHWM: this process's own peak RSS. (getrusage's ru_maxrss would carry the
                # parent's peak over execve, and the parent ran lime and captum.)
                "peak_rss_mb": _proc_status_mb("VmHWM"),
                "peak_before_explain_mb": before,
                "seconds": time.perf_counter() - t,
            }
        )
    )


def _proc_status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def bench_memory(sizes: list[int], device: str) -> dict[str, Any]:
    out = {}
    for n in sizes:
        proc = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(n), "--device", device],
            capture_output=True,
            text=True,
            check=True,
        )
        out[str(n)] = json.loads(proc.stdout.strip().splitlines()[-1])
    small, large = out[str(min(sizes))], out[str(max(sizes))]
    out["growth_mb"] = large["peak_rss_mb"] - small["peak_rss_mb"]
    return out


def bench_app() -> dict[str, Any]:
    path = ROOT / "bench" / "results" / "app_latency.json"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_app_latency.py"), "--json", str(path)],
        check=True,
        capture_output=True,
    )
    return json.loads(path.read_text())


def markdown(res: dict[str, Any]) -> str:
    lines = [
        f"Machine: {res['machine']}; torch {res['torch']}, {res['threads']} threads, "
        f"device {res['device']}. N={res['samples']}, 224x224 chelsea, lime's quickshift "
        "regions, mean fill. Each ratio compares timings taken side by side in this run.",
        "",
    ]
    if res.get("models"):
        lines += [
            "| model | K | lime / LIMEcraft | captum / LIMEcraft | LIMEcraft / floor "
            "| lime overhead / ours | captum overhead / ours |",
            "|---|---|---|---|---|---|---|",
        ]
        for m in res["models"]:
            r = m["ratios"]
            below = r["limecraft / floor"] <= 1.0  # no overhead left to divide by
            lines.append(
                f"| {m['model']} | {m['regions']} | {r['lime / limecraft']:.1f}x "
                f"| {r['captum / limecraft']:.1f}x | {r['limecraft / floor']:.3f}x "
                + (
                    "| (ours at or below the floor) | (ours at or below the floor) |"
                    if below
                    else f"| {r['lime overhead / limecraft overhead']:.1f}x "
                    f"| {r['captum overhead / limecraft overhead']:.1f}x |"
                )
            )
        lines += [
            "",
            "Options, each against LIMEcraft's fp32 default on the same model "
            "(Spearman: rank correlation of the weights with the default's):",
            "",
            "| model | bf16 + channels_last | its Spearman | early stop (W >= 0.9) "
            "| its Spearman, samples used | dedup, 8 regions | its max weight change, passes |",
            "|---|---|---|---|---|---|---|",
        ]
        for m in res["models"]:
            r, rows = m["ratios"], m["rows"]
            bf = rows.get("limecraft bf16 + channels_last")
            es = rows["limecraft early stop (W >= 0.9)"]
            dd = rows["limecraft, 8 drawn regions, dedup"]
            lines.append(
                f"| {m['model']} "
                + (
                    f"| {r['bf16 + channels_last speedup']:.2f}x | {bf['spearman_vs_fp32']:.3f} "
                    if bf
                    else "| n/a | n/a "
                )
                + f"| {r['early stop speedup']:.2f}x | {es['spearman_vs_fp32']:.3f}, "
                f"{es['samples_used']} | {r['dedup speedup (8 regions)']:.1f}x "
                f"| {dd['max_abs_diff_vs_no_dedup']:.1e}, {dd['model_passes']} |"
            )
        lines += ["", "Seconds (for scale only; compare the ratios):", ""]
        lines += ["| model | " + " | ".join(res["models"][0]["rows"]) + " |"]
        lines += ["|---" * (1 + len(res["models"][0]["rows"])) + "|"]
        for m in res["models"]:
            lines.append(
                f"| {m['model']} | "
                + " | ".join(f"{v['seconds']:.3f}" for v in m["rows"].values())
                + " |"
            )
    if res.get("segmentation"):
        lines += ["", "12-megapixel photo (4000x3000), labels at full resolution:", ""]
        lines += ["| method | seconds | regions | full resolution |", "|---|---|---|---|"]
        for k, v in res["segmentation"].items():
            lines.append(f"| {k} | {v['seconds']:.2f} | {v['regions']} | {v['full_resolution']} |")
    if res.get("memory"):
        mem = res["memory"]
        sizes = sorted(int(k) for k in mem if k.isdigit())
        lines += [
            "",
            "Peak RSS, resnet50 fp32, one explanation in a fresh process: "
            + ", ".join(f"N={n}: {mem[str(n)]['peak_rss_mb']:.0f} MB" for n in sizes)
            + f"; growth {mem['growth_mb']:.0f} MB (target <= 200 MB).",
        ]
    if res.get("app"):
        lines += ["", "App latency per interaction (512 px image, budget 0.5 s):", ""]
        lines += ["| interaction | median s | max s |", "|---|---|---|"]
        for k, v in res["app"].items():
            if isinstance(v, dict) and "median_s" in v:
                lines.append(f"| {k} | {v['median_s']:.3f} | {v['max_s']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """The command line; ``argv`` (default: ``sys.argv[1:]``) lets a test run it in-process."""
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3, help="rounds for the cheap models")
    ap.add_argument("--heavy-repeats", type=int, default=1, help="rounds for the resnets")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--skip", default="", help=f"comma-separated parts of {PARTS}")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--lime-batch-sizes", default="10,100,1000")
    ap.add_argument("--captum-batch-sizes", default="16,64,256")
    ap.add_argument("--heavy-lime-batch-sizes", default="10,100", help="for the resnets")
    ap.add_argument("--heavy-captum-batch-sizes", default="16,64", help="for the resnets")
    ap.add_argument("--floor-batch-sizes", default="16,64")
    ap.add_argument("--memory-sizes", default="500,5000")
    ap.add_argument(
        "--memory-from",
        help="take the memory figures from this earlier run_all JSON instead of measuring "
        "(they are absolute, not timings, so the machine's load does not change them)",
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--no-readme", action="store_true", help="leave bench/README.md alone")
    ap.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_child:
        memory_child(args.memory_child, args.device)
        return 0
    for key in (
        "lime_batch_sizes",
        "captum_batch_sizes",
        "heavy_lime_batch_sizes",
        "heavy_captum_batch_sizes",
        "floor_batch_sizes",
    ):
        setattr(args, key, [int(v) for v in getattr(args, key).split(",")])
    skip = {s for s in args.skip.split(",") if s}
    unknown = skip - set(PARTS)
    models = [m for m in args.models.split(",") if m]
    if unknown or set(models) - set(MODELS):
        ap.error(f"--skip takes {PARTS}; --models takes {MODELS}")
    device = lc.resolve_device(args.device).type
    res: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs"
        + (f", {torch.cuda.get_device_name()}" if device == "cuda" else ""),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": device,
        "samples": args.samples,
        "command": "python bench/run_all.py " + " ".join(argv),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    image = chelsea()
    segments = lc.segment(image, "quickshift", working_size=None)  # lime's default regions
    if "models" not in skip:
        res["models"] = []
        for m in models:
            print(f"[run_all] {m} ...", file=sys.stderr, flush=True)
            res["models"].append(bench_model(m, args, image, segments))
    if "segmentation" not in skip:
        print("[run_all] segmentation ...", file=sys.stderr, flush=True)
        res["segmentation"] = bench_segmentation(args.repeats)
    if args.memory_from:
        res["memory"] = json.loads(Path(args.memory_from).read_text())["memory"]
        res["memory"]["from"] = args.memory_from
    elif "memory" not in skip:
        print("[run_all] memory ...", file=sys.stderr, flush=True)
        res["memory"] = bench_memory([int(v) for v in args.memory_sizes.split(",")], args.device)
    if "app" not in skip:
        print("[run_all] app latency ...", file=sys.stderr, flush=True)
        res["app"] = bench_app()
    table = markdown(res)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "run_all" if device == "cpu" else f"run_all_{device}"
    (out / f"{stem}.json").write_text(json.dumps(res, indent=2))
    (out / f"{stem}.md").write_text(f"Command: `{res['command']}` ({res['date']})\n\n" + table)
    readme = ROOT / "bench" / "README.md"
    if not args.no_readme and readme.exists():
        text = readme.read_text()
        start, end = f"<!-- {stem}:start -->", f"<!-- {stem}:end -->"
        if start in text and end in text:
            head, rest = text.split(start, 1)
            _, tail = rest.split(end, 1)
            body = f"Command: `{res['command']}` ({res['date']})\n\n{table}"
            readme.write_text(f"{head}{start}\n{body}{end}{tail}")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
