"""``python -m limecraft``: explain an image, audit a model over a folder of images, list
models, make demo data.

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

# Only what the parser needs: the engine's settings schema and its errors, neither of which
# imports torch or scikit-image, so --help answers at once (the commands import the rest).
from limecraft_core._validate import Cancelled, LimecraftError, ModelError
from limecraft_core.config import AUDIT_DEFAULTS, IN_FLIGHT
from models import formats

from .args import out_dir, positive_int

PROG = "python -m limecraft"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad option in one line (exit 2) instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"limecraft: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def _setting_type(spec: Any):
    """argparse type for one setting: text to value, then checked by the schema's own rules."""
    from limecraft_core.config import check_setting, parse_text

    def parse(s: str) -> Any:
        try:
            return check_setting(spec.name, parse_text(spec, s))
        except LimecraftError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = spec.name
    return parse


def add_settings(parser: argparse.ArgumentParser, defaults: dict[str, Any] | None = None) -> None:
    """One flag per setting of ``limecraft_core.config``, grouped as the schema groups them;
    ``defaults`` are the command's own defaults where they differ from the schema's (the
    audit's), as its help says."""
    from limecraft_core.config import GROUPS, fields

    defaults = defaults or {}
    groups = {g: parser.add_argument_group(f"{g} settings") for g in GROUPS}
    for s in fields():
        lim = s.limit
        rng = f"; {lim.describe()}" if lim is not None else ""
        value = defaults.get(s.name, s.default)
        own = " for an audit" if s.name in defaults else ""
        default = f" (default{own}: {value!r})" if value not in (None, ()) else ""
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


def _add_model_options(p: argparse.ArgumentParser, where: str) -> None:
    """The model options ``explain`` and ``audit`` share."""
    p.add_argument(
        "--model",
        default="demo",
        help=f"registry name, or a model file: {formats.in_words()} (default: demo); an .onnx "
        f"file runs on onnxruntime in fp32, with its layout, size and labels read from the graph; "
        f"{where}",
    )
    p.add_argument("--arch", help="torchvision architecture of a state_dict given as --model")
    p.add_argument("--labels", help="text file with one class name per line")
    p.add_argument("--input-size", type=positive_int("--input-size"), help="model input size (px)")
    p.add_argument(
        "--normalize",
        choices=["imagenet", "half", "none"],
        help="imagenet: ImageNet's mean and std subtracted (torchvision's models); half: "
        "(x - 0.5) / 0.5, so [-1, 1] (TF-style models such as EfficientNet-Lite); none: pixels "
        "in [0, 1] (default for model files)",
    )
    p.add_argument(
        "--input-range",
        choices=["0-1", "0-255"],
        help=".onnx only: the pixel range the graph takes (default: 0-1)",
    )
    p.add_argument(
        "--onnx-outputs",
        choices=["auto", "logits", "probabilities"],
        help=".onnx only: what the graph returns (default: auto, read from the graph); a "
        "probability graph is explained as log p, so --output-space raw means log-probabilities",
    )
    p.add_argument(
        "--input-layout",
        choices=["auto", "NCHW", "NHWC"],
        help=".onnx only: the input's layout (default: auto, read from the graph)",
    )


def _model_kwargs(a: argparse.Namespace, config: Any) -> dict[str, Any]:
    """``models.registry.load_classifier``'s keywords for the model options and settings."""
    from limecraft_core.io import read_labels

    return dict(
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


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    p = _Parser(prog=PROG, description="LIMEcraft: LIME over regions that mean something.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    e = sub.add_parser("explain", help="explain a model's prediction on an image")
    e.add_argument("image", help="PNG, JPEG, WebP, BMP, TIFF or GIF")
    e.add_argument(
        "--out", required=True, help="folder for explanation.json, segments.npy, overlay.png"
    )
    _add_model_options(e, "the command line runs the model locally")
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
        type=positive_int("--top-k"),
        default=5,
        help="regions tinted in overlay.png on each side: k for and k against (default: 5)",
    )
    add_settings(e)
    e.add_argument("--quiet", action="store_true", help="print nothing but errors")

    au = sub.add_parser(
        "audit",
        help="explain a model over a folder of images and say where it looks across them",
        description="Explain every image of a folder (or a list file), write each explanation "
        "as explain does, one summary row per image (audit.csv, audit.json) and a "
        "self-contained audit.html that leads with what was found. Results are written per "
        "image as they finish: Ctrl-C or a crash keeps them, and --resume goes on from there.",
    )
    au.add_argument(
        "images",
        metavar="IMAGES",
        help="a folder (searched recursively for PNG, JPEG, WebP, BMP, TIFF and GIF files) or a "
        "text file listing one image path per line (relative to the list file; # comments)",
    )
    au.add_argument("--out", required=True, help="folder of the audit (created if missing)")
    au.add_argument(
        "--expected-masks",
        metavar="DIR",
        help="a folder with one mask per image, named as the image (any image extension; for "
        "images in subfolders, the same subfolders): non-black pixels mark where the model "
        "should look (the object). Adds relevance mass and the pointing game, and flags the "
        "images whose prediction rests outside the mask",
    )
    au.add_argument(
        "--resume",
        action="store_true",
        help="go on with an audit in --out: images already finished with the same file, mask "
        "and settings are kept, the rest are explained",
    )
    au.add_argument(
        "--limit", type=positive_int("--limit"), help="audit only the first N images (by name)"
    )
    au.add_argument(
        "--in-flight",
        type=positive_int("--in-flight"),
        default=IN_FLIGHT,
        help=f"images explained at once (default {IN_FLIGHT}): their perturbations share the "
        "model's forward passes where they fit (same input size), or go to Ray Serve together",
    )
    au.add_argument(
        "--top-k",
        type=positive_int("--top-k"),
        default=5,
        help="regions tinted in each overlay.png on each side (default: 5)",
    )
    _add_model_options(au, "with LIMECRAFT_RAY_ADDRESS set, a registry name is scored on Ray Serve")
    add_settings(au, AUDIT_DEFAULTS)
    au.add_argument("--quiet", action="store_true", help="print nothing but errors")

    sub.add_parser("models", help="list registered models and whether they can run now")

    d = sub.add_parser(
        "demo-data", help="write demo images, their tag and shape masks and labels.json"
    )
    d.add_argument("--out", required=True)
    d.add_argument("--count", type=positive_int("--count"), default=20)
    d.add_argument("--conflict", action="store_true", help="tag and shape disagree in every image")
    d.add_argument(
        "--mixed",
        action="store_true",
        help="an audit set: half aligned, half conflict images (shuffled), in images/, with the "
        "drawn shapes as expected masks in masks/ and the tags in tags/ (audit it with "
        "--expected-masks DIR/masks)",
    )
    d.add_argument("--seed", type=int, default=1000)

    from .watermark_cmd import watermark_args

    wm = sub.add_parser(
        "watermark",
        help="add the ImageNet-W watermark to a folder of photos, its masks beside them",
        description="The ImageNet-W watermark (Li et al., CVPR 2023) over every image of a "
        "folder (or a list file): OUT/images/ (watermarked, PNG), OUT/masks/ (where the text "
        "lies, named as the images: audit --expected-masks and the app's regions read them) and "
        "OUT/watermark.json, so that you can rebuild the watermark test for your own model.",
    )
    watermark_args(wm)

    for sp in (e, au, d, wm):
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
    from limecraft_core.config import ExplainConfig, fields

    return ExplainConfig.from_flat(
        {s.name: getattr(a, s.name) for s in fields() if hasattr(a, s.name)}
    )


def cmd_explain(a: argparse.Namespace) -> int:
    from limecraft_core import render
    from limecraft_core.explain import explain
    from limecraft_core.io import (
        encode_png,
        expected_area,
        read_image,
        read_label_map,
        read_labels,
        read_mask,
    )
    from models.registry import fit_warning, load_classifier

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
        expected_mask = expected_area(
            read_mask(a.expected_mask), image.shape[:2], f"--expected-mask {a.expected_mask!r}"
        )
    out = out_dir(a.out)
    try:
        model = load_classifier(a.model, **_model_kwargs(a, config))
    except LimecraftError as e:
        if a.arch is None and "state_dict" in str(e):  # as the app says it
            raise LimecraftError(
                f"{e}. If it is a state_dict, name its architecture with --arch (for example "
                "--arch resnet18)"
            ) from None
        raise
    if a.labels:
        names = read_labels(a.labels)
        _warn_label_count(a.labels, names, int(model.predict(image).shape[-1]))
    misfit = fit_warning(a.model, image.shape, "give one with --model")
    if misfit:  # as the app says it, before the run
        sys.stderr.write(f"limecraft: warning: {misfit}\n")
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
    files[2].write_bytes(encode_png(render.explanation_overlay(image, result, a.top_k)))
    if not a.quiet:
        _print_summary(result, config.targets.output_space, a.top_k, expected_mask)
        for f in files:
            print(f"wrote {f}")
    return 0


def _warn_label_count(path: str, names: Sequence[str], scores: int) -> None:
    """On stderr, as the app says it: a labels file whose names do not match the model's
    outputs (the explanation still runs)."""
    if len(names) != scores:
        rest = "the extra names are not used" if len(names) > scores else "the rest are 'class i'"
        sys.stderr.write(
            f"limecraft: warning: the labels file {path!r} has {len(names)} names but the model "
            f"gives {scores} scores: {rest}\n"
        )


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


def _num(x: float | None, fmt: str) -> str:
    """A number, or 'n/a' where it was not computed."""
    return "n/a" if x is None or not np.isfinite(x) else format(x, fmt)


def _print_summary(
    result: Any, output_space: str, k: int, expected_mask: np.ndarray | None = None
) -> None:
    """The result in lines of ``name=value`` entries separated by '; ', one list item a line."""
    from limecraft_core import render

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
    from limecraft_core.trust import name_regions

    t = result.trust
    if t.stability is not None:
        st = t.stability
        two_parts = ""
        if st.conclusion:  # the verdict in two parts: the conclusion, then the detail
            who = " + ".join(
                f"{region_label(result, i)} ({'for' if sign > 0 else 'against'})"
                for i, sign in zip(st.conclusion, st.conclusion_signs, strict=True)
            )
            detail = {True: "settled", False: "not settled", None: "not judged"}
            lead = "" if st.conclusion_lead is None else f"lead={st.conclusion_lead:.1f} sd; "
            two_parts = (
                f"conclusion={who}; held in={st.conclusion_agreement:.0%} of the runs; {lead}"
                f"detail={detail[st.detail_settled]}; "
            )
        print(
            f"stability: {'resamples' if st.source == 'stream' else 'repeats'}="
            f"{st.runs.split()[0]}; verdict={st.verdict}; {two_parts}"
            f"regions that matter={len(st.matter)}; "
            f"Kendall's W over them={st.matter_kendall_w:.3f}; "
            f"top-{min(5, max(1, len(st.matter)))} overlap={st.matter_topk:.2f}; "
            f"sign flips among them={st.matter_sign_flips:.0%}; "
            f"Kendall's W top-10={st.kendall_w:.3f}"
        )
        print(f"verdict: {name_regions(st.reason, lambda i: region_label(result, i))}")
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
    from models.demo_data import write_demo

    out = out_dir(a.out)
    if a.mixed and a.conflict:
        raise LimecraftError("give either --mixed or --conflict, not both")
    if a.mixed:
        return _demo_mixed(out, a.count, a.seed)
    entries = write_demo(out, a.count, a.seed, mode="conflict" if a.conflict else "aligned")
    print(f"wrote {len(entries)} images, their tag and shape masks and labels.json to {out}")
    return 0


def _demo_mixed(out: Path, count: int, seed: int) -> int:
    from models.demo_data import write_demo_mixed

    entries = write_demo_mixed(out, count, seed)
    n_conflict = sum(e["mode"] == "conflict" for e in entries)
    print(
        f"wrote {len(entries)} images ({len(entries) - n_conflict} aligned, {n_conflict} conflict) "
        f"to {out / 'images'}, their drawn shapes as expected masks in {out / 'masks'}, "
        f"their tags in {out / 'tags'} and labels.json to {out}"
    )
    print(
        f"audit them: {PROG} audit {out / 'images'} --model demo --expected-masks "
        f"{out / 'masks'} --out {out / 'audit'}"
    )
    return 0


def _audit_scorer(a: argparse.Namespace, config: Any) -> tuple[Any, str, Any]:
    """The scorer of an audit, how it scores, and the local work queue (or None).

    With ``LIMECRAFT_RAY_ADDRESS`` set a registry name is scored on Ray Serve, several images in
    flight; otherwise the model runs here, behind one work queue that combines the chunks of
    the images in flight into shared forward passes.
    """
    from serving import WorkQueue, load_scorer, queued

    scorer = load_scorer(a.model, **_model_kwargs(a, config))
    queue = WorkQueue(max_jobs=max(64, 4 * a.in_flight))  # its thread starts with its first job
    runner = queued(scorer, queue)
    if runner is scorer:  # on Ray Serve: several images in flight there
        return scorer, f"on Ray Serve at {scorer.config.address}", None
    if a.in_flight == 1:
        return scorer, "locally, one image at a time", None
    return runner, "locally, through a work queue of shared batches", queue


def audit_settings(a: argparse.Namespace):
    """The audit's ExplainConfig: its defaults (SLIC, 40 regions) under the flags given."""
    from limecraft_core.audit import audit_config
    from limecraft_core.config import fields

    return audit_config({s.name: getattr(a, s.name) for s in fields() if hasattr(a, s.name)})


def _audit_images(a: argparse.Namespace) -> tuple[list[tuple[str, Path]], dict[str, Path]]:
    """The images to audit and their expected masks, checked before any model is loaded."""
    from limecraft_core.io.audit_folder import AuditFolder
    from limecraft_core.io.dataset import list_images, match_masks

    files = list_images(a.images)
    if a.limit is not None:
        files = files[: a.limit]
    masks = match_masks(files, a.expected_masks) if a.expected_masks else {}
    if a.expected_masks and not masks:
        raise LimecraftError(
            f"--expected-masks {a.expected_masks!r} has no mask named as any of the images "
            f"(e.g. {files[0][0]!r}: a mask named {Path(files[0][0]).stem}.png)"
        )
    if AuditFolder.holds_audit(a.out) and not a.resume:
        raise LimecraftError(
            f"--out {a.out!r} already holds an audit: add --resume to go on with it (finished "
            "images are kept), or choose another folder"
        )
    return files, masks


def _audit_model(a: argparse.Namespace) -> dict[str, Any]:
    """The model options, as audit.json records them (and the settings key hashes them)."""
    names = ("arch", "labels", "input_size", "normalize", "input_range", "onnx_outputs")
    return {"name": a.model, **{n: getattr(a, n) for n in (*names, "input_layout")}}


def _audit_explain(
    a: argparse.Namespace, folder: Any, key: str, todo: list, scorer: Any, config: Any,
    rows: dict[str, Any],
) -> bool:  # fmt: skip
    """Explain the images to do with a progress bar; each image's files are written in its own
    thread as it finishes. Returns False when Ctrl-C stopped it (everything finished is kept)."""
    from tqdm import tqdm

    from limecraft_core.audit import run_audit

    inputs = {"model": a.model, "labels": a.labels, "arch": a.arch, **_onnx_inputs(scorer)}
    bar = tqdm(total=len(todo), unit="img", desc="audit", disable=a.quiet or not todo)
    counts = {"flagged": 0, "errors": 0}

    def save(outcome: Any) -> None:  # in the image's thread, beside the others' explanations
        folder.write(outcome, key, top_k=a.top_k, inputs=inputs)

    def done(outcome: Any) -> None:
        rows[outcome.row.key] = outcome.row
        counts["flagged"] += outcome.row.flagged
        counts["errors"] += not outcome.row.ok
        bar.set_postfix_str(f"{counts['flagged']} flagged, {counts['errors']} errors")
        bar.update(1)

    try:
        run_audit(todo, scorer, config, done, in_flight=a.in_flight, save=save)
        return True
    except KeyboardInterrupt:
        return False
    finally:
        bar.close()


def cmd_audit(a: argparse.Namespace) -> int:
    import time

    from limecraft_core.io.audit_folder import AuditFolder, settings_key
    from limecraft_core.io.dataset import audit_items

    config = audit_settings(a)
    files, masks = _audit_images(a)
    folder = AuditFolder(a.out)
    model = _audit_model(a)
    key = settings_key(config, model, a.top_k)
    items = audit_items(files, masks)
    finished = {it.key: folder.finished(it, key) for it in items} if a.resume else {}
    rows: dict[str, Any] = {k: r for k, r in finished.items() if r is not None}
    todo = [it for it in items if it.key not in rows]
    kept = len(rows)
    scorer, how, queue = _audit_scorer(a, config) if todo else (None, "", None)
    if not a.quiet:
        print(
            f"auditing {len(items)} images with {a.model}"
            + (f" ({len(masks)} with an expected mask)" if masks else "")
            + (f"; {kept} already finished are kept" if kept else "")
            + (f"; scored {how}, {a.in_flight} in flight" if todo else "")
        )
    t0 = time.perf_counter()
    complete = False
    try:
        complete = _audit_explain(a, folder, key, todo, scorer, config, rows)
    finally:  # whatever happened, the findings of what is finished are written
        seconds = time.perf_counter() - t0
        made = len(rows) - kept
        run = {"in_flight": a.in_flight, "scored": how, "explained": made, "kept": kept}
        rate = round(60 * made / max(seconds, 1e-9), 1)
        run |= {"seconds": round(seconds, 2), "images_per_minute": rate}
        if queue is not None:
            run |= {"forward_passes": queue.forward_calls, "shared_passes": queue.combined_calls}
            queue.shutdown()
        found = folder.finish(
            [rows[it.key] for it in items if it.key in rows], config=config, key=key,
            model=model, complete=complete, run=run,
            source={"images": str(a.images), "expected_masks": a.expected_masks,
                    "count": len(items), "with_masks": len(masks)},
        )  # fmt: skip
    if not complete:
        sys.stderr.write(
            f"limecraft: interrupted: {len(rows)} of {len(items)} images are finished and kept in "
            f"{a.out}; run the same command with --resume to finish\n"
        )
        return 130
    if not a.quiet:
        _print_audit(found, folder, made, seconds, queue)
    return 0 if found.ok else 2


def _print_audit(found: Any, folder: Any, made: int, seconds: float, queue: Any) -> None:
    for line in found.sentences:
        print(line)
    if made:
        extra = (
            f"; {queue.forward_calls} forward passes, {queue.combined_calls} shared by "
            "several images"
            if queue is not None
            else ""
        )
        print(
            f"explained {made} images in {seconds:.1f} s "
            f"({60 * made / seconds:.0f} images/min{extra})"
        )
    for name in ("audit.html", "audit.csv", "audit.json"):
        print(f"wrote {folder.path / name}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 bad input or model failure, 130 cancelled)."""
    args = build_parser().parse_args(argv)
    handlers = {
        "explain": cmd_explain,
        "audit": cmd_audit,
        "models": cmd_models,
        "demo-data": cmd_demo_data,
        "watermark": _cmd_watermark,
    }
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


def _cmd_watermark(a: argparse.Namespace) -> int:
    from .watermark_cmd import cmd_watermark

    return cmd_watermark(a)


def _one_line(s: str) -> str:
    return " ".join(s.split())
