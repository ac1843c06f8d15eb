"""``audit``: explain a model over a folder of images, write each image's explanation as it
finishes and the audit's findings (audit.csv, audit.json, audit.html), and go on with --resume."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from limecraft_core._validate import LimecraftError
from limecraft_core.config import AUDIT_DEFAULTS, IN_FLIGHT
from limecraft_core.proposers import AUDIT_PROPOSERS, ROUTINE_NOTES

from .args import (
    add_model_options,
    add_propose_option,
    add_settings,
    model_kwargs,
    onnx_inputs,
    positive_int,
    proposers_given,
)

__all__ = ["audit_args", "audit_settings", "cmd_audit"]


def audit_args(au: argparse.ArgumentParser) -> None:
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
        "images in subfolders, the same subfolders): non-black pixels mark where a sound model "
        "should look (the object). Adds relevance mass and the pointing game, and flags the "
        "images whose prediction rests outside the mask. Masks of an artifact (the watermark "
        "command's masks/) mark where it should not look: give them as --regions-masks",
    )
    au.add_argument(
        "--regions-masks",
        metavar="DIR",
        help="a folder with your own regions, one mask per image named as the image (matched as "
        "--expected-masks are): each distinct non-zero value of an image's mask becomes a "
        "handcrafted region of its own (hand 1, hand 2, ...) beside the superpixels, e.g. the "
        "watermark command's masks/, so the audit says whether the model relies on them",
    )
    add_propose_option(au, "for every image, beside the superpixels", AUDIT_PROPOSERS)
    au.add_argument(
        "--truth",
        metavar="CSV",
        help="a CSV with the columns file,artifact (1 when the image carries the artifact you "
        "suspect, 0 when not; file as the audit names it, relative to IMAGES): each finding's "
        "membership scores get their AUROC and AP against it",
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
    add_model_options(au, "with LIMECRAFT_RAY_ADDRESS set, a registry name is scored on Ray Serve")
    add_settings(au, AUDIT_DEFAULTS)
    au.add_argument("--quiet", action="store_true", help="print nothing but errors")


def _audit_scorer(a: argparse.Namespace, config: Any) -> tuple[Any, str, Any, Any]:
    """The scorer of an audit, how it scores, the local work queue (or None) and the scorer
    without the queue (the prove phase's, which runs after the queue is shut down).

    With ``LIMECRAFT_RAY_ADDRESS`` set a registry name is scored on Ray Serve, several images in
    flight; otherwise the model runs here, behind one work queue that combines the chunks of
    the images in flight into shared forward passes.
    """
    from serving import WorkQueue, load_scorer, queued

    scorer = load_scorer(a.model, **model_kwargs(a, config))
    queue = WorkQueue(max_jobs=max(64, 4 * a.in_flight))  # its thread starts with its first job
    runner = queued(scorer, queue)
    if runner is scorer:  # on Ray Serve: several images in flight there
        return scorer, f"on Ray Serve at {scorer.config.address}", None, scorer
    if a.in_flight == 1:
        return scorer, "locally, one image at a time", None, scorer
    return runner, "locally, through a work queue of shared batches", queue, scorer


def _lazy_predict(a: argparse.Namespace, config: Any, loaded: Any) -> Any:
    """The prove phase's class probabilities of one image: through the audit's scorer, or one
    loaded on first use (a resume with every image finished loads the model only to prove)."""
    from limecraft_core.audit import scorer_predict

    held = {"predict": None if loaded is None else scorer_predict(loaded)}

    def predict(image: Any) -> Any:
        if held["predict"] is None:
            held["predict"] = scorer_predict(_audit_scorer(a, config)[3])
        return held["predict"](image)

    return predict


def _audit_truth(a: argparse.Namespace, files: list) -> dict[str, bool] | None:
    """The --truth CSV, checked against the images before any model is loaded."""
    if not a.truth:
        return None
    from limecraft_core.audit import read_truth

    try:
        text = Path(a.truth).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LimecraftError(f"--truth {a.truth!r} cannot be read: {e}") from None
    return read_truth(text, [f for f, _ in files])


def audit_settings(a: argparse.Namespace):
    """The audit's ExplainConfig: its defaults (SLIC, 40 regions) under the flags given."""
    from limecraft_core.audit import audit_config
    from limecraft_core.config import fields

    return audit_config({s.name: getattr(a, s.name) for s in fields() if hasattr(a, s.name)})


def _audit_images(
    a: argparse.Namespace,
) -> tuple[list[tuple[str, Path]], dict[str, Path], dict[str, Path]]:
    """The images to audit, their expected masks and their own regions masks, checked before
    any model is loaded."""
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
    # a missing package, before the model loads; the defaults' is a note, not an error
    a.propose, off = proposers_given(a.propose)
    if off:  # said even with --quiet: the audit runs otherwise than its defaults say
        sys.stderr.write(f"limecraft: {off}\n")
    own = match_masks(files, a.regions_masks, "--regions-masks") if a.regions_masks else {}
    if a.regions_masks and not own:
        raise LimecraftError(
            f"--regions-masks {a.regions_masks!r} has no mask named as any of the images "
            f"(e.g. {files[0][0]!r}: a mask named {Path(files[0][0]).stem}.png)"
        )
    if AuditFolder.holds_audit(a.out) and not a.resume:
        raise LimecraftError(
            f"--out {a.out!r} already holds an audit: add --resume to go on with it (finished "
            "images are kept), or choose another folder"
        )
    return files, masks, own


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

    inputs = {"model": a.model, "labels": a.labels, "arch": a.arch, **onnx_inputs(scorer)}
    bar = tqdm(total=len(todo), unit="img", desc="audit", disable=a.quiet or not todo)
    counts = {"flagged": 0, "errors": 0, "proposed": 0}

    def save(outcome: Any) -> None:  # in the image's thread, beside the others' explanations
        folder.write(outcome, key, top_k=a.top_k, inputs=inputs)

    def done(outcome: Any) -> None:
        rows[outcome.row.key] = outcome.row
        if not a.quiet and outcome.input is not None:
            for note in outcome.input.notes:
                if not note.startswith(ROUTINE_NOTES):  # counted, not printed
                    bar.write(f"{outcome.row.file}: {note}")
        counts["flagged"] += outcome.row.flagged
        counts["errors"] += not outcome.row.ok
        counts["proposed"] += bool(outcome.input is not None and outcome.input.regions)
        bar.set_postfix_str(
            f"{counts['flagged']} flagged, {counts['errors']} errors"
            + (f", {counts['proposed']} with proposed regions" if a.propose else "")
        )
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

    from limecraft_core.io.masks_folder import check_images_source

    check_images_source(a.images)  # a typo is answered before the engine (torch) loads
    from limecraft_core.io.audit_folder import AuditFolder, settings_key
    from limecraft_core.io.dataset import audit_items

    config = audit_settings(a)
    files, masks, own = _audit_images(a)
    truth = _audit_truth(a, files)
    folder = AuditFolder(a.out)
    model = _audit_model(a)
    proposers = list(dict.fromkeys(a.propose))
    key = settings_key(
        config, model, a.top_k, proposers=proposers, regions_masks=bool(a.regions_masks)
    )
    items = audit_items(files, masks, regions_masks=own, proposers=proposers)
    finished = {it.key: folder.finished(it, key) for it in items} if a.resume else {}
    rows: dict[str, Any] = {k: r for k, r in finished.items() if r is not None}
    todo = [it for it in items if it.key not in rows]
    kept = len(rows)
    scorer, how, queue, raw = _audit_scorer(a, config) if todo else (None, "", None, None)
    if not a.quiet:
        print(
            f"auditing {len(items)} images with {a.model}"
            + (f" ({len(masks)} with an expected mask)" if masks else "")
            + (f" ({len(own)} with regions of your own)" if own else "")
            + (f"; regions proposed by {', '.join(proposers)}" if proposers else "")
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
            model=model, complete=complete, run=run, truth=truth,
            predict=_lazy_predict(a, config, raw) if complete else None,
            source={"images": str(a.images), "expected_masks": a.expected_masks,
                    "count": len(items), "with_masks": len(masks),
                    "regions_masks": a.regions_masks, "with_regions": len(own),
                    "propose": proposers},
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
    print(f"Across images: {found.headline}")
    for f in found.discovered:
        if f.sentence != found.headline:
            print(f"  also: {f.sentence}")
    for i, f in enumerate(found.discovered, start=1):
        if f.truth is not None:
            t = f.truth
            print(
                f"  finding {i} against --truth ({t.images} images, {t.positives} with the "
                f"artifact): AUROC {t.auroc:.2f}, AP {t.ap:.2f}"
            )
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
