"""Engine overhead against the lime package, side by side in one run, on three near-free models.

Setup (issues 2 and 53): a 224x224 photo (scikit-image's chelsea), lime's default quickshift
regions (both tools get the same label map), mean fill (each hidden region takes its own mean
colour, as in lime), N=1000. Three models of almost no cost, so that the overhead is what is
measured (10 classes each):

* **no signal**: the channel means through a linear layer with torch's default weights. Under
  the mean fill the channel means never move, so its score is the same for every sample (to
  the last bit): no region carries weight, and no check can pass;
* **signal everywhere**: each channel's mean and mean square through a linear layer with its
  weights drawn at 5x the scale: a hidden region loses its texture, so every region moves the
  score; two regions lead firmly, and the early stop stops at its first check;
* **noise everywhere**: a fixed random projection of the pixels wrapped by a fast sine: every
  mask moves every score by a large, unstructured amount (R^2 about 0.03), no region leads,
  and the early stop runs to the cap, screening every check it schedules.

Until 2026-12-06 the signal-everywhere model was the channel means at 5x: under the mean fill
its score did not move either (the engine now gives such a score no weights), so it measured a
second model with no signal, not one with signal.

On each: LIMEcraft with its defaults (early stop on, per-region deltas; only N, the fill and
the seed given), LIMEcraft with ``early_stop=None``, and lime_image at each batch size in
--lime-batch-sizes (its best is used). The variants run round-robin (each once per round, so a
slow spell of this shared machine hits them alike); each figure is a median of --repeats
rounds, and each ratio is of two medians taken in the same run.

``--parts compose`` measures composition against the memory floor (issue 53, item 2): a batch
of perturbed images composed, against a plain torch copy of the same bytes, with the gather of
the masks to pixels alone (its share) and the exact matrix-product formulation tried against it
(fill + masks @ per-region differences: the same bits, slower at these sizes). ``--parts
early-stop`` measures the early stop's own cost (issue 53, item 1): defaults against
``early_stop=None`` at N=--samples (1000) and at the default cap, on the three models above, a
model that settles early (one patch's brightness, near-free), and with ``--lite0``
EfficientNet-Lite0.

    nice -n 5 python bench/bench_engine.py                    # the table against lime, JSON
    nice -n 5 python bench/bench_engine.py --parts early-stop --lite0   # the early stop's cost
    nice -n 5 python bench/bench_engine.py --parts compose      # composition against a copy
"""

from __future__ import annotations

from pathlib import Path

from _common import chelsea  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import contextlib
import io
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import limecraft_core as lc

#: The signal-everywhere model's weights are drawn at this multiple of torch's default scale.
SIGNAL_SCALE = 5.0


class ChannelMeans(torch.nn.Module):
    """Almost free: the mean colour of the image through a linear layer (weights x ``scale``).
    Under the mean fill its score is the same for every sample: each hidden region takes its
    own mean colour, so the channel means do not move (the scores are equal to the last bit)."""

    FEATURES = 3  # what the linear layer reads per image

    def __init__(self, classes: int = 10, scale: float = 1.0) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(self.FEATURES, classes)
        with torch.no_grad():
            self.fc.weight.mul_(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean(dim=(2, 3)))


class ChannelMoments(ChannelMeans):
    """Almost free, with signal under the mean fill: each channel's mean and mean square
    through a linear layer (weights x ``scale``). A hidden region loses its texture (its pixels
    take their mean), so every region moves the mean squares by its own variance."""

    FEATURES = 6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.cat([x.mean(dim=(2, 3)), (x * x).mean(dim=(2, 3))], 1))


class Scrambled(torch.nn.Module):
    """Almost free, its scores move with every mask but follow no region: a fixed random
    projection of every ``stride``-th pixel of a ``size`` x ``size`` image, wrapped by a fast
    sine. Hiding any region moves every class's score by a large, unstructured amount, so no
    region leads firmly and the early stop runs every check it schedules."""

    def __init__(self, classes: int = 10, size: int = 224, stride: int = 4) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.stride = stride
        side = -(-size // stride)
        self.p = torch.nn.Parameter(
            torch.randn(3 * side * side, classes, generator=g), requires_grad=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.stride
        return torch.sin(x[:, :, ::s, ::s].flatten(1) @ self.p * 200.0) * 3.0


class OnePatch(torch.nn.Module):
    """Almost free, and settles early: class 0 is the brightness of one patch (a few regions
    lead firmly), class 1 its opposite."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x[:, :, 60:120, 60:120].mean(dim=(1, 2, 3)) * 20
        return torch.stack([s, -s], 1)


def near_free_models() -> dict[str, torch.nn.Module]:
    """The three near-free models, seeded (the same weights every run)."""
    torch.manual_seed(0)
    quiet = ChannelMeans().eval()
    torch.manual_seed(0)
    return {
        "no signal": quiet,
        "signal everywhere": ChannelMoments(scale=SIGNAL_SCALE).eval(),
        "noise everywhere": Scrambled().eval(),
    }


def round_robin(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Median seconds of each function, called once per round in turn (after one warm-up);
    also, under ``<name> cpu``, the median CPU seconds of this process (every thread's): on a
    shared machine a slow spell stretches the wall time but not the work."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        # each round starts one variant later: in a fixed order the defaults always ran right
        # after lime and measured 1.9x early_stop=None's wall time at 1.16x its CPU time
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn = fns[name]
            t, c = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
    return {name: statistics.median(ts) for name, ts in times.items()} | {
        f"{name} cpu": statistics.median(ts) for name, ts in cpu.items()
    }


def lime_runner(image: np.ndarray, segments: np.ndarray, model: torch.nn.Module, n: int, bs: int):
    """lime_image's explanation of ``image`` at batch size ``bs``, as a function to time."""
    from lime import lime_image

    def classifier_fn(batch: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(np.ascontiguousarray(batch.transpose(0, 3, 1, 2))).float() / 255.0
        with torch.inference_mode():
            return torch.softmax(model(x), dim=1).numpy()

    def run() -> None:
        # lime's PyPI wheel always draws a tqdm bar on stderr; keep it out of the table.
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            lime_image.LimeImageExplainer(random_state=0).explain_instance(
                image,
                classifier_fn,
                top_labels=1,
                hide_color=None,
                num_samples=n,
                batch_size=bs,
                segmentation_fn=lambda _: segments,
                random_seed=0,
            )

    return run


def ours_runner(image: np.ndarray, segments: np.ndarray, model: Any, n: int, **settings: Any):
    """LIMEcraft's explanation with its defaults but N, the fill and the seed (and ``settings``)."""

    def run() -> lc.Explanation:
        run.last = lc.explain(
            image, model, segments=segments, samples=n, fill="mean", seed=0, device="cpu",
            **settings,
        )  # fmt: skip
        return run.last

    return run  # run.last: its last explanation


def against_lime(image, segments, n: int, args) -> dict[str, Any]:
    """Each near-free model: the defaults and early_stop=None against lime, round-robin."""
    out: dict[str, Any] = {}
    for name, model in near_free_models().items():
        fns: dict[str, Callable[[], Any]] = {
            "defaults": ours_runner(image, segments, model, n),
            "early_stop=None": ours_runner(image, segments, model, n, early_stop=None),
        }
        for bs in [int(b) for b in args.lime_batch_sizes.split(",")]:
            fns[f"lime batch {bs}"] = lime_runner(image, segments, model, n, bs)
        t = round_robin(fns, args.repeats)
        lime_bs = min((k for k in t if k.startswith("lime") and "cpu" not in k), key=t.get)
        used = fns["defaults"].last.trust.early_stop
        out[name] = {
            "seconds": t,
            "lime_best": lime_bs,
            "lime_seconds": t[lime_bs],
            "ratio_defaults": t[lime_bs] / t["defaults"],
            "ratio_early_stop_none": t[lime_bs] / t["early_stop=None"],
            "defaults_over_none": t["defaults"] / t["early_stop=None"],
            "defaults_over_none_cpu": t["defaults cpu"] / t["early_stop=None cpu"],
            "samples_used": used.samples_used,
            "checks_at": [c.n for c in used.checks],
        }
        print(f"{name}: {json.dumps(out[name])}", flush=True)
    return out


def early_stop_cost(image, segments, args) -> dict[str, Any]:
    """The defaults against early_stop=None at N = --samples (1000) and at the default cap."""
    models: dict[str, Any] = {**near_free_models(), "settles early": OnePatch()}
    if args.lite0:
        from models.registry import load_classifier

        models["EfficientNet-Lite0"] = load_classifier("efficientnet_lite0", device="cpu")
    cap = lc.ExplainConfig().sampling.samples
    out: dict[str, Any] = {}
    for name, model in models.items():
        heavy = name == "EfficientNet-Lite0"
        for n in (args.samples, cap):
            fns = {
                "defaults": ours_runner(image, segments, model, n),
                "early_stop=None": ours_runner(image, segments, model, n, early_stop=None),
            }
            t = round_robin(fns, max(1, args.repeats // 3) if heavy else args.repeats)
            rec = fns["defaults"].last.trust.early_stop
            row = {
                "model": name,
                "samples": n,
                "defaults_s": t["defaults"],
                "none_s": t["early_stop=None"],
                "overhead": t["defaults"] / t["early_stop=None"] - 1,
                "overhead_cpu": t["defaults cpu"] / t["early_stop=None cpu"] - 1,
                "samples_used": rec.samples_used,
                "checks_at": [c.n for c in rec.checks],
            }
            out[f"{name}, N={n}"] = row
            print(json.dumps(row), flush=True)
    return out


def compose_floor(image: np.ndarray, segments: np.ndarray, rounds: int) -> dict[str, Any]:
    """Composing a batch of perturbed images (``perturb.compose_batch``, mean fill) against the
    memory floor: a plain torch copy of the same bytes (B x 3 x H x W float32), per batch."""
    from limecraft_core.perturb import compose_batch

    img = torch.from_numpy(image.astype(np.float32).transpose(2, 0, 1) / 255.0).contiguous()
    fill = img.mean(dim=(1, 2), keepdim=True).expand_as(img).contiguous()
    diff, labels = img - fill, torch.from_numpy(segments.astype(np.int64))
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    k, flat = int(segments.max()) + 1, labels.reshape(-1)
    # the formulations tried against it, each exact (the same bits): the gather alone (its
    # share), and one matrix product, fill + masks @ D with D[k] = diff on region k, else 0
    hot = torch.nn.functional.one_hot(flat, k).T.to(img.dtype)
    row = fill.reshape(1, -1)
    region_diff = (hot[:, None, :] * diff.reshape(1, 3, -1)).reshape(k, -1).contiguous()
    for b in (16, 64):
        masks = torch.from_numpy(rng.random((b, k)) < 0.5)
        buf, src = torch.empty(b, *img.shape), torch.rand(b, *img.shape)
        flat_out = buf.view(b, -1)
        t = round_robin(
            {
                "compose": lambda m=masks, o=buf: compose_batch(img, fill, labels, m, o, diff),
                "copy": lambda o=buf, s=src: o.copy_(s),
                "gather": lambda m=masks: m.to(img.dtype).index_select(1, flat),
                "matmul": lambda m=masks, o=flat_out: torch.addmm(
                    row, m.to(img.dtype), region_diff, out=o
                ),
            },
            rounds * 20,
        )
        same = torch.equal(
            torch.addmm(row, masks.to(img.dtype), region_diff).view_as(buf),
            compose_batch(img, fill, labels, masks, None, diff),
        )
        out[f"batch {b}"] = {**t, "ratio": t["compose"] / t["copy"], "matmul_exact": same}
        print(f"compose, batch {b}: {json.dumps(out[f'batch {b}'])}", flush=True)
    return out


def markdown(res: dict[str, Any]) -> str:
    lines = [
        f"K={res['regions']} regions, N={res['samples']}, torch threads={res['threads']}; "
        "medians of round-robin rounds",
        "",
        "| model | LIMEcraft defaults | `early_stop=None` | lime_image (best batch) | lime / "
        "defaults | lime / `early_stop=None` | defaults / `early_stop=None` (wall; CPU) | "
        "samples used, checks at |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in res.get("against_lime", {}).items():
        s = r["seconds"]
        lines.append(
            f"| {name} | {s['defaults']:.3f} s | {s['early_stop=None']:.3f} s | "
            f"{r['lime_seconds']:.3f} s ({r['lime_best']}) | **{r['ratio_defaults']:.1f}x** | "
            f"{r['ratio_early_stop_none']:.1f}x | {r['defaults_over_none']:.2f}; "
            f"{r['defaults_over_none_cpu']:.2f} | {r['samples_used']}, {r['checks_at']} |"
        )
    if "early_stop_cost" in res:
        lines += [
            "",
            "| model | N | defaults | `early_stop=None` | cost of the early stop (wall; CPU) "
            "| samples used, checks at |",
            "|---|---|---|---|---|---|",
        ]
        for r in res["early_stop_cost"].values():
            lines.append(
                f"| {r['model']} | {r['samples']} | {r['defaults_s']:.3f} s | {r['none_s']:.3f} s "
                f"| {100 * r['overhead']:+.0f}%; {100 * r['overhead_cpu']:+.0f}% | "
                f"{r['samples_used']}, {r['checks_at']} |"
            )
    for b, r in res.get("compose", {}).items():
        lines.append(
            f"\nComposition, {b} at 224 px: {1e3 * r['compose']:.2f} ms, a plain copy of the same "
            f"bytes {1e3 * r['copy']:.2f} ms: **{r['ratio']:.2f}x** the floor; of it the "
            f"gather of the masks to pixels {1e3 * r['gather']:.2f} ms; the same images as one "
            f"matrix product (fill + masks @ per-region differences, "
            f"{'the same bits' if r['matmul_exact'] else 'not the same bits'}) "
            f"{1e3 * r['matmul']:.2f} ms"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5, help="round-robin rounds")
    ap.add_argument("--lime-batch-sizes", default="10,64,250")
    ap.add_argument(
        "--parts",
        default="lime",
        help="comma-separated: lime (the table against lime), early-stop (its cost), compose",
    )
    ap.add_argument("--lite0", action="store_true", help="EfficientNet-Lite0 in early-stop")
    ap.add_argument("--json", default="bench/results/engine.json")
    args = ap.parse_args(argv)

    image = chelsea()
    # lime's own default segmentation, computed once and handed to both tools.
    segments = lc.segment(image, "quickshift", working_size=None)
    res: dict[str, Any] = {
        "samples": args.samples,
        "regions": int(segments.max()) + 1,
        "threads": torch.get_num_threads(),
    }
    parts = set(args.parts.split(","))
    if "lime" in parts:
        res["against_lime"] = against_lime(image, segments, args.samples, args)
    if "early-stop" in parts:
        res["early_stop_cost"] = early_stop_cost(image, segments, args)
    if "compose" in parts:
        res["compose"] = compose_floor(image, segments, args.repeats)
    print(markdown(res))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
