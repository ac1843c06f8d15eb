"""Calibration of the verdict on real models: does the default verdict (one sample, resampled)
say what 5 independent fp32 repeats at N = 2000 say?

The cases (``--list`` prints them):

* **EfficientNet-Lite0** (ImageNet weights, offline) in ONNX Runtime (the CPU default) on real
  photos: scikit-image's chelsea, coffee, astronaut and rocket, and public ImageNet photos from
  ``--imagenet-dir`` (``github:EliSchwartz/imagenet-sample-images``, fetched, not committed), each
  at 224 px (resize 256, centre crop) as it is, with automatic superpixels, and with the
  ImageNet-W watermark added and its box drawn as a handcrafted region;
* the same model **in torch** on some of them (``LIMECRAFT_LITE0_RUNTIME=torch``);
* the **demo model** on its conflict images, with the tag drawn as a region and without;
* **no signal**: a model whose scores are random draws seeded by a hash of its exact input (the
  same image, the same scores; nothing to do with any region), with the default regions;
* a **random-weight resnet18** over 100 grid regions (no training: a signal no one meant, but
  a signal; its conclusion can be reproducible).

**The reference** of a case is 5 explanations with seeds 0..4, each fp32 at N = 2000 with early
stopping off, over the default run's regions (the seed also seeds quickshift, so each repeat is
given the default run's label map and only the sampling differs), judged together by :func:`limecraft_core.trust.stability` as 5 repeats (its
conclusion, its detail, its first region). Their weights are cached in
``bench/results/calibration_refs/``, keyed by the case and a hash of the engine code that makes
weights (every file a reference run executes but the verdict's, which tests/test_bench.py
checks by tracing one: :data:`ENGINE_FILES`): the
verdict is recomputed from them by the current code, so a change to the verdict's rule does not
cost the references again. About 2.5 minutes per EfficientNet-Lite0 case on 2 cores.

**The default run** is :func:`limecraft_core.explain` with every setting at its default (the
app's and the CLI's defaults are the same schema defaults: N at most 1600, early stop on, one
sample resampled 40 times, a conclusion settled when it holds in all 40 resamples with a firm
lead), on a warm classifier, timed.

It reports, per case and in total: agreement of the default conclusion with the reference's
("stable" alike, and the same first region when stable) and of the three-word verdict;
**dangerous errors** ("stable" where the reference is "unstable", and a stable conclusion whose
first region is not the reference's first); the samples used; median and 90th-percentile time.

    python bench/bench_calibration.py                      # every case (about 45 min the first time)
    python bench/bench_calibration.py --only demo,noise    # the cheap cases
    python bench/bench_calibration.py --ref-samples 120 --only demo-conflict-1 --out /tmp/cal \\
        --refs /tmp/cal/refs                               # a smoke run (tests/test_bench.py)

Before and after: run the default runs of an earlier engine with this script's
``--default-only FILE`` (in a worktree of that commit, this file copied in), then
``--before "LABEL=FILE"`` here (repeatable, one row each): they are judged against the same references by today's rule.

Writes bench/results/calibration.json and calibration.md (``--out`` elsewhere, ``--no-write``
to print only).
"""

from __future__ import annotations

import os
from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)
os.environ.setdefault("LIMECRAFT_CPU_BF16", "0")  # the reference is fp32; so is the default here

import argparse
import hashlib
import json
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import limecraft_core as lc
from limecraft_core import trust

RESULTS = ROOT / "bench" / "results"
REFS = RESULTS / "calibration_refs"
REF_REPEATS = 5
REF_FORMAT = "r2"  # r2: every repeat over the default run's label map (r1 re-segmented per seed)
PHOTOS = ("chelsea", "coffee", "astronaut", "rocket")
IMAGENET_DIR = Path("/work/data/imagenet-sample")
IMAGENET_COUNT = 4
TORCH_CASES = ("lite0-torch-chelsea-watermark", "lite0-torch-coffee")
#: the engine code whose change changes the weights (the reference's cache key): every file a
#: reference run executes (tests/test_bench.py traces one) but :data:`NOT_WEIGHTS`
ENGINE_FILES = (
    "limecraft_core/perturb",
    "limecraft_core/regions",
    "limecraft_core/surrogate.py",
    "limecraft_core/classifier.py",
    "limecraft_core/explain.py",  # the run's order, its settings
    "limecraft_core/config",  # the defaults (fill, kernel, ridge)
    "limecraft_core/_validate.py",  # the image as floats
    "limecraft_core/limits.py",  # a flat score's rule
    "limecraft_core/result.py",  # the class's weights, read back
    "limecraft_core/_stages/regions.py",  # the label map given
    "limecraft_core/_stages/plan.py",
    "limecraft_core/_stages/score.py",
    "limecraft_core/_stages/fit.py",  # the surrogate's sample weights
    "limecraft_core/_stages/scene.py",  # the image at the model's size, the fill
    "limecraft_core/_stages/summary.py",  # the explanation it returns
    "limecraft_core/fill_table.py",  # the fills
    "limecraft_core/tensors.py",  # the resize
    "models/efficientnet_lite.py",
    "models/onnx_model.py",  # EfficientNet-Lite0's default runtime
    "models/demo.py",
)
#: what a reference run executes that cannot change its weights: the verdict (recomputed from
#: the references by today's code, so a change to its rule does not cost them again) and the
#: checks that lead to it (after the fit)
NOT_WEIGHTS = ("limecraft_core/trust", "limecraft_core/_stages/checks.py")


@dataclass(frozen=True)
class Case:
    """One calibration case: an image, its regions and a model."""

    id: str
    model: str  # "lite0", "lite0-torch", "demo", "noise"
    image: Callable[[], np.ndarray]
    regions_mask: Callable[[], np.ndarray | None] = lambda: None
    settings: dict[str, Any] = field(default_factory=dict)


def eval_view(img: np.ndarray, size: int = 224, resize: int = 256) -> np.ndarray:
    """ImageNet's evaluation view: the shorter side to ``resize``, the centre ``size`` square."""
    from PIL import Image

    im = Image.fromarray(img)
    w, h = im.size
    s = resize / min(w, h)
    im = im.resize((max(size, round(w * s)), max(size, round(h * s))), Image.Resampling.BILINEAR)
    w, h = im.size
    left, top = (w - size) // 2, (h - size) // 2
    return np.asarray(im.crop((left, top, left + size, top + size)).convert("RGB"))


def _skimage(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        from skimage import data

        return eval_view(getattr(data, name)())

    return load


def _file(path: Path) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        from PIL import Image

        return eval_view(np.asarray(Image.open(path).convert("RGB")))

    return load


def _watermarked(load: Callable[[], np.ndarray]) -> tuple[Callable, Callable]:
    def image() -> np.ndarray:
        return lc.add_watermark(load()).image

    def box() -> np.ndarray:
        return lc.add_watermark(load()).box_mask()

    return image, box


def cases(imagenet_dir: Path = IMAGENET_DIR) -> list[Case]:
    """Every case, the cheap ones first."""
    from models import demo

    out: list[Case] = []
    conflict = demo.generate(4, seed=2026, mode="conflict")
    for i, s in enumerate(conflict, 1):
        out.append(
            Case(f"demo-conflict-{i}-tag", "demo", lambda s=s: s.image, lambda s=s: s.tag_mask)
        )
    for i, s in enumerate(conflict[:2], 1):
        out.append(Case(f"demo-conflict-{i}", "demo", lambda s=s: s.image))
    grid = {"segmentation": "grid", "n_segments": 100}
    for name in ("chelsea", "coffee"):
        out.append(Case(f"nosignal-{name}", "nosignal", _skimage(name)))
    sources = [(n, _skimage(n)) for n in PHOTOS]
    if imagenet_dir.is_dir():
        files = sorted(p for p in imagenet_dir.iterdir() if p.suffix.lower() in (".jpeg", ".jpg"))
        sources += [(p.stem.split("_", 1)[-1], _file(p)) for p in files[:IMAGENET_COUNT]]
    for name, load in sources:
        out.append(Case(f"lite0-{name}", "lite0", load))
        image, box = _watermarked(load)
        out.append(Case(f"lite0-{name}-watermark", "lite0", image, box))
    for case in list(out):
        torch_id = case.id.replace("lite0-", "lite0-torch-", 1)
        if torch_id in TORCH_CASES:
            out.append(Case(torch_id, "lite0-torch", case.image, case.regions_mask))
    for name in ("chelsea", "coffee"):  # the dearest references (resnet18, 100 regions): last
        out.append(Case(f"noise-{name}", "noise", _skimage(name), settings=grid))
    return out


class HashScores:
    """No signal: 10 scores drawn from a generator seeded by a hash of the exact input, so the
    same image always gets the same scores and no region, nor any set of regions, has anything
    to do with them (every perturbation's scores are independent draws)."""

    def __call__(self, x: Any) -> Any:
        import torch

        rows = []
        for item in x.detach().to(torch.float32).cpu().numpy():
            seed = int.from_bytes(hashlib.blake2b(item.tobytes(), digest_size=8).digest(), "little")
            rows.append(np.random.default_rng(seed).standard_normal(10))
        return torch.from_numpy(np.stack(rows).astype(np.float32))


def classifier(model: str) -> lc.Classifier:
    """A warm classifier for the case's model (fp32 on this CPU)."""
    from models import efficientnet_lite as lite
    from models.registry import load_classifier

    if model == "nosignal":
        return lc.Classifier(HashScores(), input_size=64, device="cpu", name="hash")
    if model == "noise":
        import torch
        import torchvision

        torch.manual_seed(0)
        net = torchvision.models.resnet18(weights=None).eval()
        return lc.Classifier(net, input_size=224, device="cpu")
    if model == "lite0-torch":
        os.environ[lite.RUNTIME_ENV] = "torch"
        try:
            return load_classifier(lite.NAME, device="cpu")
        finally:
            os.environ.pop(lite.RUNTIME_ENV)
    return load_classifier(lite.NAME if model == "lite0" else model, device="cpu")


def engine_version() -> str:
    """A hash of the engine code that makes the weights (the reference cache's key)."""
    h = hashlib.sha1()
    for rel in ENGINE_FILES:
        p = ROOT / rel
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(f.relative_to(ROOT).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def reference(
    case: Case,
    clf: lc.Classifier | None,
    n: int,
    target: int,
    version: str,
    refs: Path = REFS,
    segments: np.ndarray | None = None,
) -> np.ndarray:
    """(5, K) weights of ``target`` from 5 independent fp32 explanations (seeds 0..4) at N =
    ``n``, early stop off, over the default run's regions ``segments`` (the seed also seeds
    quickshift, so each repeat is given the same label map: only the sampling differs); read
    from the cache in ``refs`` when the case, N and the engine are the same."""
    refs.mkdir(parents=True, exist_ok=True)
    path = refs / f"{case.id}-n{n}-{version}-{REF_FORMAT}.npz"
    if path.is_file():
        with np.load(path) as z:
            return z["weights"]
    if clf is None or segments is None:
        raise FileNotFoundError(f"no cached reference {path}: run the benchmark on this case first")
    settings = {k: v for k, v in case.settings.items() if k not in ("segmentation", "n_segments")}
    rows = []
    for seed in range(REF_REPEATS):
        ex = lc.explain(
            case.image(),
            clf,
            segments=segments,
            samples=n,
            seed=seed,
            early_stop=None,
            compute_deltas=False,
            precision="fp32",
            target=target,
            **settings,
        )
        rows.append(ex.class_weights[ex.class_index(target)])
    weights = np.stack(rows)
    np.savez_compressed(path, weights=weights)
    return weights


def default_run(
    case: Case, clf: lc.Classifier, cap: int | None = None
) -> tuple[dict[str, Any], np.ndarray]:
    """The default run of ``case`` (with the sample cap ``cap``: None, the default's), timed.
    Runs on an engine from before the two-part verdict too (``--default-only``): its conclusion
    is then the first region by |weight|, as its verdict judged it."""
    image, mask = case.image(), case.regions_mask()
    over = {} if cap is None else {"samples": cap}
    t0 = time.perf_counter()
    ex = lc.explain(image, clf, regions_mask=mask, **case.settings, **over)
    seconds = time.perf_counter() - t0
    got = ex.trust.stability
    first = int(np.argmax(np.abs(ex.class_weights[0])))
    row = {
        "case": case.id,
        "model": case.model,
        "regions": ex.n_regions,
        "target": ex.class_labels[0],
        "target_index": int(ex.target),
        "default": {
            "verdict": got.verdict,
            "conclusion": list(getattr(got, "conclusion", None) or [first]),
            "signs": list(
                getattr(got, "conclusion_signs", None)
                or [-1 if ex.class_weights[0][first] < 0 else 1]
            ),
            "agreement": getattr(got, "conclusion_agreement", None),
            "detail": getattr(got, "detail", None),
            "samples": ex.run.samples_used or ex.config.sampling.samples,
            "seconds": round(seconds, 2),
            "reason": got.reason,
        },
    }
    return row, ex.segments


def judge(row: dict[str, Any], ref_weights: np.ndarray, seconds: float = 0.0) -> dict[str, Any]:
    """``row`` (a :func:`default_run`) against its reference, judged by today's rule.

    A stable default claims that its conclusion's regions are the first ones, with their signs
    (one region: it is first; two or three: they are the first two or three, in any order). The
    claim **holds in the reference** when it holds in all 5 repeats (the reference's own bar for
    "stable"). The conclusion agrees when the default is stable, its claim holds in the
    reference and the reference is stable, or when neither is stable. Dangerous: "stable" where
    the reference is unstable, or a stable claim that does not hold in the reference (a top
    region the reference does not have first). A verdict that is not stable claims no region."""
    ref = trust.stability(ref_weights)
    ref_first = int(np.argmax(np.abs(ref.mean)))
    d = row["default"]
    stable, ref_stable = d["verdict"] == "stable", ref.verdict == "stable"
    claim = np.asarray(d["conclusion"], int)
    signs = np.asarray(d["signs"], int)
    held = trust.conclusion_agreement(ref_weights, claim, signs) if stable else 0.0
    holds = bool(stable and held >= trust.STABLE_CONCLUSION)
    agree = (stable and holds and ref_stable) or (not stable and not ref_stable)
    return {
        **row,
        "reference": {
            "verdict": ref.verdict,
            "conclusion": ref.conclusion,
            "agreement": ref.conclusion_agreement,
            "detail": ref.detail,
            "first": ref_first,
            "reason": ref.reason,
            "seconds": round(seconds, 1),
        },
        "claim_holds_in": round(float(held), 2),
        "conclusion_agrees": bool(agree),
        "verdict_agrees": d["verdict"] == ref.verdict,
        "dangerous_stable": bool(stable and ref.verdict == "unstable"),
        "dangerous_first": bool(stable and not holds),
        # the wording: the reference's first region (by the mean of its 5 repeats) is
        # not among the regions the default claims to lead
        "misses_ref_first": bool(stable and ref_first not in d["conclusion"]),
    }


def run_case(
    case: Case,
    clf: lc.Classifier,
    n_ref: int,
    version: str,
    refs: Path = REFS,
    cap: int | None = None,
) -> dict[str, Any]:
    """The default run of ``case``, timed, against its reference."""
    row, segments = default_run(case, clf, cap)
    t1 = time.perf_counter()
    weights = reference(case, clf, n_ref, row["target_index"], version, refs, segments)
    return judge(row, weights, time.perf_counter() - t1)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def stats(rs: list[dict[str, Any]]) -> dict[str, Any]:
        if not rs:
            return {"cases": 0}
        t = np.array([r["default"]["seconds"] for r in rs])
        n = np.array([r["default"]["samples"] for r in rs])
        return {
            "cases": len(rs),
            "conclusion_agrees": sum(r["conclusion_agrees"] for r in rs),
            "verdict_agrees": sum(r["verdict_agrees"] for r in rs),
            "dangerous": sum(r["dangerous_stable"] or r["dangerous_first"] for r in rs),
            "dangerous_by_first": sum(
                r["dangerous_stable"] or r.get("misses_ref_first", False) for r in rs
            ),
            "stable": sum(r["default"]["verdict"] == "stable" for r in rs),
            "samples_median": float(np.median(n)),
            "seconds_median": round(float(np.median(t)), 2),
            "seconds_p90": round(float(np.percentile(t, 90)), 2),
        }

    models = sorted({r["model"] for r in rows})
    return {"all": stats(rows), **{m: stats([r for r in rows if r["model"] == m]) for m in models}}


def markdown(doc: dict[str, Any]) -> str:
    s = doc["summary"]["all"]
    lines = [
        "# Calibration: the default verdict against 5 independent fp32 repeats",
        "",
        f"`python bench/bench_calibration.py` · {doc['meta']['machine']} · references at "
        f"N = {doc['meta']['ref_samples']} (engine {doc['meta']['engine']}); the default run: "
        f"every setting at its default, sample cap {doc['meta']['cap']}",
        "",
        f"**{s['cases']} cases: the conclusion agrees on {s.get('conclusion_agrees', 0)} "
        f"({s.get('conclusion_agrees', 0) / max(1, s['cases']):.0%}), the three-word verdict on "
        f"{s.get('verdict_agrees', 0)}; dangerous errors: {s.get('dangerous', 0)}.** Dangerous: "
        '"stable" where the reference is unstable, or a stable claim (these regions lead, with '
        "these signs) that does not hold in all 5 reference repeats; by the looser reading (the "
        "reference's first region, by the mean of its repeats, is not among the claimed): "
        f"{s.get('dangerous_by_first', 0)}.",
        "",
        "| model | cases | conclusion agrees | verdict agrees | dangerous | default stable | "
        "samples (median) | time median | time p90 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m, st in doc["summary"].items():
        if st["cases"]:
            lines.append(
                f"| {m} | {st['cases']} | {st['conclusion_agrees']} | {st['verdict_agrees']} | "
                f"{st['dangerous']} | {st['stable']} | {st['samples_median']:.0f} | "
                f"{st['seconds_median']:.1f} s | {st['seconds_p90']:.1f} s |"
            )
    if doc.get("before"):
        lines += [
            "",
            "**Before and after**: the same cases' default runs on earlier engines, judged against "
            "the same references by today's rule:",
            "",
        ]
        lines += [
            f"- *{b['label']}*: `{b['file']}`"
            + (
                f" ({len(b['set_aside'])} cases set aside: their regions differ from today's "
                f"references: {', '.join(b['set_aside'])})"
                if b.get("set_aside")
                else ""
            )
            for b in doc["before"]
        ]
        lines += [
            "",
            "| | cases | conclusion agrees | verdict agrees | dangerous (looser reading) | "
            "samples (median) | time median | time p90 |",
            "|---|---|---|---|---|---|---|---|",
        ]
        rows = [(b["label"], b["summary"]["all"]) for b in doc["before"]] + [("after", s)]
        aside = {c for b in doc["before"] for c in b.get("set_aside", [])}
        if aside:  # the after row on the cases every before row was judged on, too
            same = [c for c in doc["cases"] if c["case"] not in aside]
            rows.append((f"after, the same {len(same)} cases", summary(same)["all"]))
        for name, st in rows:
            lines.append(
                f"| {name} | {st['cases']} | {st['conclusion_agrees']} | {st['verdict_agrees']} "
                f"| {st['dangerous']} ({st['dangerous_by_first']}) | {st['samples_median']:.0f} "
                f"| {st['seconds_median']:.1f} s | {st['seconds_p90']:.1f} s |"
            )
    lines += [
        "",
        "| case | regions | class | default: verdict (conclusion, holds) · samples · time | "
        "reference: verdict (conclusion, holds) | agrees | dangerous |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in doc["cases"]:
        d, ref = r["default"], r["reference"]
        lines.append(
            f"| {r['case']} | {r['regions']} | {r['target']} | {d['verdict']} "
            f"({d['conclusion']}, {d['agreement']:.0%}) · {d['samples']} · {d['seconds']:.1f} s "
            f"| {ref['verdict']} ({ref['conclusion']}, {ref['agreement']:.0%}) | "
            f"{'yes' if r['conclusion_agrees'] else 'no'} | "
            f"{'yes' if r['dangerous_stable'] or r['dangerous_first'] else ''} |"
        )
    skipped = doc["meta"].get("skipped")
    if skipped:
        lines += ["", f"Not run this time: {', '.join(skipped)}."]
    return "\n".join(lines) + "\n"


def before(
    spec: str,
    todo: list[Case],
    held: dict[str, lc.Classifier],
    n_ref: int,
    version: str,
    refs: Path,
) -> dict[str, Any]:
    """The earlier engine's default runs in ``spec`` ("LABEL=PATH" or "PATH", a
    ``--default-only`` file) for the cases in ``todo``, judged against the same references by
    today's rule."""
    label, _, file = spec.rpartition("=")
    path = Path(file)
    label = label or "before"
    by_id = {c.id: c for c in todo}
    judged, aside = [], []
    for row in json.loads(path.read_text()):
        case = by_id.get(row["case"])
        if case is None:
            continue
        ref = reference(case, None, n_ref, row["target_index"], version, refs)
        if ref.shape[1] != row["regions"]:  # the engine's regions changed since: not comparable
            aside.append(row["case"])
            continue
        judged.append(judge(row, ref))
    return {"label": label, "file": str(path), "summary": summary(judged), "cases": judged,
            "set_aside": aside}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated parts of case ids to run")
    ap.add_argument("--ref-samples", type=int, default=2000, help="N of each reference repeat")
    ap.add_argument("--imagenet-dir", type=Path, default=IMAGENET_DIR)
    ap.add_argument("--list", action="store_true", help="print the case ids and stop")
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for the .json and .md")
    ap.add_argument(
        "--samples", type=int, default=None, help="the default run's cap (default: the default's)"
    )
    ap.add_argument("--refs", type=Path, default=REFS, help="folder of the cached references")
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    ap.add_argument(
        "--default-only",
        type=Path,
        help="run only the default runs and write them to this JSON file (no references): for "
        "an older engine, e.g. a worktree of an earlier commit, read back with --before",
    )
    ap.add_argument(
        "--before",
        action="append",
        default=[],
        metavar="[LABEL=]PATH",
        help="a --default-only file from an earlier engine: judged against the same references "
        "by today's rule, and shown beside today's default under LABEL (repeatable)",
    )
    a = ap.parse_args(argv)
    every = cases(a.imagenet_dir)
    if a.list:
        print("\n".join(c.id for c in every))
        return 0
    parts = [p for p in a.only.split(",") if p]
    todo = [c for c in every if not parts or any(p in c.id for p in parts)]
    version = engine_version()
    rows: list[dict[str, Any]] = []
    doc: dict[str, Any] = {}
    held: dict[str, lc.Classifier] = {}
    if a.default_only:
        done = []
        for i, case in enumerate(todo, 1):
            clf = held.get(case.model) or held.setdefault(case.model, classifier(case.model))
            done.append(default_run(case, clf, a.samples)[0])
            print(f"[{i}/{len(todo)}] {case.id}: {done[-1]['default']}", flush=True)
            a.default_only.write_text(json.dumps(done, indent=1))
        return 0
    for i, case in enumerate(todo, 1):
        clf = held.get(case.model) or held.setdefault(case.model, classifier(case.model))
        row = run_case(case, clf, a.ref_samples, version, a.refs, a.samples)
        rows.append(row)
        d = row["default"]
        print(
            f"[{i}/{len(todo)}] {case.id}: default {d['verdict']} ({d['samples']} samples, "
            f"{d['seconds']:.1f} s), reference {row['reference']['verdict']} · agrees "
            f"{row['conclusion_agrees']}",
            flush=True,
        )
        meta = {
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            "ref_samples": a.ref_samples,
            "cap": a.samples or lc.ExplainConfig().sampling.samples,
            "engine": version,
            "skipped": [c.id for c in every if c not in todo],
        }
        doc = {"meta": meta, "summary": summary(rows), "cases": rows}
        if a.before:
            doc["before"] = [
                before(b, todo, held, a.ref_samples, version, a.refs) for b in a.before
            ]
        if not a.no_write:  # after every case: a long run that is stopped keeps what it did
            a.out.mkdir(parents=True, exist_ok=True)
            (a.out / "calibration.json").write_text(json.dumps(doc, indent=1))
            (a.out / "calibration.md").write_text(markdown(doc))
    if doc:
        print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
