"""Why merge suggestions do not find the watermark: three measurements on the carton photos.

``bench_merge.py`` found that accepting the interaction test's merge suggestions leaves LIME's
strongest region on the watermark in 3 of 12 photos, where merging the watermark's own regions
(the answer known) gives 5 of 12. This bench asks why, with automatic superpixels only, on
every photo of ``--carton DIR`` that the ImageNet-W watermark turns into ``carton`` (as
``bench_merge.py`` finds them); the first ``--limit`` are ``merge.md``'s photos, the rest are
reported apart as **held out** (no rule here was fitted to them).

1. **What the interaction test sees.** The methods are compared for ``carton``
   (:func:`limecraft_core.compare_explainers`). Among the regions, the share that are pieces of
   the watermark (a quarter of their pixels in its box: ``bench_merge.PIECE``), and that share
   among the *disputed* regions. Among the pairs the test weighs (adjacent, one disputed: the
   merge hint's ``tested``), the share joining two pieces, and that share among the pairs it
   calls strong (|I| over the threshold, and 3 standard errors): their ratio is the **lift**.
   A lift near 1 means the interaction index does not single the watermark's pieces out.
2. **Additivity of the answer known.** The watermark's regions (half their pixels in the box)
   merged into one and LIME run again: the merged region's weight against the sum of its
   pieces' weights before the merge (ratio about 1: the pieces add up; well above 1: the whole
   watermark counts for more than its parts, an interaction of the whole group), and whether
   the merged region is then the strongest.
3. **A group rule, tried and reported** (``--grow``): from the full image, the adjacent pair
   whose joint hiding moves the softmax for ``carton`` most beyond the sum of the two hidden
   alone (|J|, occlusion's interaction), grown greedily by the neighbour that raises |J| most,
   while it rises, up to :data:`GROW_CAP` regions; one model pass per candidate. The group is
   merged and LIME run again: does its strongest region lie on the watermark?

    python bench/bench_merge_why.py --carton /tmp/imagenet --limit 12 --grow

Writes merge_why.json and merge_why.md to ``--out`` (default bench/results) unless
``--no-write``.
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
from bench_merge import PIECE, _inside, oracle_photo
from bench_proposers import ON_WATERMARK
from bench_watermark import CARTON, carton_flips, image_files

import limecraft_core as lc
from limecraft_core._validate import as_float_image
from limecraft_core.edits.watermark import watermark_mask
from limecraft_core.merge_hint import MIN_Z, adjacent_pairs, disputed_regions

METHODS = ("lime", "occlusion", "rise")
#: The group rule grows a group to this many regions at most.
GROW_CAP = 8


def _strong(t: lc.MergeHint, pair) -> bool:
    return abs(pair.index) >= t.threshold and (
        t.estimator == "exact" or abs(pair.index) >= MIN_Z * pair.se
    )


def seen_by_the_test(cmp: lc.Comparison, labels: np.ndarray, box: np.ndarray) -> dict:
    """Part 1 (module doc): the watermark's pieces among the regions, the disputed regions, the
    pairs the interaction test weighs, and those it calls strong."""
    k = cmp.n_regions
    piece = [_inside(labels, r, box) >= PIECE for r in range(k)]
    disputed = disputed_regions(cmp.agreement.spread)
    tested = cmp.merge.tested if cmp.merge is not None else ()
    joins = [piece[t.a] and piece[t.b] for t in tested]
    strong = [j for t, j in zip(tested, joins, strict=True) if _strong(cmp.merge, t)]
    return {
        "regions": k,
        "pieces": int(sum(piece)),
        "disputed": len(disputed),
        "disputed_pieces": int(sum(piece[r] for r in disputed)),
        "tested": len(tested),
        "tested_joining_pieces": int(sum(joins)),
        "strong": len(strong),
        "strong_joining_pieces": int(sum(strong)),
    }


def additivity(image, model, cfg, lime: np.ndarray, box, target=CARTON) -> dict:
    """Part 2 (module doc): the watermark's regions merged, LIME again (``bench_merge``'s answer
    known); the merged weight against the sum of its pieces' weights (``lime``: LIME's weights
    before the merge)."""
    o = oracle_photo(image, model, cfg, ("lime",), box, target)
    merged = o["merged_weight"]
    return {
        "group": o["group"],
        "sum_of_pieces": round(float(lime[o["group"]].sum()), 4),
        "merged": 0.0 if merged is None else merged,
        "wins": o["merged_rank"] == 1,
    }


def _lime(image, model, cfg, regs: lc.Regions, target: int) -> np.ndarray:
    cmp = lc.compare_explainers(
        image, model, regs, ("lime",), config=cfg, target=target, suggest_merge=False
    )
    return cmp.values("lime")


def grow_group(image, model, labels: np.ndarray, target: int, cap: int = GROW_CAP) -> dict:
    """Part 3's group (module doc): the pair of largest |J| grown greedily while |J| rises.

    J(G) = d(G) - sum over i in G of d({i}), with d(S) the drop of the softmax for ``target``
    when the regions S are hidden (the mean fill, as the engine's default), from the full image.
    """
    k = int(labels.max()) + 1
    adj = adjacent_pairs(labels)
    near: dict[int, set[int]] = {i: set() for i in range(k)}
    for i, j in adj:
        near[int(i)].add(int(j))
        near[int(j)].add(int(i))

    def hidden(groups: list[list[int]]) -> np.ndarray:
        masks = np.ones((len(groups), k), bool)
        for row, g in enumerate(groups):
            masks[row, g] = False
        imgs = lc.perturbed_images(image, labels, masks, "mean")
        z = np.asarray(model.predict(imgs), np.float64)
        p = np.exp(z - z.max(1, keepdims=True))
        return (p / p.sum(1, keepdims=True))[:, target]

    y = hidden([[], *([i] for i in range(k)), *(list(map(int, p)) for p in adj)])
    full, one = y[0], y[0] - y[1 : k + 1]
    j_pair = (full - y[k + 1 :]) - one[adj[:, 0]] - one[adj[:, 1]]
    best = int(np.argmax(np.abs(j_pair)))
    group, j = [int(adj[best, 0]), int(adj[best, 1])], float(j_pair[best])
    passes = len(y)
    while len(group) < cap:
        cand = sorted(set().union(*(near[g] for g in group)) - set(group))
        if not cand:
            break
        jc = (full - hidden([[*group, c] for c in cand])) - one[group].sum() - one[cand]
        passes += len(cand)
        b = int(np.argmax(np.abs(jc)))
        if abs(jc[b]) <= abs(j):
            break
        group, j = [*group, cand[b]], float(jc[b])
    return {"group": group, "j": round(j, 4), "passes": passes}


def one_photo(image, model, cfg, methods, box, grow: bool, target: int = CARTON) -> dict:
    """Parts 1 to 3 (module doc) for one photo."""
    regs = lc.prepare_regions(as_float_image(image), cfg.segmentation)[0]
    cmp = lc.compare_explainers(image, model, regs, methods, config=cfg, target=target)
    lime = cmp.values("lime")
    rec = {
        "lime_top_on_watermark": _inside(regs.labels, int(np.argmax(lime)), box) >= ON_WATERMARK,
        "seen": seen_by_the_test(cmp, regs.labels, box),
        "answer_known": additivity(image, model, cfg, lime, box, target),
    }
    if grow:
        g = grow_group(image, model, regs.labels, target)
        on = np.isin(regs.labels, g["group"])
        merged = lc.merge_regions(regs, g["group"])
        v = _lime(image, model, cfg, merged, target)
        top = int(np.argmax(v))
        g.update(
            inside=round(float(np.logical_and(on, box).sum() / on.sum()), 3),
            lime_top_on_watermark=_inside(merged.labels, top, box) >= ON_WATERMARK,
        )
        rec["grow"] = g
    return rec


def summary(recs: list[dict]) -> dict:
    """The parts' figures over a set of photos (module doc)."""
    s = {key: sum(r["seen"][key] for r in recs) for key in recs[0]["seen"]}
    share = lambda a, b: round(a / b, 3) if b else None  # noqa: E731
    tested = share(s["tested_joining_pieces"], s["tested"])
    strong = share(s["strong_joining_pieces"], s["strong"])
    known = [r["answer_known"] for r in recs]
    ratios = [k["merged"] / k["sum_of_pieces"] for k in known
              if len(k["group"]) >= 2 and k["sum_of_pieces"] > 0]  # fmt: skip
    out = {
        "photos": len(recs),
        "top_on_watermark": sum(r["lime_top_on_watermark"] for r in recs),
        "pieces_among_regions": share(s["pieces"], s["regions"]),
        "pieces_among_disputed": share(s["disputed_pieces"], s["disputed"]),
        "tested_joining_pieces": tested,
        "strong_joining_pieces": strong,
        "lift": round(strong / tested, 2) if tested and strong is not None else None,
        "answer_known_wins": sum(k["wins"] for k in known),
        "merged_over_sum": [round(x, 2) for x in ratios],
    }
    if "grow" in recs[0]:
        out["grow_top_on_watermark"] = sum(r["grow"]["lime_top_on_watermark"] for r in recs)
        out["grow_median_inside"] = round(float(np.median([r["grow"]["inside"] for r in recs])), 3)
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def markdown(r: dict) -> str:
    parts = r["parts"]
    lines = [
        "# Why merge suggestions do not find the watermark (superpixels only)",
        "",
        f"{r['machine']}; `{r['command']}`; EfficientNet-Lite0 ({r['runtime']}), the engine's "
        f"defaults (N = {r['samples']}, quickshift); methods {', '.join(r['methods'])} compared "
        f"for carton; {r['seconds']:.0f} s. The first {r['limit']} photos are `merge.md`'s; the "
        "others are held out.",
        "",
        "| photos | LIME top on the watermark | pieces among regions | among disputed | tested "
        "pairs joining pieces | strong pairs joining pieces | lift | answer known: wins | merged "
        "weight / sum of pieces |"
        + (" group rule: wins | group inside box (median) |" if r["grow"] else ""),
        "|---|---|---|---|---|---|---|---|---|" + ("---|---|" if r["grow"] else ""),
    ]
    for name, p in parts.items():
        row = (
            f"| {name} ({p['photos']}) | {p['top_on_watermark']} | "
            f"{_pct(p['pieces_among_regions'])} | {_pct(p['pieces_among_disputed'])} | "
            f"{_pct(p['tested_joining_pieces'])} | {_pct(p['strong_joining_pieces'])} | "
            f"{p['lift'] if p['lift'] is not None else 'n/a'} | {p['answer_known_wins']} | "
            f"{', '.join(f'{x:g}' for x in p['merged_over_sum']) or 'n/a'} |"
        )
        if r["grow"]:
            row += f" {p['grow_top_on_watermark']} | {_pct(p['grow_median_inside'])} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--carton", required=True, help="a folder of ImageNet photos")
    ap.add_argument("--limit", type=int, default=12, help="photos of merge.md; the rest held out")
    ap.add_argument("--max", type=int, help="carton photos at most (default: all)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--model", default="efficientnet_lite0")
    ap.add_argument("--samples", type=int, help="N (default: the engine's)")
    ap.add_argument("--grow", action="store_true", help="also try the group rule (part 3)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    from models import registry

    model = registry.load_classifier(a.model, precision="fp32")
    cfg = lc.ExplainConfig() if a.samples is None else lc.ExplainConfig.from_flat(samples=a.samples)
    methods = tuple(m.strip() for m in a.methods.split(",") if m.strip())
    if "lime" not in methods:
        raise SystemExit("--methods must include lime: the measures are LIME's strongest region")
    box = watermark_mask(224, 224, box=True)
    t0 = time.perf_counter()
    photos = carton_flips(image_files(a.carton), model, a.max)
    if not photos:
        raise SystemExit(f"no photo in {a.carton} turns into carton with the watermark")
    recs = []
    for j, (path, image) in enumerate(photos):
        recs.append({"file": path.name, **one_photo(image, model, cfg, methods, box, a.grow)})
        print(f"{j + 1}/{len(photos)} {recs[-1]}", file=sys.stderr, flush=True)
    parts = {f"first {a.limit}": recs[: a.limit]}
    if recs[a.limit :]:
        parts["held out"] = recs[a.limit :]
    r = {
        "command": "python bench/bench_merge_why.py " + " ".join(argv or sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "runtime": model.precision_reason.split(":")[0],
        "samples": cfg.sampling.samples,
        "methods": list(methods),
        "limit": a.limit,
        "grow": a.grow,
        "per_photo": recs,
        "parts": {name: summary(rs) for name, rs in parts.items()},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    write_results(None if a.no_write else a.out, "merge_why", r, markdown(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
