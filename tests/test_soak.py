"""A short soak (bench/soak.py, about 30 s): Explains in threads with faults injected (a model that
fails one batch call in ten, cancels, reloads) and an app session explaining alongside.

Zero lost sessions, every other request succeeds, every fault is a clear error, and memory, open
files, threads and live tensors do not grow.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    # Its own process, like the server it stands for: the memory check must not count the
    # caches and allocator state that the rest of the test suite left in pytest's process.
    out = tmp_path_factory.mktemp("soak") / "soak.json"
    args = ["--duration", "40", "--max-explains", "400", "--warmup-explains", "40"]
    args += ["--sessions", "3", "--app-sessions", "1", "--app-rounds", "4", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")},
    )
    assert out.exists(), proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_soak_loses_no_session_and_every_fault_is_a_clear_error(result):
    o = result["outcomes"]
    assert result["lost_sessions"] == [] and result["unexpected"] == []
    # the faults really happened, and the good runs still succeeded
    assert o["model_error"] > 0 and o["cancelled"] > 0 and o["ok"] > 0 and result["reloads"] > 0
    assert result["explains"] >= 40


def test_soak_other_requests_all_succeed(result):
    assert result["requests"]["ok"] > 0 and result["requests"]["failed"] == 0, result[
        "request_errors"
    ]


def test_soak_app_session_survives_faults(result):
    app = result["app"]
    assert app["problems"] == [] and app["outcomes"]["sessions_alive"] == 2  # one per half
    assert app["outcomes"].get("ok", 0) + app["outcomes"].get("in_page_error", 0) == 2 * 4


def test_soak_resources_do_not_grow(result):
    g, lim = result["growth"], result["limits"]
    assert g["open_fds"] <= 0 and g["threads"] <= 0, g
    assert g["rss_mib"] <= lim["rss_mib"] and g["live_tensors"] <= lim["live_tensors"], g
    assert result["ok"]
