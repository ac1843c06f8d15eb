"""The benchmark scripts run, and say what they claim to measure (tiny sizes; no timing asserts).

Each script's ``main(argv)`` runs in this process, on the smallest inputs that still take each
benchmark's code path: a process per script paid its interpreter and torch import (about 5 s)
every time. What a script sets process-wide (environment, ``sys.path``, torch's thread count
and global random generator) is put back after it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@contextlib.contextmanager
def _process_state_kept():
    import torch

    env, path, threads = dict(os.environ), list(sys.path), torch.get_num_threads()
    rng = torch.get_rng_state()  # the scripts seed torch's global generator
    try:
        yield
    finally:
        torch.set_rng_state(rng)
        for key in set(os.environ) - set(env):
            del os.environ[key]
        for key, value in env.items():
            if os.environ.get(key) != value:
                os.environ[key] = value
        sys.path[:] = path
        torch.set_num_threads(threads)


def _bench_main(script: str, *argv: str) -> None:
    """``bench/<script>.py``'s main(argv), in this process."""
    with _process_state_kept():
        sys.path.insert(0, str(ROOT / "bench"))  # the scripts import each other by name
        rc = importlib.import_module(script).main(list(argv))
    assert rc == 0


# At 120 samples the almost free model's bf16 scores can be all equal (bf16 keeps 8 bits of its
# inputs' small changes), and its Spearman row is then nan with scipy's warning, as a user
# running the same command sees it on stderr.
@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_run_all_writes_markdown_and_json(tmp_path):
    _bench_main(
        "run_all",
        "--models", "free",
        "--skip", "memory,app,segmentation",
        "--samples", "120",
        "--repeats", "1",
        "--lime-batch-sizes", "100",
        "--captum-batch-sizes", "64",
        "--floor-batch-sizes", "64",
        "--out", str(tmp_path),
        "--no-readme",
    )  # fmt: skip
    res = json.loads((tmp_path / "run_all.json").read_text())
    (model,) = res["models"]
    assert model["model"] == "free" and model["samples"] == 120
    assert {"lime_image", "captum Lime", "floor: model only", "limecraft (fp32)"} <= set(
        model["rows"]
    )
    assert all(v["seconds"] > 0 for v in model["rows"].values())
    dd = model["rows"]["limecraft, 8 drawn regions, dedup"]
    assert dd["model_passes"] <= 2**8 and dd["spearman_vs_no_dedup"] > 0.99
    md = (tmp_path / "run_all.md").read_text()
    assert "| free | 34 |" in md and "lime / LIMEcraft" in md


def test_load_script_serves_concurrent_sessions_without_errors(tmp_path, monkeypatch):
    from pages.lib.runtime import work_queue

    out = tmp_path / "load.json"
    # combine sessions' chunks even on a CPU (by default it does not: see serving.WorkQueue);
    # the app's one queue is made afresh with that setting, and dropped after
    monkeypatch.setenv("LIMECRAFT_QUEUE_MAX_BATCH", "200")
    work_queue.clear()
    try:
        _bench_main("bench_load", "--ks", "2", "--samples", "100", "--json", str(out))
    finally:
        work_queue().shutdown()
        work_queue.clear()
    (row,) = json.loads(out.read_text())["rows"]
    assert row["k"] == 2 and row["errors"] == []
    assert row["p50_s"] > 0 and row["forward_calls"] > 0
    # two sessions explaining at once shared forward passes through the one queue
    assert row["shared_forward_calls"] >= 1


def _run_quick(script: str, out: Path, capsys) -> str:
    _bench_main(script, "--quick", "--json", str(out))
    return capsys.readouterr().out


def test_trust_bench_reports_samples_to_stable_per_scheme(tmp_path, capsys):
    out = tmp_path / "trust.json"
    stdout = _run_quick("bench_trust", out, capsys)
    res = json.loads(out.read_text())
    schemes = ["bernoulli", "stratified", "antithetic", "glime"]
    assert res["schemes_measured"] == schemes
    for model in ("demo", "resnet18"):
        block = res["needed"][model]
        assert list(block["schemes"]) == schemes
        sizes = block["sizes"]
        for v in block["schemes"].values():
            assert v["images"] == len(v["rows"]) >= 1
            assert v["never"] == sum(r["needed"] is None for r in v["rows"])
            for r in v["rows"]:
                assert len(r["verdicts"]) == len(sizes)
                # needed is the first size from which every verdict is "stable"
                if r["needed"] is None:
                    assert r["verdicts"][-1] != "stable"
                else:
                    i = sizes.index(r["needed"])
                    assert set(r["verdicts"][i:]) == {"stable"}
                    assert i == 0 or r["verdicts"][i - 1] != "stable"
    assert res["cost"]["kernel_sweep_s"] > 0
    for scheme in schemes:
        assert f"| {scheme} |" in stdout


def test_metrics_bench_counts_each_metrics_extra_passes(tmp_path, capsys):
    from limecraft_core.trust import road_counts

    out = tmp_path / "metrics.json"
    stdout = _run_quick("bench_metrics", out, capsys)
    res = json.loads(out.read_text())
    assert len(res["cases"]) == 2
    for case in res["cases"]:
        rows = case["rows"]
        assert list(rows) == res["rows"]
        k = case["n_regions"]
        s = len(road_counts(k))
        assert rows["ROAD"]["passes"] == rows["ROAD"]["formula"] == 2 * s
        for name in ("IROF", "faithfulness correlation", "sparseness", "localisation"):
            assert rows[name]["passes"] == 0 and rows[name]["seconds"] > 0
        # dedup can only save passes against the formula
        assert 0 < rows["deletion/insertion curves"]["passes"] <= 8 * (k + 1)
        assert 0 < rows["held-out sample (held-out R², FC)"]["passes"] <= case["samples"]
        # the per-stage counts add up to what the engine itself reports
        assert case["sum_of_rows"] == case["passes_on_minus_off"] > 0
    for name in res["rows"]:
        assert f"| {name} |" in stdout


def test_onnx_bench_runs_both_engines_on_the_same_explanation(tmp_path, capsys):
    out = tmp_path / "onnx.json"
    stdout = _run_quick("bench_onnx", out, capsys)
    res = json.loads(out.read_text())
    assert res["model"] == "resnet18" and res["samples"] == 50
    assert set(res["median_seconds"]) == {"torch", "onnx"}
    assert all(s > 0 for s in res["median_seconds"].values())
    assert res["onnx_over_torch_speed"] > 0
    # same image, regions, seed and weights: the two explanations agree
    assert res["max_weight_difference"] < 1e-4
    assert res["max_weight_difference_relative"] < 1e-3
    assert "| onnx |" in stdout and "| torch |" in stdout


def test_audit_bench_scores_the_flags_and_times_the_variants(tmp_path):
    _bench_main(
        "bench_audit",
        "--images", "2", "--throughput-images", "2", "--samples", "60", "--rounds", "1",
        "--no-ray", "--compare-fills", "mean", "--out", str(tmp_path),
        "--work", str(tmp_path / "work"),
    )  # fmt: skip
    res = json.loads((tmp_path / "audit.json").read_text())
    acc = res["acceptance"]
    # the images asked for, half of them conflict images (2 of 4 before: each costs an audit
    # at the default settings, twice)
    assert acc["images"] == 2 and acc["conflict"] == 1
    assert 0 <= acc["precision"] <= 1 and 0 <= acc["recall"] <= 1
    assert set(res["acceptance_by_fill"]) == {"mean"}
    # the same images without masks: what it discovered and proved, against the same truth
    nm = res["acceptance_no_masks"]
    assert nm["confirmed"] <= nm["findings"] and nm["listed"] <= acc["images"]
    assert nm["headline"] and nm["seconds"] > 0
    variants = res["throughput"]["variants"]
    assert set(variants) == {"local, 1 image at a time", "local, 4 in flight (shared batches)"}
    assert all(v["median_images_per_minute"] > 0 for v in variants.values())
    assert all(v["max_weight_diff"] < 1e-6 for v in variants.values())  # the same explanations
    md = (tmp_path / "audit.md").read_text()
    assert "**The shortcut**" in md and "| inpaint (the audit's default) |" in md
    assert "**Without masks**" in md


def test_watermark_bench_reads_imagenet_names_and_counts_the_flips(tmp_path, capsys):
    """Three photos named as ImageNet's files are: top-1 clean and watermarked, the carton counts
    and the flips, in the JSON and the markdown."""
    from PIL import Image
    from skimage import data

    photos = tmp_path / "photos"
    photos.mkdir()
    for name, image in (
        ("n02123159_tiger_cat.png", data.chelsea()),  # its centre crop: a tiger cat
        ("n07920052_espresso.png", data.coffee()),
        ("n03388043_fountain.png", data.rocket()),  # not what it shows: a miss, counted as one
    ):
        Image.fromarray(image).save(photos / name)
    (photos / "notes.txt").write_text("not a photo")
    _bench_main("bench_watermark", "--images", str(photos), "--out", str(tmp_path / "out"))
    r = json.loads((tmp_path / "out" / "watermark.json").read_text())
    assert r["images"] == 3 and r["model"] == "efficientnet_lite0"
    assert r["top1_clean"] == pytest.approx(2 / 3)  # the cat and the coffee
    assert 0 <= r["top1_watermarked"] <= 1 and r["carton_clean"] == 0
    assert r["gap_points"] == round(100 * (r["top1_clean"] - r["top1_watermarked"]), 1)
    md = (tmp_path / "out" / "watermark.md").read_text()
    assert "| top-1 clean | 66.7% |" in md and md in capsys.readouterr().out


@pytest.mark.slow
def test_the_calibration_cache_key_covers_every_file_a_reference_run_executes(tmp_path):
    """The references are cached by a hash of the engine code that makes weights
    (``ENGINE_FILES``): every file of the engine and of the models that a reference run executes
    is in it, but the verdict's (``NOT_WEIGHTS``), which is recomputed from the references. Traced
    on a demo case and on EfficientNet-Lite0 (its default runtime, ONNX) at N = 32, over a grid
    of regions. (The
    inpainting's, the resize's and the flat rule's files were once left out: a change to them
    kept the references of the engine before it.)"""
    import numpy as np

    cal = _bench_module("bench_calibration")
    cases = {c.id: c for c in cal.cases(tmp_path / "no-imagenet")}
    executed: set[str] = set()

    def profile(frame, event, arg) -> None:
        if event == "call" and frame.f_code.co_name != "<module>":
            executed.add(frame.f_code.co_filename)

    with _process_state_kept():
        for case_id in ("demo-conflict-1-tag", "lite0-chelsea"):
            case = cases[case_id]
            clf = cal.classifier(case.model)
            h, w = case.image().shape[:2]  # a 4 x 4 grid of regions: the run, not its regions
            segments = (np.arange(h)[:, None] * 4 // h) * 4 + np.arange(w)[None] * 4 // w
            cal.reference(case, clf, 10, 1, "warm", tmp_path, segments)  # lazy imports' tables
            sys.setprofile(profile)
            try:
                cal.reference(case, clf, 32, 1, "trace", tmp_path, segments)
            finally:
                sys.setprofile(None)
    ours = {
        Path(f).resolve().relative_to(ROOT).as_posix()
        for f in executed
        if Path(f).resolve().is_relative_to(ROOT / "limecraft_core")
        or Path(f).resolve().is_relative_to(ROOT / "models")
    }
    assert "models/onnx_model.py" in ours and "limecraft_core/_stages/fit.py" in ours

    def under(path: str, roots) -> bool:
        return any(path == r or path.startswith(r + "/") for r in roots)

    left_out = sorted(f for f in ours if not under(f, cal.ENGINE_FILES + cal.NOT_WEIGHTS))
    assert not left_out, f"executed by a reference run, not in ENGINE_FILES: {left_out}"


def test_calibration_bench_judges_the_default_verdict_against_cached_repeats(tmp_path, capsys):
    """The demo model's first conflict image, with its tag drawn and without: the default run,
    its 5-repeat reference (computed, cached under --refs, then read back on a second run), the
    agreement and the dangerous errors, in the JSON and the markdown."""
    refs, out = tmp_path / "refs", tmp_path / "out"
    argv = ("--only", "demo-conflict-1", "--ref-samples", "120", "--refs", str(refs))
    _bench_main("bench_calibration", *argv, "--out", str(out))
    doc = json.loads((out / "calibration.json").read_text())
    tag, plain = doc["cases"]
    assert (tag["case"], plain["case"]) == ("demo-conflict-1-tag", "demo-conflict-1")
    assert len(list(refs.glob("demo-conflict-1*-n120-*.npz"))) == 2
    # the tag drawn as one region: it is the conclusion, by default and in the reference
    assert tag["default"]["verdict"] == "stable" == tag["reference"]["verdict"]
    assert tag["default"]["conclusion"][0] == tag["reference"]["first"]
    assert tag["conclusion_agrees"] and not (tag["dangerous_stable"] or tag["dangerous_first"])
    assert 0 < tag["default"]["samples"] <= 400 and tag["default"]["seconds"] > 0
    s = doc["summary"]["all"]
    assert s["cases"] == 2 and s["conclusion_agrees"] == sum(
        r["conclusion_agrees"] for r in doc["cases"]
    )
    md = (out / "calibration.md").read_text()
    assert "| demo-conflict-1-tag |" in md and "dangerous errors:" in md
    assert md in capsys.readouterr().out
    # the second run reads the references back: the same reference weights, none recomputed
    stamps = {p: p.stat().st_mtime_ns for p in refs.iterdir()}
    # an earlier engine's default runs (--default-only) are judged beside today's, under a label
    earlier = tmp_path / "earlier.json"
    _bench_main(
        "bench_calibration", "--only", "demo-conflict-1-tag", "--default-only", str(earlier)
    )
    capsys.readouterr()
    _bench_main("bench_calibration", *argv, "--no-write", "--before", f"an older rule={earlier}")
    assert {p: p.stat().st_mtime_ns for p in refs.iterdir()} == stamps
    md = capsys.readouterr().out
    assert f"- *an older rule*: `{earlier}`" in md
    assert "| an older rule | 1 | 1 | 1 | 0 (0) |" in md and "| after | 2 |" in md


def test_proposers_bench_finds_the_watermark_and_explains_the_flips(tmp_path, capsys):
    """Two pictures: the cat, and a plain cardboard-brown one that the watermark turns into
    carton. Detection on both (and at 1024 px on the first), then the one flip explained with
    superpixels alone and with the text proposals; the JSON and the markdown say it. Each
    explanation is capped at 200 samples: the same path on the real model, at about 15 CPU
    seconds instead of 40 at the engine's default cap; the figure over many photos at the
    defaults is the bench's own run (bench/README.md)."""
    import numpy as np
    from PIL import Image
    from skimage import data

    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    plain = np.clip(np.array((180, 140, 90)) + rng.normal(0, 8, (256, 256, 3)), 0, 255)
    Image.fromarray(plain.astype(np.uint8)).save(photos / "cardboard.png")
    Image.fromarray(data.chelsea()).save(photos / "chelsea.png")
    _bench_main(
        "bench_proposers", "--images", str(photos), "--large", "1", "--samples", "200",
        "--out", str(tmp_path),
    )  # fmt: skip
    r = json.loads((tmp_path / "proposers.json").read_text())
    d = r["detection"]
    assert d["photos"] == 2 and d["found"] == 2 and d["median_best_iou"] >= 0.5
    assert d["large_photos"] == 1 and d["found_share_1024"] == 1.0
    e = r["end_to_end"]
    assert e["flips_to_carton"] == 1 and e["rows"][0]["file"] == "cardboard.png"
    assert e["with_text_proposals"] == 1 and e["rows"][0]["top_region"].startswith("text")
    assert e["samples_asked"] == 200 and 0 < e["rows"][0]["samples"] <= 200
    md = (tmp_path / "proposers.md").read_text()
    assert "| the same, superpixels + text proposals | 1 of 1 |" in md
    assert md in capsys.readouterr().out


def test_methods_bench_times_every_explainer_side_by_side(tmp_path, capsys):
    """One photo at 64 px with the demo model and N = 40: every method alone, all together,
    exact Shapley over few regions (and its refusal at the default ones); the JSON and the
    markdown say it."""
    _bench_main(
        "bench_methods", "--model", "demo", "--size", "64", "--limit", "1", "--samples", "40",
        "--shapley-k", "4", "--out", str(tmp_path),
    )  # fmt: skip
    r = json.loads((tmp_path / "methods.json").read_text())
    rows = {s["methods"]: s for s in r["summary"]}
    assert {"lime", "kernelshap", "occlusion", "rise", "ig", "gradcam", "lime + shapley"} <= set(
        rows
    )
    assert all(s["seconds_alone"] > 0 for s in rows.values())
    # from the shared sample: no passes beyond it; the gradient methods' passes are their own
    assert rows["lime"]["extra_passes"] == rows["ig"]["extra_passes"] == 0
    assert 0 <= rows["occlusion"]["extra_passes"] <= 4 and rows["ig"]["gradient_passes"] == 50
    assert rows["lime + shapley"]["passes"] == rows["shapley"]["passes"] <= 2**4
    assert r["shapley_refused"] == "it ran (K = 4)"  # the demo's 64 px quickshift: K <= 10
    md = (tmp_path / "methods.md").read_text()
    assert "| gradcam |" in md and md in capsys.readouterr().out


def test_audit_bench_real_case_audits_a_watermarked_half_and_its_clean_half(tmp_path, capsys):
    """The real case on 2 tiny pictures with the demo model at its 128 px (the flow, not the
    figures): 1 watermarked, the truth written, the three audits run and scored, the markdown
    said."""
    import numpy as np
    from PIL import Image

    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray(rng.integers(0, 255, (8, 8, 3), np.uint8)).resize((64, 64)).save(
            photos / f"photo{i}.png"
        )
    _bench_main(
        "bench_audit", "--real", str(photos), "--real-images", "2", "--real-model", "demo",
        "--real-size", "128", "--real-propose", "watermark-box",
        "--real-audit-args", "--samples 20 --n-segments 4 --in-flight 1 --quiet",
        "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"),
    )  # fmt: skip
    r = json.loads((tmp_path / "out" / "audit_real.json").read_text())
    assert (r["images"], r["marked"], r["size"]) == (2, 1, 128) and 0 <= r["changed"] <= 1
    truth = json.loads((tmp_path / "work" / "truth.json").read_text())
    assert sorted(truth["files"]) == sorted(p.name for p in (tmp_path / "work/images").iterdir())
    assert sorted(p.name for p in (tmp_path / "work/clean").iterdir()) == sorted(
        k for k, t in truth["files"].items() if not t["marked"]
    )
    runs = r["runs"]
    assert list(runs) == ["default", "propose watermark-box", "null (clean half)"]
    assert [x["images"] for x in runs.values()] == [2, 2, 1]
    assert all(x["findings"] == len(x["all"]) and x["run"]["explained"] > 0 for x in runs.values())
    md = (tmp_path / "out" / "audit_real.md").read_text()
    assert "| null (clean half) |" in md and md in capsys.readouterr().out
    assert set(runs["default"]["changed_misses"]["counts"]) == {
        "listed", "carried", "described, not grouped", "pushes against the class", "weak",
        "no region on the watermark",
    }  # fmt: skip
    # bench/audit_regroup.py on the same audit folders: the three views of each, no model pass
    work = tmp_path / "work"
    _bench_main(
        "audit_regroup", str(work / "out-propose"), str(work / "out-null"),
        "--truth", str(work / "truth.json"),
    )  # fmt: skip
    said = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(said) == {"out-propose", "out-null"}
    assert all(
        set(v) == {"as saved", "described again", "with proposals of either sign"}
        for v in said.values()
    )


def test_audit_bench_scores_a_finding_against_the_watermark_box():
    """score_run on a hand-made audit.json: a finding whose mask is the watermark's box at its
    grid (IoU 1) listing 2 marked images and 1 clean one, its membership ranking all marked
    images first (AUROC 1)."""

    from limecraft_core.edits.watermark import watermark_mask

    with _process_state_kept():  # the script sets its thread policy and environment
        sys.path.insert(0, str(ROOT / "bench"))
        bench = importlib.import_module("bench_audit")
        _check_scores(bench, watermark_mask(224, 224, box=True))


def _check_scores(bench, box_mask) -> None:
    import numpy as np

    box = np.argwhere(box_mask).tolist()
    cells = np.argwhere(bench.box_on_grid(box, 224, 32)).tolist()
    truth = {
        "a.png": {"marked": True, "top1_clean": 1, "top1_marked": 478},  # changed
        "b.png": {"marked": True, "top1_clean": 2, "top1_marked": 2},
        "c.png": {"marked": True, "top1_clean": 3, "top1_marked": 478},  # changed, not listed
        "d.png": {"marked": False, "top1_clean": 4, "top1_marked": 4},
        "e.png": {"marked": False, "top1_clean": 5, "top1_marked": 5},
    }
    finding = {
        "kind": "place", "sentence": "s", "risk": "HIGH", "score": 0.3,
        "mask": {"grid": 32, "cells": cells},
        "regions": [{"key": k, "region": 0} for k in ("a", "b", "d")],
        "classes": [{"label": "carton", "images": 3, "share": 1.0}],
        "membership": {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.5, "e": 0.1},
    }  # fmt: skip
    doc = {
        "rows": [{"key": k[0], "file": k, "status": "ok"} for k in truth],
        "findings": {"sentences": ["headline"], "discovered": [finding]},
        "run": {"images_per_minute": 1.0},
    }
    s = bench.score_run(doc, truth, box)
    h = s["headline"]
    assert s["headline_is_watermark"] and h["mask_iou"] == 1.0
    assert h["precision"] == round(2 / 3, 3) and (h["changed_listed"], h["changed"]) == (1, 2)
    assert h["recall_changed"] == 0.5 and h["auroc"] == 1.0 and h["ap"] == 1.0
    # the rows describe no region here: none lies on the watermark; none is flagged
    assert s["per_image"]["strong_region_on_watermark"] == {"marked": 0, "clean": 0, "changed": 0}
    assert s["per_image"]["border_flag"]["flagged"] == 0


def test_audit_misses_names_why_a_changed_photo_is_not_listed(tmp_path):
    """bench/audit_misses.py on hand-made image folders: one reason each, the first that
    applies (listed; described but not grouped; on the watermark with a negative weight; with a
    small positive one; no region on the watermark)."""
    import numpy as np

    from limecraft_core.audit.regions import REGION_GRID, grid_mask, pack_mask

    box = np.zeros((64, 64), bool)
    box[40:50, 8:56] = True

    def folder(name: str, w_mark: float, described: bool, on_mark: bool = True) -> Path:
        d = tmp_path / name
        d.mkdir()
        seg = np.ones((64, 64), np.int32)
        seg[box if on_mark else np.s_[0:10, 0:10]] = 0
        np.save(d / "segments.npy", seg)
        regions = [{"id": 0, "weight": w_mark, "origin": "proposed:text"},
                   {"id": 1, "weight": 0.5, "origin": "superpixel"}]  # fmt: skip
        (d / "explanation.json").write_text(json.dumps({"regions": regions}))
        descs = [{"mask": pack_mask(grid_mask(box, REGION_GRID))}] if described else []
        (d / "row.json").write_text(json.dumps({"row": {"regions": descs}}))
        return d

    with _process_state_kept():
        sys.path.insert(0, str(ROOT / "bench"))
        m = importlib.import_module("audit_misses")
        cases = [
            (folder("a", 0.4, True), True, "listed"),
            (folder("f", -0.2, False), "carried", "carried"),
            (folder("b", 0.4, True), False, "described, not grouped"),
            (folder("c", -0.2, False), False, "pushes against the class"),
            (folder("d", 0.01, False), False, "weak"),
            (folder("e", 0.4, False, on_mark=False), False, "no region on the watermark"),
        ]
        got = [m.reason(d, box, how is True, how == "carried") for d, how, _ in cases]
    assert [why for why, _ in got] == [want for *_, want in cases]
    assert got[3][1]["weight"] == -0.2 and got[3][1]["rank"] == 1 and got[3][1]["iou"] == 1.0
    assert set(m.REASONS) == {want for *_, want in cases}


def test_engine_bench_runs_every_near_free_model_against_lime_and_times_composition(tmp_path):
    """bench_engine.py's three parts at a small N: the table against lime on the three
    near-free models, the early stop's cost, and composition against a copy. The models are
    what their names say: no signal gives no weight at all, signal everywhere settles, and
    noise everywhere moves the scores without a region leading (it runs to the end)."""
    out = tmp_path / "engine.json"
    _bench_main(
        "bench_engine",
        "--samples", "200",
        "--repeats", "1",
        "--lime-batch-sizes", "64",
        "--parts", "lime,early-stop,compose",
        "--json", str(out),
    )  # fmt: skip
    res = json.loads(out.read_text())
    rows = res["against_lime"]
    assert set(rows) == {"no signal", "signal everywhere", "noise everywhere"}
    for row in rows.values():
        assert row["ratio_defaults"] > 0 and row["lime_best"] == "lime batch 64"
    assert rows["no signal"]["samples_used"] == 200 and rows["no signal"]["checks_at"] == []
    assert rows["noise everywhere"]["samples_used"] == 200
    es = res["early_stop_cost"]
    assert {r["model"] for r in es.values()} == {*rows, "settles early"}
    cap = next(r for r in es.values() if r["model"] == "signal everywhere" and r["samples"] > 1000)
    assert cap["samples_used"] < cap["samples"]  # it settles before the cap
    assert res["compose"] and all(r["ratio"] > 0 for r in res["compose"].values())


def test_bench_models_without_and_with_signal_are_what_their_names_say():
    """The no-signal model's score is the same for every sample under the mean fill (each
    hidden region takes its own mean colour); the others' scores move."""
    import limecraft_core as lc

    sys.path.insert(0, str(ROOT / "bench"))
    import bench_engine
    from _common import chelsea

    img = chelsea()
    seg = lc.segment(img, "quickshift", working_size=None)
    for name, model in bench_engine.near_free_models().items():
        ex = lc.explain(img, model, segments=seg, samples=100, fill="mean", early_stop=None)
        assert bool(ex.weights.any()) == (name != "no signal"), name


def test_gpu_script_runs_its_dry_case_on_the_cpu(tmp_path, monkeypatch):
    """bench/gpu.sh's run (bench_gpu.py) takes its whole path on one tiny CPU case, so that the
    prepared GPU command cannot rot: the explanation, the forward-only floor, the share above it
    and the audit's command line (parsed by bench_audit.py, not run); it leaves no temporary
    folder behind."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    _bench_main("bench_gpu", "--dry", "--out", str(tmp_path))
    assert not list(scratch.iterdir())
    res = json.loads((tmp_path / "gpu_cpu_dry.json").read_text())
    (row,) = res["models"].values()
    assert row["model"] == "tiny" and row["samples"] == 40
    assert row["floor_batch_size"] in (8, 16) and row["floor_seconds"] > 0
    assert row["defaults_seconds"] > 0 and row["none_seconds"] > 0
    assert row["share_above_floor_none"] < 1 and 0 < row["defaults_samples_used"] <= 40
    audit = res["audit"]
    assert audit["dry"] and audit["device"] == "cpu"
    assert audit["argv"][audit["argv"].index("--throughput-images") + 1] == "200"
    assert "| tiny |" in (tmp_path / "gpu_cpu_dry.md").read_text()
    # the shell wrapper parses
    import subprocess

    assert subprocess.run(["bash", "-n", str(ROOT / "bench" / "gpu.sh")]).returncode == 0


def _bench_module(name: str):
    """``bench/<name>.py`` imported (the scripts import each other by name)."""
    with _process_state_kept():
        sys.path.insert(0, str(ROOT / "bench"))
        return importlib.import_module(name)


def test_merge_bench_compares_accepts_the_suggestion_and_compares_again():
    """One demo conflict image with its tag as the artifact, N = 60: each round compares the
    methods over the regions, accepts the merge suggestion if there is one, and compares again
    over one region fewer; whether LIME's strongest region lies on the artifact is its share
    inside the box against the stated bar."""
    import numpy as np

    import limecraft_core as lc
    from limecraft_core._validate import as_float_image
    from models import demo, registry

    bm = _bench_module("bench_merge")
    s = demo.generate(1, seed=2026, mode="conflict")[0]
    model = registry.load_classifier("demo")
    target = int(np.argmax(model.predict(s.image)))
    cfg = lc.ExplainConfig.from_flat(samples=60)
    recs = bm.one_photo(s.image, model, cfg, ("lime", "occlusion", "rise"), 1, s.tag_mask, target)
    assert [r["round"] for r in recs] == list(range(len(recs))) and len(recs) in (1, 2)
    for r in recs:
        assert 0 <= r["lime_top_inside"] <= 1 and -1 <= r["spearman"] <= 1
        assert r["lime_top_on_watermark"] == (r["lime_top_inside"] >= bm.ON_WATERMARK)
        assert r["merge_sentence"]
    if recs[0]["suggested"] is not None:  # accepted: the next round has one region fewer
        assert len(recs) == 2 and recs[1]["k"] == recs[0]["k"] - 1
    else:
        assert len(recs) == 1
    # the answer known: the regions on the tag, merged into one, compared again
    regs = lc.prepare_regions(as_float_image(s.image), cfg.segmentation)[0]
    group = bm.box_group(regs.labels, s.tag_mask)
    assert group and all(bm._inside(regs.labels, r, s.tag_mask) >= 0.5 for r in group)
    assert all(bm._inside(regs.labels, r, s.tag_mask) < 0.5 for r in range(regs.n_regions)
               if r not in group)  # fmt: skip
    o = bm.oracle_photo(s.image, model, cfg, ("lime", "occlusion", "rise"), s.tag_mask, target)
    assert o["group"] == group and o["k"] == regs.n_regions - max(len(group) - 1, 0)
    assert 1 <= o["merged_rank"] <= o["k"] and isinstance(o["lime_top_on_watermark"], bool)


def test_merge_bench_tally_keeps_a_photo_that_stopped_in_its_last_state():
    bm = _bench_module("bench_merge")

    def rec(rnd, on, pair, joins, rho):
        return {"round": rnd, "lime_top_on_watermark": on, "suggested": pair,
                "joins_watermark_pieces": joins, "spearman": rho}  # fmt: skip

    merged = [rec(0, False, [1, 2], True, 0.2), rec(1, True, None, False, 0.6)]
    stopped = [rec(0, True, None, False, 0.8)]
    t = bm.tally([merged, stopped], 2)
    assert [x["top_on_watermark"] for x in t] == [1, 2, 2]
    assert [x["suggestions"] for x in t] == [1, 0, 0]
    assert [x["joining_watermark_pieces"] for x in t] == [1, 0, 0]
    assert [x["photos_merged_so_far"] for x in t] == [0, 1, 0]
    assert t[1]["mean_spearman"] == 0.7
    md = bm.markdown({"photos": 2, "machine": "m", "command": "c", "runtime": "r",
                      "samples": 9, "methods": ["lime"], "seconds": 1.0, "tally": t})  # fmt: skip
    assert "| superpixels alone | 1 of 2 |" in md and "| 1 merge round(s) | 2 of 2 |" in md
    assert "answer known" not in md
    oracle = [{"group": [3, 4, 5], "lime_top_on_watermark": True, "merged_rank": 1},
              {"group": [7], "lime_top_on_watermark": False, "merged_rank": 9}]  # fmt: skip
    md = bm.markdown({"photos": 2, "machine": "m", "command": "c", "runtime": "r", "samples": 9,
                      "methods": ["lime"], "seconds": 1.0, "tally": t, "oracle": oracle})  # fmt: skip
    assert "**1 of 2** (the merged region first in 1)" in md and "2.0 a photo" in md


def test_trust_agreement_bench_judges_the_default_run_and_compares_the_methods(tmp_path, capsys):
    """The demo conflict image with its tag drawn, against the committed calibration reference:
    the default run judged as bench_calibration judges it, the four methods' first regions,
    and the two rules scored; the JSON and the markdown say it."""
    _bench_main("bench_trust_agreement", "--only", "demo-conflict-1-tag", "--out", str(tmp_path))
    r = json.loads((tmp_path / "trust_agreement.json").read_text())
    (case,) = r["cases"]
    # today's run makes the regions the recorded run made: its reference fits, and is judged
    assert case["case"] == "demo-conflict-1-tag" and not case["stale"] and case["conclusion_agrees"]
    assert set(case["methods_first"]) == {"lime", "kernelshap", "occlusion", "rise"}
    assert case["methods_agree"] == (len(set(case["methods_first"].values())) == 1)
    assert r["summary"]["cases"] == 1 and r["decision"]
    md = (tmp_path / "trust_agreement.md").read_text()
    assert "| demo-conflict-1-tag |" in md and md in capsys.readouterr().out


def test_trust_agreement_rules_count_what_they_fix_and_break():
    ta = _bench_module("bench_trust_agreement")

    def row(default, ref, agrees, firsts, conclusion=(0,)):
        return {"default_verdict": default, "reference_verdict": ref, "conclusion_agrees": agrees,
                "dangerous": False, "default_conclusion": list(conclusion),
                "methods_first": dict(zip("abcd", firsts, strict=True)),
                "methods_agree": len(set(firsts)) == 1}  # fmt: skip

    rows = [
        row("stable", "stable", True, (0, 0, 1, 0)),  # a downgrade breaks a right verdict
        row("stable", "unstable", False, (0, 2, 0, 0)),  # a downgrade fixes a wrong one
        row("borderline", "stable", False, (0, 0, 0, 0)),  # an upgrade fixes a miss
        row("borderline", "unstable", True, (0, 0, 0, 0)),  # an upgrade adds a danger
        row("stable", "stable", True, (0, 0, 0, 0)),  # untouched
        {**row("stable", "unstable", False, (0, 1, 2, 3)), "stale": True, "case": "x"},  # aside
    ]
    s = ta.score_rules(rows)
    assert s["downgrade"] == {"fixed": 1, "broken": 1}
    assert s["upgrade"] == {"fixed": 1, "broken": 1, "dangerous": 1}
    assert s["methods_agree"] == 3 and s["stable_and_methods_disagree"] == 2
    assert s["cases"] == 5 and s["stale"] == ["x"]
    assert ta.decision(s).startswith("keep the verdict as it is")


def test_merge_why_bench_measures_what_the_interaction_test_sees_and_the_answer_known():
    """One demo conflict image with its tag as the artifact, N = 60: the counts of part 1 are
    consistent with the comparison's own merge hint, the answer known merges exactly the tag's
    regions, and the group rule's group is adjacent regions within its cap."""
    import numpy as np

    import limecraft_core as lc
    from limecraft_core._validate import as_float_image
    from limecraft_core.merge_hint import adjacent_pairs
    from models import demo, registry

    bw = _bench_module("bench_merge_why")
    s = demo.generate(1, seed=2026, mode="conflict")[0]
    model = registry.load_classifier("demo")
    target = int(np.argmax(model.predict(s.image)))
    cfg = lc.ExplainConfig.from_flat(samples=60)
    rec = bw.one_photo(s.image, model, cfg, ("lime", "occlusion"), s.tag_mask, True, target)
    seen = rec["seen"]
    regs = lc.prepare_regions(as_float_image(s.image), cfg.segmentation)[0]
    assert seen["regions"] == regs.n_regions
    assert 0 <= seen["disputed_pieces"] <= min(seen["pieces"], seen["disputed"])
    assert seen["strong_joining_pieces"] <= seen["strong"] <= seen["tested"]
    assert seen["tested_joining_pieces"] <= seen["tested"]
    cmp = lc.compare_explainers(s.image, model, regs, ("lime", "occlusion"), config=cfg,
                                target=target)  # fmt: skip
    assert seen["tested"] == len(cmp.merge.tested)
    assert (seen["strong"] > 0) == (cmp.merge.pair is not None)  # a pair is suggested iff strong
    known = rec["answer_known"]
    assert known["group"] == _box_group(regs.labels, s.tag_mask)
    assert np.isclose(known["sum_of_pieces"], cmp.values("lime")[known["group"]].sum(), atol=1e-3)
    g = rec["grow"]
    assert 2 <= len(g["group"]) <= bw.GROW_CAP and len(set(g["group"])) == len(g["group"])
    pairs = {tuple(p) for p in adjacent_pairs(regs.labels).tolist()}
    assert all(any((min(a, b), max(a, b)) in pairs for b in g["group"] if b != a)
               for a in g["group"])  # fmt: skip
    assert 0 <= g["inside"] <= 1 and g["passes"] >= regs.n_regions + 1
    t = bw.summary([rec, rec])
    assert t["photos"] == 2 and t["top_on_watermark"] == 2 * rec["lime_top_on_watermark"]
    md = bw.markdown({"machine": "m", "command": "c", "runtime": "r", "samples": 60,
                      "methods": ["lime"], "seconds": 1.0, "limit": 1, "grow": True,
                      "parts": {"first 1": t}})  # fmt: skip
    assert "| first 1 (2) |" in md and "group rule" in md


def _box_group(labels, box):
    return _bench_module("bench_merge").box_group(labels, box)
