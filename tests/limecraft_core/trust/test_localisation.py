"""Localisation against an expected area, on the demo model's planted shortcut.

On a demo conflict image the model follows the tag, not the drawn shape. With the tag and the
shape drawn as two handcrafted regions, localisation must say so: against the shape (what a
person would expect the model to use) the pointing game misses and the relevance mass is near 0;
against the tag it hits and the mass is near 1.
"""

import json
import re

import numpy as np
import pytest
from PIL import Image

from limecraft.cli import main
from limecraft_core import explain
from models import demo, registry

SEED = 791  # fresh conflict images: no other test uses this seed
IMAGES = 6

LINE = re.compile(
    r"^localisation: expected regions=(\d+)( \(.+\))?; relevance mass=(\d\.\d\d); "
    r"relevance rank accuracy=(\d\.\d\d); pointing game=(hit|miss); mask coverage=(\d\.\d\d)$"
)


@pytest.fixture(scope="module")
def classifier():
    return registry.load_classifier("demo")


@pytest.mark.slow
def test_localisation_finds_the_tag_not_the_shape(classifier):
    """6 conflict images (seed 791), tag and shape as regions, 500 samples, seed 0.

    Observed (about 10 s in all on 2 shared CPU cores): against the shape the pointing game
    misses on all 6 and the relevance mass is 0.000 on each (the shape's weight is about
    -0.001: the model does not use it); against the tag it hits on all 6, with relevance mass
    0.996, 0.996, 0.995, 0.996, 0.997, 0.997 (the tag's weight about 0.98). The thresholds
    below (< 0.2 and > 0.8) leave a wide margin.
    """
    for s in demo.generate(IMAGES, seed=SEED, mode="conflict"):
        res = explain(
            s.image,
            classifier,
            regions_mask=[s.tag_mask, s.shape_mask],
            samples=500,
            seed=0,
            compute_deltas=False,
            expected_mask=s.shape_mask,
        )
        assert res.region_keys[:2] == ("hand:0", "hand:1")
        assert res.target == s.tag_class  # the model follows the tag
        shape = res.trust.localisation
        assert shape.regions == [1] and shape.mask_coverage == 1.0
        assert not shape.pointing_game and shape.relevance_mass < 0.2, shape
        assert shape.relevance_rank_accuracy == 0.0

        tag = res.with_localisation(s.tag_mask).trust.localisation  # no model pass
        assert tag.regions == [0] and tag.mask_coverage == 1.0
        assert tag.pointing_game and tag.relevance_mass > 0.8, tag
        assert tag.relevance_rank_accuracy == 1.0


@pytest.fixture(scope="module")
def demo_files(tmp_path_factory):
    """demo-data's first conflict image, its masks, and a regions mask: tag 1, shape 2."""
    out = tmp_path_factory.mktemp("demo")
    assert (
        main(["demo-data", "--out", str(out), "--count", "1", "--conflict", "--seed", "791"]) == 0
    )
    entry = json.loads((out / "labels.json").read_text())[0]
    tag = np.asarray(Image.open(out / entry["tag_mask"])) > 0
    shape = np.asarray(Image.open(out / entry["shape_mask"])) > 0
    regions = np.zeros(tag.shape, np.uint8)
    regions[tag], regions[shape] = 1, 2
    Image.fromarray(regions).save(out / "regions.png")
    return {
        "img": out / entry["file"],
        "tag": out / entry["tag_mask"],
        "shape": out / entry["shape_mask"],
        "regions": out / "regions.png",
        "dir": out,
    }


@pytest.mark.parametrize(
    ("expected", "hit", "reading"),
    [
        ("shape", False, "the model's top region (hand 1) is outside the area you expected: "),
        ("tag", True, "the top region is inside the expected area and carries most of the "),
    ],
    ids=["shape-expected", "tag-expected"],
)
def test_cli_prints_and_writes_localisation(demo_files, capsys, expected, hit, reading):
    out = demo_files["dir"] / f"out-{expected}"
    argv = [
        "explain",
        str(demo_files["img"]),
        "--out",
        str(out),
        "--model",
        "demo",
        "--regions-mask",
        str(demo_files["regions"]),
        "--expected-mask",
        str(demo_files[expected]),
        "--samples",
        "200",
    ]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith("localisation:")]
    assert len(found) == 1, lines
    m = LINE.match(lines[found[0]])
    assert m, lines[found[0]]
    assert m.group(1) == "1" and m.group(2) == (" (hand 2)" if expected == "shape" else " (hand 1)")
    assert m.group(5) == ("hit" if hit else "miss") and m.group(6) == "1.00"
    mass = float(m.group(3))
    assert (mass > 0.8) if hit else (mass < 0.2)
    sentence = lines[found[0] + 1]
    assert sentence.startswith(reading) and sentence.endswith(f"relevance mass {mass:.2f}")
    assert "," not in lines[found[0]] and "," not in sentence

    doc = json.loads((out / "explanation.json").read_text())
    loc = doc["localisation"]
    assert loc["pointing_game"] is hit and loc["expected"] == 1
    assert round(loc["relevance_mass"], 2) == mass
    assert doc["inputs"]["expected_mask"] == str(demo_files[expected])


def test_cli_without_expected_mask_prints_no_localisation(demo_files, capsys):
    out = demo_files["dir"] / "out-none"
    argv = ["explain", str(demo_files["img"]), "--out", str(out), "--samples", "60"]
    argv += ["--regions-mask", str(demo_files["regions"])]
    assert main(argv) == 0
    assert "localisation" not in capsys.readouterr().out
    doc = json.loads((out / "explanation.json").read_text())
    assert doc.get("localisation") is None and doc["inputs"]["expected_mask"] is None
