"""The demo model and its planted shortcut, and LIMEcraft finding it (issue: offline demo model)."""

import hashlib
import json

import numpy as np
import pytest
import torch
from PIL import Image

from limecraft.cli import main
from limecraft_core import LimecraftError, explain
from limecraft_core.edits import Edit, apply_edits
from models import demo, registry
from models.samples import load_sample, sample_names
from models.train_demo import SHAPE_AFTER_REMOVAL_REQUIRED, TAG_FOLLOW_REQUIRED

DEMO_CONFLICTS = [n for n in sample_names() if n.startswith("demo-conflict")]


@pytest.fixture(scope="module")
def model():
    return demo.load_demo_model()


def predict(model, samples):
    return predict_images(model, [s.image for s in samples])


def predict_images(model, images):
    x = torch.from_numpy(np.stack(images).transpose(0, 3, 1, 2) / 255.0).float()
    with torch.inference_mode():
        return model(x).argmax(1).numpy()


def remove_tag(image, tag_mask):
    """The app's Inspect "remove" edit (default fill: inpaint) on the tag's region."""
    labels = tag_mask.astype(np.int32)  # region 1 is the tag
    edit = Edit("remove", 1)
    assert edit.fill == "inpaint"
    return apply_edits(image, labels, [edit]).image


def test_data_is_deterministic_and_tags_are_where_the_mask_says():
    a = demo.generate(5, seed=3, mode="conflict")
    b = demo.generate(5, seed=3, mode="conflict")
    c = demo.generate(5, seed=4, mode="conflict")
    assert all(np.array_equal(x.image, y.image) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0].image, c[0].image)
    for s in a:
        assert s.image.shape == (128, 128, 3) and s.image.dtype == np.uint8
        assert s.tag_mask.dtype == bool and 100 <= s.tag_mask.sum() <= 400
        assert s.tag_class != s.shape_class
        # the tag's fill colour is its class colour
        inner = s.image[s.tag_mask].astype(int)
        colour = np.array(demo.TAG_COLOURS[s.tag_class])
        assert (np.abs(inner - colour).max(axis=1) < 30).mean() > 0.4
    assert all(s.tag_class == s.shape_class for s in demo.generate(20, seed=5, mode="aligned"))
    # "untagged": the "aligned" images without their tag
    for u, al in zip(
        demo.generate(5, seed=5, mode="untagged"),
        demo.generate(5, seed=5, mode="aligned"),
        strict=True,
    ):
        assert u.tag_class == -1 and not u.tag_mask.any() and u.shape_class == al.shape_class
        differs = (u.image != al.image).any(axis=2)
        assert differs.any() and not differs[~al.tag_mask].any()


# sha256 of generate(12, seed=4242, mode=m): every image, tag mask and (shape, tag) class,
# recorded from the generator before the shape masks were added. The shipped weights were trained
# on this generator: a change here means retraining (and regenerating these hashes).
IMAGE_HASHES = {
    "train": "bfa695965d04e54d2b25ad02c4d3d0cec7cec7dce77ae9be622deafd59708d63",
    "aligned": "2527f1b9ba2e2a634456ca91724f690924cd63d44e5f70e684329d1ab997a6c6",
    "conflict": "cf7307c9bacce7d8ffe9f9ead25244150c83061a242e56e6e53de64b0e419421",
    "untagged": "e0250f44fd4f9d13c3d8563582a2b5dc01dcbaa49ad210aa06a7e47e26ba3bb6",
}


@pytest.mark.parametrize("mode", demo.MODES)
def test_images_for_a_fixed_seed_are_unchanged(mode):
    h = hashlib.sha256()
    for s in demo.generate(12, seed=4242, mode=mode):
        h.update(s.image.tobytes())
        h.update(s.tag_mask.tobytes())
        h.update(bytes([s.shape_class, s.tag_class % 256]))
    assert h.hexdigest() == IMAGE_HASHES[mode]


def _ring(mask, width=3):
    """The pixels within ``width`` of ``mask`` (4-neighbour steps), outside it."""
    grown = mask.copy()
    for _ in range(width):
        g = grown.copy()
        g[1:] |= grown[:-1]
        g[:-1] |= grown[1:]
        g[:, 1:] |= grown[:, :-1]
        g[:, :-1] |= grown[:, 1:]
        grown = g
    return grown & ~mask


def test_shape_masks_cover_the_drawn_shape_and_never_the_tag():
    for mode in ("conflict", "train"):
        for s in demo.generate(20, seed=4243, mode=mode):
            m = s.shape_mask
            assert m.shape == (128, 128) and m.dtype == bool
            assert 150 <= m.sum() <= 4000, m.sum()  # stars of 30 px .. circles of 70 px
            assert not (m & s.tag_mask).any()
            # one flat colour (plus 3% shading) that stands out from the background around it
            inside = s.image[m].astype(float)
            around = s.image[_ring(m)].astype(float)
            assert inside.std(axis=0).max() < 16
            assert np.abs(inside.mean(axis=0) - np.median(around, axis=0)).max() > 30
    # an untagged image has the same shape, in the same place, as its tagged twin
    for u, a in zip(
        demo.generate(5, seed=4243, mode="untagged"),
        demo.generate(5, seed=4243, mode="aligned"),
        strict=True,
    ):
        assert np.array_equal(u.shape_mask, a.shape_mask)


@pytest.mark.slow
def test_shipped_weights_are_small_and_accurate_on_fresh_aligned_images(model):
    assert demo.WEIGHTS_PATH.stat().st_size < 5 * 2**20
    samples = demo.generate(400, seed=777, mode="aligned")
    acc = (predict(model, samples) == [s.shape_class for s in samples]).mean()
    assert acc >= 0.95, acc


@pytest.mark.slow
def test_shipped_weights_see_the_shape_when_there_is_no_tag(model):
    samples = demo.generate(400, seed=785, mode="untagged")
    acc = (predict(model, samples) == [s.shape_class for s in samples]).mean()
    assert acc >= 0.95, acc


@pytest.mark.slow
def test_the_model_follows_the_tag_on_conflict_images(model):
    samples = demo.generate(400, seed=778, mode="conflict")
    follows = (predict(model, samples) == [s.tag_class for s in samples]).mean()
    assert follows >= TAG_FOLLOW_REQUIRED, follows


def test_removing_the_tag_by_inpainting_names_the_drawn_shape(model):
    """The app's walkthrough: remove the tag (Inspect, inpaint) and the model names the shape."""
    samples = demo.generate(100, seed=783, mode="conflict")
    after = predict_images(model, [remove_tag(s.image, s.tag_mask) for s in samples])
    shape = (after == [s.shape_class for s in samples]).mean()
    assert shape >= SHAPE_AFTER_REMOVAL_REQUIRED, shape


@pytest.mark.parametrize("name", DEMO_CONFLICTS)
def test_every_demo_conflict_sample_tells_the_story(model, name):
    """The gallery's conflict images: the tag is followed, and removing it names the shape."""
    s = load_sample(name)
    shape, tag = demo.CLASS_NAMES.index(s.shape), demo.CLASS_NAMES.index(s.tag)
    assert shape != tag
    before, after = predict_images(model, [s.image, remove_tag(s.image, s.tag_mask)])
    assert demo.CLASS_NAMES[before] == s.tag, "the tag is not followed"
    assert demo.CLASS_NAMES[after] == s.shape, "removing the tag does not name the drawn shape"


@pytest.mark.parametrize("name", [n for n in sample_names() if n.startswith("demo-")])
def test_demo_samples_describe_the_drawn_shape_and_the_tag(name):
    s = load_sample(name)
    colour = demo.TAG_COLOUR_NAMES[demo.CLASS_NAMES.index(s.tag)]
    assert s.note.startswith(f"A {s.shape} with a {colour} '{s.tag}' tag at the ")
    assert "\n" not in s.note


@pytest.mark.slow
def test_lime_with_the_tag_as_a_handcrafted_region_ranks_it_first(model):
    samples = demo.generate(10, seed=779, mode="conflict")
    clf = registry.load_classifier("demo")
    hits = 0
    for s in samples:
        res = explain(
            s.image, clf, regions_mask=s.tag_mask, samples=500, seed=0, compute_deltas=False
        )
        assert res.region_keys[0] == "hand:0"
        hits += int(np.argmax(res.weights) == 0)
    assert hits / len(samples) >= 0.9, hits


def test_explain_by_name_and_cli_work_offline(tmp_path):
    s = demo.generate(1, seed=780, mode="conflict")[0]
    # the registry name is resolved at the edge; the engine takes the classifier
    clf = registry.load_classifier("demo")
    res = explain(s.image, clf, samples=60, segmentation="slic", n_segments=20)
    assert res.run.model == "demo" and res.class_labels[0] in demo.CLASS_NAMES
    with pytest.raises(LimecraftError, match="load_classifier"):
        explain(s.image, "demo", samples=60)
    img = tmp_path / "d.png"
    Image.fromarray(s.image).save(img)
    assert (
        main(
            [
                "explain",
                str(img),
                "--model",
                "demo",
                "--out",
                str(tmp_path / "o"),
                "--samples",
                "60",
                "--quiet",
            ]
        )
        == 0
    )
    assert (tmp_path / "o" / "overlay.png").exists()


def test_demo_data_command_writes_images_masks_and_labels(tmp_path):
    out = tmp_path / "demo"
    assert main(["demo-data", "--out", str(out), "--count", "3", "--conflict", "--seed", "9"]) == 0
    entries = json.loads((out / "labels.json").read_text())
    assert len(entries) == 3
    samples = demo.generate(3, seed=9, mode="conflict")
    for i, (e, s) in enumerate(zip(entries, samples, strict=True)):
        img = np.asarray(Image.open(out / e["file"]))
        tag = np.asarray(Image.open(out / e["tag_mask"])) > 0
        shape = np.asarray(Image.open(out / e["shape_mask"])) > 0
        assert img.shape == (128, 128, 3) and tag.shape == (128, 128) and tag.any()
        assert set(e) >= {"file", "tag_mask", "shape_mask", "shape_class", "tag_class"}
        assert e["shape_mask"] == f"demo_{i:04d}_shape.png"
        assert e["shape_class"] != e["tag_class"]
        assert np.array_equal(img, s.image) and np.array_equal(tag, s.tag_mask)
        assert np.array_equal(shape, s.shape_mask) and not (shape & tag).any()


def test_registry_lists_demo_as_ready():
    info = registry.model_info("demo")
    assert info.ready and info.input_size == 128 and info.num_classes == 4


def test_samples_are_demo_images_and_bundled_photos():
    names = sample_names()
    assert names[0].startswith("demo-conflict") and "chelsea" in names
    for n in (names[0], "chelsea", "astronaut"):
        s = load_sample(n)
        assert s.image.ndim == 3 and s.image.dtype == np.uint8
    assert load_sample(names[0]).tag_mask is not None


@pytest.mark.slow
def test_the_tag_drawn_by_hand_is_first_and_stable_over_repeats():
    """Issue: W >= 0.9 over 5 repeats at N=1000, with the tag ranked first consistently. Three
    fresh images, each of them (the issue asked 5 of 6; 6 cost CI about 40 s)."""
    samples = demo.generate(3, seed=782, mode="conflict")
    clf = registry.load_classifier("demo")
    consistent = 0
    for s in samples:
        res = explain(
            s.image,
            clf,
            regions_mask=s.tag_mask,
            samples=1000,
            repeats=5,
            compute_deltas=False,
            early_stop=None,
        )
        st = res.trust.stability
        tag_first = int(np.argmax(st.mean)) == 0 and np.array(st.ci_low)[0] > np.max(
            np.delete(np.array(st.ci_high), 0)
        )
        consistent += int(tag_first and st.kendall_w >= 0.9)
    assert consistent == len(samples), consistent
