"""The table of proposers (issue 50): text found by the detector on a watermarked photo, nothing
on a flat image, odd images (tiny, huge, greyscale, alpha), the drop reasons, a toy proposer
through the table alone, the analyst's own masks, and one battery over every entry."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest
from PIL import Image
from skimage import data

import limecraft_core as lc
from limecraft_core import proposers as P
from limecraft_core import text_detector as TD
from limecraft_core._validate import LimecraftError
from limecraft_core.io.masks_folder import read_regions_mask


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


@pytest.fixture(scope="module")
def marked() -> lc.Watermark:
    """A photo at 224 px with the ImageNet-W watermark at its known box."""
    photo = np.asarray(Image.fromarray(data.chelsea()).resize((224, 224)))
    return lc.add_watermark(photo)


@pytest.fixture(scope="module")
def detector():
    pytest.importorskip("rapidocr_onnxruntime", reason="the text detector is not installed")
    return TD._text_engine()


def best_text_iou(found: lc.Proposed, box: np.ndarray) -> float:
    return max((iou(p.mask, box) for p in found.proposals if p.proposer == "text"), default=0.0)


def test_text_on_a_watermarked_photo_is_proposed_at_the_watermarks_box(marked, detector):
    found = lc.propose(marked.image, ["text"])
    assert best_text_iou(found, marked.box_mask()) >= 0.5  # measured: 0.95
    best = max(found.proposals, key=lambda p: iou(p.mask, marked.box_mask()))
    assert best.name.startswith("text: 捷径"), best.name  # named by what the recogniser reads
    assert 0.0 < best.score <= 1.0 and best.mask.dtype == np.bool_


def test_detection_runs_once_per_image(marked, detector, monkeypatch):
    lc.propose(marked.image, ["text"])
    monkeypatch.setattr(TD, "_detect", lambda image: pytest.fail("detected again"))
    again = lc.propose(marked.image.copy(), ["text"])  # same pixels, another array
    assert best_text_iou(again, marked.box_mask()) >= 0.5


def test_text_lines_keeps_a_word_and_leaves_out_a_lone_glyph_with_a_note(marked, detector):
    """The audit's default: the watermark's text stays one region; a demo image's drawn star
    and square tag, which the detector also finds (read as ★ and 口), are left out."""
    lines = lc.propose(marked.image, ["text-lines"])
    assert best_text_iou(lines, marked.box_mask()) == 0.0  # its proposer is text-lines, not text
    best = max(lines.proposals, key=lambda p: iou(p.mask, marked.box_mask()))
    assert iou(best.mask, marked.box_mask()) >= 0.5 and best.name.startswith("text: 捷径")
    assert best.origin == "proposed:text-lines"
    from models import demo

    shapes = demo.generate(1, seed=0, mode="aligned")[0].image
    found = lc.propose(shapes, ["text"])
    assert found.names == ["text: ★", "text: 口"]  # measured: the star and the tag
    kept = lc.propose(shapes, ["text-lines"])
    assert kept.proposals == ()
    assert kept.notes == (
        "Left out text: ★: it reads as fewer than 2 characters.",
        "Left out text: 口: it reads as fewer than 2 characters.",
    )
    assert P.AUDIT_PROPOSERS == ("text-lines",) and P.audit_proposers() == ["text-lines"]


def test_text_lines_says_why_it_left_a_line_out(monkeypatch):
    """A line read as one glyph, and a line the recogniser never read (past the first
    MAX_READ of an image), are each left out with the reason that holds."""
    box = np.zeros((40, 40), bool)
    box[5:15, 5:30] = True
    lines = (
        TD.TextLine(box, ("捷径",), (0.9,), 1),
        TD.TextLine(box, ("★",), (0.8,), 1),
        TD.TextLine(box, (), (), 1, read=False),
    )
    monkeypatch.setattr(P, "find_text", lambda image: lines)
    found = lc.propose(np.zeros((40, 40, 3), np.uint8), ["text-lines"])
    assert found.names == ["text: 捷径"]
    assert found.notes == (
        "Left out text: ★: it reads as fewer than 2 characters.",
        f"Left out text 3: not read (the recogniser reads the first {TD.MAX_READ} text "
        "regions of an image).",
    )


def test_a_flat_image_gives_no_text_and_says_so(detector):
    found = lc.propose(np.full((224, 224, 3), 128, np.uint8), ["text"])
    assert found.proposals == () and found.notes == ("No text found.",)


def test_a_tiny_image_gives_sentences_not_errors(detector):
    found = lc.propose(np.zeros((8, 8, 3), np.uint8), ["text", "watermark"])
    assert found.proposals == ()
    assert found.notes[0] == "No text found."
    assert found.notes[1].startswith("No watermark region: this image (8×8 px) is too small")


def test_greyscale_and_alpha_images_are_read_as_rgb(marked, detector):
    grey = np.asarray(Image.fromarray(marked.image).convert("L"))
    rgba = np.dstack([marked.image, np.full(grey.shape, 255, np.uint8)])
    for image in (grey, rgba, marked.image.astype(np.float32) / 255):
        before = image.copy()
        assert best_text_iou(lc.propose(image, ["text"]), marked.box_mask()) >= 0.5
        assert np.array_equal(image, before)  # the caller's array is not touched


def test_a_huge_image_is_searched_at_the_working_size(marked, detector):
    big = np.asarray(Image.fromarray(marked.image).resize((4000, 3000)))
    box = np.asarray(Image.fromarray(marked.box_mask()).resize((4000, 3000), Image.NEAREST))
    assert P.working_size(3000, 4000) == (768, 1024)
    t0 = time.perf_counter()
    found = lc.propose(big, ["text"])
    assert time.perf_counter() - t0 < 30  # about 1 s on 2 cores; the bound only catches a hang
    assert best_text_iou(found, box) >= 0.5


def test_working_size_brings_small_images_up_and_huge_ones_down():
    assert P.working_size(224, 224) == (576, 576)
    assert P.working_size(8, 8) == (576, 576)
    assert P.working_size(1024, 1024) == (1024, 1024)
    assert P.working_size(600, 800) == (600, 800)


def test_a_missing_detector_names_the_pip_command(monkeypatch):
    monkeypatch.setattr(TD, "_engine", None)
    monkeypatch.setitem(sys.modules, "rapidocr_onnxruntime", None)  # import fails
    with pytest.raises(LimecraftError, match=r"pip install rapidocr-onnxruntime==1\.4\.4"):
        lc.propose(np.random.default_rng(0).integers(0, 255, (40, 40, 3), np.uint8), ["text"])
    assert P.audit_proposers() == []  # the audit then runs on superpixels alone, and says so


def _toy(masks: dict[str, np.ndarray]) -> P.Proposer:
    def fn(image: np.ndarray, given: np.ndarray | None = None) -> lc.Proposed:
        return lc.Proposed(tuple(lc.Proposal(n, m, 0.5, "toy") for n, m in masks.items()))

    return P.Proposer("toy", "a toy proposer", fn)


def test_a_toy_proposer_plugs_in_through_the_table_alone(monkeypatch):
    square = np.zeros((20, 20), bool)
    square[5:10, 5:10] = True
    monkeypatch.setitem(P.PROPOSERS, "toy", _toy({"square": square}))
    found = lc.propose(np.zeros((20, 20, 3), np.uint8), ["toy"])
    assert found.names == ["square"] and np.array_equal(found.masks[0], square)
    assert found.proposals[0].proposer == "toy" and found.notes == ()


def test_almost_the_whole_image_and_a_few_pixels_are_dropped_with_the_numbers(monkeypatch):
    whole = np.ones((20, 20), bool)
    dot = np.zeros((20, 20), bool)
    dot[0, :3] = True
    half = np.zeros((20, 20), bool)
    half[:10] = True
    monkeypatch.setitem(P.PROPOSERS, "toy", _toy({"whole": whole, "dot": dot, "half": half}))
    found = lc.propose(np.zeros((20, 20, 3), np.uint8), ["toy"])
    assert found.names == ["half"]
    assert found.notes == (
        "Dropped whole: it covers 100% of the image (more than 90%).",
        "Dropped dot: it covers only 3 pixels (fewer than 16).",
    )


def test_an_unknown_proposer_is_an_error_that_lists_them():
    with pytest.raises(
        LimecraftError, match="text, text-lines, watermark, watermark-box, masks; got 'ocr'"
    ):
        lc.propose(np.zeros((20, 20, 3), np.uint8), ["ocr"])


def test_a_proposers_mask_of_another_shape_is_an_error(monkeypatch):
    monkeypatch.setitem(P.PROPOSERS, "toy", _toy({"bad": np.ones((5, 5), bool)}))
    with pytest.raises(LimecraftError, match="shape"):
        lc.propose(np.zeros((20, 20, 3), np.uint8), ["toy"])


def test_the_watermark_proposer_is_the_watermark_edits_place(marked):
    found = lc.propose(marked.image, ["watermark", "watermark-box"])
    assert found.names == ["watermark", "watermark (2)"]  # one name per region
    assert np.array_equal(found.masks[0], lc.watermark_mask(224, 224))
    assert np.array_equal(found.masks[1], lc.watermark_mask(224, 224, box=True))
    assert iou(found.masks[1], marked.box_mask()) == 1.0


def test_the_masks_proposer_makes_one_region_per_value(tmp_path):
    own = np.zeros((30, 40), np.uint8)
    own[:10, :10] = 3
    own[20:, 20:] = 7
    image = np.zeros((30, 40, 3), np.uint8)
    found = lc.propose(image, ["masks"], given=own)
    assert found.names == ["hand 1", "hand 2"]
    assert np.array_equal(found.masks[1], own == 7)
    # the same mask from a folder, matched by the image's name and read through io
    Image.fromarray(own).save(tmp_path / "cat.png")
    again = lc.propose(image, ["masks"], given=read_regions_mask(tmp_path, "cat.jpg"))
    assert again.names == found.names
    assert all(np.array_equal(a, b) for a, b in zip(again.masks, found.masks, strict=True))
    missing = lc.propose(image, ["masks"], given=read_regions_mask(tmp_path, "dog.jpg"))
    assert missing.proposals == () and missing.notes == ("No mask of your own for this image.",)
    with pytest.raises(LimecraftError, match="give a mask of the image's size"):
        lc.propose(np.zeros((10, 10, 3), np.uint8), ["masks"], given=own)


@pytest.mark.parametrize("name", [n for n in P.PROPOSERS if not n.startswith("text")])
def test_every_proposer_gives_named_bool_masks_of_the_images_size(name):
    """The battery over the table's entries (``text`` and ``text-lines`` are tried above, with
    their detector)."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (240, 320, 3), np.uint8)
    given = np.zeros((240, 320), np.int32)
    given[50:100, 60:120] = 1
    found = lc.propose(image, [name], given=given)
    assert isinstance(found, lc.Proposed) and found.proposals
    assert len(set(found.names)) == len(found.names)
    for p in found.proposals:
        assert p.mask.shape == (240, 320) and p.mask.dtype == np.bool_
        assert P.MIN_PIXELS <= p.mask.sum() <= P.MAX_COVER * p.mask.size
        assert p.proposer in P.PROPOSERS and 0.0 <= p.score <= 1.0
    assert P.PROPOSERS[name].help and P.PROPOSERS[name].name == name
