"""Regions proposed on the command line (issue 50): ``explain --propose`` beside
``--regions-mask``, ``audit --propose`` and ``audit --regions-masks``, in this process with the
demo model; the audit's resume key takes both options."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from skimage import data

import limecraft_core as lc
from tests.limecraft.test_audit_cli import run as run_in_process

FAST = ["--model", "demo", "--samples", "40", "--outer-segments", "4", "--quiet"]


def run(*args: str) -> tuple[int, str, str]:
    """``python -m limecraft ARGS`` in this process: the exit code, stdout and stderr."""
    r = run_in_process(*args)
    return r.returncode, r.stdout, r.stderr


@pytest.fixture(scope="module")
def marked(tmp_path_factory) -> Path:
    """A watermarked photo (chelsea at 224 px) and a regions mask of one square."""
    d = tmp_path_factory.mktemp("propose")
    photo = np.asarray(Image.fromarray(data.chelsea()).resize((224, 224)))
    Image.fromarray(lc.add_watermark(photo).image).save(d / "cat.png")
    own = np.zeros((224, 224), np.uint8)
    own[10:50, 10:50] = 1
    Image.fromarray(own).save(d / "own.png")
    return d


def regions(out: Path) -> list[tuple[str, str]]:
    doc = json.loads((out / "explanation.json").read_text())
    return [(r["key"], r["name"]) for r in doc["regions"] if r["key"].startswith("hand:")]


def test_explain_propose_adds_named_regions_beside_the_regions_mask(marked, tmp_path):
    out = tmp_path / "out"
    code, _, err = run(
        "explain", str(marked / "cat.png"), "--out", str(out), "--regions-mask",
        str(marked / "own.png"), "--propose", "watermark-box", *FAST,
    )  # fmt: skip
    assert code == 0, err
    assert regions(out) == [("hand:0", "hand 1"), ("hand:1", "watermark")]
    doc = json.loads((out / "explanation.json").read_text())
    assert doc["inputs"]["propose"] == ["watermark-box"]
    origins = [r["origin"] for r in doc["regions"] if r["key"].startswith("hand:")]
    assert origins == ["uploaded", "proposed:watermark"]  # the box of the watermark proposer


@pytest.mark.slow  # the detector's models load, and two explanations at 224 px
def test_explain_propose_text_finds_the_watermark_and_prints_the_notes(marked, tmp_path):
    pytest.importorskip("rapidocr_onnxruntime", reason="the text detector is not installed")
    out = tmp_path / "out"
    args = ["explain", str(marked / "cat.png"), "--out", str(out), "--propose", "text"]
    code, stdout, err = run(*args, *FAST[:-1])
    assert code == 0, err
    assert [n for _, n in regions(out)] == ["text: 捷径捷径捷径"]
    assert "proposed 1 regions: text: 捷径捷径捷径" in stdout
    flat = tmp_path / "flat.png"
    Image.fromarray(np.full((224, 224, 3), 128, np.uint8)).save(flat)
    code, stdout, err = run("explain", str(flat), "--out", str(tmp_path / "o2"), "--propose",
                            "text", *FAST[:-1])  # fmt: skip
    assert code == 0, err
    assert "proposed: No text found." in stdout and regions(tmp_path / "o2") == []


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--propose", "masks"], "invalid choice: 'masks'"),
        (["--propose", "ocr"], "invalid choice: 'ocr'"),
        (["--propose", "watermark", "--segments-file", "own.png"], "not with --segments-file"),
    ],
)
def test_explain_propose_refuses_with_one_line(marked, tmp_path, extra, match):
    extra = [str(marked / e) if e == "own.png" else e for e in extra]
    code, _, err = run("explain", str(marked / "cat.png"), "--out", str(tmp_path), *extra, *FAST)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1, err


def test_a_missing_detector_is_refused_before_the_model_loads(marked, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "rapidocr_onnxruntime", None)  # as if not installed
    args = ["--out", str(tmp_path / "o"), "--propose", "text", *FAST]
    code, _, err = run("explain", str(marked / "cat.png"), *args)
    assert code == 2 and "pip install rapidocr-onnxruntime==1.4.4" in err, err
    code, _, err = run("audit", str(marked), *args)
    assert code == 2 and "pip install rapidocr-onnxruntime==1.4.4" in err, err


@pytest.fixture(scope="module")
def marked_set(tmp_path_factory) -> Path:
    """Two demo pictures watermarked by the watermark command, its masks beside them."""
    d = tmp_path_factory.mktemp("set")
    code, _, err = run("demo-data", "--mixed", "--count", "2", "--seed", "3", "--out", str(d / "d"))
    assert code == 0, err
    code, _, err = run("watermark", str(d / "d" / "images"), "--out", str(d / "w"), "--quiet")
    assert code == 0, err
    return d / "w"


def audit(data_dir: Path, out: Path, *more: str) -> tuple[int, str, str]:
    return run("audit", str(data_dir / "images"), "--out", str(out), *FAST, *more)


def test_audit_regions_masks_and_propose_make_named_regions_in_every_image(marked_set, tmp_path):
    out = tmp_path / "audit"
    more = ["--regions-masks", str(marked_set / "masks"), "--propose", "watermark-box"]
    code, _, err = audit(marked_set, out, *more)
    assert code == 0, err
    doc = json.loads((out / "audit.json").read_text())
    assert doc["source"]["with_regions"] == 2 and doc["source"]["propose"] == ["watermark-box"]
    for folder in sorted((out / "images").iterdir()):
        assert regions(folder) == [("hand:0", "hand 1"), ("hand:1", "watermark")]
        doc = json.loads((folder / "explanation.json").read_text())
        origins = [r["origin"] for r in doc["regions"] if r["key"].startswith("hand:")]
        assert origins == ["uploaded", "proposed:watermark"]  # the box of the watermark proposer


@pytest.mark.slow  # four audits of two images
def test_the_resume_key_takes_the_proposers_and_the_regions_masks(marked_set, tmp_path):
    out = tmp_path / "audit"
    masks = ["--regions-masks", str(marked_set / "masks")]
    assert audit(marked_set, out, *masks)[0] == 0
    kept = "2 already finished are kept"
    code, stdout, _ = run("audit", str(marked_set / "images"), "--out", str(out), *FAST[:-1],
                          *masks, "--resume")  # fmt: skip
    assert code == 0 and kept in stdout
    # another proposer, or no regions masks: nothing is kept
    for more in ([*masks, "--propose", "watermark"], []):
        code, stdout, _ = run("audit", str(marked_set / "images"), "--out", str(out),
                              *FAST[:-1], *more, "--resume")  # fmt: skip
        assert code == 0 and "already finished" not in stdout, stdout


@pytest.mark.slow  # three audits of two images, the detector's models load
def test_the_audit_proposes_text_lines_by_default_and_none_turns_it_off(
    marked_set, tmp_path, monkeypatch
):
    """As it comes, the audit gives every image the text that reads as a word (the watermark's,
    here); ``--propose none`` is superpixels alone, another resume key; without the detector's
    package the default is off, and the audit says so and runs."""
    out = tmp_path / "audit"
    code, _, err = audit(marked_set, out)
    assert code == 0, err
    doc = json.loads((out / "audit.json").read_text())
    assert doc["source"]["propose"] == ["text-lines"]
    found = []
    for folder in sorted((out / "images").iterdir()):
        ex = json.loads((folder / "explanation.json").read_text())
        found += [(r["name"], r["origin"]) for r in ex["regions"] if r["key"].startswith("hand:")]
    assert found and all(o == "proposed:text-lines" for _, o in found), found
    assert any(n.startswith("text: 捷") for n, _ in found), found  # the watermark, read
    code, stdout, err = run("audit", str(marked_set / "images"), "--out", str(out),
                            *FAST[:-1], "--propose", "none", "--resume")  # fmt: skip
    assert code == 0 and "already finished" not in stdout, stdout  # not the same work
    assert json.loads((out / "audit.json").read_text())["source"]["propose"] == []
    code, _, err = audit(marked_set, tmp_path / "b", "--propose", "none", "--propose", "text")
    assert code == 2 and "--propose none means no proposer: give it alone" in err, err
    monkeypatch.setitem(sys.modules, "rapidocr_onnxruntime", None)  # as if not installed
    code, _, err = audit(marked_set, tmp_path / "c")
    assert code == 0 and "regions proposed by text-lines are off" in err, err
    assert "pip install rapidocr-onnxruntime==1.4.4" in err and "superpixels only" in err
    assert json.loads((tmp_path / "c" / "audit.json").read_text())["source"]["propose"] == []


def test_regions_masks_that_match_no_image_are_refused(marked_set, tmp_path):
    code, _, err = audit(marked_set, tmp_path / "a", "--regions-masks", str(tmp_path))
    assert code == 2 and "--regions-masks" in err and "has no mask named as any" in err, err
