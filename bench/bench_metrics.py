"""Each faithfulness / localisation metric's extra model passes and seconds, side by side.

For the demo model (a fresh conflict image, the tag drawn as a region, the tag as the expected
area) and resnet50 with random weights (never pretrained) at 224 px on chelsea with SLIC regions
(about 40 asked; expected area: the centre box, half the width and height), one run explains each
case twice with the same settings (N samples, 1 repeat, deltas off, dedup on as by default):
with ``faithfulness=False`` and no expected area, then with ``faithfulness=True`` and
``expected_mask=``. What is measured, per row:

- **passes, measured**: the rows the scorer really ran (dedup applied), counted by wrapping the
  classifier's ``run_masks`` and attributing each call to the engine stage running it (the
  sampling call; ``_stages.checks._faithfulness``'s curve call; ``_stages.checks._road``'s calls). Their sum is
  checked against ``res.run.model_passes`` with faithfulness on minus off.
- **passes, formula**: curves 2(K+1)(1+3 random orders), the held-out sample min(N, 500),
  ROAD 2·S with S = ``len(metrics.road_counts(K))``, every other metric 0.
- **seconds**: the curves: the wall time of their scoring call; ROAD: ``metrics.road_images``
  (both orders, the sparse solves) plus the wall time of scoring its 2·S images, plus
  ``metrics.road``; IROF, faithfulness correlation, sparseness, localisation: the pure function
  alone, called by the engine on its own inputs, then re-timed on the same inputs (the median of
  the engine's call and 4 more); the held-out sample: its share (rows / rows) of the sampling
  call it is scored in. ``trust_s`` on minus off is printed as a cross-check.

    python bench/bench_metrics.py
    python bench/bench_metrics.py --quick --json /tmp/m.json   # tiny settings (the test)
"""

from __future__ import annotations

from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import contextlib
import functools
import json
import statistics
import time

import numpy as np
import torch

from limecraft_core import Classifier, explain, segment
from limecraft_core import _stages as stages
from limecraft_core import trust as M
from limecraft_core._stages import checks as stage_checks
from models import demo, zoo
from models.registry import load_classifier
from models.samples import load_sample

PURE = ["irof", "faithfulness_correlation", "sparseness", "localise"]
ROWS = [
    "deletion/insertion curves",
    "held-out sample (held-out R², FC)",
    "IROF",
    "ROAD",
    "faithfulness correlation",
    "sparseness",
    "localisation",
]
N_RANDOM_ORDERS = 3


class Probe:
    """Counts and times what the engine does, without changing it: the classifier's
    ``run_masks`` calls by stage, and the metric functions' calls with their inputs."""

    def __init__(self) -> None:
        self.phase = "sampling"
        self.calls: list[tuple[str, int, float]] = []  # (phase, rows, seconds)
        self.fn: dict[str, list] = {}  # name -> [(seconds, args, kwargs)]

    def wrap_scorer(self, clf) -> None:
        inner = clf.run_masks

        def run_masks(image, fill, labels, masks, batch_size, **kw):
            t = time.perf_counter()
            out = inner(image, fill, labels, masks, batch_size, **kw)
            self.calls.append((self.phase, len(masks), time.perf_counter() - t))
            return out

        clf.run_masks = run_masks

    @contextlib.contextmanager
    def installed(self):
        saved = {}

        def in_phase(name, fn):
            @functools.wraps(fn)
            def wrapper(*a, **kw):
                before, self.phase = self.phase, name
                try:
                    return fn(*a, **kw)
                finally:
                    self.phase = before

            return wrapper

        def timed(name, fn):
            @functools.wraps(fn)
            def wrapper(*a, **kw):
                t = time.perf_counter()
                out = fn(*a, **kw)
                self.fn.setdefault(name, []).append((time.perf_counter() - t, a, kw))
                return out

            return wrapper

        for mod, name, make in [
            (stage_checks, "_faithfulness", lambda f: in_phase("curves", f)),
            (stage_checks, "_road", lambda f: in_phase("road", f)),
            *[(M, n, lambda f, n=n: timed(n, f)) for n in [*PURE, "road_images", "road"]],
        ]:
            saved[(mod, name)] = getattr(mod, name)
            setattr(mod, name, make(getattr(mod, name)))
        try:
            yield self
        finally:
            for (mod, name), fn in saved.items():
                setattr(mod, name, fn)

    def rows(self, phase: str) -> int:
        return sum(r for p, r, _ in self.calls if p == phase)

    def seconds(self, phase: str) -> float:
        return sum(s for p, _, s in self.calls if p == phase)

    def pure_seconds(self, name: str, reruns: int = 4) -> float:
        """Median of the engine's call and ``reruns`` more on the same inputs."""
        (first, a, kw), *_ = self.fn[name]
        times = [first]
        fn = getattr(M, name)
        for _ in range(reruns):
            t = time.perf_counter()
            fn(*a, **kw)
            times.append(time.perf_counter() - t)
        return statistics.median(times)


def measure(label, image, model, expected, samples, **kw) -> dict:
    base = {"samples": samples, "repeats": 1, "compute_deltas": False, **kw}
    off_probe, on_probe = Probe(), Probe()
    off_probe.wrap_scorer(model)
    with off_probe.installed():
        off = explain(image, model, faithfulness=False, **base)
    model.run_masks = type(model).run_masks.__get__(model)  # unwrap
    on_probe.wrap_scorer(model)
    with on_probe.installed():
        on = explain(image, model, faithfulness=True, expected_mask=expected, **base)
    model.run_masks = type(model).run_masks.__get__(model)
    k = on.n_regions
    s = len(M.road_counts(k))
    n_hold = min(samples, stages.MAX_HOLDOUT)
    sampling_on, sampling_off = on_probe.rows("sampling"), off_probe.rows("sampling")
    hold_rows = sampling_on - sampling_off
    hold_s = on_probe.seconds("sampling") * hold_rows / max(sampling_on, 1)
    road_images_s = sum(t for t, _, _ in on_probe.fn["road_images"])
    road_fn_s = sum(t for t, _, _ in on_probe.fn["road"])
    road_score_s = on_probe.seconds("road")
    trust = on.trust
    rows = {
        "deletion/insertion curves": {
            "passes": on_probe.rows("curves"),
            "formula": 2 * (k + 1) * (1 + N_RANDOM_ORDERS),
            "seconds": on_probe.seconds("curves"),
            "how": "scoring call of the curves' masks (dedup applied)",
        },
        "held-out sample (held-out R², FC)": {
            "passes": hold_rows,
            "formula": n_hold,
            "seconds": hold_s,
            "how": "its rows' share of the sampling call's time",
        },
        "IROF": {
            "passes": 0,
            "formula": 0,
            "seconds": on_probe.pure_seconds("irof"),
            "how": "metrics.irof on the deletion curve",
        },
        "ROAD": {
            "passes": on_probe.rows("road"),
            "formula": 2 * s,
            "seconds": road_images_s + road_score_s + road_fn_s,
            "road_images_s": road_images_s,
            "scoring_s": road_score_s,
            "scoring_calls": sum(1 for p, _, _ in on_probe.calls if p == "road"),
            "how": "metrics.road_images (both orders) + scoring its 2S images + metrics.road",
        },
        "faithfulness correlation": {
            "passes": 0,
            "formula": 0,
            "seconds": on_probe.pure_seconds("faithfulness_correlation"),
            "how": "metrics.faithfulness_correlation on the held-out sample's outputs",
        },
        "sparseness": {
            "passes": 0,
            "formula": 0,
            "seconds": on_probe.pure_seconds("sparseness"),
            "how": "metrics.sparseness on the weights",
        },
        "localisation": {
            "passes": 0,
            "formula": 0,
            "seconds": on_probe.pure_seconds("localise"),
            "how": "metrics.localise on the weights, label map and expected area",
        },
    }
    return {
        "case": label,
        "n_regions": k,
        "road_steps": s,
        "samples": samples,
        "model_passes_off": off.run.model_passes,
        "model_passes_on": on.run.model_passes,
        "passes_on_minus_off": on.run.model_passes - off.run.model_passes,
        "sum_of_rows": sum(r["passes"] for r in rows.values()),
        "trust_s_off": off.timings["trust_s"],
        "trust_s_on": on.timings["trust_s"],
        "total_s_off": off.timings["total_s"],
        "total_s_on": on.timings["total_s"],
        "values": {
            "irof": trust.irof.value,
            "road_gap": trust.road.value,
            "faithfulness_correlation": trust.faithfulness_correlation.value,
            "sparseness": trust.sparseness.value,
            "relevance_mass": trust.localisation.relevance_mass,
        },
        "rows": rows,
    }


def fmt_s(x: float) -> str:
    return f"{x * 1000:.2f} ms" if x < 1 else f"{x:.2f} s"


def main(argv: list[str] | None = None) -> int:
    """The command line; ``argv`` (default: ``sys.argv[1:]``) lets a test run it in-process."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--slic", type=int, default=40)
    ap.add_argument("--input-size", type=int, default=224, help="resnet50's input size")
    ap.add_argument("--quick", action="store_true", help="tiny settings, for the tests")
    ap.add_argument("--json", default=str(ROOT / "bench/results/metrics.json"))
    args = ap.parse_args(argv)
    arch = "resnet50"
    if args.quick:
        args.samples, args.slic, args.input_size, arch = 60, 12, 64, "resnet18"

    torch.manual_seed(0)
    demo_model = load_classifier("demo")
    s = demo.generate(1, seed=4243, mode="conflict")[0]
    cases = [
        measure(
            "demo, conflict 4243/0, tag drawn, expected = tag",
            s.image,
            demo_model,
            s.tag_mask,
            args.samples,
            regions_mask=s.tag_mask,
        )
    ]
    net = Classifier(
        zoo.build(arch, pretrained=False),
        input_size=args.input_size,
        normalize="imagenet",
        device="cpu",
        name=f"{arch} (random weights)",
    )
    photo = load_sample("chelsea").image
    h, w = photo.shape[:2]
    box = np.zeros((h, w), bool)
    box[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4] = True
    cases.append(
        measure(
            f"{arch} random weights {args.input_size} px, chelsea, SLIC {args.slic}, "
            "expected = centre box",
            photo,
            net,
            box,
            args.samples,
            segments=segment(photo, "slic", args.slic),
        )
    )

    print(f"extra model passes (measured / formula) and seconds, N={args.samples}, 1 repeat")
    head = " | ".join(f"{c['case']} (K={c['n_regions']}, S={c['road_steps']})" for c in cases)
    print(f"| metric | {head} |")
    print("|---|" + "---|" * len(cases))
    for name in ROWS:
        cells = []
        for c in cases:
            r = c["rows"][name]
            cells.append(f"{r['passes']} / {r['formula']} passes, {fmt_s(r['seconds'])}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(
        "| total (model_passes on − off; trust_s on − off) | "
        + " | ".join(
            f"{c['passes_on_minus_off']} passes (rows sum {c['sum_of_rows']}), "
            f"{fmt_s(c['trust_s_on'] - c['trust_s_off'])}"
            for c in cases
        )
        + " |"
    )
    for c in cases:
        r = c["rows"]["ROAD"]
        print(
            f"{c['case']}: ROAD = road_images {fmt_s(r['road_images_s'])} + scoring "
            f"{fmt_s(r['scoring_s'])} in {r['scoring_calls']} calls; explain total "
            f"{c['total_s_off']:.2f} s off, {c['total_s_on']:.2f} s on"
        )
    out = {"samples": args.samples, "quick": args.quick, "rows": ROWS, "cases": cases}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
