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


def _setting_type(spec: Any):
    """argparse type for one setting: text to value, then checked by the schema's own rules."""
    from .config import check_setting, parse_text

    def parse(s: str) -> Any:
        try:
            return check_setting(spec.name, parse_text(spec, s))
        except LimecraftError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = spec.name
    return parse


def add_settings(parser: argparse.ArgumentParser) -> None:
    """One flag per setting of ``limecraft_core.config``, grouped as the schema groups them."""
    from .config import GROUPS, fields

    groups = {g: parser.add_argument_group(f"{g} settings") for g in GROUPS}
    for s in fields():
        lim = s.limit
        rng = f"; {lim.describe()}" if lim is not None else ""
        default = f" (default: {s.default!r})" if s.default not in (None, ()) else ""
        help_ = f"{s.help}{rng}{default}".replace("%", "%%")
        g = groups[s.group]
        if s.kind == "bool":
            g.add_argument(
                s.flag,
                dest=s.name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_,
            )
        elif s.choices:
            g.add_argument(
                s.flag, dest=s.name, choices=s.choices, default=argparse.SUPPRESS, help=help_
            )
        else:
            g.add_argument(
                s.flag,
                dest=s.name,
                type=_setting_type(s),
                default=argparse.SUPPRESS,
                metavar=s.kind.upper(),
                help=help_,
            )


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
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
        help="registry name, or a .pt2 / TorchScript .pt / .onnx file (default: demo); an .onnx "
        "file runs on onnxruntime in fp32, with its layout, size and labels read from the graph",
    )
    e.add_argument("--arch", help="torchvision architecture of a state_dict given as --model")
    e.add_argument("--labels", help="text file with one class name per line")
    e.add_argument("--input-size", type=_positive_int("--input-size"), help="model input size (px)")
    e.add_argument("--normalize", choices=["imagenet", "none"])
    e.add_argument(
        "--input-range",
        choices=["0-1", "0-255"],
        help=".onnx only: the pixel range the graph takes (default: 0-1)",
    )
    e.add_argument(
        "--onnx-outputs",
        choices=["auto", "logits", "probabilities"],
        help=".onnx only: what the graph returns (default: auto, read from the graph); a "
        "probability graph is explained as log p, so --output-space raw means log-probabilities",
    )
    e.add_argument(
        "--input-layout",
        choices=["auto", "NCHW", "NHWC"],
        help=".onnx only: the input's layout (default: auto, read from the graph)",
    )
    e.add_argument("--segments-file", help="a .npy or .png label map, used as is")
    e.add_argument("--regions-mask", help="a PNG whose non-zero values are handcrafted regions")
    e.add_argument(
        "--expected-mask",
        metavar="PNG",
        help="a PNG of the image's size whose non-zero (non-black, opaque) pixels mark the area "
        "you expect the model to rely on; adds localisation (relevance mass, rank accuracy, "
        "pointing game: a region counts as inside when half its pixels are) at no model pass",
    )
    e.add_argument(
        "--top-k",
        type=_positive_int("--top-k"),
        default=5,
        help="regions tinted in overlay.png on each side: k for and k against (default: 5)",
    )
    add_settings(e)
    e.add_argument("--quiet", action="store_true", help="print nothing but errors")

    sub.add_parser("models", help="list registered models and whether they can run now")

    d = sub.add_parser(
        "demo-data", help="write demo images, their tag and shape masks and labels.json"
    )
    d.add_argument("--out", required=True)
    d.add_argument("--count", type=_positive_int("--count"), default=20)
    d.add_argument("--conflict", action="store_true", help="tag and shape disagree in every image")
    d.add_argument("--seed", type=int, default=1000)

    for sp in (e, d):
        sp.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _onnx_inputs(model: Any) -> dict[str, Any]:
    """What an ONNX model was run with (its options resolved), for explanation.json."""
    module = getattr(model, "model", None)
    if not hasattr(module, "input_range") or not hasattr(module, "outputs"):
        return {}
    return {
        "input_range": module.input_range,
        "onnx_outputs": module.outputs,
        "input_layout": module.graph.layout,
        "model_description": module.description,
    }


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


def settings_from_args(a: argparse.Namespace):
    """The ExplainConfig of the flags given (the rest are the schema's defaults)."""
    from .config import ExplainConfig, fields

    return ExplainConfig.from_flat(
        {s.name: getattr(a, s.name) for s in fields() if hasattr(a, s.name)}
    )


#: overlay.png is at least this many pixels on its long side, so that region ids are readable.
OVERLAY_LONG_SIDE = 512


def cmd_explain(a: argparse.Namespace) -> int:
    from models.registry import load_classifier

    from .explain import explain
    from .io import encode_png, read_image, read_label_map, read_labels, read_mask

    image = read_image(a.image)
    config = settings_from_args(a)
    segments = regions_mask = None
    if a.segments_file is not None:
        if a.regions_mask is not None:
            raise LimecraftError("give either --segments-file or --regions-mask, not both")
        segments = read_label_map(a.segments_file)
    elif a.regions_mask is not None:
        regions_mask = read_mask(a.regions_mask)
    expected_mask = None
    if a.expected_mask is not None:
        expected_mask = _expected_area(read_mask(a.expected_mask), image.shape[:2], a.expected_mask)
    out = _out_dir(a.out)
    model = load_classifier(
        a.model,
        input_size=a.input_size,
        normalize=a.normalize,
        labels=read_labels(a.labels) if a.labels else None,
        device=config.speed.device,
        precision=config.speed.precision,
        arch=a.arch,
        channels_last=config.speed.channels_last,
        input_range=a.input_range,
        outputs=a.onnx_outputs,
        layout=a.input_layout,
    )
    result = explain(
        image,
        model,
        segments=segments,
        regions_mask=regions_mask,
        region_names=_hand_names(regions_mask),
        expected_mask=expected_mask,
        config=config,
        progress=_progress_printer(a.quiet),
    )
    doc = result.to_dict()
    doc["inputs"] = {
        "image_file": a.image,
        "model": a.model,
        "labels": a.labels,
        "arch": a.arch,
        **_onnx_inputs(model),
        "segments_file": a.segments_file,
        "regions_mask": a.regions_mask,
        "expected_mask": a.expected_mask,
    }
    files = [out / "explanation.json", out / "segments.npy", out / "overlay.png"]
    files[0].write_text(json.dumps(doc, indent=2))
    np.save(files[1], result.segments)
    files[2].write_bytes(encode_png(overlay_picture(image, result, a.top_k)))
    if not a.quiet:
        _print_summary(result, config.targets.output_space, a.top_k, expected_mask)
        for f in files:
            print(f"wrote {f}")
    return 0


def _expected_area(mask: np.ndarray, shape: tuple[int, int], path: str) -> np.ndarray:
    """--expected-mask as a bool area, checked before any model pass (read like --regions-mask)."""
    if mask.shape != tuple(shape):
        raise LimecraftError(
            f"--expected-mask {path!r} is {mask.shape[1]}x{mask.shape[0]} but the image is "
            f"{shape[1]}x{shape[0]}; draw the expected area on an image of the same size"
        )
    area = mask != 0
    if not area.any():
        raise LimecraftError(
            f"--expected-mask {path!r} is empty (all black or transparent); paint the area you "
            "expect the model to rely on in any non-black colour"
        )
    return area


def _hand_names(regions_mask: np.ndarray | None) -> list[str] | None:
    """'hand 1', 'hand 2', ...: a handcrafted region's one name, never read as another region's id."""
    if regions_mask is None:
        return None
    n = 1 if regions_mask.dtype == np.bool_ else len(np.unique(regions_mask[regions_mask != 0]))
    return [f"hand {i + 1}" for i in range(n)]


def region_label(result: Any, k: int) -> str:
    """How the summary names region ``k``: its name if it has one, else 'region k'.

    overlay.png writes the same region as its name, or as the bare id ``k``.
    """
    return result.region_names[k] or f"region {k}"


def overlay_picture(image: np.ndarray, result: Any, k: int) -> np.ndarray:
    """overlay.png: the weight overlay, at least 512 px on its long side, over its legend.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, the explained image
    result : Explanation
    k : int >= 1, regions tinted on each side

    Returns
    -------
    (H', W', 3) uint8 ndarray; each tinted region carries its id (or its name), as in the summary.
    """
    from . import render

    long_side = max(OVERLAY_LONG_SIDE, *result.segments.shape)
    texts = [name or str(i) for i, name in enumerate(result.region_names)]
    chosen = render.tinted_regions(result.weights, k=k)
    over = render.weight_overlay(
        image, result.segments, result.weights, k=k, names=texts, long_side=long_side
    )
    legend = render.overlay_legend(
        over.shape[1], class_label=result.class_labels[0], k=k, vmax=chosen.vmax
    )
    return render.stack_vertically(over, legend)


def _num(x: float | None, fmt: str) -> str:
    """A number, or 'n/a' where it was not computed."""
    return "n/a" if x is None or not np.isfinite(x) else format(x, fmt)


def _print_summary(
    result: Any, output_space: str, k: int, expected_mask: np.ndarray | None = None
) -> None:
    """The result in lines of ``name=value`` entries separated by '; ', one list item a line."""
    from . import render

    label = json.dumps(result.class_labels[0], ensure_ascii=False)
    print(
        f"target={label}; class={result.target}; {output_space}={result.predictions[0]:.3f}; "
        f"regions={result.n_regions}; R^2={result.score:.3f}; time={result.timings['total_s']:.2f} s"
    )
    run, asked = result.run, result.config.sampling.samples
    print(
        f"run: samples={run.samples_used}; allowed={asked}; "
        f"stopped early={'yes' if run.samples_used < asked else 'no'}; "
        f"model passes={run.model_passes}; precision={run.precision}"
    )
    if run.precision_reason:
        print(f"precision: {run.precision_reason}")
    chosen = render.tinted_regions(result.weights, k=k)
    if chosen.ids:
        print(
            f"regions tinted in overlay.png with the largest |weight| first (green: for {label}; "
            f"red: against; delta: the drop in {output_space} when only that region is hidden):"
        )
    else:
        print("no region has a non-zero weight; overlay.png tints none")
    for r in chosen.ids:
        print(
            f"  {region_label(result, r)}: weight={result.weights[r]:+.4f}; "
            f"delta={_num(result.deltas[0, r], '+.4f')}"
        )
    rest = result.n_regions - len(chosen.ids)
    if rest:
        print(
            f"{rest} other regions are not tinted (under {render.MIN_SHARE:.0%} of the largest "
            f"|weight| or beyond the top {k} of their side); explanation.json lists every region"
        )
    _print_trust(result, expected_mask)


def _print_trust(result: Any, expected_mask: np.ndarray | None = None) -> None:
    t = result.trust
    if t.stability is not None:
        st = t.stability
        print(
            f"stability: {'resamples' if st.source == 'stream' else 'repeats'}={st.repeats}; "
            f"verdict={st.verdict}; "
            f"regions that matter={len(st.matter)}; "
            f"Kendall's W over them={st.matter_kendall_w:.3f}; "
            f"top-{min(5, max(1, len(st.matter)))} overlap={st.matter_topk:.2f}; "
            f"sign flips among them={st.matter_sign_flips:.0%}; "
            f"Kendall's W top-10={st.kendall_w:.3f}"
        )
        print(f"verdict: {st.reason}")
        unsure = st.inconsistent_sign
        if unsure:
            print(
                f"sign entropy (bits) of the {len(unsure)} regions that change sign across "
                f"the {st.runs}: "
                + "; ".join(
                    f"{region_label(result, i)}={st.sign_entropy[i]:.2f}" for i in unsure[:10]
                )
                + (" …" if len(unsure) > 10 else "")
            )
    if t.convergence is not None:
        c = t.convergence
        if c.needed:
            print(f"convergence: stable (the verdict's rule) from {c.needed} samples on")
        else:
            print(f"convergence: not stable within {c.sizes[-1]} samples: use more")
    if t.kernel_sweep is not None:
        ks = t.kernel_sweep
        print(
            "kernel sweep R^2: "
            + "; ".join(
                f"{'uniform' if w == 'uniform' else f'width {w:g}'}={r2:.3f}"
                for w, r2 in zip(ks.widths, ks.scores, strict=True)
            )
        )
        sensitive = "; ".join(region_label(result, r) for r in ks.sensitive) or "none"
        print(f"width-sensitive regions: {sensitive}")
    if t.faithfulness is not None:
        f = t.faithfulness
        print(
            f"faithfulness: deletion AUC={f.deletion_auc:.3f}; "
            f"random deletion AUC={f.random_deletion_auc:.3f}; insertion AUC={f.insertion_auc:.3f}; "
            f"random insertion AUC={f.random_insertion_auc:.3f}; "
            f"held-out R^2={_num(f.heldout_r2, '.3f')}"
        )
    if t.irof is not None:  # the field's metrics (definitions in explanation.json)
        print(
            f"field metrics: IROF={t.irof.value:.2f}; IROF per region={t.irof.per_region:.3f}; "
            f"ROAD gap={t.road.value:.3f}; ROAD MoRF area={t.road.morf_area:.3f}; "
            f"ROAD LeRF area={t.road.lerf_area:.3f}; "
            f"faithfulness correlation={t.faithfulness_correlation.value:.3f}; "
            f"sparseness={t.sparseness.value:.3f}"
        )
        print(
            "reading: higher is better for IROF and the ROAD gap and LeRF area and the "
            "faithfulness correlation; lower is better for the ROAD MoRF area; higher sparseness "
            "means fewer regions carry the weight"
        )
    if t.localisation is not None:
        _print_localisation(result, t.localisation, expected_mask)
    if t.fills is not None:
        fc = t.fills
        print("fills (the top region; Spearman = rank agreement with the main fill):")
        for i, (name, top, rho) in enumerate(zip(fc.fills, fc.top1, fc.spearman[0], strict=True)):
            main = " (main)" if i == 0 else ""
            print(f"  {name}{main}: top={region_label(result, top)}; Spearman={rho:.2f}")


def _print_localisation(result: Any, loc: Any, area: np.ndarray | None) -> None:
    """The localisation line in ``name=value`` entries, then one sentence reading it."""
    names = [str(r) if not result.region_names[r] else result.region_names[r] for r in loc.regions]
    shown = " / ".join(names[:8]) + (" / …" if len(names) > 8 else "")
    print(
        f"localisation: expected regions={loc.expected}"
        + (f" ({shown})" if names else "")
        + f"; relevance mass={loc.relevance_mass:.2f}"
        f"; relevance rank accuracy={loc.relevance_rank_accuracy:.2f}"
        f"; pointing game={'hit' if loc.pointing_game else 'miss'}"
        f"; mask coverage={_num(loc.mask_coverage, '.2f')}"
    )
    print(localisation_sentence(result, loc, area))


def localisation_sentence(result: Any, loc: Any, area: np.ndarray | None = None) -> str:
    """One plain sentence (no commas) reading a Localisation of ``result``.

    With the expected ``area`` ((H, W) bool), a top region outside it that still overlaps it
    says how much of it does (an area split between regions, e.g. a tag's frame and its fill).
    """
    mass = f"relevance mass {loc.relevance_mass:.2f}"
    if loc.expected == 0:
        return (
            "no region lies at least half inside the expected area so nothing can be measured: "
            "use smaller regions or draw the area as a region (--regions-mask)"
        )
    if loc.positive_mass <= 0:
        return "no region has a positive weight so none of it falls inside the expected area"
    top_id = int(np.argmax(result.weights))
    top = region_label(result, top_id)
    if loc.pointing_game:
        how = "most of" if loc.relevance_mass >= 0.5 else "only a small part of"
        text = (
            f"the top region is inside the expected area and carries {how} the positive "
            f"weight: {mass}"
        )
    else:
        share = float(area[result.segments == top_id].mean()) if area is not None else 0.0
        part = f" ({share:.0%} of its pixels are inside)" if share > 0 else ""
        text = f"the model's top region ({top}) is outside the area you expected{part}: {mass}"
    if loc.mask_coverage is not None and loc.mask_coverage < 0.5:
        text += (
            f"; the expected regions cover only {loc.mask_coverage:.0%} of the area"
            " (draw it as a region with --regions-mask for a closer measure)"
        )
    return text


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
        shape = (s.shape_mask * 255).astype(np.uint8)  # the drawn shape, never the tag's pixels
        (out / f"{name}_shape.png").write_bytes(encode_png(shape))
        entries.append(
            {
                "file": f"{name}.png",
                "tag_mask": f"{name}_tag.png",
                "shape_mask": f"{name}_shape.png",
                "shape_class": int(s.shape_class),
                "tag_class": int(s.tag_class),
                "shape_label": demo.CLASS_NAMES[s.shape_class],
                "tag_label": demo.CLASS_NAMES[s.tag_class],
            }
        )
    (out / "labels.json").write_text(json.dumps(entries, indent=2))
    print(f"wrote {len(entries)} images, their tag and shape masks and labels.json to {out}")
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
