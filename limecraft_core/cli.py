"""``python -m limecraft_core``: explain an image from the command line, list models, make demo data.

Bad input ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from ._validate import Cancelled, LimecraftError
from .classifier import ModelError

PROG = "python -m limecraft_core"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad option in one line (exit 2) instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"limecraft: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def _positive_int(name: str):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {s!r}") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be at least 1, got {v}")
        return v

    return parse


def _number(name: str, lo: float = 0.0):
    def parse(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {s!r}") from None
        if not np.isfinite(v) or v < lo:
            raise argparse.ArgumentTypeError(f"{name} must be a number >= {lo}, got {s}")
        return v

    return parse


def _kernel_width(s: str) -> float | str:
    if s == "uniform":
        return s
    v = _number("--kernel-width")(s)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"--kernel-width must be > 0 or 'uniform', got {s}")
    return v


def _width_list(s: str) -> list[float | str]:
    out: list[float | str] = []
    for part in s.split(","):
        part = part.strip()
        if part:
            out.append(_kernel_width(part))
    if not out:
        raise argparse.ArgumentTypeError("--kernel-widths needs at least one width")
    return out


def _int_list(s: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers separated by commas, got {s!r}"
        ) from None


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    from .perturbation import FILLS, SCHEMES
    from .segmentation import METHODS

    p = _Parser(prog=PROG, description="LIMEcraft: LIME over regions that mean something.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    e = sub.add_parser("explain", help="explain a model's prediction on an image")
    e.add_argument("image", help="PNG, JPEG, WebP, BMP, TIFF or GIF")
    e.add_argument(
        "--out", required=True, help="folder for explanation.json, segments.npy, overlay.png"
    )
    e.add_argument(
        "--model",
        default="demo",
        help="registry name, or a .pt2 / TorchScript .pt file (default: demo)",
    )
    e.add_argument("--arch", help="torchvision architecture of a state_dict given as --model")
    e.add_argument("--labels", help="text file with one class name per line")
    e.add_argument("--input-size", type=_positive_int("--input-size"), help="model input size (px)")
    e.add_argument("--normalize", choices=["imagenet", "none"])
    e.add_argument("--segmentation", choices=METHODS, default="quickshift")
    e.add_argument(
        "--n-segments", type=_positive_int("--n-segments"), help="target number of regions"
    )
    e.add_argument("--segments-file", help="a .npy or .png label map, used as is")
    e.add_argument("--regions-mask", help="a PNG whose non-zero values are handcrafted regions")
    e.add_argument(
        "--inner-segments",
        type=_positive_int("--inner-segments"),
        help="segment inside each handcrafted region into about N pieces (1: one feature)",
    )
    e.add_argument(
        "--outer-segments",
        type=_positive_int("--outer-segments"),
        help="regions for the rest of the image (1: one background feature)",
    )
    e.add_argument("--samples", type=_positive_int("--samples"), default=1000)
    e.add_argument("--sampling", choices=SCHEMES, default="bernoulli")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--fill", default="mean", help=f"{', '.join(FILLS)}, or #RRGGBB")
    e.add_argument("--kernel-width", type=_kernel_width, default=0.25, help="> 0, or 'uniform'")
    e.add_argument("--ridge-alpha", type=_number("--ridge-alpha"), default=1.0)
    e.add_argument("--output-space", choices=["probability", "raw"], default="probability")
    e.add_argument("--target", type=int, help="class index to explain (default: top-1)")
    e.add_argument("--top-labels", type=_positive_int("--top-labels"), default=1)
    e.add_argument("--batch-size", type=_positive_int("--batch-size"))
    e.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    e.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16", "fp16"],
        default="auto",
        help="autocast precision (auto: bf16 on a GPU, fp32 on the CPU; bf16 on a CPU is ~2x faster)",
    )
    e.add_argument(
        "--channels-last",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="NHWC memory format for the model (default: on a GPU only)",
    )
    e.add_argument(
        "--dedup",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="score each distinct mask once (exact; default on)",
    )
    e.add_argument(
        "--early-stop",
        type=_number("--early-stop"),
        help="stop sampling when two halves of the sample agree with Kendall's W >= this, e.g. 0.9",
    )
    e.add_argument(
        "--early-stop-step",
        type=_positive_int("--early-stop-step"),
        help="samples between early-stop checks (default max(100, samples/10))",
    )
    e.add_argument(
        "--top-k", type=_positive_int("--top-k"), default=5, help="regions shown in overlay.png"
    )
    t = e.add_argument_group(
        "trust checks (JSON keys stability, convergence, kernel_sweep, faithfulness, fills)"
    )
    t.add_argument(
        "--repeats",
        type=_positive_int("--repeats"),
        default=1,
        help="explain with seeds seed..seed+R-1 and report stability",
    )
    t.add_argument("--kernel-widths", type=_width_list, help="e.g. 0.1,0.25,0.5,1,uniform")
    t.add_argument(
        "--convergence",
        type=_int_list,
        help="sample sizes, e.g. 100,200,500,1000 (needs --repeats >= 2)",
    )
    t.add_argument(
        "--faithfulness", action="store_true", help="deletion/insertion curves and held-out R^2"
    )
    t.add_argument(
        "--compare-fills",
        type=lambda v: [x.strip() for x in v.split(",") if x.strip()],
        help="e.g. blur,inpaint: how much the explanation depends on the fill",
    )
    t.add_argument(
        "--mask-expansion", type=int, default=0, help="grow hidden regions by N pixels (0-64)"
    )
    e.add_argument("--quiet", action="store_true", help="print nothing but errors")

    sub.add_parser("models", help="list registered models and whether they can run now")

    d = sub.add_parser("demo-data", help="write demo images, their tag masks and labels.json")
    d.add_argument("--out", required=True)
    d.add_argument("--count", type=_positive_int("--count"), default=20)
    d.add_argument("--conflict", action="store_true", help="tag and shape disagree in every image")
    d.add_argument("--seed", type=int, default=1000)

    for sp in (e, d):
        sp.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _out_dir(path: str) -> Path:
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise LimecraftError(f"--out {path!r} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LimecraftError(f"cannot create --out folder {path!r}: {e.strerror or e}") from None
    return out


def _progress_printer(quiet: bool):
    if quiet or not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        sys.stderr.write(f"\r  model passes {done}/{total}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def cmd_explain(a: argparse.Namespace) -> int:
    from . import render
    from .explain import explain
    from .io import encode_png, read_image

    image = read_image(a.image)
    out = _out_dir(a.out)
    result = explain(
        image,
        a.model,
        samples=a.samples,
        seed=a.seed,
        fill=a.fill,
        kernel_width=a.kernel_width,
        ridge_alpha=a.ridge_alpha,
        output_space=a.output_space,
        target=a.target,
        top_labels=a.top_labels,
        batch_size=a.batch_size,
        device=a.device,
        segmentation=a.segmentation,
        n_segments=a.n_segments,
        segments_file=a.segments_file,
        regions_mask=a.regions_mask,
        inner_segments=a.inner_segments,
        outer_segments=a.outer_segments,
        sampling=a.sampling,
        labels=a.labels,
        input_size=a.input_size,
        normalize=a.normalize,
        precision=a.precision,
        channels_last=a.channels_last,
        dedup=a.dedup,
        early_stop=a.early_stop,
        early_stop_step=a.early_stop_step,
        arch=a.arch,
        progress=_progress_printer(a.quiet),
        repeats=a.repeats,
        kernel_widths=a.kernel_widths,
        convergence=a.convergence,
        faithfulness=a.faithfulness,
        compare_fills=a.compare_fills,
        mask_expansion=a.mask_expansion,
    )
    doc = result.to_dict()
    doc["settings"].update(
        {"image_file": a.image, "model": a.model, "labels": a.labels, "arch": a.arch}
    )
    (out / "explanation.json").write_text(json.dumps(doc, indent=2))
    np.save(out / "segments.npy", result.segments)
    overlay = render.top_regions(image, result.segments, result.weights, k=a.top_k)
    (out / "overlay.png").write_bytes(encode_png(overlay))
    if not a.quiet:
        order = np.argsort(-np.abs(result.weights))[:5]
        print(
            f"{result.class_labels[0]} (class {result.target}, {a.output_space} "
            f"{result.predictions[0]:.3f}); {result.n_regions} regions, R^2 {result.score:.3f}, "
            f"{result.timings['total_s']:.2f} s"
        )
        for k in order:
            name = f" ({result.region_names[k]!r})" if result.region_names[k] else ""
            print(
                f"  region {k}{name}: weight {result.weights[k]:+.4f}, delta {result.deltas[0, k]:+.4f}"
            )
        _print_trust(result)
        print(f"wrote {out / 'explanation.json'}, {out / 'segments.npy'}, {out / 'overlay.png'}")
    return 0


def _print_trust(result: Any) -> None:
    t = result.trust
    if "stability" in t:
        st = t["stability"]
        print(
            f"stability over {st['repeats']} repeats: {st['verdict']} (Kendall's W {st['kendall_w']:.3f}, "
            f"top-5 Jaccard {st['jaccard_top5']:.2f}, sign flips {st['sign_flips']:.0%})"
        )
    if "convergence" in t:
        c = t["convergence"]
        needed = f"{c['needed']} samples" if c["needed"] else f"more than {c['sizes'][-1]} samples"
        print(f"convergence: W >= 0.9 from {needed}")
    if "kernel_sweep" in t:
        k = t["kernel_sweep"]
        print(
            f"kernel widths {k['widths']}: R^2 {[round(x, 3) for x in k['scores']]}; "
            f"width-sensitive regions: {k['sensitive'] or 'none'}"
        )
    if "faithfulness" in t:
        f = t["faithfulness"]
        print(
            f"faithfulness: deletion AUC {f['deletion_auc']:.3f} (random {f['random_deletion_auc']:.3f}), "
            f"insertion AUC {f['insertion_auc']:.3f} (random {f['random_insertion_auc']:.3f}), "
            f"held-out R^2 {f['heldout_r2']:.3f}"
        )
    if "fills" in t:
        f = t["fills"]
        print(
            "fills: "
            + ", ".join(
                f"{n}: top region {top}, Spearman {rho:.2f}"
                for n, top, rho in zip(f["fills"], f["top1"], f["spearman"][0], strict=True)
            )
        )


def cmd_models(_a: argparse.Namespace) -> int:
    from models.registry import list_models

    rows = [
        (
            m.name,
            "yes" if m.ready else "no",
            str(m.input_size),
            str(m.num_classes),
            m.reason or m.description,
        )
        for m in list_models()
    ]
    head = ("name", "ready", "input", "classes", "notes")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    for r in [head, *rows]:
        print("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4])
    return 0


def cmd_demo_data(a: argparse.Namespace) -> int:
    from models import demo

    from .io import encode_png

    out = _out_dir(a.out)
    samples = demo.generate(a.count, seed=a.seed, mode="conflict" if a.conflict else "aligned")
    entries: list[dict[str, Any]] = []
    for i, s in enumerate(samples):
        name = f"demo_{i:04d}"
        (out / f"{name}.png").write_bytes(encode_png(s.image))
        (out / f"{name}_tag.png").write_bytes(encode_png((s.tag_mask * 255).astype(np.uint8)))
        entries.append(
            {
                "file": f"{name}.png",
                "tag_mask": f"{name}_tag.png",
                "shape_class": int(s.shape_class),
                "tag_class": int(s.tag_class),
                "shape_label": demo.CLASS_NAMES[s.shape_class],
                "tag_label": demo.CLASS_NAMES[s.tag_class],
            }
        )
    (out / "labels.json").write_text(json.dumps(entries, indent=2))
    print(f"wrote {len(entries)} images, their tag masks and labels.json to {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 bad input or model failure, 130 cancelled)."""
    args = build_parser().parse_args(argv)
    handlers = {"explain": cmd_explain, "models": cmd_models, "demo-data": cmd_demo_data}
    try:
        return handlers[args.command](args)
    except (LimecraftError, ModelError) as e:
        if getattr(args, "debug", False):
            raise
        sys.stderr.write(f"limecraft: error: {_one_line(str(e))}\n")
        return 2
    except (Cancelled, KeyboardInterrupt):
        sys.stderr.write("limecraft: cancelled\n")
        return 130
    except Exception as e:  # a bug of ours: still one line, with --debug for the traceback
        if getattr(args, "debug", False) or os.environ.get("LIMECRAFT_DEBUG"):
            raise
        sys.stderr.write(
            f"limecraft: internal error: {type(e).__name__}: {_one_line(str(e))} (rerun with --debug)\n"
        )
        return 1


def _one_line(s: str) -> str:
    return " ".join(s.split())
