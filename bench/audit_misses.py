"""Why the real case's audit misses a photo that the watermark changed: one reason per photo.

The audit lists a photo in a finding only through the few strong regions its row describes
(the regions that push the photo's own predicted class the most). For each watermarked photo
whose top-1 the watermark changed, this reads the audit folder's saved explanation (its regions,
their weights and the label map; no model pass) and names the first reason that applies:

- ``listed``: the finding nearest the watermark lists it among its strong images (its group);
- ``carried``: the finding lists it as a carrier (the same region, not among the strongest);
- ``described, not grouped``: a region its row describes lies on the watermark, and the grouping
  left it out of that finding;
- ``pushes against the class``: the region on the watermark has a negative weight for the
  predicted class. The watermark changed the top-1 by lowering the clean class, not by pushing
  the new one, so an explanation of the new class cannot show it as a reason for it;
- ``weak``: the region on the watermark pushes the class, too little or too far down to be
  described (``TOP_REGIONS``, ``MIN_SHARE``);
- ``no region on the watermark``: no region overlaps the watermark's box with IoU >= 0.3 (the
  detector found no text there, or joined it with other text in the photo).

``python bench/bench_audit.py --real ...`` reports the counts under each audit run.
"""

from __future__ import annotations

from pathlib import Path

from _common import ROOT  # noqa: F401  (first: it puts the repository on sys.path)

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import json

import numpy as np
from bench_proposers import IOU_FOUND, iou

from limecraft_core.audit.regions import REGION_GRID, grid_mask, unpack_mask

REASONS = (
    "listed",
    "carried",
    "described, not grouped",
    "pushes against the class",
    "weak",
    "no region on the watermark",
)


def reason(folder: Path, box: np.ndarray, listed: bool, carried: bool = False) -> tuple[str, dict]:
    """The reason for one photo (its folder in the audit's ``images/``), and the facts behind it:
    the best-overlapping region's IoU, weight, rank by weight and share of the |weight|."""
    ex = json.loads((folder / "explanation.json").read_text())
    row = json.loads((folder / "row.json").read_text())["row"]
    seg = np.load(folder / "segments.npy")
    regions = sorted(ex["regions"], key=lambda r: -r["weight"])
    total = sum(abs(r["weight"]) for r in regions) or 1.0
    scored = [(iou(seg == r["id"], box), rank, r) for rank, r in enumerate(regions)]
    best_iou, rank, best = max(scored, key=lambda t: t[0])
    facts = {"iou": round(best_iou, 3), "weight": round(best["weight"], 4), "rank": rank,
             "share": round(best["weight"] / total, 3), "origin": best.get("origin", "")}  # fmt: skip
    grid_box = grid_mask(box, REGION_GRID)
    described = any(
        iou(unpack_mask(d["mask"]), grid_box) >= IOU_FOUND for d in row.get("regions") or []
    )
    if listed:
        return "listed", facts
    if carried:
        return "carried", facts
    if described:
        return "described, not grouped", facts
    if best_iou < IOU_FOUND:
        return "no region on the watermark", facts
    if best["weight"] < 0:
        return "pushes against the class", facts
    return "weak", facts


def misses(
    out: Path, doc: dict, truth: dict, box_cells: list, listed: set[str], size: int,
    carried: set[str] = frozenset(),
) -> dict:  # fmt: skip
    """The counts of :data:`REASONS` over the photos whose top-1 the watermark changed, and each
    photo's reason with its facts. ``listed``: the files the finding nearest the watermark
    lists among its strong images, ``carried`` its carriers; ``size``: the photos' side (the
    box's cells are in its pixels)."""
    box = np.zeros((size, size), bool)
    box[tuple(np.asarray(box_cells).T)] = True
    key_of = {r["file"]: r["key"] for r in doc["rows"] if r.get("status") == "ok"}
    per: dict[str, dict] = {}
    for name, t in sorted(truth.items()):
        if not t["marked"] or t["top1_clean"] == t["top1_marked"] or name not in key_of:
            continue
        why, facts = reason(out / "images" / key_of[name], box, name in listed, name in carried)
        per[name] = {"reason": why, **facts}
    counts = {r: sum(p["reason"] == r for p in per.values()) for r in REASONS}
    return {"changed": len(per), "counts": counts, "images": per}
