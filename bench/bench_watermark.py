"""The ImageNet-W watermark shortcut on a model: top-1 clean and watermarked, and the flips.

Each photo is resized to 256 on its shorter side and centre-cropped to 224 (ImageNet's
evaluation transform), then scored clean and with the ImageNet-W watermark
(``limecraft_core.add_watermark``: the package's exact pixels at 224, opacity 0.5 unless
``--opacity``). The class of each photo comes from ImageNet-style file names
(``n01440764_*.JPEG``: the WordNet id, mapped to its index with timm's offline ImageNet
synsets) or from ``--labels CSV`` (``file,label``; a label is a class index or name).

It reports top-1 clean and watermarked, the gap (the paper's "IN-W gap"), the share of
predictions that are ``carton`` (class 478) before and after, and every photo whose prediction
became ``carton``. ``--also-normalize imagenet`` adds the clean top-1 under another
normalisation (EfficientNet-Lite0 takes (x − 0.5) / 0.5; ImageNet's mean and std cost it
accuracy).

    python bench/bench_watermark.py --images DIR --model efficientnet_lite0
    python bench/bench_watermark.py --images DIR --model efficientnet_lite0 --limit 50 --no-write

The photos are not in the repository: fetch a public sample (e.g. one ImageNet photo per class)
and point ``--images`` at it. Writes watermark.json and watermark.md to ``--out`` (default
bench/results) unless ``--no-write``. fp32 throughout (on a CPU the registry's
efficientnet_lite0 runs in ONNX Runtime).
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import csv
import json
import os
import platform
import re
import time

import numpy as np
from PIL import Image

from limecraft_core import LimecraftError
from limecraft_core.edits.watermark import add_watermark

CARTON = 478
SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp")
_WNID = re.compile(r"^(n\d{8})")


def eval_crop(path: Path, size: int = 224, resize: int = 256) -> np.ndarray:
    """ImageNet's evaluation view of a photo file (:func:`eval_view`)."""
    return eval_view(Image.open(path).convert("RGB"), size, resize)


def eval_view(img: Image.Image, size: int = 224, resize: int = 256) -> np.ndarray:
    """ImageNet's evaluation view: shorter side to ``resize`` (bilinear), centre ``size`` crop."""
    w, h = img.size
    s = resize / min(w, h)
    img = img.resize((max(size, round(w * s)), max(size, round(h * s))), Image.Resampling.BILINEAR)
    w, h = img.size
    left, top = (w - size) // 2, (h - size) // 2
    return np.asarray(img.crop((left, top, left + size, top + size)))


def image_files(folder: str | Path) -> list[Path]:
    """The image files directly in ``folder`` (by suffix), sorted by name."""
    return sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in SUFFIXES)


def carton_flips(
    files: list[Path], model, limit: int | None = None, batch: int = 50, progress: bool = False
) -> list[tuple[Path, np.ndarray]]:
    """The photos of ``files`` (ImageNet's evaluation view) whose top-1 the watermark turns
    into carton, in order, the first ``limit`` of them (None: all), each as (its path, the
    watermarked (224, 224, 3) uint8); ``progress`` prints the count to stderr batch by batch."""
    flips: list[tuple[Path, np.ndarray]] = []
    for k in range(0, len(files), batch):
        views = [eval_crop(p) for p in files[k : k + batch]]
        marked = [add_watermark(v).image for v in views]
        pc = np.asarray(model.predict(np.stack(views))).argmax(1)
        pm = np.asarray(model.predict(np.stack(marked))).argmax(1)
        flips += [
            (files[k + i], marked[i]) for i in np.flatnonzero((pm == CARTON) & (pc != CARTON))
        ]
        if progress:
            print(f"flips {k + len(views)}/{len(files)}: {len(flips)}", file=sys.stderr, flush=True)
        if limit is not None and len(flips) >= limit:
            break
    return flips[:limit]


def class_of(names: list[str]) -> dict[str, int]:
    """``{wnid: index}`` for ImageNet-1k, from timm's offline synset list."""
    from timm.data import ImageNetInfo

    info = ImageNetInfo()
    return {info.index_to_label_name(i): i for i in range(info.num_classes())}


def labelled_images(
    folder: Path, labels_csv: Path | None, class_names: list[str]
) -> list[tuple[Path, int]]:
    """(path, class index) of every photo, from the file names or the CSV."""
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in SUFFIXES)
    if labels_csv is not None:
        by_name = {n: i for i, n in enumerate(class_names)}
        table = {}
        with open(labels_csv, newline="") as f:
            for row in csv.reader(f):
                if len(row) < 2 or row[0] == "file":
                    continue
                lab = row[1].strip()
                table[row[0].strip()] = int(lab) if lab.isdigit() else by_name[lab]
        return [(p, table[p.name]) for p in files if p.name in table]
    wnids = class_of(class_names)
    out = [
        (p, wnids[m.group(1)]) for p in files if (m := _WNID.match(p.name)) and m.group(1) in wnids
    ]
    if not out:
        raise LimecraftError(
            f"no photo in {folder} has an ImageNet-style name (n01440764_*.JPEG): give --labels CSV"
        )
    return out


def scores(model, images: list[np.ndarray], batch: int) -> np.ndarray:
    return np.asarray(model.predict(np.stack(images), batch_size=batch))


def run(args: argparse.Namespace) -> dict:
    from models import registry

    model = registry.load_classifier(args.model, precision="fp32", device=args.device)
    names = list(model.labels or [f"class {i}" for i in range(1000)])
    items = labelled_images(Path(args.images), args.labels, names)[: args.limit or None]
    t0 = time.perf_counter()
    clean, marked, truth = [], [], []
    for k in range(0, len(items), args.batch):
        chunk = items[k : k + args.batch]
        views = [eval_crop(p) for p, _ in chunk]
        clean.append(scores(model, views, args.batch))
        marked.append(
            scores(model, [add_watermark(v, opacity=args.opacity).image for v in views], args.batch)
        )
        truth += [c for _, c in chunk]
        print(f"{k + len(chunk)}/{len(items)}", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - t0
    clean, marked, truth = np.concatenate(clean), np.concatenate(marked), np.asarray(truth)
    pc, pm = clean.argmax(1), marked.argmax(1)
    flipped = [
        (items[i][0].name, names[pc[i]]) for i in np.flatnonzero((pm == CARTON) & (pc != CARTON))
    ]
    out = {
        "model": args.model,
        "images": len(items),
        "opacity": args.opacity,
        "top1_clean": float((pc == truth).mean()),
        "top1_watermarked": float((pm == truth).mean()),
        "carton_clean": int((pc == CARTON).sum()),
        "carton_watermarked": int((pm == CARTON).sum()),
        "flips_to_carton": [{"file": f, "was": w} for f, w in flipped],
        "pulled_to": _pulled(pc, pm, names),
        "seconds": round(seconds, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }
    out["gap_points"] = round(100 * (out["top1_clean"] - out["top1_watermarked"]), 1)
    for norm in args.also_normalize:
        other = registry.load_classifier(
            args.model, precision="fp32", device=args.device, normalize=norm
        )
        views = [eval_crop(p) for p, _ in items]
        out[f"top1_clean_{norm}"] = float(
            (scores(other, views, args.batch).argmax(1) == truth).mean()
        )
    return out


def _pulled(pc: np.ndarray, pm: np.ndarray, names: list[str], top: int = 6) -> list[dict]:
    """The classes that gained the most predictions under the watermark."""
    gain = np.bincount(pm, minlength=len(names)) - np.bincount(pc, minlength=len(names))
    order = np.argsort(-gain)[:top]
    return [
        {"class": names[i], "index": int(i), "gained": int(gain[i])} for i in order if gain[i] > 0
    ]


def markdown(r: dict) -> str:
    lines = [
        f"# The ImageNet-W watermark on {r['model']}",
        "",
        f"{r['images']} photos, 256 → centre 224, watermark opacity {r['opacity']}, fp32, "
        f"{r['seconds']} s on {r['machine']}.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| top-1 clean | {100 * r['top1_clean']:.1f}% |",
        f"| top-1 watermarked | {100 * r['top1_watermarked']:.1f}% |",
        f"| gap | {r['gap_points']} points |",
        f"| predicted `carton`, clean → watermarked | {r['carton_clean']} → {r['carton_watermarked']} |",
        f"| photos that flip to `carton` | {len(r['flips_to_carton'])} |",
    ]
    lines += [
        f"| top-1 clean, `{k[11:]}` normalisation | {100 * v:.1f}% |"
        for k, v in r.items()
        if k.startswith("top1_clean_")
    ]
    lines += [
        "",
        "Classes that gained the most predictions: "
        + ", ".join(f"{p['class']} (+{p['gained']})" for p in r["pulled_to"])
        + ".",
    ]
    lines += [
        "",
        "Flipped to `carton`: "
        + ", ".join(f"{f['file']} (was {f['was']})" for f in r["flips_to_carton"])
        + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", required=True, help="a folder of photos")
    p.add_argument("--model", default="efficientnet_lite0", help="a registry name or model file")
    p.add_argument(
        "--labels", type=Path, help="CSV file,label when the names are not ImageNet-style"
    )
    p.add_argument("--limit", type=int, default=0, help="the first N photos only")
    p.add_argument("--opacity", type=float, default=0.5)
    p.add_argument("--batch", type=int, default=25)
    p.add_argument("--device", default="cpu")
    p.add_argument("--also-normalize", nargs="*", default=[], help="e.g. imagenet")
    p.add_argument("--no-write", action="store_true", help="print only")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="results folder")
    args = p.parse_args(argv)
    r = run(args)
    md = markdown(r)
    print(md)
    if not args.no_write:
        out = args.out
        out.mkdir(parents=True, exist_ok=True)
        (out / "watermark.json").write_text(json.dumps(r, indent=2) + "\n")
        (out / "watermark.md").write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
