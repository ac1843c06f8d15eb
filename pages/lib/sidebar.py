"""The sidebar every page shares: the image (gallery, upload), the model (registry, upload),
the model's top-5, recent analyses and "Start fresh"."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core.io import decode_image
from models import registry
from models.samples import load_sample, sample_names
from pages.lib import analysis as A
from pages.lib import state
from pages.lib.analysis import Analysis
from pages.lib.display import error, md


def _load_upload() -> None:
    s = state.get()
    up = st.session_state.get("image_upload")
    if up is None:
        return
    try:
        img = decode_image(up.getvalue(), f"'{up.name}'")
    except lc.LimecraftError as e:
        s.message = f"That upload was not used: {md(e)}"
        return
    s.message = None
    state.replace_image(img, up.name, None, "", "upload")


def _pick_sample(key: str) -> None:
    if key != state.wkey("sample_pick"):
        # The picker of an analysis that was replaced: the browser can still send its old
        # value once, after the switch, and that must not switch back.
        return
    name = st.session_state.get(key)
    if name is None or name == state.get().image_name:
        return
    sample = load_sample(name)
    state.replace_image(sample.image, sample.name, sample.tag_mask, sample.note, "gallery")


def _model_upload(s: Analysis) -> None:
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
    folder = state.tmpdir()
    path = os.path.join(folder, f"model-{hashlib.sha256(data).hexdigest()[:16]}{suffix}")
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
    in_use = any(r.model_name == old for r in state.recent())
    if old != path and os.path.dirname(old) == folder and os.path.exists(old) and not in_use:
        os.remove(old)  # the previous upload (its model stays loaded while cached)
    A.set_model(s, path, names)
    st.session_state["model_pick"] = path  # the registry picker follows, or it would undo this
    s.message = None


def _recent_list() -> None:
    rec = state.recent()
    if not rec:
        return
    st.markdown("**Recent analyses**")
    for r in rec:
        st.button(
            A.summary(r),
            key=f"recent-{r.id[:12]}",
            on_click=state.open_recent,
            args=(r.id,),
            icon=":material/history:",
            help="Go back to this analysis (the current one is kept here)",
            width="stretch",
        )


def sidebar(s: Analysis) -> None:
    """Image source, model, the model's top-5 prediction, recent analyses; on every page."""
    with st.sidebar:
        st.markdown("## LIMEcraft")
        st.caption("Explain an image classifier over regions that mean something to you.")
        st.markdown("**Image**")
        names = sample_names()
        key = state.wkey("sample_pick")
        st.selectbox(
            "Sample gallery",
            names,
            index=names.index(s.image_name)
            if s.image_name in names and s.source == "gallery"
            else None,
            key=key,
            on_change=_pick_sample,
            args=(key,),
            placeholder="uploaded image",
        )
        st.file_uploader(
            "…or upload an image",
            type=state.UPLOAD_TYPES,
            key="image_upload",
            on_change=_load_upload,
        )
        st.markdown("**Model**")
        infos = registry.list_models()
        options = [m.name for m in infos]
        label = {m.name: f"{m.name}{'' if m.ready else ' (not available)'}" for m in infos}
        if s.model_name not in options:
            options = [s.model_name, *options]
            label[s.model_name] = f"your model: {os.path.basename(s.model_name)}"
        if st.session_state.get("model_pick") not in options:
            st.session_state.pop("model_pick", None)
        st.selectbox(
            "Registry",
            options,
            index=options.index(s.model_name),
            key="model_pick",
            format_func=lambda n: label[n],
        )
        if st.session_state["model_pick"] != s.model_name:
            A.set_model(s, st.session_state["model_pick"], None)
        with st.expander("Upload your own model"):
            st.file_uploader(
                "Model file (.pt2 or TorchScript .pt)", type=["pt2", "pt"], key="model_upload"
            )
            st.file_uploader("Labels (one class name per line)", type=["txt"], key="labels_upload")
            st.button("Use this model", key="use_model", on_click=_model_upload, args=(s,))
        if s.message:
            error(s.message)
        top5(s)
        st.divider()
        _recent_list()
        st.button(
            "Start fresh",
            key="start_fresh",
            on_click=state.start_fresh,
            icon=":material/restart_alt:",
            help="A new, empty analysis of this image; the current one stays under Recent analyses",
        )


def top5(s: Analysis) -> None:
    probs = state.predict(s, s.image)
    if probs is None:
        return
    remote = getattr(state.classifier(s.model_name), "status", None)
    if remote is not None:  # LIMECRAFT_RAY_ADDRESS: the model runs on a Ray Serve cluster
        where = "on the Ray Serve cluster" if remote.mode == "remote" else "locally (fallback)"
        st.caption(f"Model runs {where} at {md(remote.address)}. {md(remote.message)}")
    order = np.argsort(-probs)[:5]
    st.markdown("**Model's top-5 prediction**")
    st.dataframe(
        {
            "class": [state.class_label(s, int(i)) for i in order],
            "probability": [float(probs[i]) for i in order],
        },
        hide_index=True,
        width="stretch",
        column_config={
            "probability": st.column_config.ProgressColumn(format="%.3f", min_value=0, max_value=1)
        },
    )
