"""The audit engine (limecraft_core/audit.py): rows, flags, findings, the location map and the
runner, on toy models whose truth is known and on the demo model."""

import math
import threading
import time

import numpy as np
import pytest
import torch

from limecraft_core import Cancelled, Classifier, LimecraftError, explain
from limecraft_core.audit import (
    AUDIT_DEFAULTS,
    AuditInput,
    AuditItem,
    AuditRow,
    audit_config,
    audit_row,
    error_row,
    findings,
    location_grid,
    run_audit,
    sort_rows,
)
from limecraft_core.limits import THRESHOLDS

SIZE = 32
CORNER = (slice(0, 8), slice(0, 8))  # a marker in the top-left corner: region 0 of a 4x4 grid
CENTRE = (slice(8, 24), slice(8, 24))  # the object: the 4 central cells


class LooksAt(torch.nn.Module):
    """Class 0 is sure when the box is bright, class 1 otherwise: it reads only that box."""

    def __init__(self, box: tuple[slice, slice]) -> None:
        super().__init__()
        self.box = box

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bright = x[:, :, self.box[0], self.box[1]].mean(dim=(1, 2, 3))
        return torch.stack([20 * bright - 10, torch.zeros_like(bright)], dim=1)


def scene() -> tuple[np.ndarray, np.ndarray]:
    """A gray image with a white corner marker and a bright object in the centre; the object is
    the expected area."""
    img = np.full((SIZE, SIZE, 3), 0.3, np.float32)
    img[CORNER] = 1.0
    img[CENTRE] = 0.9
    expected = np.zeros((SIZE, SIZE), bool)
    expected[CENTRE] = True
    return (img * 255).astype(np.uint8), expected


def toy_config(**kw):
    # A 4x4 grid puts the marker in region 0 and the object in 4 whole regions; a black fill
    # really hides a flat region (its own mean colour would not).
    return audit_config(
        {"segmentation": "grid", "n_segments": 16, "fill": "black", "samples": 300, **kw}
    )


def explain_toy(box, expected=None, **kw):
    image, area = scene()
    clf = Classifier(LooksAt(box), labels=["marker", "other"], device="cpu")
    cfg = toy_config(**kw)
    return explain(image, clf, config=cfg, expected_mask=area if expected else None)


def test_audit_defaults_are_the_apps_regions_and_deltas_are_required():
    cfg = audit_config()
    assert (cfg.segmentation.method, cfg.segmentation.n_segments) == ("slic", 40)
    assert cfg.fill.fill == "inpaint"
    assert AUDIT_DEFAULTS == {"segmentation": "slic", "n_segments": 40, "fill": "inpaint"}
    assert audit_config({"n_segments": 12}).segmentation.n_segments == 12
    with pytest.raises(LimecraftError, match="needs the per-region deltas"):
        audit_config({"compute_deltas": False})
    with pytest.raises(LimecraftError, match="segments each image itself"):
        audit_config({"segmentation": "given"})
    with pytest.raises(LimecraftError, match="samples"):
        audit_config({"samples": 1})


def test_a_model_that_follows_a_corner_marker_is_flagged_outside_the_object():
    ex = explain_toy(CORNER, expected=True)
    row = audit_row(ex, file="a.png", key="a.png", digest="d", has_mask=True)
    assert row.predicted == 0 and row.label == "marker" and row.score > 0.99
    assert row.top_region == 0  # the marker's cell
    assert row.top_touches_border and row.expected_regions == 4
    assert row.pointing_game is False and row.relevance_mass < 0.05
    assert row.dependence > 0.9 and row.top_delta == pytest.approx(ex.deltas[0, 0])
    assert row.flags == ("outside",) and row.flagged
    assert "outside the expected region" in row.reason and f"{row.dependence:.0%}" in row.reason
    assert row.top_share > 0.5 and row.verdict in ("stable", "borderline", "unstable")


def test_a_model_that_looks_at_the_object_is_not_flagged():
    ex = explain_toy(CENTRE, expected=True)
    row = audit_row(ex, file="b.png", key="b.png", digest="d", has_mask=True)
    assert row.pointing_game is True and row.relevance_mass > 0.9
    assert not row.flagged and row.reason == ""
    assert not row.top_touches_border  # the central cells do not reach the border


def test_a_marker_the_prediction_does_not_depend_on_is_not_flagged():
    """Top region outside the object, but hiding it leaves the score: the object holds it up."""

    class Both(torch.nn.Module):  # sure when the marker OR the object is bright; more the marker
        def forward(self, x):
            m = x[:, :, CORNER[0], CORNER[1]].mean(dim=(1, 2, 3))
            o = x[:, :, CENTRE[0], CENTRE[1]].mean(dim=(1, 2, 3))
            return torch.stack([12 * torch.maximum(1.2 * m, o) - 4, torch.zeros_like(m)], 1)

    image, area = scene()
    clf = Classifier(Both(), device="cpu")
    ex = explain(image, clf, config=toy_config(), expected_mask=area)
    row = audit_row(ex, file="c.png", key="c.png", digest="d", has_mask=True)
    assert row.pointing_game is False  # the marker is the top region ...
    assert row.dependence < THRESHOLDS["audit_dependence"]  # ... but hiding it keeps the score
    assert not row.flagged


def test_without_masks_the_top_region_on_the_border_is_flagged():
    corner = audit_row(explain_toy(CORNER), file="a", key="a", digest="d")
    centre = audit_row(explain_toy(CENTRE), file="b", key="b", digest="d")
    assert corner.flags == ("border",) and corner.relevance_mass is None
    assert corner.pointing_game is None and not corner.has_mask
    assert centre.flags == ()


@pytest.mark.parametrize("fill", ["mean", "inpaint"])
def test_an_image_whose_score_never_moves_is_not_flagged_for_its_region_0(fill):
    """A flat image under the mean fill (every hidden region takes its own mean colour, which
    is the image again) and under the audit's own, inpaint (a convex combination of the kept
    pixels, kept within their range): no region carries any weight. Region 0 (the top-left
    cell, on the border) is not "the top region": no flag."""
    clf = Classifier(LooksAt(CORNER), labels=["marker", "other"], device="cpu")
    cfg = toy_config(fill=fill)
    ex = explain(np.full((SIZE, SIZE, 3), 0.3, np.float32), clf, config=cfg)
    assert not ex.weights.any()
    row = audit_row(ex, file="flat", key="flat", digest="d")
    assert row.flags == () and not row.flagged and row.top_share == 0.0
    assert not row.top_touches_border  # and the findings do not count it as on the border
    assert row.top_words == "none (no region carries weight)"
    said = " ".join(findings([row]).sentences)
    assert "In 0 of 1 images the top region touches the image border" in said, said
    assert row.verdict_reason == "unstable: no region carries any weight"


def test_a_row_needs_the_localisation_it_claims():
    with pytest.raises(LimecraftError, match="no localisation"):
        audit_row(explain_toy(CORNER), file="a", key="a", digest="d", has_mask=True)


def test_location_grid_puts_the_weight_where_the_region_is():
    ex = explain_toy(CORNER)
    g = location_grid(ex, grid=16)
    assert g.shape == (16, 16) and g.dtype == np.float32
    assert 0.0 <= g.min() and g.max() <= 1.0
    assert g[:3, :3].mean() > 0.9  # the marker's corner carries the largest |weight| ...
    assert g[:3, :3].mean() > 5 * g[6:10, 6:10].mean()  # ... far above the centre
    found = findings([audit_row(ex, file="a", key="a", digest="d")], [location_grid(ex)])
    assert found.peak == "top-left corner"
    assert found.frame_share > found.frame_area  # the border frame holds more than its area


def _row(file, label, flagged, *, mass=0.0, dep=0.9, border=True, verdict="stable", mask=True):
    return AuditRow(
        file=file, key=file, digest="d", predicted=0, label=label, score=0.9, n_regions=10,
        top_region=1, top_share=0.6, top_delta=0.9 * dep, dependence=dep,
        top_touches_border=border, verdict=verdict, has_mask=mask, expected_regions=3,
        relevance_mass=mass if mask else None, pointing_game=False if mask else None,
        rank_accuracy=0.0 if mask else None,
        flags=(("outside",) if mask else ("border",)) if flagged else (),
    )  # fmt: skip


def test_findings_lead_with_the_flagged_images_and_what_they_are_predicted():
    rows = [
        _row("1", "star", True),
        _row("2", "star", True),
        _row("3", "star", True),
        _row("4", "circle", True),
        _row("5", "circle", False, mass=0.4, dep=0.1),
        _row("6", "square", False, mass=0.2, dep=0.05, verdict="borderline"),
        error_row("7", "7", "d", "image '7' could not be decoded"),
    ]
    f = findings(rows)
    assert (f.images, f.ok, f.errors, f.flagged, f.with_masks) == (7, 6, 1, 4, 6)
    assert f.sentences[0] == (
        "In 4 of 6 images the prediction rests outside the expected region: the top region "
        "lies outside it and hiding that region alone removes at least 50% of the score; 3 are "
        "predicted 'star' and 1 'circle'."
    )
    assert "in 2 of them the prediction survives hiding it" in f.sentences[1]
    assert "median 0.00 in the flagged images and median 0.30 in the others" in f.sentences[2]
    assert any(s == "Stability: 5 stable, 1 borderline." for s in f.sentences)
    assert f.sentences[-1] == "1 image could not be audited: see the error rows."
    star = f.classes[0]
    assert (star.label, star.images, star.flagged, star.pointing_hits) == ("star", 3, 3, 0)
    assert [c.label for c in f.classes] == ["star", "circle", "square"]
    order = [r.file for r in sort_rows(rows)]
    assert order[:4] == ["1", "2", "3", "4"] and order[-1] == "7"


def test_findings_without_masks_count_the_border():
    rows = [_row(str(i), "star", i < 3, mask=False, border=i < 3) for i in range(5)]
    f = findings(rows)
    assert f.sentences[0] == (
        "In 3 of 5 images the top region touches the image border (flagged); 3 are predicted "
        "'star'."
    )
    assert f.sentences[1].startswith("In 3 of them hiding that region alone removes")


def test_findings_of_nothing_say_so():
    assert findings([]).sentences == ("The audit has no images yet.",)
    f = findings([error_row("x", "x", "d", "broken")])
    assert f.sentences[0].startswith("No image could be explained (1 error)")


def test_a_row_round_trips_and_a_bad_one_is_refused():
    row = audit_row(
        explain_toy(CORNER, expected=True), file="a", key="a", digest="d", has_mask=True
    )
    assert AuditRow.from_dict(row.to_dict()) == row
    err = error_row("b", "b", "d", "line one\nline two")
    assert err.error == "line one line two" and AuditRow.from_dict(err.to_dict()) == err
    assert math.isnan(AuditRow.from_dict(err.to_dict()).score)
    d = row.to_dict()
    with pytest.raises(LimecraftError, match="unknown field"):
        AuditRow.from_dict({**d, "evil": 1})
    with pytest.raises(LimecraftError, match="'score' must be a number"):
        AuditRow.from_dict({**d, "score": "high"})
    with pytest.raises(LimecraftError, match="unknown flag"):
        AuditRow.from_dict({**d, "flags": ["rm -rf"]})
    with pytest.raises(LimecraftError, match="status"):
        AuditRow.from_dict({**d, "status": "maybe"})


# ----------------------------------------------------------------------------- the runner


def _items(n, fail=()):
    image, area = scene()

    def loader(i):
        def load():
            if i in fail:
                if fail[i] == "bad":
                    raise LimecraftError(f"image {i} could not be decoded")
                raise RuntimeError("an odd image broke something")
            return AuditInput(image, area)

        return load

    return [AuditItem(f"im{i}.png", f"im{i}.png", f"d{i}", loader(i)) for i in range(n)]


def test_run_audit_reports_every_image_and_a_bad_one_does_not_stop_it():
    clf = Classifier(LooksAt(CORNER), device="cpu")
    got = []
    n = run_audit(
        _items(5, {1: "bad", 3: "bug"}), clf, toy_config(samples=100), got.append, in_flight=2
    )
    assert n == 5 and sorted(o.row.file for o in got) == [f"im{i}.png" for i in range(5)]
    by = {o.row.file: o.row for o in got}
    assert by["im1.png"].status == "error" and "could not be decoded" in by["im1.png"].error
    assert by["im3.png"].error == "internal error: RuntimeError: an odd image broke something"
    for i in (0, 2, 4):
        assert by[f"im{i}.png"].flagged and by[f"im{i}.png"].ok
    ok = [o for o in got if o.row.ok]
    assert all(o.explanation is not None and o.grid.shape == (64, 64) for o in ok)
    assert all(o.explanation is None for o in got if not o.row.ok)


def test_run_audit_cancel_stops_the_images_in_flight():
    class Counted(torch.nn.Module):
        def __init__(self, gate: threading.Event | None = None):
            super().__init__()
            self.calls = 0
            self.lock = threading.Lock()
            self.gate = gate

        def forward(self, x):
            if self.gate is not None:  # held until the caller's tick has run once
                assert self.gate.wait(timeout=60), "the caller's tick never ran"
            with self.lock:
                self.calls += 1
            time.sleep(0.01)  # the images in flight overlap; no timing is asserted
            return LooksAt(CORNER)(x)

    config = toy_config(samples=200, early_stop=None)
    # the model passes one whole image takes
    one = Counted()
    run_audit(_items(1), Classifier(one, device="cpu"), config, lambda o: None, in_flight=1)
    assert one.calls > 2

    # the model waits for the first tick, so the run must wait (and tick) before an image can
    # finish, however fast the machine: the first image once finished within one poll
    ticked = threading.Event()
    model = Counted(ticked)
    got, ticks = [], []
    stop = threading.Event()

    def tick():
        ticks.append(1)
        ticked.set()

    def on_result(o):
        got.append(o)
        stop.set()  # cancel once the first image is done

    with pytest.raises(Cancelled):
        run_audit(
            _items(8), Classifier(model, device="cpu"), config, on_result, in_flight=2,
            cancel=stop.is_set, tick=tick, poll_s=0.05,
        )  # fmt: skip
    assert 1 <= len(got) <= 2  # nothing after the cancel is reported ...
    # ... no image starts after it: the model saw at most the two images that were in flight
    # (8 images would take 8 times one image's passes)
    assert model.calls <= 2 * one.calls, (model.calls, one.calls)
    assert ticks  # the caller's tick ran while it waited


@pytest.mark.slow
def test_images_in_flight_give_the_same_results_as_one_at_a_time():
    from models import demo
    from models.registry import load_classifier
    from serving import QueuedScorer, WorkQueue

    images = [s.image for s in demo.generate(4, seed=77, mode="conflict")]
    items = [
        AuditItem(f"{i}", f"{i}", "d", (lambda im=im: AuditInput(im)))
        for i, im in enumerate(images)
    ]
    clf = load_classifier("demo", device="cpu")
    cfg = audit_config({"samples": 150})
    one = {}
    run_audit(items, clf, cfg, lambda o: one.__setitem__(o.row.file, o), in_flight=1)
    queue = WorkQueue()
    many = {}
    run_audit(
        items, QueuedScorer(clf, queue), cfg, lambda o: many.__setitem__(o.row.file, o), in_flight=4
    )
    queue.shutdown()
    assert set(one) == set(many) == {"0", "1", "2", "3"}
    for k in one:
        np.testing.assert_allclose(
            many[k].explanation.weights, one[k].explanation.weights, rtol=0, atol=1e-6
        )
        assert many[k].row.flags == one[k].row.flags
        assert many[k].row.top_region == one[k].row.top_region
    assert queue.forward_calls > 0 and queue.images > 0


def test_run_audit_checks_in_flight():
    with pytest.raises(LimecraftError, match="in_flight"):
        run_audit([], None, toy_config(), print, in_flight=0)
