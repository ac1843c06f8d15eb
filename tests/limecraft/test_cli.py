import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from bad_files import BAD_IMAGES, write_bad_files
from PIL import Image
from toys import ChannelMeans, ChannelMoments

from limecraft.cli import main
from limecraft_core import render

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def files(tmp_path, photo):
    img = tmp_path / "cat.png"
    Image.fromarray(photo).save(img)
    model = tmp_path / "toy.pt2"
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(
        ChannelMoments(classes=4), (torch.rand(2, 3, 48, 48),), dynamic_shapes={"x": {0: batch}}
    )
    torch.export.save(program, str(model))
    labels = tmp_path / "labels.txt"
    labels.write_text("red\ngreen\nblue\ngold\n")
    mask = np.zeros(photo.shape[:2], np.uint8)
    mask[20:60, 30:90] = 1
    mask_png = tmp_path / "mask.png"
    Image.fromarray(mask).save(mask_png)
    return {"img": img, "model": model, "labels": labels, "mask": mask_png, "dir": tmp_path}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "limecraft", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_explain_writes_the_three_files(files, photo):
    out = files["dir"] / "out"
    code = main(
        _toy_args(
            files,
            out,
            "--segmentation",
            "slic",
            "--n-segments",
            "12",
            "--fill",
            "#808080",
            "--quiet",
        )
    )
    assert code == 0
    doc = json.loads((out / "explanation.json").read_text())
    seg = np.load(out / "segments.npy")
    overlay = np.asarray(Image.open(out / "overlay.png"))
    assert seg.shape == photo.shape[:2]
    assert overlay.shape[1] == 512 and overlay.shape[0] > 384  # 4x the 128x96 image, then a legend
    assert doc["image"] == {"width": 128, "height": 96}
    assert doc["target"]["label"] in {"red", "green", "blue", "gold"}
    assert len(doc["regions"]) == seg.max() + 1
    assert sum(r["pixels"] for r in doc["regions"]) == 96 * 128
    s = doc["settings"]
    assert s["sampling"]["samples"] == 60 and s["fill"]["fill"] == "#808080"
    assert doc["run"]["input_size"] == [48, 48]
    assert s["segmentation"]["segmentation"] == "slic" and s["segmentation"]["n_segments"] == 12
    assert s["sampling"]["seed"] == 0
    assert doc["inputs"] == {
        "image_file": str(files["img"]),
        "model": str(files["model"]),
        "labels": str(files["labels"]),
        "arch": None,
        "segments_file": None,
        "regions_mask": None,
        "expected_mask": None,
    }
    assert {"segmentation_s", "sampling_s", "total_s"} <= set(doc["timings"])


def test_explain_with_a_regions_mask(files):
    out = files["dir"] / "out2"
    code = main(
        [
            "explain",
            str(files["img"]),
            "--out",
            str(out),
            "--model",
            str(files["model"]),
            "--regions-mask",
            str(files["mask"]),
            "--outer-segments",
            "1",
            "--samples",
            "40",
            "--quiet",
        ]
    )
    assert code == 0
    doc = json.loads((out / "explanation.json").read_text())
    assert [r["key"] for r in doc["regions"]] == ["hand:0", "background"]
    assert doc["regions"][0]["pixels"] == 40 * 60


def test_explain_takes_the_half_normalisation_of_tf_style_models(files):
    """--normalize half: (x - 0.5) / 0.5, as the run records."""
    out = files["dir"] / "half"
    assert main(_toy_args(files, out, "--normalize", "half", "--quiet")) == 0
    doc = json.loads((out / "explanation.json").read_text())
    assert doc["run"]["normalize"] == "half"


SUMMARY_ROW = re.compile(r"^  (region \d+|hand \d+|background): weight=([+-]\d\.\d{4}); delta=\S+$")


def _toy_args(files, out, *more: str) -> list[str]:
    return [
        "explain",
        str(files["img"]),
        "--out",
        str(out),
        "--model",
        str(files["model"]),
        "--labels",
        str(files["labels"]),
        "--input-size",
        "48",
        "--samples",
        "60",
        *more,
    ]


def test_overlay_is_large_and_carries_the_ids_of_the_summary(files, photo, capsys):
    out = files["dir"] / "ids"
    assert main(_toy_args(files, out, "--segmentation", "grid", "--n-segments", "12")) == 0
    printed = [SUMMARY_ROW.match(line) for line in capsys.readouterr().out.splitlines()]
    rows = [(m.group(1), float(m.group(2))) for m in printed if m]
    doc = json.loads((out / "explanation.json").read_text())
    seg = np.load(out / "segments.npy")
    weights = np.array([r["weight"] for r in doc["regions"]])
    ids = [int(name.split()[1]) for name, _ in rows]
    assert ids and all(name.startswith("region ") for name, _ in rows)
    assert set(ids) <= set(np.unique(seg).tolist())  # the summary's ids are the segments' ids
    assert tuple(ids) == render.tinted_regions(weights, k=5).ids  # the regions tinted, in order
    assert all(abs(weights[i] - w) < 1e-4 for i, (_, w) in zip(ids, rows, strict=True))

    picture = np.asarray(Image.open(out / "overlay.png").convert("RGB"))
    assert max(picture.shape[:2]) >= 512
    plain = render.weight_overlay(photo, seg, weights, k=5, long_side=512, ids=False)
    drawn = np.abs(picture[: plain.shape[0]].astype(int) - plain)
    scale = plain.shape[1] / seg.shape[1]
    where = {r: (x * scale, y * scale) for r, x, y in render.id_positions(seg)}
    for i in ids:  # each printed id is written on its region in overlay.png
        x, y = (int(v) for v in where[i])
        assert drawn[y - 5 : y + 5, x - 5 : x + 5].max() > 80, i
    legend = picture[plain.shape[0] :]
    assert (legend == 255).mean() > 0.5 and not (legend == 255).all()  # a legend under it


def test_a_handcrafted_region_prints_under_one_name(files, capsys):
    out = files["dir"] / "hand"
    args = _toy_args(files, out, "--regions-mask", str(files["mask"]), "--outer-segments", "1")
    assert main(args) == 0
    text = capsys.readouterr().out
    doc = json.loads((out / "explanation.json").read_text())
    assert [r["name"] for r in doc["regions"]] == ["hand 1", "background"]
    rows = [m.group(1) for m in map(SUMMARY_ROW.match, text.splitlines()) if m]
    assert "hand 1" in rows, text
    named = "\n".join(line for line in text.splitlines() if not line.startswith("stability:"))
    assert "region 0" not in named and "region 1" not in named and "'" not in named


def test_a_mask_file_gives_uploaded_regions(files):
    out = files["dir"] / "uploaded"
    args = _toy_args(files, out, "--regions-mask", str(files["mask"]), "--outer-segments", "1")
    assert main(args) == 0
    doc = json.loads((out / "explanation.json").read_text())
    assert [r["origin"] for r in doc["regions"]] == ["uploaded", "superpixel"]


def test_summary_lines_are_unambiguous(files, capsys):
    out = files["dir"] / "trust"
    args = _toy_args(
        files,
        out,
        "--segmentation",
        "grid",
        "--n-segments",
        "6",
        "--repeats",
        "2",
        "--convergence",
        "30,60",
        "--kernel-widths",
        "0.25,uniform",
        "--faithfulness",
        "--compare-fills",
        "blur",
    )
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    wrote = [line for line in lines if line.startswith("wrote ")]
    assert [Path(line[6:]).name for line in wrote] == [
        "explanation.json",
        "segments.npy",
        "overlay.png",
    ]
    heads = {line.split(":")[0] for line in lines if not line.startswith(" ")}
    assert {"stability", "convergence", "kernel sweep R^2", "faithfulness", "verdict"} <= heads
    assert {"field metrics", "reading"} <= heads
    for line in lines:
        if line in wrote or line.startswith("verdict: "):  # the verdict is a sentence
            continue
        assert "," not in line, line  # ";" between entries, never a comma inside one
        head, _, body = line.partition(": ")
        if head in {"stability", "faithfulness", "kernel sweep R^2", "field metrics"} or (
            head.startswith("target")
        ):
            entries = line.split("; ") if head.startswith("target") else body.split("; ")
            assert all(e.count("=") == 1 for e in entries), line
    fills = [line for line in lines if line.startswith("  ") and "Spearman=" in line]
    assert len(fills) == 2 and "(main)" in fills[0] and fills[1].startswith("  blur: top=")
    for line in fills:
        assert re.fullmatch(r"  \S+( \(main\))?: top=region \d+; Spearman=-?\d\.\d\d", line), line


# Several runs of the real entry point in one interpreter, so that Python and torch start once
# (tests/limecraft/test_cli.py: ``driven``); ``test_subprocess_bad_input_has_no_traceback`` is
# the one true ``python -m limecraft`` process, for the interpreter's own exit.
_DRIVER = r"""
import json, os, runpy, sys, tempfile, traceback

def drive(argv):
    # limecraft/__main__.py as ``python -m limecraft ARGV`` runs it, with file descriptors 1
    # and 2 sent to files: what C libraries write counts too
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    sys.stdout.flush(); sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
    sys.argv = ["limecraft", *argv]
    try:
        runpy.run_module("limecraft", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:  # what the interpreter does with it
        code = e.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr); code = 1
    except BaseException:
        traceback.print_exc(); code = 1
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(saved[0], 1); os.dup2(saved[1], 2)
        os.close(saved[0]); os.close(saved[1])
    out.seek(0); err.seek(0)
    return {"code": code, "stdout": out.read().decode(), "stderr": err.read().decode()}

cases = json.loads(sys.argv[1])
print(json.dumps({name: drive(argv) for name, argv in cases.items()}))
"""


@pytest.fixture(scope="module")
def driven(bad_files) -> dict:
    """Each case's exit code, stdout and stderr from one interpreter (see ``_DRIVER``)."""
    d = bad_files
    cases = {
        "summary": [
            "explain", str(d / "good.png"), "--out", str(d / "o-summary"),
            "--model", str(d / "toy.pt2"), "--samples", "30", "--segmentation", "grid",
        ],
        "bomb": ["explain", str(d / "decompression-bomb.png"), "--out", str(d / "o")],
        "evil": ["explain", str(d / "good.png"), "--model", str(d / "evil.pt"), "--out", str(d / "o")],
    }  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(cases)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_subprocess_prints_a_summary(driven):
    r = driven["summary"]
    assert r["code"] == 0, r["stderr"]
    assert "wrote" in r["stdout"] and "region" in r["stdout"]


BAD = [
    (["explain", "{missing}", "--out", "{out}"], "does not exist"),
    (["explain", "{text}", "--out", "{out}"], "not an image"),
    (["explain", "{empty}", "--out", "{out}"], "empty"),
    (["explain", "{img}", "--out", "{out}", "--regions-mask", "{small_mask}"], "width and height"),
    (["explain", "{img}", "--out", "{out}", "--segments-file", "{small_npy}"], "width and height"),
    (
        ["explain", "{img}", "--out", "{out}", "--expected-mask", "{small_mask}"],
        "is 5x5 but the image is 128x96; draw the expected area on an image of the same size",
    ),
    (
        ["explain", "{img}", "--out", "{out}", "--expected-mask", "{blank_mask}"],
        "is empty (all black or transparent); paint the area you expect the model to rely on",
    ),
    (
        ["explain", "{img}", "--out", "{out}", "--samples", "0"],
        "samples must be in [10, 200000], got 0",
    ),
    (
        ["explain", "{img}", "--out", "{out}", "--samples", "5"],
        "samples must be in [10, 200000], got 5",
    ),
    (["explain", "{img}", "--out", "{out}", "--fill", "purple"], "fill must be one of"),
    (["explain", "{img}", "--out", "{out}", "--segmentation", "kmeans"], "invalid choice"),
    (["explain", "{img}", "--out", "{out}", "--kernel-width", "-1"], "kernel-width"),
    (["explain", "{img}", "--out", "{out}", "--model", "nonesuch"], "unknown model"),
    (["explain", "{img}", "--out", "{out}", "--model", "{text}"], "neither a torch.export"),
    (["explain", "{img}", "--out", "{img}"], "not a folder"),
    (["explain", "{img}", "--out", "{out}", "--device", "cuda"], "no CUDA GPU"),
]


@pytest.mark.parametrize(("args", "match"), BAD)
def test_bad_input_exits_2_with_one_line(files, capsys, args, match):
    d = files["dir"]
    (d / "notes.txt").write_text("hello")
    (d / "empty.png").write_bytes(b"")
    Image.fromarray(np.ones((5, 5), np.uint8)).save(d / "small.png")
    np.save(d / "small.npy", np.zeros((5, 5), np.int64))
    Image.fromarray(np.zeros((96, 128, 4), np.uint8)).save(d / "blank.png")  # transparent black
    fmt = {
        "missing": str(d / "missing.png"),
        "out": str(d / "out"),
        "text": str(d / "notes.txt"),
        "empty": str(d / "empty.png"),
        "img": str(files["img"]),
        "small_mask": str(d / "small.png"),
        "small_npy": str(d / "small.npy"),
        "blank_mask": str(d / "blank.png"),
    }
    argv = [a.format(**fmt) for a in args]
    if "--model" not in argv:
        argv += ["--model", str(files["model"])]
    if "cuda" in argv and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    # a bad flag value is refused while the flags are read (argparse exits); the rest later
    flag_errors = ("invalid choice", "samples must be in", "fill must be one of", "kernel-width")
    with pytest.raises(SystemExit) if any(m in match for m in flag_errors) else _nothing() as exc:
        code = main(argv)
    if exc is not None:
        code = exc.value.code
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("limecraft: error:") and match in lines[0], lines[0]
    assert "Traceback" not in err


def test_help_says_what_the_expected_mask_is(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["explain", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--expected-mask PNG" in text
    assert "mark the area you expect the model to rely on" in text
    assert "relevance mass" in text and "pointing game" in text


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


@pytest.mark.slow
def test_subprocess_bad_input_has_no_traceback(tmp_path):
    (tmp_path / "x.png").write_text("not really a png")
    r = run_cli("explain", str(tmp_path / "x.png"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "not an image" in r.stderr


def test_an_animation_or_transparency_is_named_as_the_app_names_it(files, tmp_path, capsys):
    """A GIF gives its first frame and transparency is flattened on white, as in the app's
    "Loaded …" line: the command line says so on stderr, once, and a plain image says nothing."""
    rng = np.random.default_rng(0)
    frames = [Image.fromarray(rng.integers(0, 255, (48, 48, 3), dtype=np.uint8)) for _ in range(3)]
    gif = tmp_path / "anim.gif"
    frames[0].save(gif, save_all=True, append_images=frames[1:])
    rgba = tmp_path / "see-through.png"
    Image.fromarray(rng.integers(0, 255, (48, 48, 4), dtype=np.uint8)).save(rgba)
    said = {}
    for path in (gif, rgba, files["img"]):
        args = _toy_args(files, tmp_path / path.stem, "--segmentation", "grid")
        args[1] = str(path)
        assert main(args) == 0
        said[path.name] = [x for x in capsys.readouterr().err.splitlines() if "note:" in x]
    assert said["anim.gif"] == [
        f"limecraft: note: explaining image {str(gif)!r} (the first of its 3 frames)"
    ]
    assert said["see-through.png"] == [
        f"limecraft: note: explaining image {str(rgba)!r} (its transparency flattened on white)"
    ]
    assert said["cat.png"] == []


def test_a_flat_image_prints_no_weight_and_no_r2(files, tmp_path, capsys):
    """A flat grey image: each hidden region takes its own mean colour, which is the image, so
    the score never moves. The summary says there is nothing to fit (R^2=n/a, not a "0.000" to
    read as a bad fit), tints nothing, and the verdict says no region carries weight."""
    flat = tmp_path / "flat.png"
    Image.fromarray(np.full((48, 48, 3), 128, np.uint8)).save(flat)
    args = _toy_args(files, tmp_path / "out", "--segmentation", "grid")
    args[1] = str(flat)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "; R^2=n/a; " in out.splitlines()[0], out
    assert "no region has a non-zero weight; overlay.png tints none" in out
    assert "verdict: unstable: no region carries any weight" in out


# ----------------------------------------------------------------------------- bad inputs
# The shared battery of bad files (tests/bad_files.py) and every parameter out of its range.


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """The battery's folder, written once for this module (a few seconds of torch.export)."""
    return write_bad_files(tmp_path_factory.mktemp("bad"))


# Each row: id, the arguments after ``explain IMAGE --out OUT`` (IMAGE defaults to good.png),
# and a regular expression the one-line message must match.
CLI_BAD = [
    *[(f"image-{n}", ["--image", f"{n}.png"], m) for n, (_, m) in BAD_IMAGES.items()],
    ("image-missing", ["--image", "nope.png"], "does not exist"),
    ("image-folder", ["--image", "."], "folder"),
    ("mask-wrong-size", ["--regions-mask", "small_mask.png"], "width and height"),
    ("mask-not-an-image", ["--regions-mask", "not-an-image.png"], "not an image"),
    ("mask-empty-file", ["--regions-mask", "empty.png"], "empty"),
    ("label-map-wrong-size", ["--segments-file", "small.npy"], "width and height"),
    ("label-map-float", ["--segments-file", "float.npy"], "integer"),
    ("label-map-pickled-objects", ["--segments-file", "objects.npy"], r"plain \.npy"),
    (
        "label-map-and-mask",
        ["--segments-file", "small.npy", "--regions-mask", "small_mask.png"],
        "either|width and height",
    ),
    ("labels-not-utf8", ["--labels", "labels_bad.txt"], "UTF-8"),
    ("labels-empty", ["--labels", "labels_empty.txt"], "no class names"),
    ("model-pickle", ["--model", "evil.pt"], "refused"),
    ("model-fake-torchscript", ["--model", "evil_ts.pt"], "TorchScript|refused"),
    ("model-junk", ["--model", "junk.pt2"], r"torch\.export"),
    ("model-missing", ["--model", "nope.pt2"], "does not exist"),
    ("model-unknown-name", ["--model", "nonesuch"], "unknown model"),
    ("model-returns-nan", ["--model", "nan.pt2"], "NaN"),
    ("model-wrong-shape", ["--model", "flat.pt2"], r"shape \(N, C\)"),
    ("onnx-truncated", ["--model", "truncated.onnx"], "not an ONNX model|onnxruntime"),
    ("onnx-not-onnx", ["--model", "text.onnx"], "not an ONNX model"),
    ("onnx-a-pickle", ["--model", "pickle.onnx"], "not an ONNX model"),
    ("onnx-wrong-rank", ["--model", "rank3.onnx"], "rank-3 input"),
    ("onnx-opset-too-new", ["--model", "opset999.onnx"], "opset 999"),
    ("onnx-size-not-the-graphs", ["--model", "means.onnx", "--input-size", "16"], "8x8 inputs"),
    ("onnx-range-on-torch", ["--input-range", "0-255"], r"\.onnx model files only"),
    ("timm-unknown-name", ["--model", "timm:no_such_model_at_all"], "timm"),
    ("hf-missing-folder", ["--model", "hf:./no/such/folder"], "folder|not found|does not exist"),
    ("hf-pickle-only", ["--model", "hf:hf_bin_only"], "safetensors|safe_serialization"),
    # parameters: every message names the valid range
    ("samples-too-few", ["--samples", "5"], r"samples must be in \[10, 200000\]"),
    ("samples-too-many", ["--samples", "300000"], r"samples must be in \[10, 200000\]"),
    ("samples-zero", ["--samples", "0"], r"samples must be in \[10, 200000\], got 0"),
    ("samples-text", ["--samples", "many"], "--samples: cannot read 'many'"),
    ("seed-negative", ["--seed", "-1"], r"seed must be in \[0, "),
    ("kernel-width-zero", ["--kernel-width", "0"], "> 0"),
    ("kernel-width-nan", ["--kernel-width", "nan"], r"kernel_width must be > 0.*, got nan"),
    ("kernel-widths-negative", ["--kernel-widths", "0.25,-1"], ">= 0|> 0"),
    ("ridge-alpha-negative", ["--ridge-alpha", "-1"], r"ridge_alpha must be in \[0, 1000000\]"),
    ("ridge-alpha-huge", ["--ridge-alpha", "1e7"], r"ridge_alpha must be in \[0, 1000000\]"),
    ("top-labels-zero", ["--top-labels", "0"], r"top_labels must be in \[1, 100\], got 0"),
    ("top-labels-too-many", ["--top-labels", "101"], r"top_labels must be in \[1, 100\]"),
    ("batch-size-zero", ["--batch-size", "0"], r"batch_size must be in \[1, 65536\], got 0"),
    ("batch-size-huge", ["--batch-size", "100000"], r"batch_size must be in \[1, 65536\]"),
    ("n-segments-huge", ["--n-segments", "6000"], r"n_segments must be in \[1, 5000\]"),
    (
        "inner-segments-huge",
        ["--regions-mask", "mask.png", "--inner-segments", "2000"],
        r"inner_segments must be in \[1, 1000\]",
    ),
    (
        "outer-segments-huge",
        ["--regions-mask", "mask.png", "--outer-segments", "6000"],
        r"outer_segments must be in \[1, 5000\]",
    ),
    ("input-size-small", ["--input-size", "3"], r"input_size must be in \[8, 4096\]"),
    ("input-size-huge", ["--input-size", "5000"], r"input_size must be in \[8, 4096\]"),
    ("mask-expansion-huge", ["--mask-expansion", "65"], r"mask_expansion must be in \[0, 64\]"),
    ("mask-expansion-negative", ["--mask-expansion", "-1"], r"mask_expansion must be in \[0, 64\]"),
    ("repeats-huge", ["--repeats", "51"], r"repeats must be in \[1, 50\]"),
    ("convergence-without-repeats", ["--convergence", "20"], "repeats >= 2"),
    (
        "convergence-size-small",
        ["--repeats", "2", "--convergence", "5"],
        r"convergence size must be in \[10, ",
    ),
    ("convergence-text", ["--convergence", "a,b"], "--convergence: cannot read 'a,b'"),
    ("target-out-of-range", ["--target", "99"], r"target must be in \[0, 3\]"),
    ("target-negative", ["--target", "-1"], r"target must be in \[0, 2147483647\], got -1"),
    ("fill-bad-colour", ["--fill", "#12345"], "fill must be one of"),
    ("compare-fills-bad", ["--compare-fills", "plaid"], "compare_fills entry must be one of"),
    ("segmentation-unknown", ["--segmentation", "kmeans"], "invalid choice"),
    ("top-k-zero", ["--top-k", "0"], "at least 1"),
    ("device-unknown", ["--device", "tpu"], "invalid choice"),
]


def run_main(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own refusals
        code = e.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("case", "extra", "match"), CLI_BAD, ids=[r[0] for r in CLI_BAD])
def test_cli_bad_input_exits_2_with_one_line(bad_files, capsys, case, extra, match):
    d = bad_files
    extra = list(extra)
    image = "good.png"
    if "--image" in extra:
        i = extra.index("--image")
        image = extra[i + 1]
        del extra[i : i + 2]
    # file arguments are relative to the battery's folder
    for flag in ("--regions-mask", "--segments-file", "--labels", "--model"):
        if flag in extra:
            i = extra.index(flag) + 1
            if extra[i].startswith("hf:") and not extra[i].startswith("hf:./"):
                extra[i] = "hf:" + str(d / extra[i][3:])  # a folder in the battery's folder
            elif extra[i] != "nonesuch" and not extra[i].startswith(("timm:", "hf:")):
                extra[i] = str(d / extra[i])
    argv = ["explain", str(d / image), "--out", str(d / f"out-{case}"), "--quiet"]
    if "--model" not in extra:
        argv += ["--model", str(d / "toy.pt2")]
    if "--samples" not in extra:
        argv += ["--samples", "20"]
    if "--segmentation" not in extra:
        argv += ["--segmentation", "grid"]
    if "--n-segments" not in extra:
        argv += ["--n-segments", "4"]
    code, err = run_main([*argv, *extra], capsys)
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert lines[0].startswith("limecraft: error:"), lines[0]
    assert "Traceback" not in err
    assert re.search(match, lines[0]), lines[0]
    assert not (d / "pwned.txt").exists()


@pytest.mark.slow
def test_cli_subprocess_bad_files_have_no_traceback(bad_files, driven):
    """Through the real entry point: a bomb and a booby-trapped model, one line each."""
    for case in ("bomb", "evil"):
        r = driven[case]
        assert r["code"] == 2, r["stderr"]
        assert r["stderr"].count("\n") == 1 and "Traceback" not in r["stderr"], r["stderr"]
    assert not (bad_files / "pwned.txt").exists()


def test_help_imports_neither_torch_nor_scikit_image():
    """--help answers at once: the parser needs the settings schema only (the commands import
    the rest when they run)."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "limecraft", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("usage: python -m limecraft"), r.stdout[:200]
    modules = {
        line.rsplit("|", 1)[-1].strip()
        for line in r.stderr.splitlines()
        if line.startswith("import time:")
    }
    imported = {m.split(".")[0] for m in modules}
    assert "limecraft_core" in imported  # the check sees the engine's imports
    assert not imported & {"torch", "skimage", "scipy", "serving"}, sorted(imported)
    # of the models, only the table of model files (for --model's help), which imports nothing
    assert {m for m in modules if m.split(".")[0] == "models"} == {"models", "models.formats"}


def test_the_engine_and_its_settings_import_without_torch():
    code = (
        "import sys, limecraft_core, limecraft_core.config, limecraft_core.limits; "
        "print(sorted(m for m in ('torch', 'skimage', 'scipy') if m in sys.modules))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and r.stdout.strip() == "[]", (r.stdout, r.stderr[-2000:])


# ----------------------------------------------------------------------------- the package


@pytest.mark.slow
def test_the_package_builds_and_installs_the_limecraft_command(tmp_path):
    """pyproject.toml builds a wheel (its packages listed: no "Multiple top-level packages"),
    the wheel holds the command line, the engine with its templates, the models with the demo
    weights and the serving side (not the app or the tests), and its ``limecraft`` command runs
    from the installed copy, away from the repository."""
    import shutil
    import zipfile

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "requirements.txt"):
        shutil.copy(ROOT / name, src / name)
    for pkg in ("limecraft", "limecraft_core", "models", "serving", "pages", "tests"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*build, "-w", str(tmp_path / "dist"), str(src)], check=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("limecraft-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for want in (
        "limecraft/__main__.py",
        "limecraft_core/__init__.py",
        "limecraft_core/__init__.pyi",
        "limecraft_core/regions/superpixels.py",
        "limecraft_core/io/templates/report.html.j2",
        "limecraft_core/io/templates/audit.html.j2",
        "models/weights/demo_cnn.pt",
        "serving/__init__.py",
    ):
        assert want in names, want
    assert not any(n.startswith(("pages/", "tests/", "app.py")) for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "limecraft = limecraft.__main__:run" in zipfile.ZipFile(wheel).read(entry).decode()

    site = tmp_path / "site"
    install = [*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(site)}
    shown = subprocess.run(
        [str(site / "bin" / "limecraft"), "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "explain" in shown.stdout and "audit" in shown.stdout
    # the installed copy, not the repository: its templates load and the demo weights are there
    probe = (
        "import limecraft_core, models.demo as d; "
        "from limecraft_core.io.report import _environment; "
        "_environment().get_template('report.html.j2'); "
        "print(limecraft_core.__file__, d.WEIGHTS_PATH.is_file())"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    where, weights = out.stdout.split()
    assert Path(where).is_relative_to(site) and weights == "True", out.stdout


def test_a_labels_file_of_the_wrong_length_is_warned_about_and_the_run_goes_on(files, capsys):
    """As the app says it: 3 names for 4 outputs, then 6 names for 4 outputs (issue 29)."""
    for names, rest in ((["red", "green", "blue"], "the rest are 'class i'"),
                        (["a", "b", "c", "d", "e", "f"], "the extra names are not used")):  # fmt: skip
        files["labels"].write_text("\n".join(names) + "\n")
        assert main(_toy_args(files, files["dir"] / f"n{len(names)}", "--quiet")) == 0
        err = capsys.readouterr().err
        assert (
            f"limecraft: warning: the labels file {str(files['labels'])!r} has {len(names)} names "
            f"but the model gives 4 scores: {rest}"
        ) in err
    files["labels"].write_text("red\ngreen\nblue\ngold\n")
    assert main(_toy_args(files, files["dir"] / "n4", "--quiet")) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_state_dict_without_its_architecture_is_told_to_name_it(files, capsys):
    """As the app says it: a weights-only file needs --arch (issue 29, item 9)."""
    weights = files["dir"] / "weights.pt"
    torch.save(ChannelMeans(classes=4).state_dict(), weights)
    argv = _toy_args(files, files["dir"] / "sd")
    argv[argv.index("--model") + 1] = str(weights)
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("limecraft: error: model file") and "Traceback" not in line
    assert line.endswith(
        "If it is a state_dict, name its architecture with --arch (for example --arch resnet18)"
    )


def test_the_demo_model_on_a_photo_is_warned_about_as_the_app_does(files, capsys):
    """The demo model knows only its 128 px shape pictures: on a photo the CLI says, as the app
    does, that its result means nothing, and how to choose another model (issue 29, item 10).
    On its own pictures it says nothing of the kind."""
    from models.demo import generate

    common = ["--model", "demo", "--samples", "40", "--quiet"]
    assert main(["explain", str(files["img"]), *common, "--out", str(files["dir"] / "p")]) == 0
    err = capsys.readouterr().err
    assert "limecraft: warning: The demo model knows only LIMEcraft's synthetic shapes" in err
    assert "mean nothing" in err and "(give one with --model)" in err
    own = files["dir"] / "shape.png"
    Image.fromarray(generate(1, seed=3, mode="conflict")[0].image).save(own)
    assert main(["explain", str(own), *common, "--out", str(files["dir"] / "s")]) == 0
    assert "warning" not in capsys.readouterr().err
