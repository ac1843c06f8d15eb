"""What the app keeps for one browser session between script runs: one typed object.

Streamlit keeps a session's values in ``st.session_state``. The app's own values live there
under one key, as one :class:`Session`, so every page reads and changes them as typed
attributes (``session().app``, ``session().model_note``) and this class is the one list of
what a session holds. The other keys in ``st.session_state`` are widget keys: Streamlit
stores each widget's value under the key the widget was made with, and a page reads it there
(or sets it, before the widget is drawn, to change what the widget shows).
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import streamlit as st

if TYPE_CHECKING:
    from limecraft_core import ExplainConfig, MaskCache
    from limecraft_core.io.audit_folder import LoadedAudit
    from pages.lib.analysis import Analysis

#: The one key of the app's values in ``st.session_state``.
KEY = "limecraft_session"


def _remove(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


class Folder:
    """A per-session folder for uploaded model files; it goes with the session."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix="limecraft-session-")
        weakref.finalize(self, _remove, self.path)


@dataclass
class Pending:
    """Proposals waiting on Craft regions for the analyst (``pages/lib/propose_view.py``): for
    which analysis, by which proposer, the proposals (``lc.Proposal``, in the proposer's order)
    and what proposing them said."""

    analysis: str
    proposer: str
    proposals: list
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Recent:
    """One entry of the session's recent list: what the sidebar shows and ranks it by, and the
    analysis itself while it is held in memory (else it is opened from the store when picked).

    Attributes
    ----------
    id : the analysis' id in the store
    summary : its line in the list, e.g. ``chelsea · 1 region, results``
    work : how much work it holds (``analysis.work``): the list is cut by it
    image_name, image_key : its image, to find it again when the same image comes back
    model_name : its model (an uploaded model's file is kept while an entry uses it)
    stored : whether the store holds it (an analysis over the store's size limit is not)
    held : the analysis, for the entries shown as buttons and those not stored
    """

    id: str
    summary: str
    work: int
    image_name: str
    image_key: str
    model_name: str
    stored: bool = True
    held: Analysis | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The entry as saved beside the current analysis (without the analysis itself)."""
        return {
            "id": self.id,
            "summary": self.summary,
            "work": self.work,
            "image_name": self.image_name,
            "image_key": self.image_key,
            "model_name": self.model_name,
        }

    @classmethod
    def from_dict(cls, d: Any) -> Recent | None:
        """An entry read back from the store, or None when it is not one."""
        if not isinstance(d, dict):
            return None
        text = ("id", "summary", "image_name", "image_key", "model_name")
        if not all(isinstance(d.get(k), str) for k in text):
            return None
        work = d.get("work")
        if not isinstance(work, int) or isinstance(work, bool) or work < 0:
            return None
        return cls(**{k: d[k] for k in text}, work=work)


@dataclass
class Session:
    """One browser session's values (besides its widgets').

    Attributes
    ----------
    app : the analysis being worked on (None until the first run makes or reopens one)
    recent : earlier analyses of this session, newest first (saved beside the current one,
        so that a reload brings the list back)
    carried : (analysis id, image name): that analysis took its settings from the analysis of
        that image (a new image keeps the settings; the Explain page says so)
    saved : the fingerprint of ``app`` when it was last saved (None: save it at the run's end)
    view : counts the analyses that came in; widgets that show one carry it in their key
    folder : the session's folder for uploaded model files, made when first needed
    score_memo : the model outputs of the last scene scored, by the scene's key
    main_px : the main area's width in pixels, as last measured
    upload_version, model_upload_version : bumped to give an uploader a new, empty key
    edit_version : bumped to give Inspect's edit widgets new keys (after an edit is applied)
    pending_upload : an uploaded image's name and bytes, decoded by the page's next run
    clear_region_name : empty Craft's region-name input before it is drawn next
    steps_seen : the first steps on Explain were dismissed (or the first result came)
    stop_here : the explanation "Stop here" was pressed in (its key) and its sample count, read
        once by that explanation
    image_note, restore_note, watermark_note : why the last upload, restored file or watermark
        was refused, shown once where it was tried
    proposals : the proposed regions waiting on Craft regions for the analyst to accept or
        reject (:class:`Pending`: for one analysis); propose_error: why the last
        proposing or accepting failed
    model_note : the last model change's outcome, ``(kind, text)``, shown once
    restored_note : what the analysis file just restored holds, shown once
    run_note : after a reload, that the Explain then running was interrupted, shown once
    run_marked : the id of the analysis a run of this session marked as running in the store;
        the run may have ended without clearing the mark (Cancel, Stop here): the next run does
    loading : this run's "Loading the model…" line on a cold server (pages/lib/loading.py)
    audit_id : the audit this session has open
    audit_config : the audit page's settings
    audit_loaded : the last audit read, keyed by its folder and audit.json's time
    audit_thumbs : the open audit's thumbnails as data URLs, by row key
    signed_in : the token of this session's password sign-in
    agreement_before : (analysis id, mean feature agreement, K) of the explainers' comparison
        whose merge suggestion was accepted: the comparison after the merge is set beside it
    """

    app: Analysis | None = None
    recent: list[Recent] = field(default_factory=list)
    carried: tuple[str, str] | None = None
    saved: str | None = None
    view: int = 0
    folder: Folder | None = None
    score_memo: tuple[str, MaskCache] | None = None
    main_px: int = 10_000
    upload_version: int = 0
    model_upload_version: int = 0
    edit_version: int = 0
    pending_upload: tuple[str, bytes] | None = None
    clear_region_name: bool = False
    steps_seen: bool = False
    stop_here: dict[str, Any] | None = None
    image_note: str | None = None
    restore_note: str | None = None
    watermark_note: str | None = None
    proposals: Pending | None = None
    propose_error: str | None = None
    model_note: tuple[Literal["error", "success", "warning", "info"], str] | None = None
    restored_note: str | None = None
    run_note: str | None = None
    run_marked: str | None = None
    loading: Any = None
    audit_id: str | None = None
    audit_config: ExplainConfig | None = None
    audit_loaded: tuple[tuple[str, int], LoadedAudit] | None = None
    audit_thumbs: tuple[LoadedAudit, dict[str, Any]] | None = None
    signed_in: str | None = None
    agreement_before: tuple[str, float, int] | None = None

    def tmpdir(self) -> str:
        """The session's folder for uploaded model files."""
        if self.folder is None:
            self.folder = Folder()
        return self.folder.path


def session() -> Session:
    """This browser session's :class:`Session` (made on its first run)."""
    s = st.session_state.get(KEY)
    if s is None:
        s = st.session_state[KEY] = Session()
    return s


def set_value(name: str, value: Any) -> None:
    """Set one attribute of the session: a widget's ``on_click`` that records a choice."""
    setattr(session(), name, value)
