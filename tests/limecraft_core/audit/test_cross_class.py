"""The grouping's cross-class path (audit/grouping.py): regions alike in place and in look are one
finding whatever class they push; alike in place only, across classes, they are not. Rows are
built by hand (no model pass), so the grouping alone is under test."""

import numpy as np

from limecraft_core.audit import AuditRow, discover
from limecraft_core.audit.grouping import CROSS, group_regions
from limecraft_core.audit.regions import REGION_GRID, RegionDescriptor, pack_mask

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
