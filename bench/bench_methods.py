"""The explainers side by side on EfficientNet-Lite0: wall time and model passes of each method.

For each photo (scikit-image's chelsea, coffee and astronaut by default, or the files of
``--images``; ImageNet's evaluation view, 256 then centre 224), the table of explainers'
methods each run alone through :func:`limecraft_core.compare_explainers` at the engine's
defaults (quickshift with lime's parameters, N = 1600, the mean fill, probabilities), then all
of them in one call, **round-robin**: the order of the runs rotates from photo to photo, so a
slow spell of the shared machine hits every method alike.

A run alone always scores the shared sample (the target is read from its first row), so a
method's own cost is its **marginal** time: its run's wall time minus the median run of RISE,
which attributes from the shared sample alone. Its passes are the model passes of its run
beyond the shared sample's (each distinct mask once); the gradient methods make none there,
and their forward and backward passes of one image are the table's (``Explainer.passes``).
Exact Shapley refuses the default regions (K > 10; its message gives the cost); it is timed
over a SLIC segmentation of at most ``--shapley-k`` regions instead, with LIME beside it.

``--carton DIR`` adds the ImageNet-W part: the photos of DIR whose top-1 the watermark turns
into ``carton`` (as ``bench_proposers.py`` finds them), each explained for ``carton`` with
superpixels plus the watermark's box as a drawn region; for each method, on how many photos the
watermark's region comes first (the largest value).

    python bench/bench_methods.py
    python bench/bench_methods.py --carton /tmp/imagenet --carton-limit 12

Writes methods.json and methods.md (and methods_carton.json and .md for ``--carton``) to ``--out``
(default bench/results) unless ``--no-write``; ``--limit 0 --carton DIR`` runs that part alone.
"""

from __future__ import annotations

import sys

from _common import ROOT, write_results  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import os
import platform
import statistics
import time

import numpy as np
from bench_watermark import CARTON, carton_flips, eval_crop, eval_view, image_files
from PIL import Image

import limecraft_core as lc
from limecraft_core._validate import as_float_image
from limecraft_core.edits.watermark import watermark_mask

PHOTOS = ("chelsea", "coffee", "astronaut")
BASE = "rise"  # attributes from the shared sample alone: its run is the shared sample's cost


def photos(images: str | None, size: int, limit: int) -> list[tuple[str, np.ndarray]]:
    """(name, (size, size, 3) uint8) photos: skimage.data's, or a folder's first files."""
    if images:
        files = image_files(images)[:limit]
        return [(p.name, eval_crop(p, size, round(size * 8 / 7))) for p in files]
    from skimage import data

    out = []
    for name in PHOTOS[:limit]:
        img = Image.fromarray(getattr(data, name)()).convert("RGB")
        out.append((name, eval_view(img, size, round(size * 8 / 7))))
    return out


def _run(image, model, regions, methods, cfg) -> tuple[float, lc.Comparison | str]:
    t = time.perf_counter()
    try:
        cmp = lc.compare_explainers(image, model, regions, methods, config=cfg)
    except lc.LimecraftError as e:
        return time.perf_counter() - t, str(e)
    return time.perf_counter() - t, cmp


def side_by_side(shots, model, cfg, shapley_k: int) -> dict:
    """Every method alone and all together on each photo, round-robin; shapley on few regions."""
    alone = [n for n in lc.EXPLAINERS if n != "shapley"]
    runs = [*[(m,) for m in alone], tuple(alone), ("shapley",), ("lime", "shapley")]
    rows: dict[str, list[dict]] = {" + ".join(r): [] for r in runs}
    few = cfg.replace(segmentation="slic", n_segments=shapley_k)
    refused = ""
    for i, (name, image) in enumerate(shots):
        regs = lc.prepare_regions(as_float_image(image), cfg.segmentation)[0]
        small = lc.prepare_regions(as_float_image(image), few.segmentation)[0]
        k = i % len(runs)
        for methods in runs[k:] + runs[:k]:  # the order rotates photo by photo
            on_few = "shapley" in methods
            seconds, got = _run(image, model, small if on_few else regs, methods, cfg)
            if methods == ("shapley",) and i == 0:  # once: at the default regions it refuses
                said = _run(image, model, regs, methods, cfg)[1]
                refused = said if isinstance(said, str) else f"it ran (K = {regs.n_regions})"
            if isinstance(got, str):
                raise SystemExit(f"{methods} on {name}: {got}")
            rows[" + ".join(methods)].append(
                {"photo": name, "seconds": seconds, "passes": got.passes, "k": got.n_regions}
            )
            print(f"{name} {methods}: {seconds:.1f} s, {got.passes} passes", file=sys.stderr)
    return {"rows": rows, "shapley_refused": refused, "alone": alone}


def summary(r: dict, n: int) -> list[dict]:
    """One line per method: median wall time alone, marginal time (paired: its run minus
    RISE's on the same photo, the median over photos) and passes (module doc)."""
    rows = r["rows"]
    base = {x["photo"]: x for x in rows[BASE]}  # the shared sample alone, per photo
    out = []
    for key, v in rows.items():
        few = "shapley" in key  # over other regions: no shared-sample reference
        grads = [lc.EXPLAINERS[m] for m in key.split(" + ") if lc.EXPLAINERS[m].gradients]
        out.append(
            {
                "methods": key,
                "k": statistics.median(x["k"] for x in v),
                "seconds_alone": statistics.median(x["seconds"] for x in v),
                "marginal_seconds": None
                if few
                else statistics.median(x["seconds"] - base[x["photo"]]["seconds"] for x in v),
                "passes": statistics.median(x["passes"] for x in v),
                "extra_passes": None
                if few
                else statistics.median(x["passes"] - base[x["photo"]]["passes"] for x in v),
                "gradient_passes": sum(e.passes(0, n) for e in grads),
            }
        )
    return out


def carton(folder: str, model, cfg, limit: int, methods: list[str], batch: int = 50) -> dict:
    """On the photos the watermark turns into carton: which method puts the watermark first."""
    flips = [(p.name, im) for p, im in carton_flips(image_files(folder), model, limit, batch)]
    box = watermark_mask(224, 224, box=True)
    first = dict.fromkeys(methods, 0)
    ranks: dict[str, list[int]] = {m: [] for m in methods}
    rows = []
    for j, (name, image) in enumerate(flips):
        regs = lc.prepare_regions(
            as_float_image(image), cfg.segmentation, regions_mask=[box], names=["watermark"]
        )[0]
        wm = regs.names.index("watermark")
        t = time.perf_counter()
        cmp = lc.compare_explainers(image, model, regs, methods, config=cfg, target=CARTON)
        tops = {m: int(np.argmax(cmp.values(m))) for m in methods}
        for m in methods:
            first[m] += tops[m] == wm
            ranks[m].append(1 + int((cmp.values(m) > cmp.values(m)[wm]).sum()))
        rows.append(
            {
                "file": name,
                "k": cmp.n_regions,
                "watermark_first": [m for m in methods if tops[m] == wm],
                "watermark_rank": {m: ranks[m][-1] for m in methods},
                "agreement": cmp.agreement.sentence,
                "notes": {a.method: a.note for a in cmp.attributions if a.method in ("ig",)},
                "seconds": round(time.perf_counter() - t, 1),
            }
        )
        print(f"carton {j + 1}/{len(flips)}: {rows[-1]}", file=sys.stderr, flush=True)
    return {
        "photos": len(rows),
        "watermark_first": first,
        "median_rank": {m: statistics.median(v) if v else None for m, v in ranks.items()},
        "rows": rows,
    }


def markdown(r: dict) -> str:
    lines = [
        "# The explainers side by side on EfficientNet-Lite0",
        "",
        f"{r['machine']}; `{r['command']}`; {r['photos']} photos ({', '.join(r['names'])}), "
        f"224 px, the engine's defaults (N = {r['samples']}, quickshift, K median "
        f"{r['k_default']:g}), {r['runtime']}. Medians over the photos; each run alone scores "
        f"the shared sample too, so a method's own cost is its marginal time (its run minus "
        f"{BASE}'s on the same photo). The shared sample alone ({BASE}) took "
        f"{min(x['seconds'] for x in r['rows'][BASE]):.0f}-"
        f"{max(x['seconds'] for x in r['rows'][BASE]):.0f} s: differences within that spread "
        "are the machine's noise, not the method's cost; the passes are exact.",
        "",
        "| methods | K | seconds alone | marginal seconds | model passes | beyond the shared "
        "sample | forward + backward passes |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in r["summary"]:
        marg = "" if s["marginal_seconds"] is None else f"{s['marginal_seconds']:+.1f}"
        extra = "" if s["extra_passes"] is None else f"{s['extra_passes']:g}"
        lines.append(
            f"| {s['methods']} | {s['k']:g} | {s['seconds_alone']:.1f} | {marg} | "
            f"{s['passes']:g} | {extra} | {s['gradient_passes']} |"
        )
    lines += ["", f"Exact Shapley at the default regions: {r['shapley_refused']}"]
    return "\n".join(lines) + "\n"


def carton_markdown(c: dict) -> str:
    n = c["photos"]
    return (
        "\n".join(
            [
                f"# The watermark as a drawn region, on {n} photos the watermark turns into carton",
                "",
                f"{c['machine']}; `{c['command']}`; EfficientNet-Lite0 ({c['runtime']}), the "
                f"engine's defaults (N = {c['samples']}, quickshift) plus the watermark's box as one "
                f"drawn region; each photo explained for carton; {c['seconds']:.0f} s.",
                "",
                "| method | watermark's region first | its median rank |",
                "|---|---|---|",
                *(
                    f"| {m} | {v} of {n} | {c['median_rank'][m] or 0:g} |"
                    for m, v in c["watermark_first"].items()
                ),
            ]
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", help="a folder of photos (default: skimage.data's three)")
    ap.add_argument("--limit", type=int, default=3, help="photos at most (0: none)")
    ap.add_argument("--size", type=int, default=224, help="the photos' side, in pixels")
    ap.add_argument("--model", default="efficientnet_lite0")
    ap.add_argument("--samples", type=int, help="N (default: the engine's)")
    ap.add_argument("--shapley-k", type=int, default=10, help="regions for exact Shapley's row")
    ap.add_argument("--carton", help="a folder of ImageNet photos for the watermark part")
    ap.add_argument("--carton-limit", type=int, default=12)
    ap.add_argument(
        "--carton-methods", default=",".join(n for n in lc.EXPLAINERS if n != "shapley")
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    from models import registry

    model = registry.load_classifier(a.model, precision="fp32")
    cfg = lc.ExplainConfig() if a.samples is None else lc.ExplainConfig.from_flat(samples=a.samples)
    common = dict(
        command="python bench/bench_methods.py " + " ".join(argv or sys.argv[1:]),
        machine=f"{platform.machine()}, {os.cpu_count()} cores",
        runtime=model.precision_reason.split(":")[0],
        samples=cfg.sampling.samples,
    )
    shots = photos(a.images, a.size, a.limit)
    if shots:
        t0 = time.perf_counter()
        r = side_by_side(shots, model, cfg, a.shapley_k)
        r["summary"] = summary(r, cfg.sampling.samples)
        r.update(
            common,
            photos=len(shots),
            names=[n for n, _ in shots],
            k_default=statistics.median(x["k"] for x in r["rows"]["lime"]),
            seconds=round(time.perf_counter() - t0, 1),
        )
        write_results(None if a.no_write else a.out, "methods", r, markdown(r))
    if a.carton:
        t0 = time.perf_counter()
        methods = [m.strip() for m in a.carton_methods.split(",") if m.strip()]
        c = carton(a.carton, model, cfg, a.carton_limit, methods)
        c.update(common, seconds=round(time.perf_counter() - t0, 1))
        write_results(None if a.no_write else a.out, "methods_carton", c, carton_markdown(c))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
