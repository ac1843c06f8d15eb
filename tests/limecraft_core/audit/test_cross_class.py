"""The grouping's cross-class path (audit/grouping.py): regions alike in place and in look are one
finding whatever class they push; alike in place only, across classes, they are not. The grouping
tests build rows by hand (no model pass); the last audits and proves a toy set end to end."""

import json
from dataclasses import replace

import numpy as np
import torch

from limecraft_core import Classifier
from limecraft_core.audit import (
    REMOVAL_MARGIN,
    AuditInput,
    AuditItem,
    AuditRow,
    audit_config,
    discover,
    findings,
    findings_from_dict,
    prove_findings,
    run_audit,
    scorer_predict,
)
from limecraft_core.audit.grouping import CROSS, group_regions
from limecraft_core.audit.proving import _clean
from limecraft_core.audit.regions import REGION_GRID, RegionDescriptor, pack_mask
from limecraft_core.io.audit_report import audit_html, carrier_pictures

LABELS = ("carton", "candle", "schnauzer", "binder", "lipstick", "pajama")


def _region(cell: tuple[int, int], lab: tuple, name: str = "", region: int = 0) -> RegionDescriptor:
    mask = np.zeros((REGION_GRID, REGION_GRID), bool)
    r, c = cell
    mask[r : r + 8, c : c + 8] = True
    box = (r / REGION_GRID, c / REGION_GRID, (r + 8) / REGION_GRID, (c + 8) / REGION_GRID)
    return RegionDescriptor(
        region=region, name=name, weight=0.3, share=0.3, delta=0.2, area=float(mask.mean()),
        box=box, mask=pack_mask(mask), lab_mean=lab, lab_std=(2.0, 1.0, 1.0), key_lab=lab,
        key_lab_std=(2.0, 1.0, 1.0), grad_mean=0.1, grad_std=0.05,
    )  # fmt: skip


def _rows(regions: list[RegionDescriptor | None], n: int = 30) -> list[AuditRow]:
    """``n`` rows of six classes in turn, the first ones with ``regions`` (None: a region of its
    own place and colour), and every one with a second region of its own place and colour."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        own = [
            _region(
                tuple(rng.integers(0, REGION_GRID - 8, 2)), tuple(rng.uniform(-40, 80, 3)), "", j
            )
            for j in (0, 1)
        ]
        first = regions[i] if i < len(regions) and regions[i] is not None else own[0]
        rows.append(
            AuditRow(
                file=f"im{i:02d}.png",
                key=f"im{i:02d}",
                digest=f"d{i}",
                predicted=i % 6,
                label=LABELS[i % 6],
                score=0.9,
                n_regions=2,
                top_region=0,
                regions=(first, own[1]),
            )
        )
    return rows


def test_one_patch_at_one_place_in_four_classes_is_one_finding():
    patch = _region((2, 20), (60.0, 70.0, 50.0))
    rows = _rows([patch] * 4)  # 4 of 30 images (13%), each of another class
    groups = [g for g in group_regions(rows) if g.kind == CROSS]
    assert len(groups) == 1 and sorted(groups[0].rows) == [0, 1, 2, 3]
    top = discover(rows)[0]
    assert top.kind == CROSS and sorted(k for k, _ in top.regions) == [f"im0{i}" for i in range(4)]
    assert (
        len(top.classes) == 4 and "push 4 classes ('carton', 'candle', 'schnauzer'" in top.sentence
    )
    assert "whatever class they push" in top.sentence


def test_a_class_group_inside_a_larger_cross_class_group_becomes_that_group():
    """The real case's shape: a watermark tips four 'carton' photos (a group of one class) and
    three photos of other classes. The cross-class group holds all seven, more than half of them
    the class group's: the two are one CROSS finding of the seven, not the four alone."""
    patch = _region((2, 20), (60.0, 70.0, 50.0))
    # a cell to the side and a little bluer in the other classes (IoU 0.78, a Lab difference of
    # 6): alike across classes only without the class gap, as a detector's boxes around the
    # same text differ a little and a semi-transparent mark takes its background's colour
    moved = _region((2, 21), (60.0, 70.0, 44.0))
    carton, others = {0, 6, 12, 18}, {1, 2, 3}  # six classes in turn: rows 0, 6, ... 'carton'
    at = carton | others
    rows = _rows([patch if i in carton else moved if i in others else None for i in range(19)])
    groups = group_regions(rows)
    assert [(g.kind, sorted(g.rows)) for g in groups if 0 in g.rows] == [(CROSS, sorted(at))]
    top = discover(rows)[0]
    assert top.kind == CROSS and sorted(k for k, _ in top.regions) == sorted(
        f"im{i:02d}" for i in at
    )


def _weak(d: RegionDescriptor, region: int = 7) -> RegionDescriptor:
    """``d`` as one of a row's other regions: another id, a weight against the class."""
    return replace(d, region=region, weight=-0.2, share=0.2)


def test_a_finding_names_every_image_that_carries_its_region():
    """A text proposal pushes the class in 4 images (the finding) and is in 5 more where it lowers
    the class, each a row's ``proposed`` (a semi-transparent mark: another colour, the same
    characters). The finding's carriers are all 9, each with its region; the same text at
    another place, and other text at the same place, are not; and the 9 have the highest
    membership. The carriers survive audit.json's findings block."""
    mark = _region((2, 20), (60.0, 70.0, 50.0), "text: 经捷径")
    rows = _rows([mark] * 4)
    for i in range(4, 9):
        rows[i] = replace(
            rows[i], proposed=(_weak(_region((2, 20), (55.0, 20.0, 20.0), "text: 捷径")),)
        )
    rows[9] = replace(
        rows[9], proposed=(_weak(_region((20, 2), (60.0, 70.0, 50.0), "text: 经捷径")),)
    )
    rows[10] = replace(
        rows[10], proposed=(_weak(_region((2, 20), (-20.0, 10.0, -30.0), "text: AB")),)
    )
    top = discover(rows)[0]
    assert top.kind == CROSS and top.images == 4
    assert top.carriers == tuple((f"im{i:02d}", 0 if i < 4 else 7) for i in range(9))
    assert top.sentence.endswith(
        "The same region is in 5 more images, where it is not among the strongest (9 of 30 in all)."
    )
    like = dict(top.membership)
    assert min(like[f"im{i:02d}"] for i in range(9)) > max(like[f"im{i:02d}"] for i in range(9, 30))
    back = findings_from_dict(json.loads(json.dumps(findings(rows).to_dict())))
    assert back.discovered[0].carriers == top.carriers
    found = findings(rows)

    def load(key: str) -> tuple[np.ndarray, np.ndarray]:  # each image's regions 0 and 7: halves
        seg = np.zeros((8, 8), int)
        seg[:, 4:] = 7
        return np.full((8, 8, 3), 90, np.uint8), seg

    pics = carrier_pictures(found, load, most=3)
    assert [k for k, _ in pics[0]] == ["im04", "im05", "im06"]  # all as alike: in their order
    assert all(src.startswith("data:image/jpeg;base64,") for _, src in pics[0])
    html = audit_html(found, rows, {}, model="toy", config=audit_config(), carriers=pics)
    assert "Also carried by 5 more images" in html and "im04.png, im05.png" in html
    assert html.count("(carries it)</figcaption>") == 3
    # none of them is a clean image to paste the finding into
    clean = _clean(top, {r.key: r for r in rows}, "carton", 30, lambda key: 0.0)
    carriers = {k for k, _ in top.carriers}
    assert sorted(clean) == [r.key for r in rows if r.label != "carton" and r.key not in carriers]


def test_a_one_class_findings_carriers_of_another_class_must_be_very_alike():
    """A finding of one class ('carton') takes a region of another class's image as a carrier
    only as the grouping would group it: the class gap applies. A copy a cell aside and a little
    bluer carries it in a 'carton' image, not in a 'candle' one; an exact copy in either."""
    patch = _region((2, 20), (60.0, 70.0, 50.0))
    moved = _weak(_region((2, 21), (60.0, 70.0, 44.0)))
    rows = _rows([patch if i in (0, 6, 12, 18) else None for i in range(19)])
    rows[24] = replace(rows[24], proposed=(moved,))  # carton
    rows[1] = replace(rows[1], proposed=(moved,))  # candle
    rows[7] = replace(rows[7], proposed=(_weak(patch),))  # candle, an exact copy
    top = discover(rows)[0]
    members = {k for k, _ in top.regions}
    assert top.kind != CROSS and top.classes[0][0] == "carton"
    assert {"im00", "im06", "im12", "im18"} <= members and not members & {"im01", "im07", "im24"}
    assert {k for k, _ in top.carriers} == members | {"im07", "im24"}


def test_alike_place_but_another_look_across_classes_is_not_grouped():
    looks = [(60.0, 70.0, 50.0), (60.0, -60.0, 40.0), (30.0, 10.0, -60.0), (90.0, 0.0, 80.0)]
    rows = _rows([_region((2, 20), lab) for lab in looks])
    assert not [g for g in group_regions(rows) if g.kind == CROSS]
    assert not [f for f in discover(rows) if f.kind == CROSS]


def test_text_proposals_reading_the_same_text_are_alike_whatever_their_colour():
    # a semi-transparent watermark: its colour follows each photo, the text it reads does not
    looks = [(60.0, 70.0, 50.0), (60.0, -60.0, 40.0), (30.0, 10.0, -60.0), (90.0, 0.0, 80.0)]
    texts = ["text: 捷径捷径", "text: 捷经插径", "text: 捷径", "text: 经捷径捷"]
    rows = _rows([_region((2, 20), lab, name) for lab, name in zip(looks, texts, strict=True)])
    groups = [g for g in group_regions(rows) if g.kind == CROSS]
    assert len(groups) == 1 and sorted(groups[0].rows) == [0, 1, 2, 3]
    names = ["text: 家", "text: T"] * 2
    other = [_region((2, 20), lab, n) for lab, n in zip(looks, names, strict=True)]
    assert not [g for g in group_regions(_rows(other)) if g.kind == CROSS]


class ObjectOrPlain(torch.nn.Module):
    """Classes 'red', 'green', 'blue' (how much of the image is that colour) and 'plain'. A white
    patch lowers 'plain', so it pushes whichever colour class the image shows: one artifact at
    one place behind three classes, as a watermark."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def only(c: int) -> torch.Tensor:
            rest = torch.maximum(x[:, (c + 1) % 3], x[:, (c + 2) % 3])
            return 120 * torch.relu(x[:, c] - rest).mean(dim=(1, 2))

        white = torch.relu(x.amin(dim=1) - 0.8).mean(dim=(1, 2))
        top = x.amax(dim=1)  # dark but not black (the fill)
        dark = (torch.relu(0.4 - top) * (top > 0.05)).mean(dim=(1, 2))
        return torch.stack([only(0), only(1), only(2), 3 - 600 * white + 300 * dark], 1)


def _images(n: int = 16, seed: int = 0) -> list[np.ndarray]:
    """``n`` gray 48-px images, each with a red, green or blue object in a random cell of 6 x 6;
    the first three (one of each colour) with a white patch in cell 7, the others with a dull dark
    object instead (each its own colour and place: strong regions for 'plain' that group with
    nothing, so the patch is in 3 of 24 images with regions, under the 20% floor)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        img = np.full((48, 48, 3), 0.45)
        r, c = divmod(int(rng.choice([k for k in range(36) if k != 7])), 6)
        colour = np.full(3, rng.uniform(0.05, 0.2))
        colour[i % 3] = 0.9
        if i >= 3:  # a dull dark object of its own colour, which pushes 'plain'
            colour = rng.uniform(0.1, 0.35, 3)
        img[r * 8 : r * 8 + 8, c * 8 : c * 8 + 8] = colour
        if i < 3:
            img[8:16, 8:16] = 1.0
        out.append((img * 255).astype(np.uint8))
    return out


def test_one_patch_pushing_three_classes_is_found_and_confirmed():
    images = _images(24)
    clf = Classifier(ObjectOrPlain(), labels=["red", "green", "blue", "plain"], device="cpu")
    cfg = audit_config({"segmentation": "grid", "n_segments": 36, "fill": "black", "samples": 200})
    items = [
        AuditItem(f"im{i:02d}.png", f"im{i:02d}", f"d{i}", lambda im=im: AuditInput(im))
        for i, im in enumerate(images)
    ]
    got = []
    run_audit(items, clf, cfg, got.append, in_flight=4)
    keep = {o.row.key: (o.input.image, o.explanation.segments) for o in got}
    rows = sorted((o.row for o in got), key=lambda r: r.key)
    assert [r.label for r in rows[:3]] == ["red", "green", "blue"]
    f = prove_findings(findings(rows), rows, keep.__getitem__, scorer_predict(clf))
    top = f.discovered[0]
    assert top.kind == CROSS and top.confirmed and f.headline == top.sentence
    assert sorted(k for k, _ in top.regions) == ["im00", "im01", "im02"]
    assert top.intervention.images == 3 and top.intervention.removal_margin >= REMOVAL_MARGIN
