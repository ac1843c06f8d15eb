"""Where the firm lead's threshold and the sample cap come from: the calibration's cases, judged
by the one-sample verdict for several leads and caps, against the same cached references.

Each case of ``bench/bench_calibration.py`` is explained once, every setting at its default
except the cap (``--max-cap``, early stopping off). Its main sample (the masks, the model's
outputs and the surrogate's weights of each row) is kept. For each lead z and cap, the early
stop is then replayed on prefixes of that sample, at the sizes the engine checks
(:attr:`~limecraft_core.config.SamplingConfig.step` for that cap, rounded up to the run's batch
size, from the first check size on, skipping the checks that cannot pass as the engine does,
:func:`limecraft_core.trust.next_check` with the lead tried, and screening each check first by
:func:`limecraft_core.trust.quick_lead` against half that lead): it stops at the first "stable" verdict of
:func:`limecraft_core.trust.stream_stability` with that lead, else at the cap. The verdict
there is judged against the case's cached 5-repeat reference by the calibration's own rule
(:func:`bench_calibration.judge`). The rows of a prefix are exactly the rows an early-stopped
run of that size scores (the masks are drawn in order from one seeded generator), so this
costs one run per case instead of one per lead and cap. Times are scaled from each case's
run: seconds per sample times the samples used.

Needs the references (run ``bench/bench_calibration.py`` first: they are read, never computed).

    python bench/sweep_lead.py                        # about 10 min on 2 cores
    python bench/sweep_lead.py --only demo --leads 0,3.5 --caps 800,1600   # a quick look

Writes bench/results/lead_sweep.json and lead_sweep.md.
"""

from __future__ import annotations

import os
from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)
os.environ.setdefault("LIMECRAFT_CPU_BF16", "0")  # as bench_calibration: fp32 throughout

import argparse
import json
import platform
import time
from typing import Any

import bench_calibration as cal
import numpy as np

import limecraft_core as lc
from limecraft_core import trust
from limecraft_core._stages.plan import EARLY_STOP_MIN_SAMPLES, EARLY_STOP_SAMPLES_PER_REGION
from limecraft_core.config import SamplingConfig

RESULTS = ROOT / "bench" / "results"


def main_sample(case: cal.Case, clf: lc.Classifier, n: int) -> dict[str, Any]:
    """One run of ``case`` at N = ``n``, early stop off: its main sample's rows (taken from the
    one-sample verdict's own call, which gets exactly them), the run's batch size and time."""
    seen: list[tuple] = []
    real = trust.stream_stability

    def keep(masks, y, sw, alpha, **kw):  # the engine calls it once, on the whole sample
        seen.append((np.array(masks), np.array(y), np.array(sw), alpha, kw.get("seed", 0)))
        return real(masks, y, sw, alpha, **kw)

    trust.stream_stability = keep
    try:
        t0 = time.perf_counter()
        ex = lc.explain(
            case.image(),
            clf,
            regions_mask=case.regions_mask(),
            **case.settings,
            samples=n,
            early_stop=None,
        )
        seconds = time.perf_counter() - t0
    finally:
        trust.stream_stability = real
    masks, y, sw, alpha, seed = seen[-1]
    return {
        "masks": masks,
        "y": y,
        "sw": sw,
        "alpha": alpha,
        "seed": seed,
        "batch": ex.run.batch_size,
        "per_sample": seconds / n,
        "row": {
            "case": case.id,
            "model": case.model,
            "regions": ex.n_regions,
            "target": ex.class_labels[0],
            "target_index": int(ex.target),
        },
    }


def first_and_step(cap: int, batch: int, k: int) -> tuple[int, int]:
    """The first size the engine judges and its step, for the cap ``cap``."""
    step = SamplingConfig(samples=cap).step
    step = min(-(-step // batch) * batch, cap)
    first = max(EARLY_STOP_MIN_SAMPLES, EARLY_STOP_SAMPLES_PER_REGION * k)
    return -(-first // step) * step, step


def replay(s: dict[str, Any], lead: float, cap: int) -> dict[str, Any]:
    """The default run's verdict with the lead ``lead`` and the cap ``cap``, replayed at the
    sizes the engine judges: from the first check size on, each next one by
    :func:`limecraft_core.trust.next_check` (for the lead tried), and the cap."""
    k = s["masks"].shape[1]
    n, step = first_and_step(cap, s["batch"], k)
    while True:
        n = min(n, cap)
        if lead and n < cap:  # the engine's screen (trust.quick_lead, half the lead tried)
            quick = trust.quick_lead(s["masks"][:n], s["y"][:n], s["sw"][:n], s["alpha"])
            if quick < lead / 2:  # this check cannot pass: not made
                n = trust.next_check(n, step, quick, firm=lead)
                continue
        st = trust.stream_stability(
            s["masks"][:n], s["y"][:n], s["sw"][:n], s["alpha"], seed=s["seed"], lead=lead
        )
        if st.verdict == "stable" or n == cap:
            break
        n = trust.next_check(n, step, st.conclusion_lead, firm=lead) if lead else n + step
    return {
        **s["row"],
        "default": {
            "verdict": st.verdict,
            "conclusion": list(st.conclusion) or [int(np.argmax(np.abs(st.mean)))],
            "signs": list(st.conclusion_signs) or [1],
            "agreement": st.conclusion_agreement,
            "detail": st.detail,
            "samples": n,
            "seconds": round(s["per_sample"] * n, 2),
            "reason": st.reason,
            "lead": st.conclusion_lead,
        },
    }


def markdown(doc: dict[str, Any]) -> str:
    m = doc["meta"]
    lines = [
        "# The firm lead and the sample cap, swept over the calibration's cases",
        "",
        f"`python bench/sweep_lead.py` · {m['machine']} · {m['cases']} cases, each run once at "
        f"N = {m['max_cap']} with early stopping off and replayed (module docstring); references: "
        f"5 fp32 repeats at N = {m['ref_samples']} (engine {m['engine']}). Times are scaled from "
        "each case's run (seconds per sample times samples used).",
        "",
        "| lead (sd) | cap | conclusion agrees | dangerous | samples (median) | "
        "EfficientNet-Lite0: time median | p90 | all: time p90 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["grid"]:
        lines.append(
            f"| {r['lead']:g} | {r['cap']} | {r['agrees']}/{r['cases']} | {r['dangerous']} | "
            f"{r['samples_median']:.0f} | {r['lite0_median']:.1f} s | {r['lite0_p90']:.1f} s | "
            f"{r['all_p90']:.1f} s |"
        )
    lines += ["", "Dangerous, by lead and cap (the case, what the default claimed):", ""]
    for r in doc["grid"]:
        if r["dangerous_cases"]:
            said = "; ".join(f"{c} {d}" for c, d in r["dangerous_cases"])
            lines.append(f"- lead {r['lead']:g}, cap {r['cap']}: {said}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated parts of case ids to run")
    ap.add_argument("--leads", default="0,2,2.5,3,3.5,4", help="leads (sd) to try; 0: none")
    ap.add_argument("--caps", default="800,1200,1600,2400", help="sample caps to try")
    ap.add_argument("--ref-samples", type=int, default=2000)
    ap.add_argument("--refs", type=Path, default=cal.REFS)
    ap.add_argument("--imagenet-dir", type=Path, default=cal.IMAGENET_DIR)
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    leads = [float(x) for x in a.leads.split(",")]
    caps = sorted(int(x) for x in a.caps.split(","))
    parts = [p for p in a.only.split(",") if p]
    todo = [c for c in cal.cases(a.imagenet_dir) if not parts or any(p in c.id for p in parts)]
    version = cal.engine_version()
    held: dict[str, lc.Classifier] = {}
    samples, refs = [], []
    for i, case in enumerate(todo, 1):
        clf = held.get(case.model) or held.setdefault(case.model, cal.classifier(case.model))
        s = main_sample(case, clf, caps[-1])
        samples.append(s)
        target = s["row"]["target_index"]
        refs.append(cal.reference(case, None, a.ref_samples, target, version, a.refs))
        print(f"[{i}/{len(todo)}] {case.id}: {caps[-1]} samples scored", flush=True)
    grid = []
    for lead in leads:
        for cap in caps:
            judged = [
                cal.judge(replay(s, lead, cap), w) for s, w in zip(samples, refs, strict=True)
            ]
            bad = [
                (r["case"], f"{r['default']['verdict']} {r['default']['conclusion']}")
                for r in judged
                if r["dangerous_stable"] or r["dangerous_first"]
            ]
            secs = [r["default"]["seconds"] for r in judged]
            lite = [r["default"]["seconds"] for r in judged if r["model"].startswith("lite0")]
            grid.append(
                {
                    "lead": lead,
                    "cap": cap,
                    "cases": len(judged),
                    "agrees": sum(r["conclusion_agrees"] for r in judged),
                    "dangerous": len(bad),
                    "dangerous_cases": bad,
                    "samples_median": float(np.median([r["default"]["samples"] for r in judged])),
                    "lite0_median": float(np.median(lite)) if lite else 0.0,
                    "lite0_p90": float(np.percentile(lite, 90)) if lite else 0.0,
                    "all_p90": float(np.percentile(secs, 90)),
                    "rows": [  # compact: what each case said, and whether it agrees
                        [
                            r["case"],
                            r["default"]["verdict"],
                            r["default"]["conclusion"],
                            r["default"]["samples"],
                            r["conclusion_agrees"],
                        ]
                        for r in judged
                    ],
                }
            )
            g = grid[-1]
            print(
                f"lead {lead:g}, cap {cap}: agrees {g['agrees']}/{g['cases']}, dangerous "
                f"{g['dangerous']}",
                flush=True,
            )
    doc = {
        "meta": {
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            "cases": len(todo),
            "max_cap": caps[-1],
            "ref_samples": a.ref_samples,
            "engine": version,
        },
        "grid": grid,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "lead_sweep.json").write_text(json.dumps(doc, indent=1))
    md = markdown(doc)
    (a.out / "lead_sweep.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
