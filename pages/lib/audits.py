"""The app's audits: where they live, how one runs (and is proved) with progress and Cancel, and
how one of its images, or a finding, opens on Explain or Inspect.

An audit is a folder in the layout of :mod:`limecraft_core.io.audit_folder` (the CLI's ``--out``
folder, so either opens the other's), under ``<store folder>/audits/<id>/``, with:

- ``dataset/``: the images to audit (the demo set, or an uploaded zip, unpacked), with their
  expected masks in ``dataset/masks/`` and, for the demo set, the tags in ``dataset/tags/``;
- ``app.json``: who made it, with which model and settings (so a reload or Resume can go on);
- ``model/``: a copy of an uploaded model (the upload goes with its session; the audit stays);
- the audit's own files, written per image as it finishes.

The audit's id is in the page address (``?audit=...``), so a reload brings it back; with
sign-in on, it opens only for the account that made it. The newest :data:`MAX_AUDITS` are
kept, none longer than the saved analyses (``LIMECRAFT_STORE_MAX_AGE_H``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

import limecraft_core as lc
import serving
from limecraft_core import render
from limecraft_core.audit import AuditOutcome, Finding, run_audit, scorer_predict
from limecraft_core.io import decode_mask
from limecraft_core.io.audit_folder import AuditFolder, LoadedAudit, load_audit, settings_key
from limecraft_core.io.audit_report import EXEMPLAR_COLOUR
from limecraft_core.io.dataset import (
    audit_items,
    match_masks,
    safe_parts,
    split_dataset,
    unpack_zip,
)
from pages.lib import analysis as A
from pages.lib import propose_view, runtime, state
from pages.lib.identity import ModelRef
from pages.lib.progress import duration
from pages.lib.session import session
from pages.lib.session_liveness import session_alive
from pages.lib.store import new_id, valid_id

APP_FILE = "app.json"
OWNER_FILE = ".owner"
MAX_AUDITS = 50
DEMO_COUNT, DEMO_SEED = 24, 2026
TOP_K = 5
#: Images explained at once: their chunks share the work queue's forward passes.
IN_FLIGHT = 4
#: The app's audit defaults: the engine's audit defaults (SLIC, about 40 regions) over the
#: app's Explain defaults.
AUDIT_SETTINGS = ("segmentation", "n_segments", "samples", "early_stop", "fill")


@dataclass(frozen=True)
class AppAudit:
    """What ``app.json`` records of an audit made (or opened) in the app.

    Attributes
    ----------
    source : {"demo", "upload", "opened"}
    name : str, what the analyst knows it by (the zip's name, "demo set of 24 images")
    model : dict, the :class:`~pages.lib.identity.ModelRef` fields (name, labels, arch, normalize)
    settings : dict, the settings it runs with (``ExplainConfig.to_dict``)
    owner : str
    proposers : tuple of str, detectors whose regions every image gets beside the superpixels
        (names of :data:`limecraft_core.proposers.PROPOSERS`, ``text`` say)
    """

    source: str
    name: str
    model: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    owner: str = ""
    proposers: tuple[str, ...] = ()

    @property
    def model_ref(self) -> ModelRef:
        m = self.model
        labels = m.get("labels")
        return ModelRef(
            str(m.get("name") or "demo"),
            tuple(labels) if isinstance(labels, list) and labels else None,
            m.get("arch") if isinstance(m.get("arch"), str) else None,
            m.get("normalize") if isinstance(m.get("normalize"), str) else None,
        )

    @property
    def config(self) -> lc.ExplainConfig:
        return lc.ExplainConfig.from_dict(self.settings)


# ----------------------------------------------------------------------------- where they live


def root() -> Path:
    r = Path(state.store().folder) / "audits"
    r.mkdir(mode=0o700, parents=True, exist_ok=True)
    return r


def _evict() -> None:
    """The newest MAX_AUDITS audits are kept, none older than the store keeps analyses."""
    max_age = state.store().config.max_age_s
    now = time.time()
    entries = []
    for d in root().iterdir():
        try:
            mtime = (d / OWNER_FILE).stat().st_mtime
        except OSError:
            continue
        if now - mtime > max_age:
            shutil.rmtree(d, ignore_errors=True)
        else:
            entries.append((mtime, d))
    entries.sort()
    for _, d in entries[: max(0, len(entries) - MAX_AUDITS)]:
        shutil.rmtree(d, ignore_errors=True)


def create(app: AppAudit) -> tuple[str, Path]:
    """A new, empty audit folder of this account; returns its id and path."""
    _evict()
    aid = new_id()
    folder = root() / aid
    folder.mkdir(mode=0o700)
    (folder / OWNER_FILE).write_text(app.owner)
    write_app(folder, app)
    return aid, folder


MODEL_DIR = "model"


def keep_model(folder: Path, app: AppAudit, uploads: str | Path | None = None) -> AppAudit:
    """An audit of an uploaded model keeps its own copy of the model file (and of an ONNX
    file's weights beside it) in ``<audit>/model/``: the upload lives in the session's own
    folder (``uploads``, default ``state.tmpdir()``), gone with the session, and the audit must
    stay inspectable, resumable and provable after it. A registry name, or a file outside the
    session's uploads, is kept as it is. Returns the app record that names the copy."""
    name = str(app.model.get("name") or "")
    if not name or not os.path.isfile(name):
        return app
    home = Path(state.tmpdir() if uploads is None else uploads).resolve()
    if not Path(name).resolve().is_relative_to(home):
        return app
    dest = folder / MODEL_DIR
    shutil.copytree(Path(name).parent, dest, dirs_exist_ok=True)
    kept = AppAudit(app.source, app.name, {**app.model, "name": str(dest / Path(name).name)},
                    app.settings, app.owner)  # fmt: skip
    write_app(folder, kept)
    return kept


def write_app(folder: Path, app: AppAudit) -> None:
    doc = {"source": app.source, "name": app.name, "model": app.model, "settings": app.settings,
           "proposers": list(app.proposers)}  # fmt: skip
    (folder / APP_FILE).write_text(json.dumps(doc))


def read_app(folder: Path) -> AppAudit | None:
    try:
        d = json.loads((folder / APP_FILE).read_text())
        owner = (folder / OWNER_FILE).read_text()
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict):
        return None
    return AppAudit(
        source=str(d.get("source", "opened")),
        name=str(d.get("name", "audit"))[:300],
        model=d.get("model") if isinstance(d.get("model"), dict) else {},
        settings=d.get("settings") if isinstance(d.get("settings"), dict) else {},
        owner=owner,
        proposers=_proposers(d.get("proposers")),
    )


def _proposers(v: Any) -> tuple[str, ...]:
    """The proposers app.json names that the engine has (none in an audit from before them)."""
    ok = propose_view.offered()
    return tuple(n for n in v if n in ok) if isinstance(v, list) else ()


def folder_of(aid: str | None, owner: str) -> Path | None:
    """The folder of audit ``aid`` when it is this account's, else None."""
    if not valid_id(aid):
        return None
    folder = root() / aid
    try:
        if (folder / OWNER_FILE).read_text() != owner:
            return None
    except OSError:
        return None
    return folder


def mine(owner: str, most: int = 10) -> list[tuple[str, AppAudit, float]]:
    """This account's audits, the last changed first: (id, its app.json record, its start)."""
    out = []
    for d in root().iterdir():
        app = read_app(d) if valid_id(d.name) else None
        if app is None or app.owner != owner:
            continue
        try:
            began = (d / OWNER_FILE).stat().st_mtime  # never rewritten: a label that stays
            last = max(p.stat().st_mtime for p in (d / APP_FILE, d / "audit.json") if p.exists())
        except (OSError, ValueError):
            continue
        out.append((last, d.name, app, began))
    out.sort(key=lambda t: -t[0])
    return [(aid, app, began) for _, aid, app, began in out[:most]]


def remember(aid: str | None) -> None:
    """Make ``aid`` this session's audit: in the page address on every page (a reload on any
    page brings it back) and in the session (a page switch keeps it)."""
    if aid is None:
        session().audit_id = None
        st.query_params.pop("audit", None)
    else:
        session().audit_id = aid
        st.query_params["audit"] = aid


def keep_in_url() -> None:
    """Called on every page: the session's audit stays in the page address."""
    aid = session().audit_id
    if aid is None and valid_id(st.query_params.get("audit")):
        session().audit_id = st.query_params["audit"]
    elif aid is not None and st.query_params.get("audit") != aid:
        st.query_params["audit"] = aid


def dataset(folder: Path) -> Path:
    return folder / "dataset"


def write_demo_set(folder: Path, count: int = DEMO_COUNT, seed: int = DEMO_SEED) -> None:
    """The mixed demo set (aligned and conflict images, the drawn shapes as expected masks)."""
    from models.demo_data import write_demo_mixed

    write_demo_mixed(dataset(folder), count, seed)


def write_upload(folder: Path, data: bytes) -> None:
    """An uploaded zip of images (and masks/) as the audit's dataset."""
    unpack_zip(data, dataset(folder))
    split_dataset(dataset(folder))  # refused now, with its reason, when it holds no image


def write_files(dest: Path, files: list[tuple[str, bytes]]) -> None:
    """Files of an uploaded folder (their names are paths inside it) under ``dest``, safely."""
    for name, data in files:
        target = dest.joinpath(*safe_parts(name, "the folder"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


# ----------------------------------------------------------------------------- running


@dataclass
class Plan:
    """The images of an audit, and which are finished already (for Resume)."""

    items: list
    done: dict[str, Any]
    todo: list
    key: str
    masks: int


def plan(folder: Path, app: AppAudit) -> Plan:
    files, masks_dir = split_dataset(dataset(folder))
    masks = match_masks(files, masks_dir) if masks_dir is not None else {}
    items = audit_items(files, masks, proposers=app.proposers)
    key = settings_key(app.config, app.model, TOP_K, proposers=app.proposers)
    af = AuditFolder(folder)
    done, todo = {}, []
    for it in items:
        row = af.finished(it, key)
        if row is not None:
            done[it.key] = row
        else:
            todo.append(it)
    return Plan(items, done, todo, key, len(masks))


def scorer_for(ref: ModelRef, config: lc.ExplainConfig) -> Any:
    """The audit's scorer: on Ray Serve when configured (several images in flight), else the
    shared model behind this process's work queue (its chunks share forward passes with the
    other images in flight, and other sessions' Explains are served in turn)."""
    clf = runtime.classifier(ref, config.speed.precision)
    return serving.queued(clf, runtime.work_queue(), alive=session_alive())


def progress_text(done: int, total: int, flagged: int, errors: int, per_image: float | None) -> str:
    """The audit's progress line: images done, flagged so far, unreadable, and the time left
    from ``per_image``, the seconds an image took in this run (None before one finished)."""
    head = f"Auditing: {done} of {total} images · {flagged} flagged"
    if errors:
        head += f" · {errors} could not be read"
    if per_image is None:
        return head + " · timing the first images…"
    if done < total:
        head += f" · about {duration(per_image * (total - done))} left"
    return head


def run(folder: Path, app: AppAudit) -> bool:
    """Audit the images not finished yet, with a progress bar (images, flagged so far, time
    left) and a Cancel button. Every finished image is on disk at once; the audit's files are
    written however it ends (Cancel, a reload, a failure). Returns whether it completed."""
    p = plan(folder, app)
    af = AuditFolder(folder)
    config = app.config
    rows = dict(p.done)
    total = len(p.items)
    counts = {"flagged": sum(r.flagged for r in rows.values()), "errors": 0}
    bar = st.progress(len(rows) / max(1, total), text="Auditing: starting…")
    st.button("Cancel the audit", key="audit_cancel", help="Stops after the images in flight")
    t0 = time.perf_counter()
    made = [0]
    inputs = {"model": app.model.get("name"), "labels": None, "arch": app.model.get("arch")}

    def save(o: AuditOutcome) -> None:
        af.write(o, p.key, top_k=TOP_K, inputs=inputs)

    def done(o: AuditOutcome) -> None:
        rows[o.row.key] = o.row
        made[0] += 1
        counts["flagged"] += o.row.flagged
        counts["errors"] += not o.row.ok

    def tick() -> None:  # where Streamlit stops this run when Cancel is pressed
        per_image = (time.perf_counter() - t0) / made[0] if made[0] else None
        text = progress_text(len(rows), total, counts["flagged"], counts["errors"], per_image)
        bar.progress(len(rows) / max(1, total), text=text)

    complete = False
    try:
        if p.todo:
            scorer = scorer_for(app.model_ref, config)
            run_audit(p.todo, scorer, config, done, in_flight=IN_FLIGHT, save=save, tick=tick)
        complete = True
    finally:  # also when Cancel or a reload stops the run here
        if not complete:
            write_findings(folder, app, p, rows, False, time.perf_counter() - t0)
    prove(folder, app, p, rows, bar, time.perf_counter() - t0)
    bar.empty()
    return complete


PROVE_TEXT = (
    "Proving the top findings: hiding each one's region and pasting it into clean images of "
    "other classes, against a same-area null"
)


def prover(app: AppAudit, bar: Any = None) -> Any:
    """The prove phase's class probabilities of one image, through the audit's scorer (loaded
    on first use), each pass counted on ``bar`` (a Cancel stops the run there)."""
    held: dict[str, Any] = {}
    passes = [0]

    def predict(image: np.ndarray) -> np.ndarray:
        if "predict" not in held:
            held["predict"] = scorer_predict(scorer_for(app.model_ref, app.config))
        passes[0] += 1
        if bar is not None:
            bar.progress(1.0, text=f"{PROVE_TEXT}: {passes[0]} model passes…")
        return held["predict"](image)

    return predict


def prove(
    folder: Path,
    app: AppAudit,
    p: Plan | None = None,
    rows: dict[str, Any] | None = None,
    bar: Any = None,
    seconds: float | None = None,
) -> None:
    """The prove phase of a complete audit, as the command line runs it: the findings written
    with their top ones proved (:meth:`AuditFolder.finish` with ``predict``). A Cancel or a
    reload while it proves leaves the findings written unproved (the page offers to prove
    them again)."""
    p = plan(folder, app) if p is None else p
    if bar is None:
        bar = st.progress(1.0, text=f"{PROVE_TEXT}…")
    proved = False
    try:
        write_findings(folder, app, p, rows, True, seconds, predict=prover(app, bar))
        proved = True
    finally:
        if not proved:  # stopped while proving: the findings of every image, unproved
            write_findings(folder, app, p, rows, True, seconds)


def write_findings(
    folder: Path,
    app: AppAudit,
    p: Plan,
    rows: dict[str, Any] | None = None,
    complete: bool = False,
    seconds: float | None = None,
    predict: Any = None,
) -> None:
    """Write the audit's files from its finished images (``p.done`` unless ``rows`` is given).

    A stopped run writes them as it unwinds, but Streamlit starts the next run at once (fast
    reruns) beside it, so the page also writes them from what is on disk when it finds the
    audit stopped.
    """
    rows = p.done if rows is None else rows
    ordered = [rows[it.key] for it in p.items if it.key in rows]
    AuditFolder(folder).finish(
        ordered,
        config=app.config,
        key=p.key,
        model=app.model,
        source={"images": app.name, "count": len(p.items), "with_masks": p.masks},
        complete=complete,
        run={"in_flight": IN_FLIGHT, **({"seconds": round(seconds, 2)} if seconds else {})},
        predict=predict,
    )


# ----------------------------------------------------------------------------- reading


def loaded(folder: Path) -> LoadedAudit:
    """The audit in ``folder`` (cached on its audit.json's time, so browsing reads it once)."""
    f = folder / "audit.json"
    stamp = f.stat().st_mtime_ns if f.exists() else 0
    held = session().audit_loaded
    if held is not None and held[0] == (str(folder), stamp):
        return held[1]
    result = load_audit(folder)
    session().audit_loaded = ((str(folder), stamp), result)
    return result


def tag_of(folder: Path, file: str) -> np.ndarray | None:
    """The demo tag of an image of the demo set (``dataset/tags/``), for Craft's walkthrough."""
    p = dataset(folder) / "tags" / file
    try:
        return decode_mask(p.read_bytes(), file) != 0 if p.is_file() else None
    except (OSError, lc.LimecraftError):
        return None


def from_audit(
    image: np.ndarray,
    name: str,
    ex: lc.Explanation,
    *,
    model: ModelRef,
    expected: np.ndarray | None = None,
    tag_mask: np.ndarray | None = None,
    note: str = "",
) -> A.Analysis:
    """One image of an audit as a new analysis: its regions and explanation as the audit made
    them, and its expected mask as the expected area (so Explain and Trust measure against it
    at once)."""
    a = A.new(image, name, tag_mask=tag_mask, note=note, source="audit")
    a.model_name, a.model_labels = model.name, list(model.labels) if model.labels else None
    a.model_arch, a.model_normalize = model.arch, model.normalize
    a.expected_area = None if expected is None else np.asarray(expected, bool).copy()
    A.restore_explanation(a, ex)
    a.explanation = A.with_expected(a, ex)
    return a


def finding_name(i: int, f: Finding) -> str:
    """A finding's region as Inspect names it: ``finding 1: outside, 'star'``."""
    return f"finding {i + 1}: {f.kind}, '{f.classes[0][0]}'" if f.classes else f"finding {i + 1}"


def finding_region(f: Finding, key: str) -> int:
    """The finding's region id in image ``key`` (its saved segments' label), a carrier's too."""
    regions = {**dict(f.carriers), **dict(f.regions)}
    if key not in regions:
        raise lc.LimecraftError(f"image {key!r} is not one of the finding's images")
    return int(regions[key])


def target_class(audit: LoadedAudit, f: Finding) -> int:
    """The finding's suspect class: the one its proof followed, else its main class's index."""
    if f.intervention is not None:
        return int(f.intervention.target_class)
    label = f.classes[0][0] if f.classes else None
    keys = [k for k, _ in f.regions if audit.row(k).label == label] or [f.medoid]
    return int(audit.row(keys[0]).predicted)


def exemplars(audit: LoadedAudit, f: Finding, keys: list[str] | None = None) -> list:
    """The finding's exemplars (the medoid first; ``keys``: these images) with its region
    outlined, as audit.html shows them: [(image key, (H, W, 3) uint8 picture)]; one whose files
    cannot be read, or whose region is not in its saved segments, is left out."""
    out = []
    for key in f.exemplars if keys is None else keys:
        try:
            image, segments = audit.folder.regions_of(key)
            mask = segments == finding_region(f, key)
        except lc.LimecraftError:
            continue
        if mask.shape == image.shape[:2] and mask.any():
            out.append((key, render.outline_masks(image, [mask], [EXEMPLAR_COLOUR], 0.2)))
    return out


def open_image(
    folder: Path,
    audit: LoadedAudit,
    app: AppAudit | None,
    key: str,
    finding: int | None = None,
) -> int | None:
    """Make one audited image the session's analysis: the audit's regions and explanation, its
    expected mask as the expected area, and the model it was audited with.

    With ``finding`` (an index into ``audit.findings.discovered``), that finding's region in
    the image is named in the map (``finding 1: …``: named regions come first on Inspect and
    Explain) and its id is returned.
    """
    row = audit.row(key)
    ex = audit.explanation(key)
    ref = app.model_ref if app is not None else ModelRef(str(audit.model.get("name") or "demo"))
    note = f"from the audit: {row.reason}" if row.flagged else "from the audit: not flagged"
    rid = None
    if finding is not None:
        f = audit.findings.discovered[finding]
        rid = finding_region(f, key)
        if not 0 <= rid < ex.n_regions:
            raise lc.LimecraftError(f"image {key!r}: its saved regions do not hold region {rid}")
        names = list(ex.region_names)
        names[rid] = finding_name(finding, f)
        ex = replace(ex, region_names=tuple(names))
        note = f"from the audit: {finding_name(finding, f)}"
    a = from_audit(
        audit.image(key),
        row.file,
        ex,
        model=ref,
        expected=audit.expected(key),
        tag_mask=tag_of(folder, row.file),
        note=note,
    )
    state.adopt(a)
    return rid


def paste_from(folder: Path, audit: LoadedAudit, app: AppAudit | None, finding: int) -> None:
    """Start Inspect's paste from a finding: its medoid opened with the finding's region named,
    that region chosen as the one to paste and the suspect class as the class to follow."""
    f = audit.findings.discovered[finding]
    rid = open_image(folder, audit, app, f.medoid, finding)
    # after adopt: a new analysis clears its widgets' state (state._ANALYSIS_WIDGETS)
    st.session_state.update(edit_region=rid, edit_follow=target_class(audit, f))


def truth_template(audit: LoadedAudit) -> str:
    """A truth CSV to fill in: every audited image, ``artifact`` 0 (mark the 1s)."""
    return "file,artifact\n" + "".join(f"{r.file},0\n" for r in audit.rows)


def score_truth(folder: Path, data: bytes) -> None:
    """Score the audit's findings against the analyst's truth CSV (``data``, as uploaded) and
    keep it with the audit (:meth:`AuditFolder.score_truth`); a reload reads the scores back.

    Raises
    ------
    LimecraftError
        If the file is not UTF-8 text or does not fit the audit; the audit is left as it was.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise lc.LimecraftError(
            "it is not UTF-8 text: save it as CSV (UTF-8) with the columns file,artifact"
        ) from None
    AuditFolder(folder, create=False).score_truth(text, name="your truth CSV")


def share(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.0%}"
