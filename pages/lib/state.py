"""Session state, caches and the shared sidebar of the LIMEcraft app.

Everything here is thin glue between Streamlit and ``limecraft_core`` / ``models``: the work is
done by the engine's pure functions.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import streamlit as st
from PIL import Image

import limecraft_core as lc
from limecraft_core.io import decode_image
from models import registry
from models.samples import load_sample, sample_names

DISPLAY_WIDTH = 560  # px sent to the browser for the main pictures
UPLOAD_TYPES = ["png", "jpg", "jpeg", "webp", "bmp", "tif", "tiff", "gif"]
# Streamlit's named colours (usable in labels as :name[text]) and how they are drawn.
REGION_COLOURS = {
    "red": "#e6194b",
    "blue": "#4363d8",
    "orange": "#f58231",
    "violet": "#911eb4",
    "green": "#3cb44b",
    "gray": "#808080",
}


def next_colour(n: int) -> str:
    names = list(REGION_COLOURS)
    return names[n % len(names)]


def with_regions(image: np.ndarray, hand: list[HandRegion], alpha: float = 0.35) -> np.ndarray:
    """The image with each handcrafted region tinted and outlined in its colour."""
    from skimage.segmentation import find_boundaries

    out = image.astype(np.float32)
    for h in hand:
        rgb = np.array(
            [int(REGION_COLOURS[h.colour][i : i + 2], 16) for i in (1, 3, 5)], np.float32
        )
        out[h.mask] = (1 - alpha) * out[h.mask] + alpha * rgb
        out[find_boundaries(h.mask, mode="inner")] = rgb
    return out.astype(np.uint8)


_UID = iter(range(1, 1 << 62))


@dataclass
class HandRegion:
    """A region the analyst drew or uploaded."""

    name: str
    mask: np.ndarray
    inner: int = 1  # 1: one feature; N > 1: segmented inside into about N pieces
    colour: str = "red"  # a key of REGION_COLOURS
    uid: int = field(default_factory=lambda: next(_UID))


@dataclass
class ExplainSettings:
    """The Explain controls' values; defaults are the engine's."""

    samples: int = 1000
    sampling: str = "bernoulli"
    fill: str = "mean"
    kernel_width: float | str = 0.25
    seed: int = 0
    top_labels: int = 1
    target: int | None = None
    ridge_alpha: float = 1.0
    repeats: int = 3  # > 1 gives every explanation a stability verdict
    # Trust checks (the Trust page): all reuse the model passes where they can.
    kernel_widths: tuple = ()
    convergence: tuple = ()
    faithfulness: bool = False
    compare_fills: tuple = ()
    mask_expansion: int = 0
    # Speed (bench/README.md measures each): stop sampling once two halves agree; bf16 autocast.
    early_stop: float | None = None
    precision: str = "auto"

    def key(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


@dataclass
class SegSettings:
    method: str = "slic"
    n_segments: int = 40
    outer: str = "segment"  # "segment" the rest, or keep it as "one" background feature
    params: tuple[tuple[str, float], ...] = ()  # the method's own parameters, beyond the count


@dataclass
class AppState:
    image: np.ndarray
    image_name: str
    tag_mask: np.ndarray | None
    model_name: str = registry.DEFAULT_MODEL
    model_labels: list[str] | None = None
    seg: SegSettings = field(default_factory=SegSettings)
    hand: list[HandRegion] = field(default_factory=list)
    merges: list[tuple[tuple[str, ...], str, str]] = field(
        default_factory=list
    )  # keys, name, result key
    selected: frozenset[str] = frozenset()
    settings: ExplainSettings = field(default_factory=ExplainSettings)
    explanation: lc.Explanation | None = None
    explanation_auto: lc.Explanation | None = None
    trust_explanation: lc.Explanation | None = None
    edits: list[Any] = field(default_factory=list)
    canvas_version: int = 0
    restored: lc.Regions | None = None  # regions of a restored explanation, until regions change
    message: str | None = None
    tmpdir: str = ""


def _tmpdir_cleanup(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def get() -> AppState:
    """This session's state, created on first use (demo image, demo model)."""
    if "app" not in st.session_state:
        sample = load_sample(sample_names()[0])
        tmp = tempfile.mkdtemp(prefix="limecraft-session-")
        app = AppState(
            image=sample.image, image_name=sample.name, tag_mask=sample.tag_mask, tmpdir=tmp
        )
        # The folder goes when the session's state does (tab closed, session expired).
        weakref.finalize(app, _tmpdir_cleanup, tmp)
        st.session_state["app"] = app
    return st.session_state["app"]


def reset_for_new_image(
    s: AppState, image: np.ndarray, name: str, tag_mask: np.ndarray | None
) -> None:
    """A new image: regions, selections, results and edits belong to the old one."""
    s.image, s.image_name, s.tag_mask = image, name, tag_mask
    s.hand, s.merges, s.selected, s.edits = [], [], frozenset(), []
    s.explanation = s.explanation_auto = s.restored = s.trust_explanation = None
    s.canvas_version += 1


# ----------------------------------------------------------------------------- caches


@st.cache_resource(show_spinner="Loading the model…")
def classifier(name: str, precision: str = "auto") -> lc.Classifier:
    """One model per process and precision, shared by all sessions (inference is thread-safe).

    bf16 on a CPU also uses channels_last, the combination that is about 2x faster there."""
    cl = True if precision == "bf16" else None
    return registry.load_classifier(name, precision=precision, channels_last=cl)


@st.cache_resource
def work_queue() -> lc.WorkQueue:
    """One bounded queue in front of the device for every session of this process: concurrent
    Explains are served in turn and combined into shared forward passes."""
    batch = os.environ.get("LIMECRAFT_QUEUE_MAX_BATCH")  # images per combined pass
    return lc.WorkQueue(
        max_jobs=int(os.environ.get("LIMECRAFT_MAX_QUEUED", "64")),
        max_batch=int(batch) if batch else None,
    )


def session_alive() -> Callable[[], bool]:
    """A liveness check for this browser session (False once the tab is closed)."""
    from streamlit.runtime import Runtime, exists
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None or not exists():
        return lambda: True
    runtime, sid = Runtime.instance(), ctx.session_id
    return lambda: runtime.is_active_session(sid)


@st.cache_data(max_entries=64, show_spinner=False)
def segment(
    image: np.ndarray, method: str, n_segments: int, params: tuple[tuple[str, float], ...] = ()
) -> np.ndarray:
    return lc.segment(
        image, method, n_segments, params=dict(params), working_size=working_size(method)
    )


def working_size(method: str) -> int:
    """The app segments at most at this size so previews answer within 0.5 s: quickshift and
    felzenszwalb cost grows with the square of the area (labels are scaled back up)."""
    return {"quickshift": 192, "felzenszwalb": 192}.get(method, 512)


@st.cache_data(max_entries=64, show_spinner=False)
def compose(
    image: np.ndarray,
    method: str,
    n_segments: int,
    outer: str,
    masks: tuple[np.ndarray, ...],
    names: tuple[str, ...],
    inner: tuple[int, ...],
    params: tuple[tuple[str, float], ...] = (),
) -> lc.Regions:
    if not masks:
        return lc.regions_from_labels(segment(image, method, n_segments, params))
    return lc.compose_regions(
        image,
        list(masks),
        names=list(names),
        inner_segments=list(inner),
        inner_method="slic",
        outer_segments=1 if outer == "one" else n_segments,
        outer_method=method,
        outer_params=dict(params),
        working_size=working_size(method),
    )


def regions(s: AppState, *, handcrafted: bool = True) -> lc.Regions:
    """The current regions: automatic superpixels, handcrafted regions, and the merges."""
    if handcrafted and s.restored is not None:
        return s.restored
    hand = s.hand if handcrafted else []
    r = compose(
        s.image,
        s.seg.method,
        s.seg.n_segments,
        s.seg.outer,
        tuple(h.mask for h in hand),
        tuple(h.name for h in hand),
        tuple(h.inner for h in hand),
        s.seg.params,
    )
    if handcrafted:
        for keys, name, _ in s.merges:
            r = lc.merge_by_keys(r, keys, name)
    return r


class _ExplanationCache:
    """Explanations keyed on every input, shared by all sessions, bounded (LRU)."""

    def __init__(self, size: int = 32) -> None:
        self.size, self.lock, self.items = size, threading.Lock(), OrderedDict()

    def get(self, key: str) -> lc.Explanation | None:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        return None

    def put(self, key: str, value: lc.Explanation) -> None:
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)


@st.cache_resource
def explanation_cache() -> _ExplanationCache:
    return _ExplanationCache()


def explanation_key(
    image: np.ndarray,
    labels: np.ndarray,
    model: str,
    settings: ExplainSettings,
    names: tuple[str, ...] = (),
) -> str:
    h = hashlib.sha256()
    for a in (image, labels):
        h.update(str(a.shape).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(model.encode())
    h.update(settings.key().encode())
    h.update(json.dumps(names).encode())
    return h.hexdigest()


def run_explain(
    image: np.ndarray,
    reg: lc.Regions,
    model_name: str,
    settings: ExplainSettings,
    status_label: str = "Explaining",
) -> lc.Explanation | None:
    """Explain with a progress bar (per batch, with time left) and a Cancel button."""
    key = explanation_key(image, reg.atoms, model_name, settings, reg.keys + reg.names)
    cached = explanation_cache().get(key)
    if cached is not None:
        return cached
    clf = classifier(model_name, settings.precision)
    bar = st.progress(0.0, text=f"{status_label}: starting…")
    cancel_slot = st.empty()
    cancel_slot.button("Cancel", key=f"cancel-{status_label}", help="Stops after the current batch")
    t0 = time.perf_counter()

    def progress(done: int, total: int) -> None:
        el = time.perf_counter() - t0
        left = el / done * (total - done) if done else 0
        # Each update is also where Streamlit stops this run when the user presses Cancel.
        bar.progress(
            done / total,
            text=f"{status_label}: {done}/{total} model passes, about {left:.0f} s left",
        )

    def waiting(q: lc.QueueStatus) -> None:
        if q.position > 0:
            bar.progress(
                0.0,
                text=f"{status_label}: waiting for the model, {q.position} "
                f"explanation{'s' if q.position > 1 else ''} ahead of yours",
            )

    from models.remote import RemoteClassifier

    # A Ray Serve deployment batches across sessions itself, and composes next to its model:
    # only local models go through this process's work queue.
    runner = (
        clf
        if isinstance(clf, RemoteClassifier)
        else lc.QueuedClassifier(clf, work_queue(), alive=session_alive(), on_wait=waiting)
    )
    ex = lc.explain(
        image,
        runner,
        segments=reg,
        samples=settings.samples,
        seed=settings.seed,
        fill=settings.fill,
        kernel_width=settings.kernel_width,
        ridge_alpha=settings.ridge_alpha,
        target=settings.target,
        top_labels=settings.top_labels,
        sampling=settings.sampling,
        repeats=settings.repeats,
        kernel_widths=list(settings.kernel_widths) or None,
        convergence=list(settings.convergence) or None,
        faithfulness=settings.faithfulness,
        compare_fills=list(settings.compare_fills) or None,
        mask_expansion=settings.mask_expansion,
        early_stop=settings.early_stop,
        progress=progress,
    )
    bar.empty()
    cancel_slot.empty()
    explanation_cache().put(key, ex)
    return ex


# ----------------------------------------------------------------------------- display


def to_display(a: np.ndarray, width: int = DISPLAY_WIDTH) -> Image.Image:
    """A picture for the browser, ``width`` px wide (aspect kept): large photos are shrunk so
    pages stay light, small images are enlarged so drawing on them is comfortable."""
    im = Image.fromarray(a)
    if im.width != width:
        resample = Image.Resampling.LANCZOS if im.width > width else Image.Resampling.NEAREST
        im = im.resize((width, max(1, round(im.height * width / im.width))), resample)
    return im


def jpeg_bytes(a: np.ndarray, width: int = DISPLAY_WIDTH) -> bytes:
    buf = io.BytesIO()
    to_display(a, width).save(buf, format="JPEG", quality=88)
    return buf.getvalue()


def png_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG")
    return buf.getvalue()


@st.cache_data(max_entries=64, show_spinner=False)
def _id_positions(labels: np.ndarray) -> list[tuple[int, float, float]]:
    """A point well inside each region (farthest from its border; a centroid can fall outside)."""
    from scipy import ndimage as ndi

    out = []
    for region, box in enumerate(ndi.find_objects(labels + 1)):
        if box is None:
            continue
        m = np.pad(labels[box] == region, 1)
        dist = ndi.distance_transform_edt(m)[1:-1, 1:-1]
        y, x = np.unravel_index(np.argmax(dist), dist.shape)
        out.append((region, box[1].start + x + 0.5, box[0].start + y + 0.5))
    return out


def label_ids(
    picture: np.ndarray, labels: np.ndarray, width: int = DISPLAY_WIDTH, max_labels: int = 150
) -> Image.Image:
    """The picture at display size with each region's id written inside it."""
    from PIL import ImageDraw, ImageFont

    im = to_display(picture, width)
    if int(labels.max()) + 1 > max_labels:
        return im
    sx, sy = im.width / labels.shape[1], im.height / labels.shape[0]
    draw = ImageDraw.Draw(im)
    font = ImageFont.load_default(size=max(10, min(15, im.width // 40)))
    for region, x, y in _id_positions(labels):
        draw.text(
            (x * sx, y * sy),
            str(region),
            fill="white",
            font=font,
            anchor="mm",
            stroke_width=2,
            stroke_fill="black",
        )
    return im


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$])")


def md(text: object) -> str:
    """User text (file names, region names, class labels) made inert for st.markdown."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def error(msg: str) -> None:
    st.error(msg, icon=":material/error:")


# ----------------------------------------------------------------------------- sidebar


def _load_upload(s: AppState) -> None:
    up = st.session_state.get("image_upload")
    if up is None:
        return
    try:
        img = decode_image(up.getvalue(), f"'{up.name}'")
    except lc.LimecraftError as e:
        s.message = f"That upload was not used: {md(e)}"
        return
    reset_for_new_image(s, img, up.name, None)
    s.message = None


def _pick_sample(s: AppState) -> None:
    name = st.session_state["sample_pick"]
    sample = load_sample(name)
    reset_for_new_image(s, sample.image, sample.name, sample.tag_mask)


def _model_upload(s: AppState) -> None:
    up = st.session_state.get("model_upload")
    labels = st.session_state.get("labels_upload")
    if up is None:
        return
    suffix = os.path.splitext(up.name)[1].lower()
    if suffix not in (".pt2", ".pt"):
        s.message = "A model file must be a .pt2 (torch.export) or TorchScript .pt file."
        return
    data = up.getvalue()
    # Per-session folder, never a shared path; named by content, because the loaded model is
    # cached on its path (a second upload must not be served the first model).
    path = os.path.join(s.tmpdir, f"model-{hashlib.sha256(data).hexdigest()[:16]}{suffix}")
    with open(path, "wb") as f:
        f.write(data)
    try:
        names = None
        if labels is not None:
            names = [
                ln.strip()
                for ln in labels.getvalue().decode("utf-8-sig").splitlines()
                if ln.strip()
            ]
        clf = registry.load_classifier(path, labels=names)
        clf.predict(np.zeros((clf.input_size[0], clf.input_size[1], 3), np.uint8))
    except (lc.LimecraftError, lc.ModelError, UnicodeDecodeError) as e:
        s.message = f"That model was not used: {md(e)}"
        if path != s.model_name:
            os.remove(path)  # a refused file is not kept
        return
    old = s.model_name
    if old != path and os.path.dirname(old) == s.tmpdir and os.path.exists(old):
        os.remove(old)  # the previous upload (its model stays loaded while cached)
    s.model_name = path
    st.session_state["model_pick"] = path  # the registry picker follows, or it would undo this
    s.model_labels = names
    s.explanation = s.explanation_auto = None
    s.message = None


def sidebar(s: AppState) -> None:
    """Image source, model, and the model's top-5 prediction; shared by every page."""
    with st.sidebar:
        st.markdown("## LIMEcraft")
        st.caption("Explain an image classifier over regions that mean something to you.")
        st.markdown("**Image**")
        names = sample_names()
        st.selectbox(
            "Sample gallery",
            names,
            index=names.index(s.image_name) if s.image_name in names else None,
            key="sample_pick",
            on_change=_pick_sample,
            args=(s,),
            placeholder="uploaded image",
        )
        st.file_uploader(
            "…or upload an image",
            type=UPLOAD_TYPES,
            key="image_upload",
            on_change=_load_upload,
            args=(s,),
        )
        st.markdown("**Model**")
        infos = registry.list_models()
        options = [m.name for m in infos]
        label = {m.name: f"{m.name}{'' if m.ready else ' (not available)'}" for m in infos}
        if s.model_name not in options:
            options = [s.model_name, *options]
            label[s.model_name] = f"your model: {os.path.basename(s.model_name)}"
        st.selectbox(
            "Registry",
            options,
            index=options.index(s.model_name),
            key="model_pick",
            format_func=lambda n: label[n],
        )
        if st.session_state["model_pick"] != s.model_name:
            s.model_name = st.session_state["model_pick"]
            s.explanation = s.explanation_auto = None
        with st.expander("Upload your own model"):
            st.file_uploader(
                "Model file (.pt2 or TorchScript .pt)", type=["pt2", "pt"], key="model_upload"
            )
            st.file_uploader("Labels (one class name per line)", type=["txt"], key="labels_upload")
            st.button("Use this model", key="use_model", on_click=_model_upload, args=(s,))
        if s.message:
            error(s.message)
        top5(s)


def ready_classifier(s: AppState) -> lc.Classifier | None:
    """The chosen model, or None with an explanation on the page of why it cannot run."""
    if s.model_name in registry.zoo.ZOO or s.model_name == "demo":
        info = registry.model_info(s.model_name)
        if not info.ready:
            error(
                f"{s.model_name} cannot run here: {info.reason}. Choose the demo model, or "
                "upload your own model file."
            )
            return None
    try:
        return classifier(s.model_name)
    except (lc.LimecraftError, lc.ModelError) as e:
        error(f"{s.model_name} cannot run: {e}")
        return None


@st.cache_data(max_entries=64, show_spinner=False)
def _predict(model_name: str, image: np.ndarray) -> np.ndarray:
    clf = classifier(model_name)
    logits = clf.predict(image)
    e = np.exp(logits - logits.max())
    return e / e.sum()


def predict(s: AppState, image: np.ndarray) -> np.ndarray | None:
    """Class probabilities for an image, or None (with a message) when the model fails."""
    if ready_classifier(s) is None:
        return None
    try:
        return _predict(s.model_name, image)
    except (lc.LimecraftError, lc.ModelError) as e:
        error(f"The model failed on this image: {e}")
        return None


def class_label(s: AppState, index: int) -> str:
    return classifier(s.model_name).label(index)


def top5(s: AppState) -> None:
    probs = predict(s, s.image)
    if probs is None:
        return
    remote = getattr(classifier(s.model_name), "status", None)
    if remote is not None:  # LIMECRAFT_RAY_ADDRESS: the model runs on a Ray Serve cluster
        where = "on the Ray Serve cluster" if remote.mode == "remote" else "locally (fallback)"
        st.caption(f"Model runs {where} at {md(remote.address)}. {md(remote.message)}")
    order = np.argsort(-probs)[:5]
    st.markdown("**Model's top-5 prediction**")
    st.dataframe(
        {
            "class": [class_label(s, int(i)) for i in order],
            "probability": [float(probs[i]) for i in order],
        },
        hide_index=True,
        width="stretch",
        column_config={
            "probability": st.column_config.ProgressColumn(format="%.3f", min_value=0, max_value=1)
        },
    )
