"""The benchmark scripts run, and say what they claim to measure (tiny sizes; no timing asserts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def test_run_all_writes_markdown_and_json(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run_all.py"),
            "--models",
            "free",
            "--skip",
            "memory,app,segmentation",
            "--samples",
            "120",
            "--repeats",
            "1",
            "--lime-batch-sizes",
            "100",
            "--captum-batch-sizes",
            "64",
            "--out",
            str(tmp_path),
            "--no-readme",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
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


def test_load_script_serves_concurrent_sessions_without_errors(tmp_path):
    out = tmp_path / "load.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_load.py"),
            "--ks",
            "2",
            "--samples",
            "100",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        # combine sessions' chunks even on a CPU (by default it does not: see serving.WorkQueue)
        env={**os.environ, "LIMECRAFT_QUEUE_MAX_BATCH": "200"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["k"] == 2 and row["errors"] == []
    assert row["p50_s"] > 0 and row["forward_calls"] > 0
    # two sessions explaining at once shared forward passes through the one queue
    assert row["shared_forward_calls"] >= 1
