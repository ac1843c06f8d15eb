"""``explain``: explain a model's prediction on one image, write explanation.json, segments.npy
and overlay.png, and print the result with its trust checks (:mod:`limecraft.printing`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import numpy as np

from limecraft_core._validate import LimecraftError

from .args import (
    add_explainers_option,
    add_model_options,
    add_propose_option,
    add_settings,
    model_kwargs,
    onnx_inputs,
    out_dir,
    positive_int,
    settings_from_args,
)
from .printing import print_explainers, print_summary

__all__ = ["cmd_explain", "explain_args"]


def explain_args(e: argparse.ArgumentParser) -> None:
    e.add_argument("image", help="PNG, JPEG, WebP, BMP, TIFF or GIF")
    e.add_argument(
        "--out", required=True, help="folder for explanation.json, segments.npy, overlay.png"
    )
    add_model_options(e, "the command line runs the model locally")
    e.add_argument("--segments-file", help="a .npy or .png label map, used as is")
    e.add_argument("--regions-mask", help="a PNG whose non-zero values are handcrafted regions")
    add_propose_option(e, "added to --regions-mask's (if any) beside the superpixels")
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
    add_explainers_option(e)
    add_settings(e)
    e.add_argument("--quiet", action="store_true", help="print nothing but errors")


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
    from limecraft_core import render
    from limecraft_core.explain import explain
    from limecraft_core.io import (
        encode_png,
        expected_area,
        read_label_map,
        read_labels,
        read_mask,
    )
    from limecraft_core.io.images import read_image_noted
    from models.registry import fit_warning, load_classifier

    image, note = read_image_noted(a.image)  # note: a GIF's first frame, transparency
    if note:
        sys.stderr.write(f"limecraft: note: explaining image {a.image!r} ({note})\n")
    config = settings_from_args(a)
    segments = regions_mask = None
    if a.segments_file is not None:
        if a.regions_mask is not None:
            raise LimecraftError("give either --segments-file or --regions-mask, not both")
        segments = read_label_map(a.segments_file)
    elif a.regions_mask is not None:
        regions_mask = read_mask(a.regions_mask)
    if a.propose and segments is not None:
        raise LimecraftError(
            "--propose adds regions beside the superpixels: give it with --regions-mask or "
            "alone, not with --segments-file"
        )
    region_names = _hand_names(regions_mask)
    region_origins = ["uploaded"] * len(region_names) if region_names else None
    if a.propose:
        from limecraft_core.proposers import check_proposer_names

        check_proposer_names(a.propose)  # a missing package, before the model loads
        regions_mask, region_names, region_origins = _with_proposals(
            image, regions_mask, a.propose, a.quiet
        )
    expected_mask = None
    if a.expected_mask is not None:
        expected_mask = expected_area(
            read_mask(a.expected_mask), image.shape[:2], f"--expected-mask {a.expected_mask!r}"
        )
    out = out_dir(a.out)
    try:
        model = load_classifier(a.model, **model_kwargs(a, config))
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
        region_names=region_names,
        region_origins=region_origins,
        expected_mask=expected_mask,
        config=config,
        progress=_progress_printer(a.quiet),
    )
    if a.explainers:
        result = _with_explainers(image, model, result, a.explainers, a.quiet)
    doc = result.to_dict()
    doc["inputs"] = {
        "image_file": a.image,
        "model": a.model,
        "labels": a.labels,
        "arch": a.arch,
        **onnx_inputs(model),
        "segments_file": a.segments_file,
        "regions_mask": a.regions_mask,
        **({"propose": list(a.propose)} if a.propose else {}),
        "expected_mask": a.expected_mask,
    }
    files = [out / "explanation.json", out / "segments.npy", out / "overlay.png"]
    files[0].write_text(json.dumps(doc, indent=2))
    np.save(files[1], result.segments)
    files[2].write_bytes(encode_png(render.explanation_overlay(image, result, a.top_k)))
    if not a.quiet:
        print_summary(result, config.targets.output_space, a.top_k)
        if result.explainers is not None:
            print_explainers(result)
        for f in files:
            print(f"wrote {f}")
    return 0


def _with_explainers(image: np.ndarray, model, result, methods: Sequence[str], quiet: bool):
    """``result`` carrying the explainers ``methods`` over its own regions (same settings,
    same target), named as the summary names them."""
    import dataclasses

    from limecraft_core.compare import compare_explainers

    from .printing import region_label

    names = [region_label(result, r) for r in range(result.n_regions)]
    cmp = compare_explainers(
        image,
        model,
        result.segments,
        methods,
        config=result.config,
        target=result.target,
        region_names=names,
        progress=_progress_printer(quiet),
    )
    return dataclasses.replace(result, explainers=cmp)


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


def _with_proposals(
    image: np.ndarray, regions_mask: np.ndarray | None, names: Sequence[str], quiet: bool
) -> tuple[list[np.ndarray] | None, list[str] | None, list[str] | None]:
    """The handcrafted regions of ``--regions-mask`` (if any) followed by the proposals of
    ``names``, as masks, names and origins (``uploaded``, ``proposed:<proposer>``) for
    ``explain``; the proposers' notes printed."""
    from limecraft_core.proposers import propose

    found = propose(image, names)
    masks: list[np.ndarray] = []
    if regions_mask is not None:
        values = [True] if regions_mask.dtype == np.bool_ else np.unique(regions_mask)
        masks = [regions_mask == v for v in values if v != 0]
    own = _hand_names(regions_mask) or []
    if not quiet:
        for note in found.notes:
            print(f"proposed: {note}")
        if found.proposals:
            print(f"proposed {len(found.proposals)} regions: {', '.join(found.names)}")
    masks += found.masks
    origins = ["uploaded"] * len(own) + found.origins
    return (masks or None), ([*own, *found.names] or None), (origins or None)
