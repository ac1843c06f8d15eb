"""The audit's prove phase (audit/proving.py), the truth scores (audit/truth.py) and the findings
read back from audit.json (audit/findings_doc.py), on the generated sets of test_grouping.py
whose truth is known: a red patch at one place, at random places, and a clean set."""

import json

import numpy as np
import pytest
import torch

from limecraft_core import Classifier, LimecraftError
from limecraft_core.audit import (
    NO_FINDING,
    REMOVAL_MARGIN,
    audit_config,
    findings,
    findings_from_dict,
    prove_findings,
    read_truth,
    score_truth,
    scorer_predict,
)
from limecraft_core.audit.regions import grid_mask
from tests.limecraft_core.audit.test_grouping import CELLS, PATCH_CELL, SIZE, RedOrObject, _box


class ObjectOnly(torch.nn.Module):
    """RedOrObject's classes, but 'red' is a constant: this model does not rely on the patch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        saturation = (x.amax(dim=1) - x.amin(dim=1)).mean(dim=(1, 2))
        return torch.stack([torch.full_like(saturation, 0.5), 10 * saturation], 1)


def _predict(model: torch.nn.Module | None = None):
    clf = Classifier(model or RedOrObject(), labels=["red", "object"], device="cpu")
    return scorer_predict(clf)


def _proved(audited, kind: str, predict=None):
    rows, patched, keep = audited[kind]
    return (
        rows,
        patched,
        prove_findings(findings(rows), rows, keep.__getitem__, predict or _predict()),
    )


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / (a | b).sum())


def test_scorer_predict_gives_the_classifiers_probabilities(audited):
    image = next(iter(audited["place"][2].values()))[0]
    clf = Classifier(RedOrObject(), labels=["red", "object"], device="cpu")
    want = torch.softmax(torch.from_numpy(clf.predict(image)), -1).numpy()
    np.testing.assert_allclose(scorer_predict(clf)(image), want, atol=1e-5)


def test_a_patch_at_one_place_is_the_confirmed_headline(audited):
    _, patched, f = _proved(audited, "place")
    top = f.discovered[0]
    patch = np.zeros((SIZE, SIZE), bool)
    patch[_box(PATCH_CELL)] = True
    assert f.proved and top.confirmed and f.headline == top.sentence
    assert "place" in top.kind and _iou(top.mask, grid_mask(patch)) >= 0.5
    assert sorted(k for k, _ in top.regions) == patched
    iv = top.intervention
    assert iv.target_class == 0 and iv.images == len(patched) and iv.clean_images == 8
    assert iv.removal_margin >= REMOVAL_MARGIN and iv.insertion == "causes"
    assert iv.removal_mean > iv.removal_null_mean and iv.mean_gain > iv.null_gain
    assert "Confirmed against the null" in f.headline and f"{iv.removal_mean:.3f}" in f.headline
    assert f"{iv.null_gain:+.3f}" in f.headline and f"{iv.flip_rate:.0%}" in f.headline


def test_a_patch_of_one_colour_at_random_places_is_the_confirmed_headline_by_its_look(audited):
    _, patched, f = _proved(audited, "look")
    top = f.discovered[0]
    assert top.kind == "look" and top.confirmed and f.headline == top.sentence
    assert sorted(k for k, _ in top.regions) == patched
    assert "one place" not in top.indicators


def test_a_clean_set_has_no_finding_above_the_null(audited):
    _, _, f = _proved(audited, "clean")
    assert f.proved and f.headline == NO_FINDING
    assert f.headline.startswith("No finding above the null")


def test_a_finding_the_model_does_not_rely_on_is_not_confirmed(audited):
    """The same red-patch group, proved through a model that ignores red: grouping is not proof."""
    _, patched, f = _proved(audited, "place", _predict(ObjectOnly()))
    assert f.discovered and not any(x.confirmed for x in f.discovered)
    assert f.headline == NO_FINDING
    top = next(x for x in f.discovered if sorted(k for k, _ in x.regions) == patched)
    assert (
        top.intervention.removal_margin < REMOVAL_MARGIN and top.intervention.insertion != "causes"
    )
    assert "Not confirmed against the null" in top.sentence


def test_a_finding_of_one_class_only_is_not_proved_and_says_why(audited):
    rows, patched, keep = audited["place"]
    red = [r for r in rows if r.key in patched]
    f = prove_findings(findings(red), red, keep.__getitem__, _predict())
    assert f.discovered and all(x.intervention is None for x in f.discovered)
    assert "Not proved: no explained image of another class than 'red'" in f.discovered[0].sentence
    assert f.headline == NO_FINDING


def test_truth_scores_rank_the_patched_images(audited):
    rows, patched, f = _proved(audited, "place")
    files = [r.file for r in rows]
    truth = read_truth(
        "file,artifact\n" + "".join(f"{r.file},{int(r.key in patched)}\n" for r in rows), files
    )
    scored = score_truth(f, rows, truth)
    t = scored.discovered[0].truth
    assert (t.auroc, t.ap, t.images, t.positives) == (1.0, 1.0, len(rows), len(patched))


@pytest.mark.parametrize(
    "text",
    [
        "file,artifact\nim00.png,1\nim01.png,0\n",
        "\ufeffFile;Artifact\r\nim00.png;1\r\nim01.png;0\r\n",  # a spreadsheet's export
        " file\t artifact \nim00.png\t1\nim01.png\t0\n",
    ],
)
def test_a_truth_csv_reads_as_a_spreadsheet_writes_it(text):
    assert read_truth(text, ["im00.png", "im01.png"]) == {"im00.png": True, "im01.png": False}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name,artifact\nim00.png,1\n", "has no column 'file'"),
        ("file,artifact\nim00.png,yes\n", "line 2: artifact must be 0 or 1, not 'yes'"),
        ("file,artifact\nelse.png,1\n", "'else.png' is not one of the audited images"),
        ("file,artifact\nim00.png,1\nim00.png,0\n", "line 3: 'im00.png' is named twice"),
        ("file,artifact\nim00.png,1\nim01.png,1\n", "AUROC needs both"),
    ],
)
def test_a_bad_truth_csv_is_one_clear_error(text, message):
    with pytest.raises(LimecraftError, match=message):
        read_truth(text, ["im00.png", "im01.png"], name="--truth t.csv")


def _folder(path, keep):
    """An audit folder holding what the audit keeps of each image (its picture and regions)."""
    from limecraft_core.io.audit_folder import AuditFolder
    from limecraft_core.io.images import encode_png

    folder = AuditFolder(path)
    for key, (image, segments) in keep.items():
        (folder.image_dir(key)).mkdir(parents=True)
        (folder.image_dir(key) / "image.png").write_bytes(encode_png(image))
        np.save(folder.image_dir(key) / "segments.npy", segments)
    return folder


def test_findings_with_interventions_are_stored_and_read_back_through_the_schema(audited, tmp_path):
    from limecraft_core.io.audit_folder import load_audit

    rows, patched, keep = audited["place"]
    folder = _folder(tmp_path, keep)
    cfg = audit_config({"segmentation": "grid", "n_segments": CELLS, "fill": "black"})
    truth = {r.file: r.key in patched for r in rows}
    found = folder.finish(
        rows, config=cfg, key="k", model={"name": "toy"}, source={}, complete=True,
        predict=_predict(), truth=truth,
    )  # fmt: skip
    assert found.proved and found.discovered[0].confirmed
    doc = json.loads((tmp_path / "audit.json").read_text())
    first = doc["findings"]["discovered"][0]
    assert first["intervention"]["confirmed"] is True and first["truth"]["auroc"] == 1.0
    back = load_audit(tmp_path).findings
    assert back.to_dict() == doc["findings"]  # every field, read back through the schema
    assert back.discovered[0].intervention == found.discovered[0].intervention.__class__(
        **first["intervention"]
    )
    html = (tmp_path / "audit.html").read_text()
    assert html.index("Findings across images") < html.index("By predicted class")
    assert "Confirmed against the null" in html and "risk HIGH" in html
    assert html.count('alt="exemplar ') == len(found.discovered[0].exemplars) + sum(
        len(x.exemplars) for x in found.discovered[1:]
    )
    bad = {**doc["findings"], "discovered": [{**first, "risk": "HUGE"}]}
    with pytest.raises(LimecraftError, match=r"findings: discovered\[0\]\.risk must be one of"):
        findings_from_dict(bad)


def test_a_finished_audit_is_scored_against_a_truth_given_afterwards(audited, tmp_path):
    """The Audit page's truth: an audit written without one is scored afterwards; the proof is
    kept, audit.json and audit.html show the scores, and the findings written again later (the
    prove phase, a resume) are scored against the kept truth.csv. A CSV that does not fit
    changes nothing."""
    from limecraft_core.io.audit_folder import TRUTH_FILE, load_audit

    rows, patched, keep = audited["place"]
    folder = _folder(tmp_path, keep)
    cfg = audit_config({"segmentation": "grid", "n_segments": CELLS, "fill": "black"})
    kw = {"config": cfg, "key": "k", "model": {"name": "toy"}, "source": {}, "complete": True}
    proved = folder.finish(rows, predict=_predict(), **kw)
    assert proved.discovered[0].truth is None
    before = {n: (tmp_path / n).read_bytes() for n in ("audit.json", "audit.html")}
    # a CSV that does not fit: one clear error, the audit as it was, no truth kept
    with pytest.raises(LimecraftError, match=r"the truth CSV line 2: 'else\.png' is not one of"):
        folder.score_truth("file,artifact\nelse.png,1\n")
    assert {n: (tmp_path / n).read_bytes() for n in before} == before
    assert not (tmp_path / TRUTH_FILE).exists()

    text = "file,artifact\n" + "".join(f"{r.file},{int(r.key in patched)}\n" for r in rows)
    scored = folder.score_truth(text)
    want = score_truth(proved, rows, read_truth(text, [r.file for r in rows]))
    assert scored.to_dict() == want.to_dict()
    t = scored.discovered[0].truth
    assert (t.auroc, t.images, t.positives) == (1.0, len(rows), len(patched))
    back = load_audit(tmp_path).findings
    assert back.to_dict() == want.to_dict()  # the proof kept, the scores added
    assert back.proved and back.discovered[0].confirmed
    html = (tmp_path / "audit.html").read_text()
    assert f"Against your truth ({len(rows)} images, {len(patched)} with the artifact)" in html
    assert (tmp_path / TRUTH_FILE).read_text() == text

    # written again (unproved, then proved): scored against the kept truth each time
    again = folder.finish(rows, **kw)
    assert again.discovered[0].truth == t
    # and over the images done so far only: those of an interrupted audit
    part = [r for r in rows if r.key in patched][:3] + [r for r in rows if r.key not in patched][:3]
    partial = folder.finish(part, **{**kw, "complete": False})
    assert partial.discovered, partial.sentences
    assert partial.discovered[0].truth.images == 6 and partial.discovered[0].truth.positives == 3
