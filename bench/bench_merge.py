"""From disagreement to a better region, on real photos: do merge suggestions find the watermark?

The explainers-issue's acceptance on real data, with **automatic superpixels only** (no drawn
region, no proposal): EfficientNet-Lite0 on the photos of ``--carton DIR`` whose top-1 the
ImageNet-W watermark turns into ``carton`` (found as ``bench_methods.py --carton`` finds them:
ImageNet's evaluation view, the watermark of ``python -m limecraft watermark``). For each photo:

1. the methods of ``--methods`` (default LIME, KernelSHAP, occlusion and RISE: all from one
   shared sample) are compared for ``carton`` over the engine's default superpixels
   (:func:`limecraft_core.compare_explainers`, the engine's defaults);
2. the comparison's merge suggestion (:func:`limecraft_core.merge_hint.merge_hint`), if any, is
   accepted, as Craft's "Merge selected" does (:func:`limecraft_core.merge_regions`), and the
   methods are compared again; up to ``--rounds`` times, stopping when nothing is suggested.

Reported per round: on how many photos LIME's strongest region for ``carton`` lies on the
watermark (at least half of its pixels inside the watermark's box: ``bench_proposers.py``'s
measure, which gives 3 of 12 with superpixels alone), how many suggestions were made, how many
joined two pieces of the watermark (each region with at least :data:`PIECE` of its pixels in the
box), and the methods' mean Spearman agreement.

``--oracle`` also asks what a merge could do at best *with the answer known*: the regions that
lie on the watermark (at least half of their pixels in its box) merged into one, as an analyst
who had drawn the box would select them, then the methods compared again. The photos where
LIME's strongest region then lies on the watermark bound what any merge suggestion of those
regions can reach (one model comparison more per photo).

    python bench/bench_merge.py --carton /tmp/imagenet --limit 12 --oracle

Writes merge.json and merge.md to ``--out`` (default bench/results) unless ``--no-write``.
"""

from __future__ import annotations

import sys

from _common import ROOT, write_results  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import os
import platform
import time

import numpy as np
from bench_proposers import ON_WATERMARK
from bench_watermark import CARTON, carton_flips, image_files

import limecraft_core as lc
from limecraft_core._validate import as_float_image
from limecraft_core.edits.watermark import watermark_mask

METHODS = ("lime", "kernelshap", "occlusion", "rise")
#: A region is "a piece of the watermark" when this share of its pixels lies in the box.
PIECE = 0.25


def _inside(labels: np.ndarray, region: int, box: np.ndarray) -> float:
    r = labels == region
    return float(np.logical_and(r, box).sum() / max(int(r.sum()), 1))


def _spearman(cmp: lc.Comparison) -> float:
    return float(np.mean([p.spearman for p in cmp.agreement.pairs]))


def one_photo(
    image: np.ndarray, model, cfg, methods, rounds: int, box: np.ndarray, target: int = CARTON
) -> list[dict]:
    """Compare, accept the suggestion, compare again: one record per round (module doc);
    ``box`` marks the artifact, ``target`` the class it pushes."""
    regs = lc.prepare_regions(as_float_image(image), cfg.segmentation)[0]
    out = []
    for r in range(rounds + 1):
        t = time.perf_counter()
        cmp = lc.compare_explainers(image, model, regs, methods, config=cfg, target=target)
        labels = regs.labels
        top = int(np.argmax(cmp.values("lime")))
        pair = cmp.merge.pair if cmp.merge is not None else None
        rec = {
            "round": r,
            "k": cmp.n_regions,
            "lime_top_on_watermark": _inside(labels, top, box) >= ON_WATERMARK,
            "lime_top_inside": round(_inside(labels, top, box), 3),
            "spearman": round(_spearman(cmp), 3),
            "suggested": list(pair) if pair else None,
            "joins_watermark_pieces": bool(pair)
            and all(_inside(labels, i, box) >= PIECE for i in pair),
            "merge_sentence": cmp.merge.sentence if cmp.merge is not None else "",
            "seconds": round(time.perf_counter() - t, 1),
        }
        out.append(rec)
        if pair is None or r == rounds:
            break
        regs = lc.merge_regions(regs, pair)
    return out


def box_group(labels: np.ndarray, box: np.ndarray) -> list[int]:
    """The regions that lie on the artifact: at least ON_WATERMARK of their pixels in ``box``."""
    return [int(r) for r in np.unique(labels) if _inside(labels, int(r), box) >= ON_WATERMARK]


def oracle_photo(
    image: np.ndarray, model, cfg, methods, box: np.ndarray, target: int = CARTON
) -> dict:
    """The regions on the artifact merged into one (the answer known), compared again: whether
    LIME's strongest region then lies on the artifact, and the merged region's rank and weight."""
    regs = lc.prepare_regions(as_float_image(image), cfg.segmentation)[0]
    group = box_group(regs.labels, box)
    on_box = np.isin(regs.labels, group)
    if len(group) >= 2:
        regs = lc.merge_regions(regs, group)
    cmp = lc.compare_explainers(
        image, model, regs, methods, config=cfg, target=target, suggest_merge=False
    )
    lime = cmp.values("lime")
    top = int(np.argmax(lime))
    merged = int(regs.labels[on_box][0]) if group else None  # its id in the merged map
    return {
        "group": group,
        "k": cmp.n_regions,
        "lime_top_on_watermark": _inside(regs.labels, top, box) >= ON_WATERMARK,
        "merged_rank": None if merged is None else int((lime > lime[merged]).sum()) + 1,
        "merged_weight": None if merged is None else round(float(lime[merged]), 4),
    }


def tally(per_photo: list[list[dict]], rounds: int) -> list[dict]:
    """Per round: photos whose LIME top lies on the watermark (a photo that stopped early keeps
    its last state), suggestions made, suggestions joining watermark pieces, mean Spearman."""
    rows = []
    for r in range(rounds + 1):
        state = [recs[min(r, len(recs) - 1)] for recs in per_photo]
        here = [recs[r] for recs in per_photo if len(recs) > r]
        rows.append(
            {
                "round": r,
                "top_on_watermark": sum(s["lime_top_on_watermark"] for s in state),
                "photos_merged_so_far": sum(len(recs) - 1 >= r for recs in per_photo) if r else 0,
                "suggestions": sum(h["suggested"] is not None for h in here),
                "joining_watermark_pieces": sum(h["joins_watermark_pieces"] for h in here),
                "mean_spearman": round(float(np.mean([s["spearman"] for s in state])), 3),
            }
        )
    return rows


def markdown(r: dict) -> str:
    n = r["photos"]
    lines = [
        f"# Merge suggestions with superpixels only, on {n} photos the watermark turns into carton",
        "",
        f"{r['machine']}; `{r['command']}`; EfficientNet-Lite0 ({r['runtime']}), the engine's "
        f"defaults (N = {r['samples']}, quickshift), no drawn region and no proposal; methods "
        f"{', '.join(r['methods'])} compared for carton; each round accepts the merge suggestion "
        f"and compares again; {r['seconds']:.0f} s.",
        "",
        "| after | LIME's strongest region on the watermark | merges accepted so far (photos) "
        "| suggestions in this round | joining two watermark pieces | mean Spearman |",
        "|---|---|---|---|---|---|",
    ]
    for t in r["tally"]:
        lines.append(
            f"| {'superpixels alone' if t['round'] == 0 else str(t['round']) + ' merge round(s)'} | "
            f"{t['top_on_watermark']} of {n} | {t['photos_merged_so_far']} | "
            f"{t['suggestions']} | {t['joining_watermark_pieces']} | {t['mean_spearman']:.2f} |"
        )
    if r.get("oracle"):
        o = r["oracle"]
        lines += [
            "",
            f"**With the answer known** (`--oracle`): the regions on the watermark (half of their "
            f"pixels in its box; {sum(len(x['group']) for x in o) / len(o):.1f} a photo) merged "
            f"into one and compared again: LIME's strongest region lies on the watermark in "
            f"**{sum(x['lime_top_on_watermark'] for x in o)} of {n}** (the merged region first in "
            f"{sum(x['merged_rank'] == 1 for x in o)}). Merging exactly those regions is what an analyst who knew the answer would do.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--carton", required=True, help="a folder of ImageNet photos")
    ap.add_argument("--limit", type=int, default=12, help="carton photos at most")
    ap.add_argument("--rounds", type=int, default=3, help="merge suggestions accepted at most")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--model", default="efficientnet_lite0")
    ap.add_argument("--samples", type=int, help="N (default: the engine's)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--oracle", action="store_true", help="also merge the regions on the box")
    a = ap.parse_args(argv)
    from models import registry

    model = registry.load_classifier(a.model, precision="fp32")
    cfg = lc.ExplainConfig() if a.samples is None else lc.ExplainConfig.from_flat(samples=a.samples)
    methods = tuple(m.strip() for m in a.methods.split(",") if m.strip())
    box = watermark_mask(224, 224, box=True)
    t0 = time.perf_counter()
    photos = [(p.name, im) for p, im in carton_flips(image_files(a.carton), model, a.limit)]
    if not photos:
        raise SystemExit(f"no photo in {a.carton} turns into carton with the watermark")
    per_photo: list[list[dict]] = []
    oracle: list[dict] = []
    for j, (name, image) in enumerate(photos):
        recs = one_photo(image, model, cfg, methods, a.rounds, box)
        per_photo.append(recs)
        if a.oracle:
            oracle.append(oracle_photo(image, model, cfg, methods, box))
        print(f"{j + 1}/{len(photos)} {name}: {recs} {oracle[-1:]}", file=sys.stderr, flush=True)
    r = {
        "command": "python bench/bench_merge.py " + " ".join(argv or sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "runtime": model.precision_reason.split(":")[0],
        "samples": cfg.sampling.samples,
        "methods": list(methods),
        "photos": len(photos),
        "files": [n for n, _ in photos],
        "per_photo": per_photo,
        "tally": tally(per_photo, a.rounds),
        "oracle": oracle or None,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    write_results(None if a.no_write else a.out, "merge", r, markdown(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
