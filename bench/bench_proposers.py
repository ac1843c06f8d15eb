"""Regions proposed by a detector on real photos: is the watermark proposed, and does LIME name it?

Two parts, on ImageNet-style photos (e.g. ``github:EliSchwartz/imagenet-sample-images``, one
photo per class; fetched, not committed), each in ImageNet's evaluation view (256, centre 224):

1. **Detection.** The first ``--limit`` photos, each with the ImageNet-W watermark
   (``limecraft_core.add_watermark``, the package's pixels at opacity 0.5) and as it is. For the
   watermarked ones: the share where a ``text`` proposal overlaps the watermark's box with IoU
   >= 0.3, and the median best IoU; for the clean ones, the share with any text proposal (text in
   the scene, and false boxes: proposals are candidates, never findings). Seconds per image at
   224 px, and at 1024 px on the first ``--large`` photos (each resized to 1024, then
   watermarked; detection runs at its working size).
2. **End to end.** Every photo of the folder whose top-1 the watermark turns into ``carton``
   (class 478) with ``--model`` (EfficientNet-Lite0 by default), explained for ``carton`` with
   the engine's defaults twice: with automatic superpixels only, and with the superpixels plus
   the ``text`` proposals as handcrafted regions (no drawing). A run *finds the watermark* when
   its strongest region for ``carton`` (the largest weight) lies on the watermark: at least half
   of the region's pixels inside the watermark's box, the same test for both runs. The issue's
   goal: the proposals make it so in at least 80% of the photos. ``--samples N`` caps both
   explanations at N samples instead of the engine's default (the suite's smoke run uses it).

    python bench/bench_proposers.py --images DIR
    python bench/bench_proposers.py --images DIR --limit 50 --no-explain --no-write

Writes proposers.json and proposers.md to ``--out`` (default bench/results) unless
``--no-write``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import ROOT, write_results  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import os
import platform
import statistics
import time

import numpy as np
from bench_watermark import CARTON, SUFFIXES, carton_flips, eval_crop, eval_view
from PIL import Image

import limecraft_core as lc
from limecraft_core.edits.watermark import add_watermark, watermark_mask

IOU_FOUND = 0.3  # a proposal "overlaps the watermark" (the measure)
ON_WATERMARK = 0.5  # a region "lies on the watermark": this share of its pixels in the box


def iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 0.0


def best_iou(image: np.ndarray, box: np.ndarray) -> tuple[float, int]:
    """The best IoU of a text proposal with ``box``, and the number of proposals."""
    found = lc.propose(image, ["text"]).proposals
    return max((iou(p.mask, box) for p in found), default=0.0), len(found)


def detection(files: list[Path], large: int) -> dict:
    box = watermark_mask(224, 224, box=True)
    ious, clean_with_text, t_marked = [], 0, 0.0
    for k, p in enumerate(files):
        view = eval_crop(p)
        marked = add_watermark(view).image
        t = time.perf_counter()
        b, _ = best_iou(marked, box)
        t_marked += time.perf_counter() - t
        ious.append(b)
        clean_with_text += best_iou(view, box)[1] > 0
        print(f"detect {k + 1}/{len(files)}", file=sys.stderr, flush=True)
    big_times, big_ious = [], []
    for p in files[:large]:
        view = eval_view(Image.open(p).convert("RGB"), 1024, 1024)
        marked = add_watermark(view).image
        big_box = watermark_mask(1024, 1024, box=True)
        t = time.perf_counter()
        b, _ = best_iou(marked, big_box)
        big_times.append(time.perf_counter() - t)
        big_ious.append(b)
    n = len(files)
    return {
        "photos": n,
        "found_share": sum(i >= IOU_FOUND for i in ious) / n,
        "found": int(sum(i >= IOU_FOUND for i in ious)),
        "median_best_iou": float(statistics.median(ious)),
        "clean_with_text_share": clean_with_text / n,
        "seconds_per_image_224": t_marked / n,
        "large_photos": len(big_times),
        "seconds_per_image_1024": statistics.median(big_times) if big_times else None,
        "found_share_1024": (
            sum(i >= IOU_FOUND for i in big_ious) / len(big_ious) if big_ious else None
        ),
    }


def _top_on_watermark(result: lc.Explanation, box: np.ndarray) -> tuple[bool, str]:
    w = result.class_weights[result.class_index(CARTON)]
    top = int(np.argmax(w))
    region = result.segments == top
    inside = float(np.logical_and(region, box).sum() / region.sum())
    return inside >= ON_WATERMARK, result.region_names[top] or result.region_keys[top]


def end_to_end(files: list[Path], model_name: str, batch: int, samples: int | None) -> dict:
    from models import registry

    model = registry.load_classifier(model_name, precision="fp32")
    box = watermark_mask(224, 224, box=True)
    settings = {} if samples is None else {"samples": samples}  # else the engine's default
    flips = carton_flips(files, model, batch=batch, progress=True)
    rows = []
    for p, image in flips:
        t = time.perf_counter()
        alone = lc.explain(image, model, target=CARTON, **settings)
        found = lc.propose(image, ["text"])
        masks = [q.mask for q in found.proposals]
        names = [q.name for q in found.proposals]
        both = lc.explain(
            image,
            model,
            regions_mask=masks or None,
            region_names=names or None,
            target=CARTON,
            **settings,
        )
        on_alone, _ = _top_on_watermark(alone, box)
        on_both, top_name = _top_on_watermark(both, box)
        rows.append(
            {
                "file": p.name,
                "proposals": len(masks),
                "superpixels_only": on_alone,
                "with_text_proposals": on_both,
                "top_region": top_name,
                "samples": int(both.run.samples_used),
                "seconds": round(time.perf_counter() - t, 1),
            }
        )
        print(f"explain {len(rows)}/{len(flips)}: {rows[-1]}", file=sys.stderr, flush=True)
    n = len(rows)
    return {
        "model": model_name,
        "samples_asked": samples,  # None: the engine's default
        "flips_to_carton": n,
        "superpixels_only": sum(r["superpixels_only"] for r in rows),
        "with_text_proposals": sum(r["with_text_proposals"] for r in rows),
        "share_with_text_proposals": (sum(r["with_text_proposals"] for r in rows) / n)
        if n
        else None,
        "rows": rows,
    }


def markdown(r: dict) -> str:
    d = r["detection"]
    lines = [
        "# Regions proposed by a detector (text), on real photos",
        "",
        f"{r['machine']}; `{r['command']}`",
        "",
        "| measure | value |",
        "|---|---|",
        f"| watermarked photos with a text proposal on the watermark (IoU >= {IOU_FOUND}) | "
        f"{d['found']} of {d['photos']} ({d['found_share']:.0%}) |",
        f"| median best IoU | {d['median_best_iou']:.2f} |",
        f"| clean photos with some text proposal | {d['clean_with_text_share']:.0%} |",
        f"| detection seconds per image, 224 px | {d['seconds_per_image_224']:.3f} |",
    ]
    if d["seconds_per_image_1024"] is not None:
        lines.append(
            f"| detection seconds per image, 1024 px ({d['large_photos']} photos) | "
            f"{d['seconds_per_image_1024']:.3f} |"
        )
    e = r.get("end_to_end")
    if e:
        n = e["flips_to_carton"]
        lines += [
            f"| photos the watermark turns into carton ({e['model']}) | {n} |",
            f"| strongest region for carton on the watermark, superpixels only | "
            f"{e['superpixels_only']} of {n} |",
            f"| the same, superpixels + text proposals | {e['with_text_proposals']} of {n} |",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", required=True, help="a folder of ImageNet-style photos")
    ap.add_argument("--limit", type=int, default=200, help="photos for the detection part")
    ap.add_argument("--large", type=int, default=10, help="photos timed at 1024 px")
    ap.add_argument("--model", default="efficientnet_lite0")
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument(
        "--samples", type=int, default=None, help="cap each explanation at N (default: engine's)"
    )
    ap.add_argument("--no-explain", action="store_true", help="the detection part only")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    files = sorted(p for p in Path(a.images).rglob("*") if p.suffix.lower() in SUFFIXES)
    if not files:
        print(f"no photos in {a.images}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    r = {
        "command": "python bench/bench_proposers.py " + " ".join(argv or sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "detection": detection(files[: a.limit], a.large),
    }
    if not a.no_explain:
        r["end_to_end"] = end_to_end(files, a.model, a.batch, a.samples)
    r["seconds"] = round(time.perf_counter() - t0, 1)
    write_results(None if a.no_write else a.out, "proposers", r, markdown(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
