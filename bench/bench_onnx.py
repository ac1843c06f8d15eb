"""onnxruntime against torch on this machine's CPU, for the same LIME explanation.

A torchvision model with random weights (resnet50 by default, ``weights=None``) is exported to
ONNX (``torch.onnx.export(dynamo=True)``, dynamic batch axis) and loaded through the registry,
so it runs as LIMEcraft runs any ``.onnx`` file (onnxruntime, fp32, CPU provider). Both explain
the same image (scikit-image's chelsea at SIZE px) over the same SLIC regions with the same seed
and N samples; the two engines alternate within each round (torch first in odd rounds, onnx
first in even ones), so a slow spell of a shared machine hits both alike. Printed: seconds and
images per second of each run, the median per engine, the onnx/torch speed ratio, and the
largest difference between the two explanations' weights (absolute, and relative to the
largest weight: a random-weight model's probabilities are nearly flat, so its weights are tiny).

    python bench/bench_onnx.py [--quick] [--model resnet50] [--samples 1000] [--rounds 1]
                               [--json bench/results/onnx.json]
"""

from __future__ import annotations

from pathlib import Path

from _common import chelsea, timed  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import json
import statistics
import tempfile
import time
import warnings

import numpy as np
import torch
import torchvision.models as tvm

from limecraft_core import Classifier, explain
from models.registry import load_classifier


def _export(net: torch.nn.Module, size: int, path: Path) -> float:
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net,
            (torch.rand(2, 3, size, size),),
            str(path),
            dynamo=True,
            input_names=["x"],
            dynamic_shapes=({0: torch.export.Dim("batch")},),
            verbose=False,
        )
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    """The command line; ``argv`` (default: ``sys.argv[1:]``) lets a test run it in-process."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="resnet18, 50 samples, 64 px, 1 round")
    ap.add_argument("--model", default="resnet50", help="a torchvision model name")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--regions", type=int, default=60, help="SLIC n_segments")
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    a = ap.parse_args(argv)
    if a.quick:
        a.model, a.samples, a.size, a.rounds = "resnet18", 50, 64, 1

    torch.manual_seed(0)
    net = tvm.get_model(a.model, weights=None).eval()
    image = chelsea(a.size, rounded=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{a.model}.onnx"
        export_s = _export(net, a.size, path)
        engines = {
            "torch": Classifier(net, input_size=a.size, device="cpu", precision="fp32"),
            "onnx": load_classifier(str(path), device="cpu"),
        }
        settings = {"samples": a.samples, "seed": 0}
        segments = explain(image, engines["torch"], samples=10, n_segments=a.regions).segments
        for clf in engines.values():  # warm-up: first-call allocations and graph setup
            explain(image, clf, segments=segments, samples=10, seed=0)
        seconds: dict[str, list[float]] = {k: [] for k in engines}
        weights = {}
        for r in range(a.rounds):
            order = list(engines) if r % 2 == 0 else list(engines)[::-1]
            for name in order:
                ex, t = timed(
                    lambda name=name: explain(image, engines[name], segments=segments, **settings)
                )
                seconds[name].append(t)
                weights[name] = ex.class_weights
                print(
                    f"round {r + 1} {name:5s}: {seconds[name][-1]:7.2f} s, "
                    f"{a.samples / seconds[name][-1]:6.1f} img/s",
                    flush=True,
                )
        onnx_desc = engines["onnx"].model.description
    med = {k: statistics.median(v) for k, v in seconds.items()}
    diff = float(np.abs(weights["torch"] - weights["onnx"]).max())
    rel = diff / max(float(np.abs(weights["torch"]).max()), 1e-30)
    k = int(segments.max()) + 1
    print(
        f"\n{a.model} (random weights), {a.size} px, K={k} regions, N={a.samples}, "
        f"{torch.get_num_threads()} torch threads; ONNX export {export_s:.1f} s ({onnx_desc})"
    )
    print("| engine | seconds (median) | img/s |")
    print("|---|---|---|")
    for name, s in med.items():
        print(f"| {name} | {s:.2f} | {a.samples / s:.1f} |")
    ratio = med["torch"] / med["onnx"]
    print(
        f"onnx/torch speed: {ratio:.2f}x; largest weight difference: {diff:.2e} "
        f"({rel:.1e} of the largest |weight|)"
    )
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(
            json.dumps(
                {
                    "model": a.model,
                    "size": a.size,
                    "samples": a.samples,
                    "regions": k,
                    "threads": torch.get_num_threads(),
                    "export_seconds": export_s,
                    "seconds": seconds,
                    "median_seconds": med,
                    "images_per_second": {n: a.samples / s for n, s in med.items()},
                    "onnx_over_torch_speed": ratio,
                    "max_weight_difference": diff,
                    "max_weight_difference_relative": rel,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
