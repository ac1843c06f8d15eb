"""``python -m limecraft audit`` and ``demo-data --mixed``, as a user runs them: the shortcut
found in the demo set, the files written, bad images, resume after a kill, Ctrl-C, progress.

The CLI runs in this process (``main(argv)``, what it prints captured), except where the process
itself is the point: the exit code of bad input, a kill and Ctrl-C."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tqdm import tqdm

from limecraft.cli import main
from limecraft_core import Explanation
from limecraft_core.io.audit_folder import load_audit

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
#: Samples per image where what a test checks is the run itself (files, rows, resume, signals),
#: not what the explanations find: 100 (over the ~40 regions of an image) take every stage of
#: the run as 200 did; and no proposers (the text detector's regions are
#: tests/limecraft/test_propose_cli.py's subject). The test of what the audit finds runs at
#: N = 400 with the audit's default proposers.
FAST = ["--samples", "100", "--propose", "none"]
#: Images of the demo set, half of them conflict images (tag and shape of different classes).
#: bench/bench_audit.py scores the flags on 60 images at N=500; here a smaller set is enough
#: to hold the same precision and recall bars (at this seed the model follows the tag on every
#: conflict image).
COUNT = 10


@dataclass(frozen=True)
class Result:
    """What a run of the CLI gave: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def run(*args: str) -> Result:
    """``python -m limecraft ARGS``, in this process: main's exit code (argparse's
    ``SystemExit`` code for a bad option) and its stdout and stderr.

    The audit's progress bar starts no tqdm monitor thread here: tqdm keeps that thread for the
    rest of the process once started, and this process runs the rest of the suite."""
    out, err = io.StringIO(), io.StringIO()
    interval, tqdm.monitor_interval = tqdm.monitor_interval, 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse: a bad option (2) or --help (0)
                code = e.code if isinstance(e.code, int) else int(e.code is not None)
    finally:
        tqdm.monitor_interval = interval
    return Result(code, out.getvalue(), err.getvalue())


def spawn(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m limecraft ARGS`` as a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "limecraft", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def demo_set(folder: Path, count: int, seed: int) -> Path:
    p = run(
        "demo-data", "--mixed", "--count", str(count), "--seed", str(seed), "--out", str(folder)
    )
    assert p.returncode == 0, p.stderr
    return folder


def audit(data: Path, out: Path, *more: str, masks: bool = True, fast: bool = True) -> Result:
    args = ["audit", str(data / "images"), "--model", "demo", "--out", str(out)]
    args += [*FAST, *more] if fast else list(more)
    if masks:
        args += ["--expected-masks", str(data / "masks")]
    return run(*args)


def png(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im)


def rows_of(out: Path) -> list[dict]:
    return json.loads((out / "audit.json").read_text())["rows"]


def without_timing(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    return demo_set(tmp_path_factory.mktemp("mixed"), COUNT, seed=424_242)


def test_demo_data_mixed_writes_an_audit_ready_set(mixed):
    labels = json.loads((mixed / "labels.json").read_text())
    assert len(labels) == COUNT
    assert sum(e["mode"] == "conflict" for e in labels) == COUNT // 2
    assert [e["mode"] for e in labels] != sorted(e["mode"] for e in labels)  # shuffled
    for e in labels:
        assert (mixed / "images" / e["file"]).is_file()
        shape, tag = png(mixed / e["shape_mask"]), png(mixed / e["tag_mask"])
        assert shape.shape == tag.shape == (128, 128) and shape.any() and tag.any()
        assert not (shape.astype(bool) & tag.astype(bool)).any()  # the shape never covers the tag
        assert (e["tag_class"] == e["shape_class"]) == (e["mode"] == "aligned")
    assert sorted(p.name for p in (mixed / "masks").iterdir()) == sorted(e["file"] for e in labels)


def test_the_audit_finds_the_shortcut_in_the_demo_set(mixed, tmp_path):
    """The acceptance test, smaller: the conflict images where the model follows the tag are the
    flagged ones (precision and recall at least 0.9 against labels.json)."""
    out = tmp_path / "audit"
    labels = {e["file"]: e for e in json.loads((mixed / "labels.json").read_text())}
    truth = tmp_path / "truth.csv"  # which images carry a tag of another class than the shape
    truth.write_text(
        "file,artifact\n"
        + "".join(f"{f},{int(e['mode'] == 'conflict')}\n" for f, e in labels.items())
    )
    p = audit(mixed, out, "--samples", "400", "--truth", str(truth), fast=False)  # text-lines
    assert p.returncode == 0, p.stderr
    rows = rows_of(out)
    assert len(rows) == COUNT and all(r["status"] == "ok" for r in rows)
    truth = {
        r["file"]
        for r in rows
        if labels[r["file"]]["mode"] == "conflict"
        and r["predicted"] == labels[r["file"]]["tag_class"]
    }
    flagged = {r["file"] for r in rows if r["flags"]}
    # the model follows the tag on (almost) every conflict image: at least 9 in 10
    assert len(truth) >= 0.9 * (COUNT // 2)
    precision = len(flagged & truth) / max(1, len(flagged))
    recall = len(flagged & truth) / len(truth)
    assert precision >= 0.9 and recall >= 0.9, (precision, recall, flagged ^ truth)
    # what the user reads first
    first = p.stdout.splitlines()[1]
    assert first.startswith(f"In {len(flagged)} of {COUNT} images the prediction rests outside")
    assert "are predicted" in first or "is predicted" in first
    html = (out / "audit.html").read_text()
    assert first.replace("'", "&#39;") in html
    assert html.count('<tr class="flagged">') == len(flagged)
    # the findings across images lead the page, proved, with their truth scores
    doc = json.loads((out / "audit.json").read_text())["findings"]
    assert doc["proved"] and doc["discovered"]
    outside = next(f for f in doc["discovered"] if f["kind"] == "outside")
    assert outside["intervention"]["confirmed"] and outside["truth"]["images"] == COUNT
    assert outside["truth"]["positives"] == COUNT // 2 and 0 <= outside["truth"]["auroc"] <= 1
    against = f"against --truth ({COUNT} images, {COUNT // 2} with"
    said = [line for line in p.stdout.splitlines() if against in line]
    assert len(said) == len(doc["discovered"])
    assert f"AUROC {outside['truth']['auroc']:.2f}, AP {outside['truth']['ap']:.2f}" in p.stdout
    assert html.index("Findings across images") < html.index("Where the model looks")
    assert "against the null" in html and 'alt="exemplar ' in html
    assert "Where the model looks across the dataset" in html and "By predicted class" in html
    assert "http://" not in html and "https://" not in html  # self-contained
    with open(out / "audit.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == COUNT and {r["file"] for r in table if r["flagged"] == "true"} == flagged
    # each image's explanation, as explain writes it
    for r in rows[:3]:
        d = out / "images" / r["key"]
        for name in ("explanation.json", "segments.npy", "overlay.png", "image.png", "row.json"):
            assert (d / name).is_file(), name
        ex = Explanation.from_json((d / "explanation.json").read_text())
        assert ex.target == r["predicted"] and int(np.argmax(ex.weights)) == r["top_region"]
        assert ex.trust.localisation is not None
        np.testing.assert_array_equal(np.load(d / "segments.npy"), ex.segments)
        assert png(d / "overlay.png").shape[1] >= 512
    # the folder reads back as the app reads it
    loaded = load_audit(out)
    assert loaded.complete and len(loaded.rows) == COUNT and loaded.findings.flagged == len(flagged)
    assert loaded.image(rows[0]["key"]).shape == (128, 128, 3)
    assert loaded.expected(rows[0]["key"]).any()


def test_without_masks_the_border_and_the_location_map(mixed, tmp_path):
    out = tmp_path / "audit"
    p = audit(mixed, out, "--limit", "6", masks=False)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert (
        lines[1].startswith("In ") and "top region touches the image border (flagged)" in lines[1]
    )
    assert any(line.startswith("Location map: the outer 10% of each side") for line in lines)
    across = [line for line in lines if line.startswith("Across images: ")]
    assert len(across) == 1
    doc = json.loads((out / "audit.json").read_text())
    assert across[0] == "Across images: " + doc["findings"]["headline"]
    doc = json.loads((out / "audit.json").read_text())
    grid = np.asarray(doc["findings"]["location_map"])
    assert grid.shape == (64, 64) and grid.max() > 0
    assert len(doc["rows"]) == 6 and doc["source"]["with_masks"] == 0
    assert all(r["relevance_mass"] is None for r in doc["rows"])


def test_bad_images_are_error_rows_and_the_run_goes_on(mixed, tmp_path):
    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    (data / "masks").mkdir()
    for e in json.loads((mixed / "labels.json").read_text())[:2]:
        for sub in ("images", "masks"):
            (data / sub / e["file"]).write_bytes((mixed / sub / e["file"]).read_bytes())
    good = (data / "images" / "demo_0000.png").read_bytes()
    (data / "images" / "broken.png").write_bytes(good[: len(good) // 3])
    (data / "images" / "notes.png").write_text("not an image")
    (data / "images" / "small.png").write_bytes(good)
    Image.fromarray(np.full((64, 64), 255, np.uint8)).save(data / "masks" / "small.png")
    out = tmp_path / "audit"
    p = audit(data, out)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    rows = {r["file"]: r for r in rows_of(out)}
    assert rows["broken.png"]["status"] == "error" and "truncated" in rows["broken.png"]["error"]
    assert "not an image that can be read" in rows["notes.png"]["error"]
    assert rows["small.png"]["error"] == (
        "the expected mask 'small.png' is 64x64 but the image is 128x128; draw the expected "
        "area on an image of the same size"
    )
    assert [rows[f]["status"] for f in ("demo_0000.png", "demo_0001.png")] == ["ok", "ok"]
    assert "3 images could not be audited: see the error rows." in p.stdout
    html = (out / "audit.html").read_text()
    assert html.count('<tr class="error">') == 3 and "the file may be truncated" in html


def test_bad_input_is_one_line_and_exit_2(mixed, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        (["audit", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o1")], "does not exist"),
        (["audit", str(empty), "--out", str(tmp_path / "o2")], "holds no image files"),
        (
            ["audit", str(mixed / "images"), "--out", str(tmp_path / "o3"), "--expected-masks",
             str(mixed / "labels.json")],
            "is not a folder",
        ),
        (
            ["audit", str(mixed / "images"), "--out", str(tmp_path / "o4"), "--expected-masks",
             str(empty)],
            "has no mask named as any of the images",
        ),
        (
            ["audit", str(mixed / "images"), "--out", str(tmp_path / "o5"), "--no-compute-deltas"],
            "needs the per-region deltas",
        ),
        (["audit", str(mixed / "images"), "--out", str(tmp_path / "o6"), "--in-flight", "0"],
         "--in-flight must be at least 1"),
    ]  # fmt: skip
    first = sorted(p.name for p in (mixed / "images").iterdir())[:2]
    for i, (text, message) in enumerate(
        [
            ("name,artifact\n", "has no column 'file'"),
            (f"file,artifact\n{first[0]},1\nelse.png,0\n", "'else.png' is not one of the audited"),
            (f"file,artifact\n{first[0]},1\n{first[1]},1\n", "AUROC needs both"),
        ]
    ):
        (tmp_path / f"truth{i}.csv").write_text(text)
        args = ["audit", str(mixed / "images"), "--out", str(tmp_path / f"t{i}")]
        cases.append(([*args, "--truth", str(tmp_path / f"truth{i}.csv")], message))
    for args, message in cases:
        p = run(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "Traceback" not in p.stderr


def test_bad_input_is_one_line_and_exit_2_from_the_real_process(tmp_path):
    """The same for one case, as the shell sees it: the process's exit code and its stderr."""
    p = spawn("audit", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o1"), timeout=120)
    assert p.returncode == 2, p.stderr
    assert "does not exist" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "Traceback" not in p.stderr


def test_an_audit_folder_is_not_overwritten_without_resume(mixed, tmp_path):
    out = tmp_path / "audit"
    assert audit(mixed, out, "--limit", "2").returncode == 0
    p = audit(mixed, out, "--limit", "2")
    assert p.returncode == 2
    assert "already holds an audit: add --resume" in p.stderr
    p = audit(mixed, out, "--limit", "3", "--resume")
    assert p.returncode == 0, p.stderr
    assert "2 already finished are kept" in p.stdout and len(rows_of(out)) == 3


#: The stopped runs' images, one at a time and each scoring every sample, so that a signal lands
#: between two images: a kill once KILLED_AFTER are written leaves some still to do.
LIMIT, KILLED_AFTER = 5, 2
STOPPED = ["--limit", str(LIMIT), "--in-flight", "1", "--early-stop", "none"]


def _rows_written(out: Path) -> int:
    return len(list((out / "images").glob("*/row.json")))


def _start(mixed: Path, out: Path, stderr=subprocess.PIPE) -> subprocess.Popen:
    args = [sys.executable, "-m", "limecraft", "audit", str(mixed / "images"), "--model"]
    args += ["demo", "--out", str(out), "--expected-masks", str(mixed / "masks"), *FAST]
    args += STOPPED
    return subprocess.Popen(
        args,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        # as a terminal's foreground command: a shell without job control starts its background
        # jobs (a suite run with `pytest &`) with Ctrl-C ignored, and Python keeps it ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_rows(proc: subprocess.Popen, out: Path, n: int) -> None:
    deadline = time.monotonic() + 300
    while _rows_written(out) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_killed_audit_keeps_what_is_done_and_resume_gives_the_same_results(mixed, tmp_path):
    whole = tmp_path / "whole"
    p = audit(mixed, whole, *STOPPED)
    assert p.returncode == 0, p.stderr

    out = tmp_path / "killed"
    proc = _start(mixed, out)
    _wait_rows(proc, out, KILLED_AFTER)
    proc.send_signal(signal.SIGKILL)  # a crash: no chance to clean up
    proc.communicate()
    done = sorted(p.parent.name for p in (out / "images").glob("*/row.json"))
    assert KILLED_AFTER <= len(done) < LIMIT
    stamps = {}
    for key in done:  # everything finished is whole on disk
        d = out / "images" / key
        row = json.loads((d / "row.json").read_text())["row"]
        assert row["status"] == "ok"
        assert (
            Explanation.from_json((d / "explanation.json").read_text()).target == row["predicted"]
        )
        stamps[key] = {f.name: f.stat().st_mtime_ns for f in d.iterdir()}
    assert not (out / "audit.json").exists()

    p = audit(mixed, out, *STOPPED, "--resume")
    assert p.returncode == 0, p.stderr
    assert f"{len(done)} already finished are kept" in p.stdout
    assert f"explained {LIMIT - len(done)} images" in p.stdout
    for key in done:  # the finished images were not redone
        d = out / "images" / key
        assert {f.name: f.stat().st_mtime_ns for f in d.iterdir()} == stamps[key]
    assert without_timing(rows_of(out)) == without_timing(rows_of(whole))
    found = json.loads((whole / "audit.json").read_text())["findings"]
    assert found["proved"] and json.loads((out / "audit.json").read_text())["findings"] == found
    # a resume with every image finished explains nothing and proves again: the same findings
    p = audit(mixed, out, *STOPPED, "--resume")
    assert p.returncode == 0 and "images/min" not in p.stdout, p.stderr
    assert json.loads((out / "audit.json").read_text())["findings"] == found
    for r in rows_of(whole):
        a = Explanation.from_json((whole / "images" / r["key"] / "explanation.json").read_text())
        b = Explanation.from_json((out / "images" / r["key"] / "explanation.json").read_text())
        np.testing.assert_array_equal(a.weights, b.weights)
    assert json.loads((out / "audit.json").read_text())["complete"] is True


def _wait_reported(proc: subprocess.Popen, log: Path) -> None:
    """Until the audit has taken in its first finished image: the progress bar shows the
    '... flagged, ... errors' counts from then on. (An image's row.json is written in its own
    thread a moment before the audit takes its row in: a Ctrl-C sent as soon as row.json is
    there can fall between the two.)"""
    deadline = time.monotonic() + 300
    while "flagged" not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_ctrl_c_stops_cleanly_and_says_how_to_finish(mixed, tmp_path):
    out = tmp_path / "stopped"
    log = tmp_path / "stderr.txt"
    with open(log, "w") as f:  # read while it runs: the progress bar says what is taken in
        proc = _start(mixed, out, stderr=f)
    _wait_reported(proc, log)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    err = log.read_text()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "interrupted:" in err and "run the same command with --resume to finish" in err
    doc = json.loads((out / "audit.json").read_text())
    assert doc["complete"] is False
    assert len(doc["rows"]) == _rows_written(out) >= 1
    assert "This audit was interrupted" in (out / "audit.html").read_text()


def test_progress_bar_with_eta_and_a_list_file(mixed, tmp_path):
    listing = tmp_path / "list.txt"
    names = sorted(p.name for p in (mixed / "images").iterdir())[:3]
    listing.write_text(
        "# three demo images and one that is gone\n"
        + "".join(f"{mixed / 'images' / n}\n" for n in names)
        + "missing.png\n"
    )
    out = tmp_path / "audit"
    p = run("audit", str(listing), "--model", "demo", "--out", str(out), *FAST, "--in-flight", "2")
    assert p.returncode == 0, p.stderr
    assert "audit: 100%" in p.stderr and "4/4" in p.stderr  # tqdm's bar ...
    assert "<00:" in p.stderr and ("img/s" in p.stderr or "s/img" in p.stderr)  # ... its ETA
    assert "flagged" in p.stderr
    rows = rows_of(out)
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "error"]
    assert rows[3]["file"] == "missing.png" and "does not exist" in rows[3]["error"]


def test_images_in_subfolders_keep_their_paths_and_their_masks(mixed, tmp_path):
    data = tmp_path / "nested"
    names = sorted(p.name for p in (mixed / "images").iterdir())[:2]
    for sub, n in zip(("left", "right"), names, strict=True):
        for kind in ("images", "masks"):
            (data / kind / sub).mkdir(parents=True)
            (data / kind / sub / "x.png").write_bytes((mixed / kind / n).read_bytes())
    out = tmp_path / "audit"
    assert audit(data, out).returncode == 0
    rows = rows_of(out)
    assert [r["file"] for r in rows] == ["left/x.png", "right/x.png"]
    assert [r["key"] for r in rows] == ["left__x.png", "right__x.png"]
    assert all(r["has_mask"] for r in rows)
