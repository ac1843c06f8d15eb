"""The app's audits without a browser: the Audit page under AppTest (run the demo set, open an
image, a bad upload), the analysis's expected area, and pages/lib/audits.py's pieces."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import limecraft_core as lc
from limecraft_core.audit import audit_config
from limecraft_core.io.audit_folder import load_audit
from models.demo_data import write_demo_mixed
from pages.lib import analysis as A
from pages.lib import analysis_file as AF
from pages.lib import audits, identity
from pages.lib.audits import from_audit, progress_text, write_files

APP = str(Path(__file__).resolve().parents[2] / "app.py")
AUDIT = "pages/app_pages/audit.py"
EXPLAIN = "pages/app_pages/explain.py"
INSPECT = "pages/app_pages/inspect.py"
pytestmark = pytest.mark.slow
#: The smallest demo set the page offers: at the app's seed, two conflict images the model
#: follows the tag on (flagged) and two aligned ones (outside the finding: the proof pastes the
#: tag into them).
N_DEMO = 4


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMECRAFT_STORE_DIR", str(tmp_path / "store"))


def audit_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    at.switch_page(AUDIT).run()
    assert not at.exception, at.exception
    return at


def button(at, label):
    return next(b for b in at.button if b.label == label)


def texts(at) -> str:
    return "\n".join(
        [m.value for m in at.markdown] + [e.value for e in at.error] + [s.value for s in at.success]
        + [i.value for i in at.info] + [w.value for w in at.warning]
    )  # fmt: skip


def test_the_demo_audit_runs_and_an_image_opens_with_the_audits_regions():
    at = audit_page()
    assert "Start an audit" in texts(at)
    at.number_input(key="audit_demo_count").set_value(N_DEMO).run()
    button(at, "Run the audit").click().run()
    assert not at.exception, at.exception
    shown = texts(at)
    assert "images the prediction rests outside the expected region" in shown
    aid = at.session_state["limecraft_session"].audit_id
    assert at.query_params["audit"] == [aid] or at.query_params["audit"] == aid
    folder = Path(at.session_state["limecraft_session"].audit_loaded[0][0])
    audit = load_audit(folder)
    assert audit.complete and len(audit.rows) == N_DEMO
    labels = {e["file"]: e for e in json.loads((folder / "dataset" / "labels.json").read_text())}
    findings_first(at, audit)
    truth_scores_the_findings(at, aid, audit, labels)
    exemplar_opens_with_the_findings_region_named(at, audit)
    paste_starts_from_the_finding(at, audit)
    reload_keeps_the_findings(aid, audit)
    # open the first flagged image (the picker's default) on Inspect
    at.switch_page(AUDIT).run()
    flagged = [r for r in audit.rows if r.flagged]
    assert flagged, "the demo set at this seed has conflict images the model follows"
    at.button(key="audit_open_inspect").click().run()
    assert not at.exception, at.exception
    a = at.session_state["limecraft_session"].app
    first = sorted(flagged, key=lambda r: -r.dependence)[0]
    assert a.image_name == first.file and a.source == "audit"
    assert a.restored is not None and a.explanation is not None
    ex = audit.explanation(first.key)
    np.testing.assert_array_equal(a.restored.labels, ex.segments)
    np.testing.assert_array_equal(a.explanation.weights, ex.weights)
    np.testing.assert_array_equal(a.expected_area, audit.expected(first.key))
    loc = a.explanation.trust.localisation
    assert loc is not None and loc.pointing_game is False
    assert loc.relevance_mass == pytest.approx(first.relevance_mass)
    assert a.tag_mask is not None and a.tag_mask.any()  # the demo tag, for Craft's walkthrough
    assert labels[first.file]["mode"] == "conflict"
    # the Explain page shows the audit's explanation against the expected mask
    at.switch_page(EXPLAIN).run()
    assert not at.exception, at.exception
    assert any(m.options and "the audit's expected mask" in m.options for m in at.multiselect)
    assert "is outside the area you expected" in texts(at)


def findings_first(at, audit) -> None:
    """The page leads with the proved findings, as audit.html does."""
    found = audit.findings
    assert found.proved and found.discovered, "the app's audit runs the prove phase"
    f = found.discovered[0]
    iv = f.intervention
    assert f.confirmed and iv is not None  # the demo tag: removal and insertion beat the null
    md = [m.value for m in at.markdown]
    assert md.index("**Findings across images**") < md.index("**In plain sentences**")
    assert found.headline == at.error[0].value  # the headline first, as a confirmed finding
    shown = texts(at)
    assert f"risk **{f.risk}** ({', '.join(f.indicators)})" in shown
    assert f"Prevalence: {f.images} images" in shown
    table = next(m for m in md if m.startswith("| test |"))
    assert f"| {iv.removal_mean:.3f} | {iv.removal_null_mean:.3f} | {iv.removal_margin:+.3f} |" in (
        table
    )
    assert f"| {iv.mean_gain:+.3f} | {iv.null_gain:+.3f} |" in table
    assert f"flip rate to the class | {iv.flip_rate:.0%}" in table
    assert "**Confirmed against the null.**" in shown
    pics = audits.exemplars(audit, f)  # what the card shows: the region outlined, as audit.html
    assert [k for k, _ in pics] == list(f.exemplars) and pics[0][0] == f.medoid
    for key, pic in pics:
        image, segments = audit.folder.regions_of(key)
        changed = (pic != image).any(axis=2)
        assert changed.any() and not changed[segments != dict(f.regions)[key]].all()


def truth_scores_the_findings(at, aid: str, audit, labels: dict) -> None:
    """The analyst's truth, given after the audit: a CSV that does not fit is one message and
    changes nothing; one that fits gives each finding its AUROC and AP, as the engine scores
    them, and is kept with the audit (the reload below proves the findings again with it)."""
    from limecraft_core.audit import read_truth, score_truth

    folder = audit.folder.path
    assert "file,artifact\n" in audits.truth_template(audit)
    before = (folder / "audit.json").read_bytes()
    up = at.file_uploader(key=f"audit_truth-{aid}")
    up.set_value(("t.csv", b"file,artifact\nnope.png,1\n", "text/csv")).run()
    at.button(key="audit_truth_score").click().run()
    assert not at.exception, at.exception
    assert any(
        "That truth cannot be used: your truth CSV line 2: 'nope.png' is not one of the audited"
        in e.value
        for e in at.error
    ), [e.value for e in at.error]
    assert (folder / "audit.json").read_bytes() == before
    text = "file,artifact\n" + "".join(
        f"{r.file},{int(labels[r.file]['mode'] == 'conflict')}\n" for r in audit.rows
    )
    at.file_uploader(key=f"audit_truth-{aid}").set_value(("t.csv", text.encode(), "text/csv"))
    at.run()
    at.button(key="audit_truth_score").click().run()
    assert not at.exception, at.exception
    want = score_truth(audit.findings, audit.rows, read_truth(text, [r.file for r in audit.rows]))
    t = want.discovered[0].truth
    shown = texts(at)
    assert (
        f"Against your truth ({t.images} images, {t.positives} with the artifact): "
        f"AUROC {t.auroc:.2f}, AP {t.ap:.2f}." in shown
    )
    assert "Score the findings against your truth · scored" in [e.label for e in at.expander]
    assert load_audit(folder).findings.discovered[0].truth == t


def exemplar_opens_with_the_findings_region_named(at, audit) -> None:
    f = audit.findings.discovered[0]
    key = f.exemplars[0]
    at.button(key="audit_f0_open_0").click().run()
    assert not at.exception, at.exception
    a = at.session_state["limecraft_session"].app
    rid = dict(f.regions)[key]
    assert a.image_name == audit.row(key).file and a.source == "audit"
    name = audits.finding_name(0, f)
    assert name.startswith("finding 1: ") and a.restored.names[rid] == name
    _, segments = audit.folder.regions_of(key)
    np.testing.assert_array_equal(a.restored.labels == rid, segments == rid)
    assert at.selectbox(key="edit_region").value == rid  # named regions first on Inspect
    assert name in at.selectbox(key="edit_region").format_func(rid)


def paste_starts_from_the_finding(at, audit) -> None:
    f = audit.findings.discovered[0]
    at.switch_page(AUDIT).run()
    at.button(key="audit_f0_paste").click().run()
    assert not at.exception, at.exception
    a = at.session_state["limecraft_session"].app
    rid = dict(f.regions)[f.medoid]
    assert a.image_name == audit.row(f.medoid).file
    assert at.selectbox(key="edit_region").value == rid
    assert at.selectbox(key="edit_follow").value == f.intervention.target_class
    assert "Paste this region into other images" in [h.value for h in at.subheader]


def reload_keeps_the_findings(aid: str, audit) -> None:
    """A new session on the page address (a reload, a new tab) finds the audit on disk; one
    stopped while proving offers to prove it, and proves it as the first run did."""

    def new_tab() -> AppTest:
        at = AppTest.from_file(APP, default_timeout=300)
        at.query_params["audit"] = aid
        at.run()
        at.switch_page(AUDIT).run()
        assert not at.exception, at.exception
        return at

    at = new_tab()
    assert audit.findings.headline in [e.value for e in at.error]
    assert any(m.value.startswith("| test |") for m in at.markdown)
    assert not [b for b in at.button if b.key == "audit_prove"]
    folder = audit.folder.path
    app = audits.read_app(folder)
    audits.write_findings(folder, app, audits.plan(folder, app), complete=True)  # unproved
    at = new_tab()
    assert not load_audit(folder).findings.proved
    at.button(key="audit_prove").click().run()
    assert not at.exception, at.exception
    again = load_audit(folder).findings
    assert again.proved and again.headline == audit.findings.headline  # the same seeds
    assert again.discovered[0].intervention == audit.findings.discovered[0].intervention
    assert again.discovered[0].truth is not None  # the truth kept with the audit


def test_a_bad_zip_is_one_message_and_leaves_nothing_behind(tmp_path):
    at = audit_page()
    at.segmented_control(key="audit_source").set_value("Upload images").run()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("notes/readme.txt", "no images here")
    at.file_uploader(key="audit_zip").set_value(("data.zip", buf.getvalue(), "application/zip"))
    at.run()
    button(at, "Run the audit").click().run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert any("That upload cannot be audited" in e and "holds no image files" in e for e in errors)
    audits_dir = tmp_path / "store" / "audits"
    assert not [d for d in audits_dir.iterdir() if d.is_dir()]  # the half-made audit is gone


@pytest.fixture(scope="module")
def cli_audit(tmp_path_factory) -> Path:
    """A small audit made by the command line."""
    from limecraft.cli import main

    tmp = tmp_path_factory.mktemp("cli")
    data = tmp / "data"
    write_demo_mixed(data, 3, seed=99)
    out = tmp / "out"
    argv = ["audit", str(data / "images"), "--expected-masks", str(data / "masks"), "--out"]
    assert main([*argv, str(out), "--samples", "120", "--quiet"]) == 0
    return out


def test_a_finished_cli_audit_opens_from_its_zip(cli_audit):
    out = cli_audit
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in out.rglob("*"):
            if p.is_file():
                z.write(p, "out/" + p.relative_to(out).as_posix())
    at = audit_page()
    at.segmented_control(key="audit_source").set_value("Open a finished audit").run()
    at.file_uploader(key="audit_open_zip").set_value(("out.zip", buf.getvalue(), "application/zip"))
    at.run()
    button(at, "Open the audit").click().run()
    assert not at.exception, at.exception
    cli = json.loads((out / "audit.json").read_text())
    assert cli["findings"]["sentences"][0] in texts(at)
    # a zip that is not an audit says so
    at.file_uploader(key="audit_open_zip").set_value(("x.zip", b"not a zip", "application/zip"))
    at.run()
    button(at, "Open the audit").click().run()
    assert any("That audit could not be opened" in e.value for e in at.error)


def test_a_finished_audit_opens_from_its_folder_and_cannot_take_another_owner(cli_audit):
    files = folder_files(cli_audit)
    files += [("out/.owner", b"oidc:someone@else", "text/plain"), ("out/app.json", b"{}", "x")]
    at = open_folder(files)
    cli = json.loads((cli_audit / "audit.json").read_text())
    assert cli["findings"]["sentences"][0] in texts(at)
    folder = Path(at.session_state["limecraft_session"].audit_loaded[0][0])
    assert (folder / ".owner").read_text() == "local"  # the upload's own .owner was not used
    assert json.loads((folder / "app.json").read_text())["source"] == "opened"
    assert not (folder / "opened").exists()


def test_an_audit_stays_open_when_its_files_change_in_another_minute(cli_audit):
    """ "Your audits" names each audit with a time. That time was the audit's last change, so
    scoring the truth or a prove phase a minute later changed the label of the option shown;
    the selectbox then handed back the old label as if picked, the page took it for an audit id
    and said "That audit is not here any more". Seen in the browser test under load; the label's
    time is now when the audit began (and the page takes no value that is not a listed id)."""
    files = folder_files(cli_audit)
    at = audit_page()
    at.segmented_control(key="audit_source").set_value("Open a finished audit").run()
    at.file_uploader(key="audit_open_dir").set_value(files)
    at.run()
    button(at, "Open the audit").click().run()
    aid = at.session_state["limecraft_session"].audit_id
    folder = Path(at.session_state["limecraft_session"].audit_loaded[0][0])
    mine = next(s for s in at.selectbox if s.label == "Your audits")
    label = mine.format_func(aid)
    assert mine.value == aid and label.startswith("out · ")
    later = time.time() + 3 * 3600  # the truth scored hours later: audit.json changes
    for name in ("audit.json", "app.json"):
        os.utime(folder / name, (later, later))
    at.run()
    at.run()
    assert not at.exception, at.exception
    assert "not here any more" not in texts(at)
    assert at.session_state["limecraft_session"].audit_id == aid
    mine = next(s for s in at.selectbox if s.label == "Your audits")
    # the browser holds the label it was shown and sends it back with the next rerun: it must
    # still be this run's label of the audit
    assert mine.value == aid and mine.format_func(aid) == label


# ----------------------------------------------------------------------------- the pieces


def test_the_expected_area_counts_round_trips_and_can_be_turned_off(quadrants):
    area = np.zeros(quadrants.shape[:2], bool)
    area[:16, :16] = True
    segments = lc.segment(quadrants, "grid", 4)
    ex = lc.explain(
        quadrants, lambda x: x.mean(dim=(2, 3)), segments=segments, samples=40,
        expected_mask=area,
    )  # fmt: skip
    a = from_audit(quadrants, "q.png", ex, model=identity.ModelRef("demo"), expected=area, note="n")
    assert a.source == "audit" and A.expected_ids(a) == {A.AREA}
    np.testing.assert_array_equal(A.expected_mask(a), area)
    assert a.explanation.trust.localisation is not None
    back = AF.from_json(AF.to_json(a))
    np.testing.assert_array_equal(back.expected_area, area)
    assert back.area_expected and back.source == "audit"
    np.testing.assert_array_equal(back.restored.labels, segments)
    fp = AF.fingerprint(a)
    A.set_expected(a, set())
    assert A.expected_mask(a) is None and a.explanation.trust.localisation is None
    assert AF.fingerprint(a) != fp
    assert not AF.from_json(AF.to_json(a)).area_expected


def test_progress_text_says_what_is_done_and_what_is_left():
    assert progress_text(0, 10, 0, 0, None) == (
        "Auditing: 0 of 10 images · 0 flagged · timing the first images…"
    )
    assert progress_text(4, 10, 2, 1, 3.0) == (
        "Auditing: 4 of 10 images · 2 flagged · 1 could not be read · about 18 s left"
    )
    assert progress_text(10, 10, 5, 0, 2.0) == "Auditing: 10 of 10 images · 5 flagged"


def test_an_uploaded_folder_cannot_write_outside_the_audit(tmp_path):
    write_files(tmp_path, [("run/images/a.png", b"x")])
    assert (tmp_path / "run" / "images" / "a.png").read_bytes() == b"x"
    for bad in ("../evil.png", "run/../../evil.png", "C:/evil.png"):
        with pytest.raises(lc.LimecraftError, match="unsafe path"):
            write_files(tmp_path / "d", [(bad, b"x")])
    assert not (tmp_path.parent / "evil.png").exists()


def test_audit_settings_start_from_the_audit_defaults():
    cfg = audit_config({**A.APP_CONFIG.flat(), "segmentation": "slic", "n_segments": 40})
    assert cfg.segmentation.method == "slic" and cfg.targets.compute_deltas


def test_an_uploaded_model_is_kept_with_its_audit_and_outlives_the_session(tmp_path):
    """The upload lives in the session's own folder; the audit keeps a copy (with an ONNX
    file's weights beside it), so Open in Inspect, Resume and Prove find it after the session."""
    session_dir = tmp_path / "session" / "0123abcd"
    session_dir.mkdir(parents=True)
    (session_dir / "net.onnx").write_bytes(b"model")
    (session_dir / "net.onnx.data").write_bytes(b"weights")
    folder = tmp_path / "audit"
    folder.mkdir()
    (folder / audits.OWNER_FILE).write_text("local")
    up = audits.AppAudit("upload", "z.zip", {"name": str(session_dir / "net.onnx")}, {}, "local")
    kept = audits.keep_model(folder, up, uploads=tmp_path / "session")
    shutil.rmtree(tmp_path / "session")  # the session ends
    assert kept.model_ref.name == str(folder / "model" / "net.onnx")
    assert (folder / "model" / "net.onnx").read_bytes() == b"model"
    assert (folder / "model" / "net.onnx.data").read_bytes() == b"weights"
    assert audits.read_app(folder).model_ref.name == kept.model_ref.name  # what a reload reads
    demo = audits.AppAudit("demo", "demo", {"name": "demo"}, {}, "local")
    assert audits.keep_model(folder, demo, uploads=tmp_path) is demo  # a registry name
    elsewhere = audits.AppAudit("upload", "z", {"name": str(folder / "model" / "net.onnx")}, {}, "")
    assert audits.keep_model(folder, elsewhere, uploads=tmp_path / "x") is elsewhere


def test_a_demo_audit_with_text_proposals_keeps_them_through_a_reload_and_resume():
    """Regions proposed by a detector on the Audit page, as --propose does on the command line:
    every image gets the text detector's regions beside the superpixels (the demo tags read as
    text), app.json keeps the choice, and the finished audit's plan has nothing left to do (the
    settings key holds the proposers, as the command line's does)."""
    at = audit_page()
    control = at.multiselect(key="audit_propose")
    # the audit's default: text that reads as a word (the demo's tags, read as one glyph, are
    # left out by it); the demo set's tags become regions of their own with "text"
    assert control.value == ["text-lines"]
    assert [o.split(":")[0] for o in control.options[:2]] == ["text", "text-lines"]
    at.number_input(key="audit_demo_count").set_value(N_DEMO).run()
    control.set_value(["text"]).run()
    button(at, "Run the audit").click().run()
    assert not at.exception, at.exception
    folder = Path(at.session_state["limecraft_session"].audit_loaded[0][0])
    audit = load_audit(folder)
    assert audit.complete and len(audit.rows) == N_DEMO
    names = [n for r in audit.rows for n in audit.explanation(r.key).region_names]
    assert any(n.startswith("text") for n in names), names
    app = audits.read_app(folder)
    assert app is not None and app.proposers == ("text",)
    p = audits.plan(folder, app)
    assert p.todo == [] and len(p.done) == N_DEMO  # resumes: the same key
    no_text = audits.plan(folder, audits.AppAudit(**{**vars(app), "proposers": ()}))
    assert len(no_text.todo) == N_DEMO  # without the proposer the images are not the same work


def test_without_the_detector_the_page_says_the_default_is_off(monkeypatch):
    """On Python 3.13 the text detector's package does not install: the page's default is then
    empty (superpixels alone) and a line says why and what to install."""
    monkeypatch.setitem(sys.modules, "rapidocr_onnxruntime", None)  # as if not installed
    at = audit_page()
    assert at.multiselect(key="audit_propose").value == []
    said = " ".join(c.value for c in at.caption)
    assert "The audit's default, text-lines, is off here" in said, said
    assert "pip install rapidocr-onnxruntime==1.4.4" in said


def test_app_json_from_before_proposers_reads_as_none(tmp_path):
    (tmp_path / audits.APP_FILE).write_text(json.dumps({"source": "demo", "name": "d"}))
    (tmp_path / audits.OWNER_FILE).write_text("me")
    assert audits.read_app(tmp_path).proposers == ()
    (tmp_path / audits.APP_FILE).write_text(json.dumps({"proposers": ["text", "masks", 3]}))
    assert audits.read_app(tmp_path).proposers == ("text",)  # only what runs from the image


def test_a_carrier_of_a_finding_opens_in_inspect_with_its_region_named(cli_audit, tmp_path):
    """A finding lists the images that carry its region where it is not among their strongest
    (``carriers``). The card shows "Also carried by N more images"; one picked there opens on
    Inspect with that region named as the finding's, as an exemplar does. The audit is the
    command line's, its first finding given one carrier by hand (a demo audit has no proposals)."""
    out = tmp_path / "out"
    shutil.copytree(cli_audit, out)
    doc = json.loads((out / "audit.json").read_text())
    f = doc["findings"]["discovered"][0]
    members = {r["key"] for r in f["regions"]}
    key = next(r["key"] for r in doc["rows"] if r["status"] == "ok" and r["key"] not in members)
    f["carriers"] = [*f["regions"], {"key": key, "region": 1}]
    (out / "audit.json").write_text(json.dumps(doc))
    at = open_folder(folder_files(out))
    assert "Also carried by 1 more image" in [e.label for e in at.expander]
    picker = at.selectbox(key="audit_f0_carrier")
    assert picker.value == key and picker.format_func(key) == doc_file(doc, key)
    at.button(key="audit_f0_open_carrier").click().run()
    assert not at.exception, at.exception
    a = at.session_state["limecraft_session"].app
    assert a.image_name == doc_file(doc, key) and a.source == "audit"
    assert a.restored.names[1].startswith("finding 1: ")
    assert at.selectbox(key="edit_region").value == 1


def doc_file(doc: dict, key: str) -> str:
    return next(r["file"] for r in doc["rows"] if r["key"] == key)


def folder_files(out: Path) -> list[tuple[str, bytes, str]]:
    """An audit folder as the folder uploader hands it over."""
    return [
        ("out/" + p.relative_to(out).as_posix(), p.read_bytes(), "application/octet-stream")
        for p in sorted(out.rglob("*"))
        if p.is_file()
    ]


def open_folder(files: list) -> AppTest:
    """The Audit page with "Open a finished audit" given these files, opened."""
    at = audit_page()
    at.segmented_control(key="audit_source").set_value("Open a finished audit").run()
    at.file_uploader(key="audit_open_dir").set_value(files)
    at.run()
    button(at, "Open the audit").click().run()
    assert not at.exception, at.exception
    return at
