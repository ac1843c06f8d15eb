"""``python -m limecraft``: explain an image, audit a model over a folder of images, list
models, make demo data, watermark a folder.

This module wires the commands into one parser and runs them; each command is its own module
(``explain_cmd``, ``audit_cmd``, ``models_cmd``, ``demo_data_cmd``, ``watermark_cmd``), the
arguments they share are in ``args`` and what ``explain`` prints is in ``printing``.

Bad input ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

# Only what the parser needs (each command imports the rest when it runs), so --help answers
# at once.
from limecraft_core._validate import Cancelled, LimecraftError, ModelError

from .args import PROG
from .audit_cmd import audit_args, cmd_audit
from .demo_data_cmd import cmd_demo_data, demo_data_args
from .explain_cmd import cmd_explain, explain_args
from .models_cmd import cmd_models
from .watermark_cmd import cmd_watermark, watermark_args

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad option in one line (exit 2) instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"limecraft: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    p = _Parser(prog=PROG, description="LIMEcraft: LIME over regions that mean something.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    e = sub.add_parser("explain", help="explain a model's prediction on an image")
    explain_args(e)

    au = sub.add_parser(
        "audit",
        help="explain a model over a folder of images and say where it looks across them",
        description="Explain every image of a folder (or a list file), write each explanation "
        "as explain does, one summary row per image (audit.csv, audit.json) and a "
        "self-contained audit.html that leads with what was found. Results are written per "
        "image as they finish: Ctrl-C or a crash keeps them, and --resume goes on from there.",
    )
    audit_args(au)

    sub.add_parser("models", help="list registered models and whether they can run now")

    d = sub.add_parser(
        "demo-data", help="write demo images, their tag and shape masks and labels.json"
    )
    demo_data_args(d)

    wm = sub.add_parser(
        "watermark",
        help="add the ImageNet-W watermark to a folder of photos, its masks beside them",
        description="The ImageNet-W watermark (Li et al., CVPR 2023) over every image of a "
        "folder (or a list file): OUT/images/ (watermarked, PNG), OUT/masks/ (where the text "
        "lies, named as the images: audit --regions-masks makes each a region of its own, and "
        "the app's regions read them; they mark the artifact, not where a sound model should "
        "look, so they are no --expected-masks) and "
        "OUT/watermark.json, so that you can rebuild the watermark test for your own model.",
    )
    watermark_args(wm)

    for sp in (e, au, d, wm):
        sp.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 bad input or model failure, 130 cancelled)."""
    args = build_parser().parse_args(argv)
    handlers = {
        "explain": cmd_explain,
        "audit": cmd_audit,
        "models": cmd_models,
        "demo-data": cmd_demo_data,
        "watermark": cmd_watermark,
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


def _one_line(s: str) -> str:
    return " ".join(s.split())
