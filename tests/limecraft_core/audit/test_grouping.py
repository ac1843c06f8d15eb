"""Findings across images (audit/regions.py, grouping.py, findings.py): the real audit engine over
small generated sets whose truth is known: a red patch at one place, a red patch at random
places, and a clean set."""

import json

import numpy as np
import pytest
import torch

from limecraft_core import Classifier, LimecraftError
from limecraft_core.audit import (
    NO_FINDING,
    AuditInput,
    AuditItem,
    AuditRow,
    audit_config,
    discover,
    findings,
    run_audit,
)
from limecraft_core.audit.grouping import group_regions, view_distances
from limecraft_core.audit.regions import (
    MIN_SHARE,
    REGION_GRID,
    describe_regions,
    grid_mask,
    pack_mask,
    unpack_mask,
)

SIZE, CELL, N = 48, 8, 20  # 20 images of 6 x 6 cells of 8 px
CELLS = (SIZE // CELL) ** 2
PATCH_CELL = 7  # the fixed place: row 1, column 1
RED = (0.9, 0.1, 0.1)


class RedOrObject(torch.nn.Module):
    """Class 'red': how red the image is (a red patch); class 'object': how saturated it is (the
    object). Gray and black add to neither, so hiding a gray cell changes nothing."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        red = torch.relu(x[:, 0] - torch.maximum(x[:, 1], x[:, 2])).mean(dim=(1, 2))
        saturation = (x.amax(dim=1) - x.amin(dim=1)).mean(dim=(1, 2))
        return torch.stack([60 * red, 10 * saturation], 1)


def _box(c: int) -> tuple[slice, slice]:
    r, q = divmod(c, SIZE // CELL)
    return slice(r * CELL, (r + 1) * CELL), slice(q * CELL, (q + 1) * CELL)


def make_set(kind: str, seed: int = 0) -> tuple[list[np.ndarray], list[str]]:
    """N gray images, each with one object of a random colour (never red) in a random cell; with
    ``kind`` "place" the even images get a red patch in cell PATCH_CELL, with "look" in a random
    cell, with "clean" none. Returns the images and the patched images' keys."""
    rng = np.random.default_rng(seed)
    images, patched = [], []
    for i in range(N):
        img = np.full((SIZE, SIZE, 3), 0.45)
        free = [c for c in range(CELLS) if not (kind == "place" and c == PATCH_CELL)]
        obj = int(rng.choice(free))
        colour = rng.uniform(0.1, 0.9, 3)
        colour[0] = colour.min()  # red at most the other channels: the object is never red
        img[_box(obj)] = colour
        if kind != "clean" and i % 2 == 0:
            where = (
                PATCH_CELL if kind == "place" else int(rng.choice([c for c in free if c != obj]))
            )
            img[_box(where)] = RED
            patched.append(f"im{i:02d}")
        images.append((img * 255).astype(np.uint8))
    return images, patched


def audit(images: list[np.ndarray], keep: dict | None = None) -> list[AuditRow]:
    """The rows of an audit of ``images``; ``keep`` gets each image and its label map by key."""
    clf = Classifier(RedOrObject(), labels=["red", "object"], device="cpu")
    cfg = audit_config(
        {"segmentation": "grid", "n_segments": CELLS, "fill": "black", "samples": 200}
    )
    items = [
        AuditItem(f"im{i:02d}.png", f"im{i:02d}", f"d{i}", lambda im=im: AuditInput(im))
        for i, im in enumerate(images)
    ]
    got = []
    run_audit(items, clf, cfg, got.append, in_flight=4)
    if keep is not None:
        keep.update({o.row.key: (o.input.image, o.explanation.segments) for o in got})
    return sorted((o.row for o in got), key=lambda r: r.key)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / (a | b).sum())


def test_each_row_keeps_its_strongest_regions(sets):
    rows, patched = sets["place"]
    patch = np.zeros((SIZE, SIZE), bool)
    patch[_box(PATCH_CELL)] = True
    for r in rows:
        assert r.ok and 1 <= len(r.regions) <= 3
        shares = [d.share for d in r.regions]
        assert shares == sorted(shares, reverse=True) and all(d.weight > 0 for d in r.regions)
        top = r.regions[0]
        assert top.region == r.top_region
        if r.key in patched:  # the patch: its place, box, area and colour
            assert r.label == "red" and np.array_equal(top.grid_mask(), grid_mask(patch))
            assert top.box == pytest.approx((1 / 6, 1 / 6, 2 / 6, 2 / 6), abs=1e-4)
            assert top.area == pytest.approx(1 / CELLS, abs=1e-4) and top.lab_mean[1] > 50
            assert top.key_lab == pytest.approx(top.lab_mean, abs=0.01)  # a flat patch
            assert top.grad_mean > 0 and top.colour.startswith("#e")
        else:
            assert r.label == "object"


def test_a_row_with_regions_round_trips_and_an_old_row_still_loads(sets):
    row = sets["place"][0][0]
    d = json.loads(json.dumps(row.to_dict()))
    assert AuditRow.from_dict(d) == row
    old = {k: v for k, v in d.items() if k != "regions"}
    assert AuditRow.from_dict(old).regions == ()
    bad = {**d, "regions": [{**d["regions"][0], "mask": "ff"}]}
    with pytest.raises(LimecraftError, match="region mask"):
        AuditRow.from_dict(bad)
    with pytest.raises(LimecraftError, match="'regions' must be a list of region descriptors"):
        AuditRow.from_dict({**d, "regions": [{**d["regions"][0], "weight": "big"}]})


def test_a_patch_at_one_place_is_the_headline(sets):
    rows, patched = sets["place"]
    f = findings(rows)
    top = f.discovered[0]
    patch = np.zeros((SIZE, SIZE), bool)
    patch[_box(PATCH_CELL)] = True
    assert "place" in top.kind and top.risk == "HIGH"
    assert _iou(top.mask, grid_mask(patch)) >= 0.5
    assert sorted(k for k, _ in top.regions) == patched
    assert top.classes == (("red", len(patched), 1.0),) and top.medoid in patched
    assert 1 <= len(top.exemplars) <= 5 and set(top.exemplars) <= set(patched)
    assert f.headline == top.sentence and "push 'red' in 10 of 20 images" in f.headline
    # the membership score ranks every patched image above every other one (no threshold)
    member = dict(top.membership)
    assert len(member) == N
    assert min(member[k] for k in patched) > max(v for k, v in member.items() if k not in patched)


def test_a_patch_of_one_colour_at_random_places_is_found_by_its_look(sets):
    rows, patched = sets["look"]
    top = findings(rows).discovered[0]
    assert top.kind == "look" and top.risk == "HIGH"
    assert sorted(k for k, _ in top.regions) == patched
    assert "one place" not in top.indicators


def test_a_clean_set_has_no_finding(sets):
    rows, _ = sets["clean"]
    assert all(r.regions for r in rows)  # each object is a strong region: there was something
    f = findings(rows)
    assert f.discovered == () and f.headline == NO_FINDING
    assert f.to_dict()["headline"].startswith("No finding") and f.to_dict()["discovered"] == []


def test_findings_are_plain_json(sets):
    doc = json.loads(json.dumps(findings(sets["place"][0]).to_dict()))
    first = doc["discovered"][0]
    assert first["risk"] == "HIGH" and first["mask"]["grid"] == REGION_GRID
    assert [PATCH_CELL // 6 * 16 // 3, PATCH_CELL % 6 * 16 // 3] in first["mask"]["cells"]
    assert {r["key"] for r in first["regions"]} == set(sets["place"][1])
    assert len(first["membership"]) == N


def test_rows_without_regions_give_no_finding_and_errors_take_no_part(sets):
    rows, _ = sets["place"]
    old = [AuditRow(**{**r.__dict__, "regions": ()}) for r in rows]
    assert discover(old) == () and group_regions(old[:2]) == ()


def test_views_and_masks():
    m = np.zeros((REGION_GRID, REGION_GRID), bool)
    m[3:9, 20:30] = True
    assert np.array_equal(unpack_mask(pack_mask(m)), m)
    with pytest.raises(ValueError, match="hex digits"):
        unpack_mask("00")
    with pytest.raises(ValueError, match="a view is one of place, look"):
        view_distances([], "smell")
    tiny = np.zeros((100, 100), bool)
    tiny[50, 50] = True
    assert grid_mask(tiny).sum() == 1  # a small region is never lost


class RedNotBlue(torch.nn.Module):
    """Class 0: red minus blue; class 1: nothing."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        red, blue = x[:, 0].mean(dim=(1, 2)), x[:, 2].mean(dim=(1, 2))
        return torch.stack([10 * (red - blue), torch.zeros_like(red)], 1)


def _red_and_blue():
    """A red patch drawn (it pushes class 0) and a blue one proposed (it lowers it), explained:
    the image, the two masks and the explanation."""
    from limecraft_core import explain

    image = np.full((SIZE, SIZE, 3), 128, np.uint8)
    red, blue = np.zeros((SIZE, SIZE), bool), np.zeros((SIZE, SIZE), bool)
    red[4:20, 4:20], blue[28:44, 28:44] = True, True
    image[red], image[blue] = (230, 20, 20), (20, 20, 230)
    clf = Classifier(RedNotBlue(), labels=["red", "none"], device="cpu")
    ex = explain(
        image, clf, regions_mask=[red, blue], region_origins=["drawn", "proposed:text"],
        samples=200, segmentation="grid", n_segments=4, fill="gray", target=0,
    )  # fmt: skip
    return image, red, blue, ex


def test_a_proposal_against_the_class_is_described_only_when_asked():
    """describe_regions(..., proposals=True): a proposed region that holds its share of the
    |weight| is described whatever its sign (here a blue patch that lowers the class), after
    the strongest regions; by default only regions that push the class are."""

    image, _red, blue, ex = _red_and_blue()
    assert ex.weights[0] > 0 > ex.weights[1]
    plain = describe_regions(image, ex)
    asked = describe_regions(image, ex, proposals=True)
    assert 1 not in [d.region for d in plain] and [d.region for d in asked][: len(plain)] == [
        d.region for d in plain
    ]
    blue_d = next(d for d in asked if d.region == 1)
    assert blue_d.weight < 0 and blue_d.share >= MIN_SHARE and blue_d.name == ex.region_names[1]
    assert _iou(unpack_mask(blue_d.mask), grid_mask(blue)) == 1.0
    assert all(d.weight > 0 for d in asked if ex.region_origins[d.region] != "proposed:text")


def test_a_row_keeps_its_other_regions_whatever_their_sign_and_an_old_row_gets_them_on_resume(
    tmp_path,
):
    """audit_row keeps the regions that are not superpixels and not among the strongest in
    ``proposed`` (here a proposed blue patch that lowers the class), and they round-trip. A row
    saved before they were kept (no ``proposed`` in its row.json) is described again from its
    saved image and explanation when the audit resumes, and its row.json rewritten so."""
    from limecraft_core.audit import AuditItem, AuditOutcome, audit_row, location_grid
    from limecraft_core.audit.runner import AuditInput
    from limecraft_core.io.audit_folder import AuditFolder

    image, _red, blue, ex = _red_and_blue()
    row = audit_row(ex, file="a.png", key="a", digest="d", image=image)
    assert 1 not in [d.region for d in row.regions] and [d.region for d in row.proposed] == [1]
    assert row.proposed[0].weight < 0 and _iou(row.proposed[0].grid_mask(), grid_mask(blue)) == 1
    assert AuditRow.from_dict(json.loads(json.dumps(row.to_dict()))) == row
    folder = AuditFolder(tmp_path)
    item = AuditItem("a.png", "a", "d", lambda: AuditInput(image))
    out = AuditOutcome(item, row, AuditInput(image), ex, location_grid(ex))
    folder.write(out, "k", top_k=3, inputs={})
    saved = tmp_path / "images" / "a" / "row.json"
    doc = json.loads(saved.read_text())
    del doc["row"]["proposed"]
    saved.write_text(json.dumps(doc))
    assert folder.finished(item, "k") == row
    assert json.loads(saved.read_text())["row"]["proposed"] == row.to_dict()["proposed"]


def test_with_expected_masks_the_outside_flag_is_a_finding_too():
    from limecraft_core import explain
    from limecraft_core.audit import audit_row
    from tests.limecraft_core.audit.test_audit import CORNER, LooksAt, scene, toy_config

    image, area = scene()
    clf = Classifier(LooksAt(CORNER), labels=["marker", "other"], device="cpu")
    ex = explain(image, clf, config=toy_config(samples=200), expected_mask=area)
    rows = [
        audit_row(ex, file=f"{i}", key=f"k{i}", digest="d", has_mask=True, image=image)
        for i in range(3)
    ]
    assert all(r.flags == ("outside",) for r in rows)
    out = [f for f in discover(rows) if f.kind == "outside"]
    assert (
        len(out) == 1 and out[0].images == 3 and out[0].sentence.startswith("Top regions outside")
    )
    corner = np.zeros(image.shape[:2], bool)
    corner[CORNER] = True
    assert _iou(out[0].mask, grid_mask(corner)) >= 0.5


def test_audit_json_lists_the_findings_and_a_version_1_file_still_loads(sets, tmp_path):
    from limecraft_core.io.audit_folder import FORMAT_VERSION, AuditFolder, load_audit

    rows, patched = sets["place"]
    cfg = audit_config({"segmentation": "grid", "n_segments": CELLS, "fill": "black"})
    AuditFolder(tmp_path).finish(
        rows, config=cfg, key="k", model={"name": "toy"}, source={}, complete=True
    )
    doc = json.loads((tmp_path / "audit.json").read_text())
    assert doc["format_version"] == FORMAT_VERSION == 4
    assert doc["findings"]["headline"].startswith("Regions of one look at one place")
    assert {r["key"] for r in doc["findings"]["discovered"][0]["regions"]} == set(patched)
    back = load_audit(tmp_path)
    assert back.rows == tuple(rows) and back.findings.headline == doc["findings"]["headline"]
    doc["format_version"] = 2  # before findings were stored: recomputed from the rows
    (tmp_path / "audit.json").write_text(json.dumps(doc))
    assert load_audit(tmp_path).findings.headline == doc["findings"]["headline"]
    doc["format_version"] = 1  # an audit written before the regions were kept
    doc["rows"] = [{k: v for k, v in r.items() if k != "regions"} for r in doc["rows"]]
    (tmp_path / "audit.json").write_text(json.dumps(doc))
    old = load_audit(tmp_path)
    assert all(r.regions == () for r in old.rows) and old.findings.headline == NO_FINDING


def _tag_region(fill: tuple, frame: tuple, side: int = 18, around: int = 36) -> np.ndarray:
    """(n, 3) CIE Lab pixels of a superpixel holding a demo-style tag: a ``side`` px square of
    ``fill`` in a 2 px frame of ``frame``, in an ``around`` px square of gray background."""
    from skimage.color import rgb2lab

    img = np.full((around, around, 3), 120, np.uint8)
    img[:side, :side] = frame
    img[2 : side - 2, 2 : side - 2] = fill
    return rgb2lab(img).reshape(-1, 3)


def test_a_two_colour_tags_key_colour_is_its_fill_not_the_muddle_of_fill_and_frame():
    """The demo's tags are a saturated fill in a frame of the complementary colour. When the fill
    is under a fifth of its superpixel, the most chromatic fifth mixes fill and frame, and their
    mean matched neither another tag of the class nor anything else: three of the demo set's
    four tag classes formed no finding. The dominant hue keeps the fill."""
    from skimage.color import rgb2lab

    from limecraft_core.audit.regions import KEY_SHARE, key_pixels

    red = rgb2lab(np.uint8([[[220, 30, 30]]])).ravel()
    for around in (30, 36, 44):  # the fill a large and a small share of the region
        px = _tag_region((220, 30, 30), (35, 225, 225), around=around)
        key = key_pixels(px)
        assert np.linalg.norm(key.mean(axis=0) - red) < 3, around  # the fill's colour
        assert key.std(axis=0).max() < 3  # one colour, not two
    # the old rule's mean of the most chromatic fifth, on the larger region: far from both
    px = _tag_region((220, 30, 30), (35, 225, 225), around=44)
    chroma = np.hypot(px[:, 1], px[:, 2])
    muddle = px[chroma >= np.quantile(chroma, 1 - KEY_SHARE)].mean(axis=0)
    assert np.linalg.norm(muddle - red) > 20


def test_alike_regions_tie_and_the_medoid_is_the_strongest_of_them():
    """Regions of one exact look all tie on distance; the medoid (the region the prove phase
    pastes) is then the one holding the largest share of its image's |weight|, not the first,
    which may be a sliver of the artifact."""
    from dataclasses import replace

    from tests.limecraft_core.audit.test_cross_class import _region

    rows = []
    for i, share in enumerate((0.05, 0.3, 0.9, 0.4, 0.2, 0.35)):
        d = replace(_region((i * 4, 2), (50.0, 70.0, 50.0)), share=share, weight=share)
        rows.append(
            AuditRow(
                file=f"im{i}.png", key=f"im{i}", digest="d", predicted=0, label="red", score=0.9,
                n_regions=1, top_region=0, regions=(d,),
            )
        )  # fmt: skip
    looks = [g for g in group_regions(rows) if "look" in g.kind]
    assert len(looks) == 1 and len(looks[0].members) == 6
    assert looks[0].medoid == (2, 0)  # the 0.9 share, not im0's 0.05


def test_a_shortcut_of_a_class_that_is_a_small_share_of_the_folder_is_found():
    """8 'square' images of 48, each with the same green tag at its own place: under 20% of the
    folder (a floor of 10 hid them), but all of their class; the 40 others have regions of their
    own places and colours, and form nothing."""
    from tests.limecraft_core.audit.test_cross_class import _region

    rng = np.random.default_rng(1)
    rows = []
    for i in range(48):
        small = i < 8
        d = _region(
            tuple(int(v) for v in rng.integers(0, REGION_GRID - 8, 2)),
            (66.0, -64.0, 56.0) if small else tuple(rng.uniform(-60, 90, 3)),
            region=0,
        )
        rows.append(
            AuditRow(
                file=f"im{i:02d}.png", key=f"im{i:02d}", digest="d", predicted=int(not small),
                label="square" if small else "other", score=0.9, n_regions=1, top_region=0,
                regions=(d,),
            )
        )  # fmt: skip
    groups = group_regions(rows)
    assert [sorted(g.rows) for g in groups] == [list(range(8))]
    assert groups[0].kind == "look"
    # two images of the class are not enough (3 at least)
    assert group_regions(rows[:2] + rows[8:]) == ()
