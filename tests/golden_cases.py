"""Golden cases: fixed inputs whose outputs were recorded before the engine was restructured.

``python tests/golden_cases.py`` rewrites ``tests/golden/*.json`` (only when the outputs are
meant to change); ``python tests/golden_cases.py --print`` prints them; ``tests/limecraft_core/test_golden.py``
checks that the engine still gives them exactly.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# The goldens are fp32 on every machine (precision "auto" would pick bf16 on a native-bf16 CPU).
os.environ.setdefault("LIMECRAFT_CPU_BF16", "0")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "golden"


def _photo() -> np.ndarray:
    from skimage import data, transform

    return (transform.resize(data.chelsea(), (96, 128), anti_aliasing=True) * 255).astype(np.uint8)


def _demo_classifier():
    from models.registry import load_classifier

    return load_classifier("demo", device="cpu")


def case_linear():
    """The pixel-linear additive model: the weights are the exact per-region effects."""
    from toys import LinearPixels

    from limecraft_core import explain, segment

    img = _photo()
    labels = segment(img, "slic", n_segments=20)
    return explain(
        img,
        LinearPixels(img.shape[:2], classes=3),
        segments=labels,
        samples=300,
        fill="gray",
        output_space="raw",
        ridge_alpha=1e-9,
        top_labels=2,
        seed=3,
        device="cpu",
    )


def case_demo_handcrafted():
    """The demo model, the planted tag as a handcrafted region cut in 2, the rest as ~10 SLIC."""
    from limecraft_core import explain
    from models.samples import load_sample

    s = load_sample("demo-conflict-1")
    return explain(
        s.image,
        _demo_classifier(),
        regions_mask=s.tag_mask,
        segmentation="slic",
        inner_segments=2,
        outer_segments=10,
        region_names=["tag"],
        samples=200,
        seed=5,
        device="cpu",
    )


def case_trust():
    """Repeats, convergence, faithfulness, a kernel sweep and a fill comparison in one run."""
    from limecraft_core import explain
    from models.samples import load_sample

    s = load_sample("demo-conflict-2")
    return explain(
        s.image,
        _demo_classifier(),
        segmentation="quickshift",
        samples=200,
        seed=1,
        repeats=3,
        convergence=[50, 100, 200],
        faithfulness=True,
        kernel_widths=[0.1, 0.5, "uniform"],
        compare_fills=["blur"],
        mask_expansion=1,
        device="cpu",
    )


def case_early_stop():
    """Stopping early when two halves agree; the sample that ran is the one recorded."""
    from limecraft_core import explain
    from models.samples import load_sample

    # demo-conflict-2: with the retrained demo model, demo-conflict-1 no longer stops early here
    s = load_sample("demo-conflict-2")
    return explain(
        s.image,
        _demo_classifier(),
        segmentation="grid",
        n_segments=16,
        samples=1000,
        early_stop=0.5,
        early_stop_step=100,
        seed=2,
        device="cpu",
    )


CASES = {
    "linear": case_linear,
    "demo_handcrafted": case_demo_handcrafted,
    "trust": case_trust,
    "early_stop": case_early_stop,
}


def _untimed(check: dict) -> dict:
    """A check without its timings (the fill comparison's seconds per fill vary run to run)."""
    return {k: v for k, v in check.items() if k != "seconds"}


def numbers(ex) -> dict:
    """What must not change: every number of the result, and the segmentation."""
    d = ex.to_dict(include_segments=False)
    return {
        "segments_sha": __import__("hashlib")
        .sha256(np.ascontiguousarray(ex.segments.astype(np.int32)).tobytes())
        .hexdigest(),
        "n_regions": ex.n_regions,
        "region_names": list(ex.region_names),
        "classes": d["classes"],
        "top_predictions": d["top_predictions"],
        "trust": {
            k: _untimed(d[k])
            for k in (
                "stability",
                "convergence",
                "kernel_sweep",
                "faithfulness",
                "fills",
                "early_stop",
                "irof",
                "road",
                "faithfulness_correlation",
                "sparseness",
            )
            if k in d
        },
        "samples_used": d["run"]["samples_used"],
        "model_passes": d["run"]["model_passes"],
    }


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]
    if sys.argv[1:] == [
        "--print"
    ]:  # what tests/limecraft_core/test_golden.py compares, from a fresh process
        print(json.dumps({name: numbers(make()) for name, make in CASES.items()}))
        raise SystemExit(0)
    GOLDEN.mkdir(exist_ok=True)
    for name, make in CASES.items():
        (GOLDEN / f"{name}.json").write_text(json.dumps(numbers(make()), indent=1) + "\n")
        print("wrote", name)
