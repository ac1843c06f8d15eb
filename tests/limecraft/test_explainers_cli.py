"""``explain --explainers`` (issue 52): explainers over the explanation's own regions, in this
process with the demo model: a line per method and the agreement, the file's ``explainers``
block read back, and bad names and exact Shapley over 30 regions as one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from limecraft.cli import main
from limecraft_core import EXPLAINERS, Explanation

ALL = ",".join(EXPLAINERS)
FAST = ["--model", "demo", "--samples", "40", "--segmentation", "grid", "--n-segments", "6"]


@pytest.fixture(scope="module")
def shape(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("explainers")
    assert main(["demo-data", "--out", str(d), "--count", "1"]) == 0
    return d / "demo_0000.png"


def _explain(shape: Path, out: Path, *extra: str) -> int:
    return main(["explain", str(shape), "--out", str(out), *FAST, *extra])


def test_a_line_per_method_and_the_agreement(shape, tmp_path, capsys):
    assert _explain(shape, tmp_path, "--explainers", ALL) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("explainers over the same"))
    titles = [e.title for e in EXPLAINERS.values()]
    n = len(titles)
    for line, title in zip(lines[head + 1 : head + 1 + n], titles, strict=True):
        assert line.startswith(f"  {title}: region "), line
        assert line.count("=") == 3  # the top 3 regions with their values
    assert lines[head + 1 + n].startswith("agreement: ") and lines[head + 1 + n].endswith(".")
    # the merge test over the 6 regions, from the exact table (K <= SHAPLEY_MAX_K)
    merge = json.loads((tmp_path / "explanation.json").read_text())["explainers"]["merge"]
    assert lines[head + 2 + n].startswith("merge (exact Shapley interaction index; a merge needs ")
    assert lines[head + 2 + n].endswith(merge["sentence"])
    assert lines[head + 3 + n] == f"wrote {tmp_path / 'explanation.json'}"


def test_the_file_carries_the_block_and_reads_back(shape, tmp_path, capsys):
    assert _explain(shape, tmp_path, "--explainers", "occlusion,lime", "--quiet") == 0
    assert capsys.readouterr().out == ""
    text = (tmp_path / "explanation.json").read_text()
    doc = json.loads(text)
    assert list(doc["explainers"]["methods"]) == ["occlusion", "lime"]
    ex = Explanation.from_json(text)
    assert ex.explainers is not None and ex.explainers.target == ex.target
    # over the explanation's own regions and settings: LIME is its weights, occlusion its deltas
    np.testing.assert_allclose(ex.explainers.values("occlusion"), ex.deltas[0], atol=1e-6)
    assert ex.explainers.agreement.methods == ("occlusion", "LIME")


def test_without_the_option_the_file_has_no_block(shape, tmp_path):
    assert _explain(shape, tmp_path, "--quiet") == 0
    doc = json.loads((tmp_path / "explanation.json").read_text())
    assert "explainers" not in doc
    assert Explanation.from_dict(doc).explainers is None


@pytest.mark.parametrize(
    "names, words",
    [
        (
            "lime,gc",
            "explainer must be one of lime, kernelshap, shapley, occlusion, rise, ig, gradcam; "
            "got 'gc'",
        ),
        ("lime,lime", "names each method once"),
        (",", "needs at least one name"),
    ],
)
def test_a_bad_name_is_one_line_listing_the_table(shape, tmp_path, capsys, names, words):
    with pytest.raises(SystemExit) as e:
        _explain(shape, tmp_path, "--explainers", names)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_exact_shapley_over_30_regions_says_what_it_would_cost(shape, tmp_path, capsys):
    labels = (np.arange(128)[:, None] * 5 // 128) * 6 + np.arange(128)[None, :] * 6 // 128
    np.save(tmp_path / "thirty.npy", labels)
    given = ["--segments-file", str(tmp_path / "thirty.npy"), "--explainers", "lime,shapley"]
    code = main(["explain", str(shape), "--out", str(tmp_path / "out"), "--model", "demo", *given])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "over 30 regions would cost 2^30" in err and "use kernelshap" in err
    assert not (tmp_path / "out" / "explanation.json").exists()


def test_a_gradient_method_on_an_onnx_model_says_why_in_one_line(shape, tmp_path, capsys):
    from onnx_graphs import TinyCNN, graph_file

    graph_file(tmp_path / "tiny.onnx", TinyCNN())
    code = main(
        ["explain", str(shape), "--out", str(tmp_path / "out"), "--model",
         str(tmp_path / "tiny.onnx"), "--samples", "20", "--explainers", "lime,ig"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "ig needs a local torch model" in err and "computes no gradients" in err
    assert not (tmp_path / "out" / "explanation.json").exists()
