"""``demo-data``: write the demo images with their tag and shape masks and labels.json, or with
--mixed an audit set (aligned and conflict images, the drawn shapes as expected masks)."""

from __future__ import annotations

import argparse
from pathlib import Path

from limecraft_core._validate import LimecraftError

from .args import PROG, out_dir, positive_int

__all__ = ["cmd_demo_data", "demo_data_args"]


def demo_data_args(d: argparse.ArgumentParser) -> None:
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
