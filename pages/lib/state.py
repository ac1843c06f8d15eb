"""Session glue and caches of the LIMEcraft app (the sidebar is in sidebar.py, pictures in display.py).

The session's work is one :class:`~pages.lib.analysis.Analysis` (``session().app``),
changed through the named actions in :mod:`pages.lib.analysis`. It is saved to the
:mod:`pages.lib.store` after every script run that changed it, under the id in the page's URL
(``?a=...``), so a reload brings it back. The work is done by the engine's pure functions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import streamlit as st

import limecraft_core as lc
import serving
from limecraft_core import render
from models import registry
from models.samples import load_sample, sample_names
from pages.lib import analysis as A
from pages.lib import analysis_file as AF
from pages.lib import auth
from pages.lib.analysis import (  # noqa: F401  (re-exported for pages and tests)
    REGION_COLOURS,
    Analysis,
    HandRegion,
    SegSettings,
    next_colour,
)
from pages.lib.display import VERDICT_TEXT, error, for_drawing, md, named_reason
from pages.lib.progress import ExplainProgress
from pages.lib.session import Recent, session, set_value
from pages.lib.session_liveness import session_alive
from pages.lib.store import Store, StoreConfig, new_id, valid_id

AppState = Analysis  # the pages' name for the session's value
UPLOAD_TYPES = ["png", "jpg", "jpeg", "webp", "bmp", "tif", "tiff", "gif"]
RECENT = 5  # analyses shown as buttons under the sidebar's "Recent analyses"
RECENT_KEPT = 30  # analyses the list remembers in all; those not shown are under "More"
_log = logging.getLogger("limecraft")


def with_regions(image: np.ndarray, hand: list[HandRegion], alpha: float = 0.35) -> np.ndarray:
    """The image with each handcrafted region tinted and outlined in its colour."""
    return render.outline_masks(
        image, [h.mask for h in hand], [A.colour_rgb(h.colour) for h in hand], alpha
    )


# ----------------------------------------------------------------------------- the session


def store() -> Store:
    """The saved-analysis store (``LIMECRAFT_STORE_*``), one per setting in this process."""
    return _store(StoreConfig.from_env())


@st.cache_resource
def _store(config: StoreConfig) -> Store:
    return Store(config)


def owner() -> str:
    """The account this session's analyses belong to."""
    return auth.owner()


def tmpdir() -> str:
    return session().tmpdir()


def _sample_analysis(name: str, like: Analysis | None = None) -> Analysis:
    sample = load_sample(name)
    return A.new(
        sample.image,
        sample.name,
        tag_mask=sample.tag_mask,
        note=sample.note,
        source="gallery",
        like=like,
    )


def _fresh() -> Analysis:
    a = _sample_analysis(sample_names()[0])
    a.model_name = registry.DEFAULT_MODEL
    a.id = new_id()
    return a


def _usable_model(a: Analysis) -> None:
    """A reopened analysis whose uploaded model file is gone falls back to the default model."""
    known = {m.name for m in registry.list_models()}
    if a.model_name not in known and not os.path.isfile(a.model_name):
        a.message = (
            f"The model this analysis used ({md(os.path.basename(a.model_name))}) is no longer "
            f"here; it uses {registry.DEFAULT_MODEL} now. Upload the model again to use it."
        )
        A.set_model(a, registry.DEFAULT_MODEL, None)


def _open_from_url() -> tuple[Analysis, list[Recent]]:
    """The analysis named in the URL when this account may open it, with the recent list saved
    beside it; else a fresh one and an empty list."""
    aid = st.query_params.get("a")
    if not aid:
        return _fresh(), []
    who = owner()
    got = store().load_with_recent(aid, who) if valid_id(aid) else None
    if got is None:
        a = _fresh()
        if store().exists_for_other(aid, who):
            _log.warning("refused to open an analysis of another account")
            a.message = "That analysis link belongs to another account; a new analysis is started."
        else:
            a.message = (
                "That analysis is not saved here (it may have expired); a new one is started."
            )
        return a, []
    d, saved_recent = got
    try:
        a = _reopened(d, aid)
    except lc.LimecraftError as e:
        a = _fresh()
        a.message = f"That saved analysis could not be opened ({md(e)}); a new one is started."
        return a, []
    session().run_note = _interrupted_note(a, _take_running(aid, who))
    rec = [r for r in map(Recent.from_dict, saved_recent) if r is not None and valid_id(r.id)]
    seen = {aid}
    rec = [r for r in rec if not (r.id in seen or seen.add(r.id))]
    return a, kept(rec)


def _reopened(d: dict, aid: str) -> Analysis:
    """A saved analysis opened again under its id (LimecraftError if it cannot be read)."""
    a = AF.from_dict(d)
    a.id = aid
    _usable_model(a)
    return a


def get() -> Analysis:
    """This session's analysis: the one in the URL (after a reload), else a fresh demo one."""
    ses = session()
    if ses.app is None:
        ses.app, ses.recent = _open_from_url()
        if "r" in st.query_params:  # an older address's recent list: the store keeps it now
            del st.query_params["r"]
        ses.saved = AF.fingerprint(ses.app)
        if st.query_params.get("a") != ses.app.id:
            ses.saved = None  # a new id: save it at the end of this run
    a = ses.app
    if ses.run_marked:  # a run of this live session ended without clearing its mark: it is over
        _mark_running(ses.run_marked, None)
    a.tmpdir = tmpdir()
    if st.query_params.get("a") != a.id:
        st.query_params["a"] = a.id
    return a


def save(a: Analysis | None = None) -> bool:
    """Save the session's analysis when it changed since the last save (call after each run),
    with the session's recent list beside it (so that a reload brings the list back, on any
    page: Streamlit's page navigation drops the address' other parameters). Returns whether
    the store holds it now."""
    ses = session()
    a = a if a is not None else ses.app
    if a is None or not a.id:
        return False
    fp = AF.fingerprint(a)
    if ses.saved == fp:
        return True
    rec = [r.to_dict() for r in ses.recent if r.stored and r.id != a.id]
    try:
        ok = store().save(a.id, owner(), AF.to_json(a), rec)
    except OSError as e:
        _log.warning("could not save the analysis: %s", e)
        ok = False
    if ok:
        ses.saved = fp
    return ok


#: What the analyst pressed, by the run's progress label, for the note after a reload.
_RUN_NAMES = {
    "Explaining": "Explain",
    "Explaining the edited image": "Explain of the edited image",
    "Comparing": "comparison with automatic superpixels",
    "Checking": "trust check",
}


def _mark_running(aid: str, what: str | None) -> None:
    """Mark analysis ``aid`` as running ``what`` (a progress label) in the store, or, with None,
    as not running. A reload in the middle of the run finds the mark (:func:`_open_from_url`)."""
    session().run_marked = aid if what is not None else None
    try:
        store().mark_running(aid, owner(), what)
    except OSError as e:  # the run goes on; only the note after a reload is lost
        _log.warning("could not mark the analysis as running: %s", e)


def _take_running(aid: str, who: str) -> str | None:
    try:
        return store().take_running(aid, who)
    except OSError:
        return None


def _interrupted_note(a: Analysis, what: str | None) -> str | None:
    """After a reload: the run the page was doing when it was reloaded did not finish."""
    if what is None:
        return None
    name = _RUN_NAMES.get(what, "run")
    kept = (
        "the previous result is shown."
        if a.explanation is not None
        else "there was no earlier result to show."
    )
    return f"The last {name} was interrupted by the reload of the page and did not finish: {kept}"


def wkey(name: str) -> str:
    """The key of a widget that shows the analysis: it changes when another analysis comes in,
    so the widget starts from the new analysis' value (a browser keeps a widget's old value
    under the same key, and a widget made without its value would fall back to its minimum)."""
    return f"{name}-{session().view}"


def recent() -> list[Recent]:
    """Earlier analyses of this session, newest first (kept when the image was replaced)."""
    return session().recent


def _cut(rec: list[Recent], most: int) -> list[Recent]:
    """``rec`` (newest first) cut to ``most`` entries: the entry with the least work goes
    first, the oldest of those with as little, and never the newest (the one just left).
    So a burst of uploads, explained or not, never pushes out an analysis with more work."""
    rec = list(rec)
    while len(rec) > max(most, 1):
        least = min(r.work for r in rec[1:])
        rec.pop(max(i for i in range(1, len(rec)) if rec[i].work == least))
    return rec


def kept(rec: list[Recent], most: int = RECENT_KEPT) -> list[Recent]:
    """The entries the recent list remembers (newest first); see :func:`_cut`."""
    return _cut(rec, most)


def shown(rec: list[Recent], most: int = RECENT) -> tuple[list[Recent], list[Recent]]:
    """The sidebar's split of the list: the ``most`` entries shown as buttons (see
    :func:`_cut`: more work outranks less) and the rest, under "More"; both newest first."""
    top = _cut(rec, most)
    ids = {r.id for r in top}
    return top, [r for r in rec if r.id not in ids]


def _entry(a: Analysis, stored: bool) -> Recent:
    return Recent(
        id=a.id,
        summary=A.summary(a),
        work=A.work(a),
        image_name=a.image_name,
        image_key=a.image_key,
        model_name=a.model_name,
        stored=stored,
        held=a,
    )


def _opened(r: Recent) -> Analysis | None:
    """The analysis of a recent entry: held in memory, else read from the store (None when
    it is gone: expired, or unreadable now)."""
    if r.held is not None:
        return r.held
    d = store().load(r.id, owner())
    if d is None:
        return None
    try:
        return _reopened(d, r.id)
    except lc.LimecraftError:
        return None


def _switch(new: Analysis) -> None:
    """Make ``new`` the session's analysis; the current one goes to the recent list if it holds
    work. Widgets that show the analysis are set to its values (they would keep the old ones)."""
    ses = session()
    cur = ses.app
    rec = [r for r in recent() if r.id != new.id and (cur is None or r.id != cur.id)]
    # An uploaded image is kept even without work: it cannot be picked again from the gallery.
    if cur is not None and cur.id != new.id and (A.has_work(cur) or cur.source == "upload"):
        rec.insert(0, _entry(cur, stored=save(cur)))
    rec = kept(rec)
    top, _ = shown(rec)
    # Memory: the entries shown as buttons keep their analysis; the others are read from the
    # store when picked (one the store could not take is held, or it would be lost).
    held = {r.id for r in top}
    ses.recent = [r if r.id in held or not r.stored else replace(r, held=None) for r in rec]
    new.canvas_version = (cur.canvas_version + 1) if cur is not None else 0
    ses.app = new
    ses.view += 1
    ses.saved = None  # saved at the end of this run, with the new recent list beside it
    st.query_params["a"] = new.id
    _show_analysis(new)


#: Widgets whose values belong to one analysis: dropped when another analysis comes in.
_ANALYSIS_WIDGETS = re.compile(
    r"^(set_|tr_|edit_|e_|hname-|hinner-|res_|edited_|trust_|merge_name$|split_pick$|pick$|cfg_)"
)


def _show_analysis(a: Analysis) -> None:
    for key in list(st.session_state.keys()):
        if isinstance(key, str) and _ANALYSIS_WIDGETS.match(key):
            del st.session_state[key]


def replace_image(
    image: np.ndarray, name: str, tag_mask: np.ndarray | None, note: str, source: str
) -> None:
    """A new image. The current analysis is kept in the recent list when it holds work, and an
    earlier analysis of the same image comes back instead of an empty one."""
    cur = get()
    key = A.new(image, name).image_key
    entry = next((r for r in recent() if r.image_key == key and r.image_name == name), None)
    back = _opened(entry) if entry is not None else None
    if back is None:
        # A new image keeps the settings of the one before (analysts tune once, then compare
        # images under the same settings); the Explain page says so when they are not the
        # defaults, and offers "Back to the defaults" (docs/app.md, "A new image").
        back = A.new(image, name, tag_mask=tag_mask, note=note, source=source, like=cur)
        back.id = new_id()
        if not_defaults(back):
            session().carried = (back.id, cur.image_name)
    _switch(back)


def not_defaults(a: Analysis) -> bool:
    """Whether ``a``'s Explain settings differ from the app's defaults."""
    return bool(a.config.changed())


def defaults_again() -> None:
    """Back to the defaults: the app's Explain settings for the session's analysis. The
    settings widgets get new keys (the session's ``view``), so they show the defaults rather
    than their old values."""
    get().config = A.APP_CONFIG
    ses = session()
    ses.carried = None
    ses.view += 1
    for key in [k for k in st.session_state if isinstance(k, str) and k.startswith("set_")]:
        del st.session_state[key]


def open_recent(aid: str) -> None:
    """Return to an analysis of the recent list (one gone from the store leaves the list)."""
    found = next((r for r in recent() if r.id == aid), None)
    if found is None:
        return
    a = _opened(found)
    if a is None:
        session().recent = [r for r in recent() if r.id != aid]
        get().message = (
            f"{md(found.summary)} is no longer saved here (it may have expired); it left the "
            "list of recent analyses."
        )
        return
    _switch(a)


def start_fresh() -> None:
    """A new, empty analysis of the current image, on purpose (the current one goes to recent)."""
    cur = get()
    a = A.new(cur.image, cur.image_name, tag_mask=cur.tag_mask, note=cur.note, source=cur.source)
    A.set_model(a, cur.model_name, cur.model_labels, cur.model_arch, cur.model_normalize)
    a.id = new_id()
    _switch(a)


def adopt(a: Analysis) -> None:
    """A restored analysis file becomes this session's analysis (a new id: it is a copy)."""
    a.id = new_id()
    _usable_model(a)
    _switch(a)


# ----------------------------------------------------------------------------- caches


def classifier(
    ref: A.ModelRef | Analysis | str, precision: str = "auto"
) -> lc.Classifier | serving.RemoteScorer:
    """The analysis's model (its name, uploaded labels and architecture; or a registry name),
    loaded once per process and precision and shared by all sessions (inference is
    thread-safe)."""
    if isinstance(ref, str):
        ref = A.ModelRef(ref)
    return _classifier(ref if isinstance(ref, A.ModelRef) else A.model_ref(ref), precision)


@st.cache_resource(show_spinner="Loading the model…")
def _classifier(ref: A.ModelRef, precision: str) -> lc.Classifier | serving.RemoteScorer:
    """On the Ray Serve cluster when ``LIMECRAFT_RAY_ADDRESS`` is set, else local.

    bf16 on a CPU also uses channels_last, the combination that is about 2x faster there."""
    cl = True if precision == "bf16" else None
    return serving.load_scorer(
        ref.name,
        labels=list(ref.labels) if ref.labels else None,
        arch=ref.arch,
        precision=precision,
        channels_last=cl,
        **A.normalisation(ref.normalize),
    )


@st.cache_resource
def work_queue() -> serving.WorkQueue:
    """One bounded queue in front of the device for every session of this process: concurrent
    Explains are served in turn and combined into shared forward passes."""
    batch = os.environ.get("LIMECRAFT_QUEUE_MAX_BATCH")  # images per combined pass
    return serving.WorkQueue(
        max_jobs=int(os.environ.get("LIMECRAFT_MAX_QUEUED", "64")),
        max_batch=int(batch) if batch else None,
    )


class _LRU:
    """A small, thread-safe, bounded cache shared by all sessions (least recently used out)."""

    def __init__(self, size: int) -> None:
        self.size, self.lock, self.items = size, threading.Lock(), OrderedDict()

    def get(self, key: str):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        return None

    def put(self, key: str, value) -> None:
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)


@st.cache_resource
def _regions_cache() -> _LRU:
    return _LRU(32)


def _prepare(
    image: np.ndarray,
    seg: lc.config.SegmentationConfig,
    masks: tuple[np.ndarray, ...],
    names: tuple[str, ...],
    progress: Callable[[float, str], None] | None = None,
) -> lc.Regions:
    """The engine's region stage, cached on its inputs. Not ``st.cache_data``: that would
    replay the progress bar's updates, which belong to the run that made the regions."""
    key = "|".join([*(A.digest(a) for a in (image, *masks)), repr((seg, names))])
    hit = _regions_cache().get(key)
    if hit is not None:
        return hit
    regions, _ = lc.prepare_regions(
        lc._validate.as_float_image(image),
        seg,
        regions_mask=list(masks) if masks else None,
        names=list(names) if masks else None,
        progress=progress,
    )
    _regions_cache().put(key, regions)
    return regions


def regions(
    s: Analysis,
    *,
    handcrafted: bool = True,
    progress: Callable[[float, str], None] | None = None,
) -> lc.Regions:
    """The current regions: automatic superpixels, handcrafted regions, and the merges.

    They are made by the engine's own region stage, so an explanation records the segmentation
    that really made them (``config.segmentation``). ``progress(fraction, message)`` hears how
    a segmentation that is not cached yet advances."""
    if handcrafted and s.restored is not None:
        return s.restored
    hand = s.hand if handcrafted else []
    r = _prepare(
        s.image,
        A.segmentation_config(s, handcrafted=handcrafted),
        tuple(h.mask for h in hand),
        tuple(h.name for h in hand),
        progress,
    )
    if handcrafted:
        for keys, name, _ in s.merges:
            r = lc.merge_by_keys(r, keys, name)
    return r


@st.cache_resource
def explanation_cache() -> _LRU:
    """Explanations keyed on every input, shared by all sessions."""
    return _LRU(32)


def _digest(image: np.ndarray, reg: lc.Regions, model: A.ModelRef, *parts: object) -> str:
    """A hash of the image, the regions' atoms, the model and any JSON-able parts."""
    h = hashlib.sha256()
    for a in (image, reg.atoms):
        h.update(str(a.shape).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(repr(model).encode())
    for part in parts:
        h.update(json.dumps(part, sort_keys=True, default=str).encode())
    return h.hexdigest()


def explanation_key(
    image: np.ndarray, reg: lc.Regions, model: A.ModelRef, config: lc.ExplainConfig
) -> str:
    return _digest(image, reg, model, config.to_dict(), [reg.keys, reg.names, reg.source])


def scene_key(
    image: np.ndarray, reg: lc.Regions, model: A.ModelRef, config: lc.ExplainConfig
) -> str:
    """What the model's score of a mask depends on: the image, the regions, the model, the fill
    and the speed settings (not the sampling, surrogate or trust settings)."""
    d = config.to_dict()
    return _digest(image, reg, model, [d["fill"], d["speed"]], [reg.keys, reg.source])


def score_memo(key: str) -> lc.MaskCache:
    """This session's model scores for the scene ``key``, kept across runs, so that an Explain
    stopped half-way (Stop here, Cancel, a reload of the page) does not score its masks again.
    One scene is kept: a new one replaces it."""
    ses = session()
    held = ses.score_memo
    if held is None or held[0] != key:
        held = ses.score_memo = (key, lc.MaskCache())
    return held[1]


LIVE_TOP_K = 5  # regions tinted on each side in the live result


def live_result(
    slot: Any,
    image: np.ndarray,
    reg: lc.Regions,
    label: str,
    p: lc.Partial,
    stop_key: str | None,
) -> None:
    """The explanation so far, while it is computed: the top regions on the image, the verdict
    as it firms up, and (for Explain) a button that keeps this result."""
    over = render.weight_overlay(
        *for_drawing(image, reg.labels),
        p.weights,
        k=min(LIVE_TOP_K, reg.n_regions),
        min_share=render.MIN_SHARE,
        long_side=480,
    )
    stb = p.stability
    if stb is None:
        verdict = ":gray-badge[not judged yet] (from 200 samples on)"
    else:  # the conclusion, then its detail on a line of its own (as the result shows them)
        conclusion, detail = lc.trust.split_verdict(stb.reason)
        why = named_reason(conclusion, reg.names).split(": ", 1)[-1]
        when = "so far" if stb.samples in (None, p.samples) else f"at {stb.samples} samples"
        verdict = f"{VERDICT_TEXT[stb.verdict]} {when}: {md(why)}"
        if detail:
            verdict += f"  \nThe detail: {md(named_reason(detail, reg.names))}."
    with slot.container(border=True):
        st.markdown(
            f"**Live result for {md(label)}** · {p.samples} of up to {p.allowed} samples  \n"
            + verdict
        )
        st.image(
            over,
            caption=f"top {LIVE_TOP_K} regions for (green) and against (red) the class, "
            "refined as samples come in",
            width="stretch",
        )
        if p.final:
            st.caption("Sampling is done: scoring each region hidden alone and kept alone…")
        elif stop_key is not None:
            st.button(
                f"Stop here and keep this result ({p.samples} samples)",
                key=f"stop_here_{p.samples}",
                on_click=set_value,
                args=("stop_here", {"key": stop_key, "samples": p.samples}),
                help="Finishes the explanation with the samples scored so far; nothing is "
                "scored twice",
            )


def stop_here_samples(
    image: np.ndarray, reg: lc.Regions, model: A.ModelRef, config: lc.ExplainConfig
) -> int | None:
    """The sample count the analyst chose with "Stop here" for this very Explain, or None."""
    ses = session()
    asked, ses.stop_here = ses.stop_here, None
    if asked and asked["key"] == explanation_key(image, reg, model, config):
        return int(asked["samples"])
    return None


def run_explain(
    image: np.ndarray,
    reg: lc.Regions,
    model: A.ModelRef,
    config: lc.ExplainConfig,
    status_label: str = "Explaining",
    *,
    live: bool = False,
) -> lc.Explanation:
    """Explain with a progress bar (per batch, with time left), a Cancel button and, with
    ``live``, the result so far after each step, with a "Stop here" button."""
    key = explanation_key(image, reg, model, config)
    cached = explanation_cache().get(key)
    if cached is not None:
        return cached
    clf = classifier(model, config.speed.precision)
    bar = st.progress(0.0, text=f"{status_label}: starting…")
    cancel_slot = st.empty()
    cancel_slot.button("Cancel", key=f"cancel-{status_label}", help="Stops after the current batch")
    live_slot = st.empty() if live else None
    line = ExplainProgress(status_label)

    def progress(done: int, total: int) -> None:
        line.passes(done, total)
        # Each update is also where Streamlit stops this run when the user presses Cancel.
        bar.progress(line.fraction, text=line.text())

    def waiting(q: serving.QueueStatus) -> None:
        before = line.text()
        line.waiting(q.position)
        if line.text() != before:
            bar.progress(line.fraction, text=line.text())

    def partial(p: lc.Partial) -> None:
        live_result(live_slot, image, reg, clf.label(p.target), p, key)

    # only local models go through this process's work queue (a Ray Serve deployment batches
    # across sessions itself)
    alive = session_alive()
    runner = serving.queued(clf, work_queue(), alive=alive, on_wait=waiting)
    # Marked as running in the store until it ends, so that a reload (F5) in the middle of it
    # says so. A page that is closed or reloaded leaves the mark; Cancel or Stop here, which
    # rerun the script, leave it to the session's next run to clear (get()).
    app = session().app
    if app is not None:
        _mark_running(app.id, status_label)
    try:
        ex = lc.explain(
            image,
            runner,
            segments=reg,
            config=config,
            progress=progress,
            partial=partial if live else None,
            memo=score_memo(scene_key(image, reg, model, config)),
        )
    except (lc.LimecraftError, lc.ModelError):
        if app is not None and alive():  # it failed, and the page says so: not interrupted
            _mark_running(app.id, None)
        raise
    if app is not None:
        _mark_running(app.id, None)
    bar.empty()
    cancel_slot.empty()
    if live_slot is not None:
        live_slot.empty()
    explanation_cache().put(key, ex)
    return ex


# ----------------------------------------------------------------------------- model calls


def ready_classifier(s: Analysis) -> lc.Classifier | None:
    """The chosen model, or None with an explanation on the page of why it cannot run."""
    if s.model_name in registry.zoo.ZOO or s.model_name in registry.BUILT_IN:
        info = registry.model_info(s.model_name)
        if not info.ready:
            error(
                f"{s.model_name} cannot run here: {info.reason}. Choose the demo model, or "
                "upload your own model file."
            )
            return None
    try:
        return classifier(s)
    except (lc.LimecraftError, lc.ModelError) as e:
        error(f"{A.model_ref(s).display_name} cannot run: {e}")
        return None


@st.cache_data(max_entries=64, show_spinner=False)
def _predict(model: A.ModelRef, image: np.ndarray) -> np.ndarray:
    return render.softmax(classifier(model).predict(image))


def predict(s: Analysis, image: np.ndarray) -> np.ndarray | None:
    """Class probabilities for an image, or None (with a message) when the model fails."""
    if ready_classifier(s) is None:
        return None
    try:
        return _predict(A.model_ref(s), image)
    except (lc.LimecraftError, lc.ModelError) as e:
        error(f"The model failed on this image: {e}")
        return None


def model_fit_warning(s: Analysis) -> str | None:
    """A plain warning when the model cannot mean anything for this image (see
    :func:`models.registry.fit_warning`)."""
    return registry.fit_warning(s.model_name, s.image.shape)


def class_label(s: Analysis, index: int) -> str:
    return classifier(s).label(index)
