"""Fast by default: today's defaults, the new defaults and an fp32 reference, side by side.

For each architecture (random weights, as no weights can be downloaded here) and each real
photo (scikit-image's samples), over the same SLIC regions (about 40 asked for):

* **today's defaults**: what the app ran before (N=1000, 3 independent repeats, fp32, no
  channels_last, no early stop), timed;
* **new defaults**: :func:`limecraft_core.explain` with every setting at its default, on the
  classifier :func:`models.registry.load_classifier` gives (precision "auto": bf16 on a CPU that
  does it natively, when a first batch agrees with fp32; channels_last; early stop on; the
  verdict from one sample), timed from a fresh classifier, so the bf16 check is included;
* **the reference**: fp32, N=1000, 5 independent repeats, mean weights. It runs after today's
  defaults with the same model and seeds, so its first 3 repeats are the very masks today's
  run scored: those scores are reused through the engine's mask memo (exact: same masks, same
  fp32 model), and only repeats 4 and 5 and the hidden/kept deltas are scored again.

Agreement with the reference: the overlap of the top-5 regions by |weight| (share of the
reference's top 5 found in the run's top 5) and Spearman's rank correlation of the weights over
the reference's top-10 regions.

**The honesty check.** The new defaults' verdict comes from resampling one sample. It is
compared with the verdict of 5 fully independent repeats *at the same sample size*: the
reference's 5 streams (fp32) cut to the samples the new run used. The agreement rate is given at
each run's own stopping point, and over every size 200, 300, ..., 1000 of every case (the
one-stream verdict of the first stream's prefix against the 5 streams' prefixes): no extra model
pass, just refits.

The runtimes: throughput of the model alone (batch 16, 224 px) in torch eager fp32, eager fp32
channels_last, eager bf16 autocast + channels_last, torch.compile of the latter (with its compile
time) and onnxruntime fp32 (the model exported with ``torch.onnx.export``), to show which is the
fastest here and why the default is what it is.

    python bench/bench_fast.py                     # 2 models x 3 photos + runtimes (~80 min)
    python bench/bench_fast.py --archs resnet50 --images chelsea --skip runtimes   # a look
    python bench/bench_fast.py --archs "" --out /tmp/rt   # the runtimes only (2 min)

Writes bench/results/fast.json and bench/results/fast.md.
"""

from __future__ import annotations

from pathlib import Path

from _common import ROOT, spearman, timed  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import contextlib
import json
import os
import platform
import tempfile
import time
import warnings
from typing import Any

import numpy as np
import torch
from skimage import data

import limecraft_core as lc
from limecraft_core import _stages as stages
from limecraft_core import trust
from limecraft_core._validate import as_float_image
from limecraft_core.classifier import cpu_has_native_bf16
from limecraft_core.surrogate import cosine_distance, fit_ridge, make_kernel
from models.registry import load_classifier

ARCHS = ("resnet50", "convnext_tiny")
IMAGES = ("chelsea", "astronaut", "coffee")
N_SEGMENTS = 40
GOAL_S = 20.0
SIZES = tuple(range(200, 1001, 100))  # the honesty check across sizes


def photo(name: str) -> np.ndarray:
    return getattr(data, name)()[..., :3]


def classifier(arch: str, **kw: Any) -> lc.Classifier:
    """The architecture with random weights, the same weights every time (seeded)."""
    torch.manual_seed(0)
    return load_classifier(arch, pretrained=False, device="cpu", **kw)


def agreement(w: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(top-5 overlap, Spearman over the reference's top 10), both by |weight|."""
    top5 = set(np.argsort(-np.abs(w), kind="stable")[:5].tolist())
    ref5 = set(np.argsort(-np.abs(ref), kind="stable")[:5].tolist())
    idx = np.argsort(-np.abs(ref), kind="stable")[:10]
    return len(top5 & ref5) / 5, spearman(w[idx], ref[idx])


def honesty(
    ref_cfg: lc.ExplainConfig,
    regions: lc.Regions,
    memo: lc.MaskCache,
    target: int,
    n_stop: int,
) -> dict[str, Any]:
    """The one-stream verdict against 5 independent repeats at equal sample sizes, from the
    reference's 5 fp32 streams (scores from the memo: no model pass)."""
    plan = stages.plan_samples(regions.n_regions, ref_cfg)
    streams = [plan.main, *plan.repeats]
    kern = make_kernel(ref_cfg.surrogate.kernel_width)
    ys = []
    for m in streams:
        _, _, keys = memo.missing(m.masks)
        ys.append(torch.softmax(memo.gather(keys), 1)[:, target].double().numpy())

    def fits(n: int) -> np.ndarray:
        ws = []
        for m, y in zip(streams, ys, strict=True):
            sw = kern(cosine_distance(m.masks[:n])) * m.weights[:n]
            ws.append(fit_ridge(m.masks[:n], y[:n, None], sw, alpha=1.0).coef[0])
        return np.stack(ws)

    def at(n: int) -> tuple[str, str]:
        five = trust.stability(fits(n)).verdict
        m0 = streams[0]
        sw0 = kern(cosine_distance(m0.masks[:n])) * m0.weights[:n]
        one = stages.stream_verdict(m0.masks[:n], ys[0][:n], sw0, ref_cfg).verdict
        return one, five

    sizes = [n for n in SIZES if n <= len(streams[0].masks)]
    ref = fits(len(streams[0].masks)).mean(axis=0)
    return {
        "at_stop": at(n_stop),
        "sizes": {n: at(n) for n in sizes},
        # each fp32 stream's first n samples against the reference: how N keeps agreement
        "agreement_by_size": {
            n: [agreement(w, ref) for w in fits(n)] for n in (100, *sizes) if n <= sizes[-1]
        },
    }


def run_case(arch: str, name: str, skip_today: bool, n_ref: int = 1000) -> dict[str, Any]:
    img = photo(name)
    regions, _ = stages.prepare_regions(
        as_float_image(img),
        lc.ExplainConfig.from_flat(segmentation="slic", n_segments=N_SEGMENTS).segmentation,
    )
    old = classifier(arch, precision="fp32", channels_last=False)
    memo = lc.MaskCache()
    today_kw = dict(samples=n_ref, repeats=3, early_stop=None, precision="fp32")
    out: dict[str, Any] = {"model": arch, "image": name, "regions": regions.n_regions}
    if not skip_today:
        today, t_today = timed(
            lambda: lc.explain(img, old, segments=regions, memo=memo, **today_kw)
        )
        out["today"] = {
            "seconds": t_today,
            "passes": today.run.model_passes,
            "verdict": today.trust.stability.verdict,
            "samples": today.run.samples_used,
        }
    ref_cfg = lc.ExplainConfig.from_flat(
        segmentation="given", samples=n_ref, repeats=5, early_stop=None, precision="fp32"
    )
    ref, t_ref = timed(lambda: lc.explain(img, old, segments=regions, memo=memo, config=ref_cfg))
    w_ref = np.asarray(ref.trust.stability.mean)
    out["reference"] = {
        "seconds": t_ref,
        "passes_new": ref.run.model_passes,
        "rows": 5 * n_ref + 2 * regions.n_regions,
        "verdict": ref.trust.stability.verdict,
        "target": ref.target,
        "weights": w_ref.tolist(),
    }
    new_clf = classifier(arch)  # every setting at its default, as the app and the CLI
    first: dict[str, float] = {}
    t0 = time.perf_counter()

    def seen(p: lc.Partial) -> None:  # when the app shows the weights and the verdict
        first.setdefault("first_s", time.perf_counter() - t0)
        if p.final:
            first["final_s"] = time.perf_counter() - t0

    new, t_new = timed(lambda: lc.explain(img, new_clf, segments=regions, partial=seen))
    t5, sp = agreement(new.weights, w_ref) if new.target == ref.target else (float("nan"),) * 2
    out["new"] = {
        "seconds": t_new,
        "first_weights_s": first.get("first_s"),
        "weights_and_verdict_s": first.get("final_s"),
        "passes": new.run.model_passes,
        "samples": new.run.samples_used,
        "verdict": new.trust.stability.verdict,
        "reason": new.trust.stability.reason,
        "stable_share": new.trust.stability.stable_share,
        "precision": new.run.precision,
        "precision_reason": new.run.precision_reason,
        "timings": new.timings,
        "target": new.target,
        "top5_overlap": t5,
        "spearman_top10": sp,
        "weights": new.weights.tolist(),
    }
    out["honesty"] = honesty(ref_cfg, regions, memo, ref.target, new.run.samples_used)
    print(json.dumps({k: out[k] for k in ("model", "image", "new")}, default=str)[:600], flush=True)
    return out


# ----------------------------------------------------------------------------- runtimes


def runtimes(arch: str = "resnet50", batch: int = 16, reps: int = 3) -> list[dict[str, Any]]:
    """Images per second of the model alone in each CPU runtime, side by side."""
    torch.manual_seed(0)
    import torchvision.models as tvm

    x = torch.rand(batch, 3, 224, 224)
    rows = []

    def rate(fn: Any) -> float:
        with torch.inference_mode():
            fn(x)
            t = time.perf_counter()
            for _ in range(reps):
                fn(x)
        return reps * batch / (time.perf_counter() - t)

    def net(cl: bool) -> torch.nn.Module:
        torch.manual_seed(0)
        m = getattr(tvm, arch)(weights=None).eval()
        return m.to(memory_format=torch.channels_last) if cl else m

    def eager(m: torch.nn.Module, cl: bool, bf16: bool) -> Any:
        def f(b: torch.Tensor) -> torch.Tensor:
            b = b.contiguous(memory_format=torch.channels_last) if cl else b
            ctx = torch.autocast("cpu", torch.bfloat16) if bf16 else contextlib.nullcontext()
            with ctx:
                return m(b)

        return f

    for label, cl, bf16 in (
        ("torch eager fp32", False, False),
        ("torch eager fp32 channels_last", True, False),
        ("torch eager bf16 channels_last", True, True),
    ):
        if bf16 and not cpu_has_native_bf16():
            rows.append({"runtime": label, "img_s": None, "note": "no native bf16 on this CPU"})
            continue
        rows.append({"runtime": label, "img_s": rate(eager(net(cl), cl, bf16))})
    try:
        m = net(True)
        t = time.perf_counter()
        cm = torch.compile(m)
        f = eager(cm, True, cpu_has_native_bf16())
        with torch.inference_mode():
            f(x)
        compile_s = time.perf_counter() - t
        rows.append(
            {
                "runtime": "torch.compile (inductor) of the fastest eager",
                "img_s": rate(f),
                "note": f"compile and first batch {compile_s:.0f} s, paid once per model",
            }
        )
    except Exception as e:
        rows.append({"runtime": "torch.compile", "img_s": None, "note": f"failed: {e}"[:120]})
    try:
        import onnxruntime as ort

        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = Path(d) / "m.onnx"
            t = time.perf_counter()
            torch.onnx.export(
                net(False),
                (x[:1],),
                str(path),
                input_names=["x"],
                output_names=["y"],
                dynamic_axes={"x": {0: "b"}, "y": {0: "b"}},
                dynamo=False,
            )
            so = ort.SessionOptions()
            sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            export_s = time.perf_counter() - t
            xn = x.numpy()
            rows.append(
                {
                    "runtime": "onnxruntime fp32",
                    "img_s": rate(lambda b: sess.run(None, {"x": xn})),
                    "note": f"export and session {export_s:.0f} s",
                }
            )
    except Exception as e:
        rows.append({"runtime": "onnxruntime fp32", "img_s": None, "note": f"failed: {e}"[:120]})
    for r in rows:
        print(f"  {r['runtime']}: {r['img_s'] or 0:.1f} img/s {r.get('note', '')}", flush=True)
    return rows


# ----------------------------------------------------------------------------- report


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if x is None or x != x else fmt.format(x)


def markdown(cases: list[dict[str, Any]], rts: list[dict[str, Any]], meta: dict) -> str:
    if not cases:
        return _runtime_rows(rts)
    lines = [
        f"Machine: {meta['cpu']}, {meta['cores']} cores; native bf16: {meta['bf16']}; "
        f"torch {meta['torch']}. Random weights; SLIC asked for {N_SEGMENTS} regions.",
        "",
        "| model | image | today's defaults | new defaults | the reference | agreement with the "
        "reference | samples and passes |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        n, r, t = c["new"], c["reference"], c.get("today")
        today = f"{t['seconds']:.0f} s, {t['verdict']}" if t else "—"
        lines.append(
            f"| {c['model']} | {c['image']} ({c['regions']} regions) | {today} | "
            f"**{n['seconds']:.1f} s** (weights and verdict at {_f(n['weights_and_verdict_s'], '{:.1f}')} s, "
            f"first weights at {_f(n['first_weights_s'], '{:.1f}')} s), {n['verdict']}, {n['precision']} | "
            f"{r['verdict']} ({r['passes_new']} of {r['rows']} passes new, {r['seconds']:.0f} s) | "
            f"top-5 {_f(n['top5_overlap'])}, Spearman {_f(n['spearman_top10'])} | "
            f"new: {n['samples']} samples, {n['passes']} passes"
            + (f"; today: {t['samples']} × 3, {t['passes']} passes" if t else "")
            + " |"
        )
    # the new run's own verdict (its precision, at its stop) against 5 fp32 repeats cut there
    stops = [(c["new"]["verdict"], c["honesty"]["at_stop"][1]) for c in cases]
    sizes = [v for c in cases for v in c["honesty"]["sizes"].values()]
    agree = sum(a == b for a, b in stops)
    agree_all = sum(a == b for a, b in sizes)
    lines += [
        "",
        f"**Honesty check**: the new defaults' verdict (one sample, resampled) agrees with the "
        f"verdict of 5 independent fp32 repeats of the same size in **{agree}/{len(stops)}** "
        f"runs ("
        + "; ".join(
            f"{c['model']}/{c['image']}: {a} vs {b}" for c, (a, b) in zip(cases, stops, strict=True)
        )
        + f"), and the one-sample verdict in **{agree_all}/{len(sizes)}** (model, photo, size) "
        f"cases over sizes {SIZES[0]}–{SIZES[-1]} (the first fp32 stream's prefix against the 5 "
        "streams' prefixes).",
    ]
    disagree = [
        f"{c['model']}/{c['image']}@{n}: one sample {a}, 5 repeats {b}"
        for c in cases
        for n, (a, b) in c["honesty"]["sizes"].items()
        if a != b
    ]
    if disagree:
        lines.append("Disagreements: " + "; ".join(disagree) + ".")
    return "\n".join(lines) + "\n" + ("\n" + _runtime_rows(rts) if rts else "")


def _runtime_rows(rts: list[dict[str, Any]]) -> str:
    lines = ["| runtime (resnet50, batch 16, 224 px) | images/s | note |", "|---|---|---|"]
    lines += [f"| {r['runtime']} | {_f(r['img_s'], '{:.1f}')} | {r.get('note', '')} |" for r in rts]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--archs", default=",".join(ARCHS))
    ap.add_argument("--images", default=",".join(IMAGES))
    ap.add_argument("--skip", default="", help="comma-separated: today, runtimes")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "fast"))
    ap.add_argument(
        "--ref-samples", type=int, default=1000, help="N of today's defaults and the reference"
    )
    ap.add_argument(
        "--report-only", action="store_true", help="rewrite the .md from the .json of a run"
    )
    a = ap.parse_args(argv)
    if a.report_only:
        saved = json.loads(Path(a.out).with_suffix(".json").read_text())
        md = markdown(saved["cases"], saved["runtimes"], saved["meta"])
        Path(a.out).with_suffix(".md").write_text(md)
        print(md)
        return 0
    skip = set(filter(None, a.skip.split(",")))
    meta = {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "bf16": cpu_has_native_bf16(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    with contextlib.suppress(OSError):
        meta["cpu"] = next(
            line.split(":", 1)[1].strip()
            for line in open("/proc/cpuinfo")
            if line.startswith("model name")
        )
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    cases: list[dict[str, Any]] = []
    rts: list[dict[str, Any]] = []

    def save() -> str:  # after every part, so a long run can be read (or cut) as it goes
        md = markdown(cases, rts, meta)
        out.with_suffix(".json").write_text(
            json.dumps({"meta": meta, "cases": cases, "runtimes": rts}, indent=1, default=str)
        )
        out.with_suffix(".md").write_text(md)
        return md

    if "runtimes" not in skip:  # first: the model alone, before the long explanations
        rts = runtimes()
        save()
    for arch in filter(None, a.archs.split(",")):
        for name in filter(None, a.images.split(",")):
            print(f"{arch} / {name} …", flush=True)
            cases.append(run_case(arch, name, "today" in skip, a.ref_samples))
            save()
    print(save())
    resnet = [c for c in cases if c["model"] == "resnet50"]
    met = all(
        c["new"]["seconds"] <= GOAL_S
        and c["new"]["top5_overlap"] >= 0.8
        and c["new"]["spearman_top10"] >= 0.9
        for c in resnet
    )
    print(
        f"resnet50 goal (≤ {GOAL_S:.0f} s, top-5 ≥ 0.8, Spearman ≥ 0.9): {'met' if met else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
