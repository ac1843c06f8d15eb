"""What the audit's findings would be if each row also described its proposals of either sign.

    python bench/audit_regroup.py W/out-propose [W/out-null ...] --truth W/truth.json

An audit row describes the (up to 3) regions that push the photo's predicted class the most. On
the real case (``bench/bench_audit.py --real``), 6 of the 34 photos whose top-1 the watermark
changes have the watermark's proposal with a *negative* weight for the predicted class (the
watermark lowered the clean class), so no finding can list them (``bench/audit_misses.py``).
This re-describes every finished row of an audit folder from its saved image and explanation
with :func:`~limecraft_core.audit.regions.describe_regions`'s ``proposals=True`` (every proposed
region that holds 5% of the |weight|, whatever its sign and rank), groups the rows again, and
prints the first groups beside the audit's own (as saved, and described again without the
option, since rows saved by an older engine may differ): images listed, how many carry the watermark and
how many of those the watermark changed. No model pass; the prove phase is not run, so a group
here is a candidate, not a confirmed finding.
"""

from __future__ import annotations

from pathlib import Path

from _common import ROOT  # noqa: F401  (first: it puts the repository on sys.path)

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import dataclasses
import json
import sys

from limecraft_core.audit.grouping import group_regions
from limecraft_core.audit.regions import describe_regions
from limecraft_core.audit.rows import AuditRow
from limecraft_core.io.audit_folder import LoadedAudit, load_audit


def redescribed(audit: LoadedAudit, proposals: bool) -> list[AuditRow]:
    """The audit's finished rows described again from their saved image and explanation."""
    return [
        dataclasses.replace(
            r,
            regions=describe_regions(
                audit.image(r.key), audit.explanation(r.key), proposals=proposals
            ),
        )
        if r.ok
        else r
        for r in audit.rows
    ]


def groups(rows: list[AuditRow], truth: dict, most: int = 3) -> list[dict]:
    """The first ``most`` groups: kind, images, and how many carry the watermark / it changed."""
    marked = {k for k, t in truth.items() if t["marked"]}
    changed = {k for k in marked if truth[k]["top1_clean"] != truth[k]["top1_marked"]}
    out = []
    for g in group_regions(rows)[:most]:
        listed = {rows[i].file for i in g.rows}
        out.append({"kind": g.kind, "images": len(listed), "marked": len(listed & marked),
                    "changed": len(listed & changed)})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("audits", nargs="+", type=Path, help="finished audit folders")
    ap.add_argument("--truth", type=Path, required=True, help="the real case's truth.json")
    args = ap.parse_args(argv)
    truth = json.loads(args.truth.read_text())["files"]
    changed = sum(t["marked"] and t["top1_clean"] != t["top1_marked"] for t in truth.values())
    result = {}
    for folder in args.audits:
        audit = load_audit(folder)
        result[folder.name] = {
            "as saved": groups(list(audit.rows), truth),
            # described again as the audit does today (rows of an older engine may differ)
            "described again": groups(redescribed(audit, False), truth),
            "with proposals of either sign": groups(redescribed(audit, True), truth),
        }
        for name, found in result[folder.name].items():
            print(f"{folder.name}, {name}: {len(found)} group(s) shown")
            for f in found:
                print(f"  {f['kind']}: {f['images']} images, {f['marked']} watermarked, "
                      f"{f['changed']} of the {changed} it changed")  # fmt: skip
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
