"""Should the trust verdict use the explainers' agreement? Decided on the calibration cases.

For each case of ``bench_calibration.py`` (the same images, regions and models), the default
run is made and judged against the case's cached reference (5 independent fp32 repeats at
N = 2000, ``bench/results/calibration_refs/``) by ``bench_calibration.judge``, as that benchmark
does; then LIME, KernelSHAP, occlusion and RISE (:func:`limecraft_core.compare_explainers`, the
same regions, the engine's defaults, the default run's class) are compared, and the case counts
as **the methods agree** when all of them put the same region first (the largest |value|).

Two rules that would bring agreement into the verdict are scored against the references:

* **downgrade**: a "stable" verdict becomes "borderline" when the methods disagree on the first
  region. It can only remove dangerous errors (a stable claim the reference does not support)
  and can only cost correct stable verdicts;
* **upgrade**: a "borderline" verdict becomes "stable" when the methods agree and their first
  region is the default's conclusion. It can only fix conservative misses and can only add
  dangerous errors.

The verdict should use agreement only if a rule fixes more than it breaks, with no new
dangerous error. The reference of a case is read whichever engine version cached it (the
cache key's hash covers the code that makes weights). Where today's engine makes the case's
regions differently from the run ``bench_calibration.py`` recorded with those references
(``calibration.json``: another region count or another default conclusion), the reference's
region ids need not be today's: the case is **stale**, reported and left out of the scores.

    python bench/bench_trust_agreement.py --imagenet-dir /tmp/imagenet

Writes trust_agreement.json and .md to ``--out`` (default bench/results) unless ``--no-write``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import ROOT, write_results  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import json
import os
import platform
import time

import bench_calibration as cal
import numpy as np

import limecraft_core as lc

METHODS = ("lime", "kernelshap", "occlusion", "rise")


def cached_reference(case_id: str, refs: Path) -> tuple[np.ndarray, str] | None:
    """The case's cached reference weights (any engine version) and that version."""
    found = sorted(refs.glob(f"{case_id}-n2000-*-{cal.REF_FORMAT}.npz"))
    if not found:
        return None
    with np.load(found[-1]) as z:
        return z["weights"], found[-1].name.rsplit("-", 2)[-2]


def recorded_runs(path: Path = cal.RESULTS / "calibration.json") -> dict[str, dict]:
    """The default runs that ``bench_calibration.py`` judged when its references were made, by
    case: their regions and conclusion tell whether a reference still fits today's run."""
    if not path.is_file():
        return {}
    return {c["case"]: c for c in json.loads(path.read_text())["cases"]}


def one_case(
    case: cal.Case, clf: lc.Classifier, refs: Path, recorded: dict[str, dict]
) -> dict | None:
    """The case's default run judged against its cached reference, and the methods compared.
    A reference made over other regions (the engine has changed how the case's regions are
    made since: another count, or another default conclusion than the recorded run's) is
    **stale**: its region ids need not be today's, so the case is reported, not judged."""
    got = cached_reference(case.id, refs)
    if got is None:
        print(f"{case.id}: no cached reference in {refs}; skipped", file=sys.stderr)
        return None
    weights, version = got
    row, segments = cal.default_run(case, clf)
    then = recorded.get(case.id)
    stale = (
        weights.shape[1] != row["regions"]
        or then is None
        or then["regions"] != row["regions"]
        or then["default"]["conclusion"] != row["default"]["conclusion"]
    )
    judged = cal.judge(row, weights)
    cfg = lc.ExplainConfig.from_flat(**case.settings) if case.settings else lc.ExplainConfig()
    t = time.perf_counter()
    cmp = lc.compare_explainers(
        case.image(), clf, segments, METHODS, config=cfg, target=row["target_index"]
    )
    firsts = {m: int(np.argmax(np.abs(cmp.values(m)))) for m in METHODS}
    return {
        "case": case.id,
        "model": case.model,
        "reference_version": version,
        "stale": bool(stale),
        "regions": row["regions"],
        "default_verdict": judged["default"]["verdict"],
        "default_conclusion": judged["default"]["conclusion"],
        "reference_verdict": judged["reference"]["verdict"],
        "conclusion_agrees": judged["conclusion_agrees"],
        "dangerous": judged["dangerous_stable"] or judged["dangerous_first"],
        "methods_first": firsts,
        "methods_agree": len(set(firsts.values())) == 1,
        "agreement": cmp.agreement.sentence,
        "compare_seconds": round(time.perf_counter() - t, 1),
    }


def score_rules(rows: list[dict]) -> dict:
    """What each rule would change against the references (module doc); stale cases aside."""
    down_fixed = down_broken = up_fixed = up_broken = up_dangerous = 0
    stale = [r["case"] for r in rows if r.get("stale")]
    rows = [r for r in rows if not r.get("stale")]
    for r in rows:
        stable, ref_stable = r["default_verdict"] == "stable", r["reference_verdict"] == "stable"
        if stable and not r["methods_agree"]:  # downgraded: agrees iff the reference is not stable
            down_fixed += (not r["conclusion_agrees"]) and not ref_stable
            down_broken += r["conclusion_agrees"]
        first = next(iter(r["methods_first"].values()))
        if (
            r["default_verdict"] == "borderline"
            and r["methods_agree"]
            and first in r["default_conclusion"]
        ):
            up_fixed += ref_stable and not r["conclusion_agrees"]
            up_broken += r["conclusion_agrees"]
            up_dangerous += not ref_stable
    agrees = sum(r["conclusion_agrees"] for r in rows)
    return {
        "cases": len(rows),
        "stale": stale,
        "conclusion_agrees": agrees,
        "dangerous": sum(r["dangerous"] for r in rows),
        "methods_agree": sum(r["methods_agree"] for r in rows),
        "stable_and_methods_disagree": sum(
            r["default_verdict"] == "stable" and not r["methods_agree"] for r in rows
        ),
        "downgrade": {"fixed": down_fixed, "broken": down_broken},
        "upgrade": {"fixed": up_fixed, "broken": up_broken, "dangerous": up_dangerous},
    }


def decision(s: dict) -> str:
    down, up = s["downgrade"], s["upgrade"]
    better = [
        name
        for name, r in (("downgrade", down), ("upgrade", up))
        if r["fixed"] > r["broken"] and not r.get("dangerous")
    ]
    if better:
        return f"use agreement ({', '.join(better)}): it fixes more verdicts than it breaks"
    return (
        "keep the verdict as it is: neither rule fixes more verdicts than it breaks "
        f"(downgrade fixes {down['fixed']}, breaks {down['broken']}; upgrade fixes "
        f"{up['fixed']}, breaks {up['broken']}, adds {up['dangerous']} dangerous); the "
        "agreement is shown beside the verdict, not folded into it"
    )


def markdown(r: dict) -> str:
    s = r["summary"]
    lines = [
        "# Should the trust verdict use the explainers' agreement?",
        "",
        f"{r['machine']}; `{r['command']}`; the calibration cases ({s['cases']} with a cached "
        f"reference, engine {', '.join(sorted(set(r['versions'])))}, judged; "
        f"{len(s['stale'])} more whose reference is stale, reported only: "
        f"{', '.join(s['stale']) or 'none'}); methods "
        f"{', '.join(METHODS)} over each default run's regions; {r['seconds']:.0f} s.",
        "",
        f"- the default conclusion agrees with the reference on {s['conclusion_agrees']} of "
        f"{s['cases']}; dangerous errors: {s['dangerous']};",
        f"- the methods put the same region first on {s['methods_agree']} of {s['cases']}; "
        f"{s['stable_and_methods_disagree']} stable verdicts have methods that disagree;",
        f"- **downgrade** (stable → borderline when the methods disagree): fixes "
        f"{s['downgrade']['fixed']}, breaks {s['downgrade']['broken']};",
        f"- **upgrade** (borderline → stable when they agree on its conclusion): fixes "
        f"{s['upgrade']['fixed']}, breaks {s['upgrade']['broken']}, adds "
        f"{s['upgrade']['dangerous']} dangerous.",
        "",
        f"**Decision: {r['decision']}.**",
        "",
        "| case | default | reference | agrees | methods' first regions | methods agree |",
        "|---|---|---|---|---|---|",
    ]
    for c in r["cases"]:
        firsts = ", ".join(f"{m} {v}" for m, v in c["methods_first"].items())
        lines.append(
            f"| {c['case']} | {c['default_verdict']} {c['default_conclusion']} | "
            f"{c['reference_verdict']} | "
            f"{'stale' if c['stale'] else 'yes' if c['conclusion_agrees'] else 'no'} | {firsts} | "
            f"{'yes' if c['methods_agree'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--imagenet-dir", type=Path, default=cal.IMAGENET_DIR)
    ap.add_argument("--only", help="comma-separated case-id prefixes")
    ap.add_argument("--refs", type=Path, default=cal.REFS)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    wanted = [p for p in (a.only or "").split(",") if p]
    todo = [c for c in cal.cases(a.imagenet_dir) if not wanted or c.id.startswith(tuple(wanted))]
    t0, clfs, rows, recorded = time.perf_counter(), {}, [], recorded_runs()
    for case in todo:
        if case.model not in clfs:
            clfs[case.model] = cal.classifier(case.model)
        row = one_case(case, clfs[case.model], a.refs, recorded)
        if row is not None:
            rows.append(row)
            print(f"{case.id}: {row}", file=sys.stderr, flush=True)
    if not rows:
        raise SystemExit(f"no case with a cached reference in {a.refs}")
    s = score_rules(rows)
    r = {
        "command": "python bench/bench_trust_agreement.py " + " ".join(argv or sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "versions": [c["reference_version"] for c in rows],
        "summary": s,
        "decision": decision(s),
        "cases": rows,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    write_results(None if a.no_write else a.out, "trust_agreement", r, markdown(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
