"""The session's analysis: opened, saved, replaced, and the recent list (the app's session glue).

The session's work is one :class:`~pages.lib.analysis.Analysis` (``session().app``),
changed through the named actions in :mod:`pages.lib.analysis`. It is saved to the
:mod:`pages.lib.store` after every script run that changed it, under the id in the page's URL
(``?a=...``), so a reload brings it back. The model is in :mod:`pages.lib.runtime`, the caches
in :mod:`pages.lib.caches`, and an Explain with its progress in :mod:`pages.lib.explain_run`.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import replace

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core import render
from models import registry
from models.samples import load_sample, sample_names
from pages.lib import analysis as A
from pages.lib import analysis_file as AF
from pages.lib import auth
from pages.lib.analysis import Analysis, HandRegion
from pages.lib.display import md
from pages.lib.session import Recent, session
from pages.lib.store import Store, StoreConfig, new_id, valid_id

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
        mark_running(ses.run_marked, None)
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


def mark_running(aid: str, what: str | None) -> None:
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
