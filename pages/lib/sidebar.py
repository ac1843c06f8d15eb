"""The sidebar every page shares: the image (gallery, upload), the model (registry, upload),
the model's top-5, recent analyses and "Start fresh"."""

from __future__ import annotations

import hashlib
import os
import shutil

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core.io import decode_image
from limecraft_core.io.images import conversion_note
from models import formats, hub, onnx_model, registry
from models.samples import load_sample, model_for, sample_names
from pages.lib import analysis as A
from pages.lib import caches, identity, runtime, state
from pages.lib.analysis import Analysis
from pages.lib.display import error, md, md_sentence
from pages.lib.session import Recent, session


def _upload_key() -> str:
    """The image uploader's key: a new one after each upload, so the picker is empty again
    and never shows a file name next to another image (or a refused file after a switch)."""
    return f"image_upload-{session().upload_version}"


def _load_upload(key: str) -> None:
    """The upload is only noted here: decoding and segmenting a large image take seconds, so
    :func:`load_pending` does them in the page, with progress."""
    if key != _upload_key():
        # The picker of an earlier upload: the browser can send its old value once more after
        # the picker was replaced, and that must not load the image a second time.
        return
    up = st.session_state.get(key)
    ses = session()
    ses.image_note = None
    if up is not None:
        ses.pending_upload = (up.name, up.getvalue())
        ses.upload_version += 1


def load_pending() -> None:
    """Decode and segment a just-uploaded image with a progress message in the main area; the
    old image stays until the new one is ready, and a bad file leaves the work as it was."""
    ses = session()
    pending, ses.pending_upload = ses.pending_upload, None
    if pending is None:
        return
    name, data = pending
    failed = None
    with st.status(f"Loading {md(name)}…", expanded=True) as box:
        st.write(f"Decoding the image ({len(data) / 2**20:.1f} MB)…")
        try:
            img = decode_image(data, f"'{name}'")
        except lc.LimecraftError as e:
            box.update(label=f"{md(name)} was not used", state="error", expanded=False)
            failed = (
                f"That upload was not used: {md_sentence(e)}",
                "Your current image and work are kept.",
            )
        else:
            h, w = img.shape[:2]
            state.replace_image(img, name, None, "", "upload")
            s = state.get()
            st.write(f"Segmenting {w}×{h} px into about {s.seg.n_segments} {s.seg.method} regions…")
            bar = st.progress(0.0)
            try:
                reg = caches.regions(s, progress=lambda f, msg: bar.progress(min(1.0, f), text=msg))
            except lc.LimecraftError as e:
                box.update(label=f"{md(name)} could not be segmented", state="error")
                failed = (
                    f"The regions could not be made: {md_sentence(e)}",
                    "Change the superpixels on Craft regions.",
                )
            else:
                note = conversion_note(data)  # a GIF's first frame, transparency on white
                box.update(
                    label=f"Loaded {md(name)}: {w}×{h} px, {reg.n_regions} regions"
                    + (f" ({note})" if note else ""),
                    state="complete",
                    expanded=False,
                )
    if failed is not None:  # in the main area, where the user looks, and under the upload
        session().image_note = failed[0]
        error(" ".join(failed))


def _pick_sample(key: str) -> None:
    if key != state.wkey("sample_pick"):
        # The picker of an analysis that was replaced: the browser can still send its old
        # value once, after the switch, and that must not switch back.
        return
    name = st.session_state.get(key)
    if name is None or name == state.get().image_name:
        return
    session().image_note = None
    sample = load_sample(name)
    state.replace_image(sample.image, sample.name, sample.tag_mask, sample.note, "gallery")
    now = state.get()
    # The built-in models follow the gallery: a photo is the real ImageNet model's, a demo
    # image the demo model's (a model of your own stays yours; so does a reopened analysis's).
    if now.model_name in registry.BUILT_IN and now.explanation is None:
        A.set_model(now, model_for(name), None)
    st.session_state["model_pick"] = now.model_name  # the picker shows this analysis's model


ARCH_AUTO = "(not a state_dict)"


def _safe_name(name: str) -> str:
    """The uploaded file's own name, kept for display (no folders, no odd characters)."""
    base = os.path.basename(name.replace("\\", "/")) or "model"
    return "".join(c if c.isalnum() or c in "._- " else "_" for c in base)[:100]


def _model_upload_key() -> str:
    """The model uploader's key: a new one after a refused file, so that the refused file is
    not left in the picker (as for a refused image)."""
    v = session().model_upload_version
    return "model_upload" if v == 0 else f"model_upload-{v}"


def _refuse_model_file(why: str) -> None:
    """The model file was not used: say why once, next to the button, and empty the picker."""
    ses = session()
    ses.model_note = ("error", why)
    ses.model_upload_version += 1


def _model_upload(s: Analysis) -> None:
    up = st.session_state.get(_model_upload_key())
    labels = st.session_state.get("labels_upload")
    session().model_note = None
    if up is None:
        s.message = None
        session().model_note = ("error", "Choose a model file first.")
        return
    arch = st.session_state.get("model_arch")
    arch = None if arch in (None, ARCH_AUTO) else arch
    norm = st.session_state.get("model_normalize") or "none"
    suffix = os.path.splitext(up.name)[1].lower()
    if norm == identity.PIXELS_0_255 and suffix != ".onnx":
        # a setting to change, not a bad file: the file stays in the picker
        session().model_note = (
            "error",
            "The 0-255 pixel range is for .onnx files; choose none or imagenet for this model.",
        )
        return
    if suffix == ".pth" and arch is None:  # the file may be good: it needs its architecture
        session().model_note = (
            "error",
            "A state_dict (.pt or .pth) holds only weights: choose its architecture below.",
        )
        return
    if suffix not in formats.suffixes():
        _refuse_model_file(f"A model file must be {formats.in_words()} chosen below.")
        return
    data = up.getvalue()
    weights = st.session_state.get("model_data_upload") if suffix == ".onnx" else None
    digest = hashlib.sha256(data)
    if weights is not None:
        digest.update(weights.getvalue())
    # Per-session folder, never a shared path; a sub-folder per content, because the loaded
    # model is cached on its path (a second upload must not be served the first model), and
    # the file keeps its own name, the name the user knows it by.
    folder = os.path.join(state.tmpdir(), digest.hexdigest()[:16])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, _safe_name(up.name))
    with open(path, "wb") as f:
        f.write(data)
    if weights is not None:
        # An ONNX graph saved with its weights apart names its weights file: the one chosen
        # is written under that name, beside the model (whatever it was called on the way).
        named = onnx_model.weights_files(path)
        name = named[0] if len(named) == 1 else _safe_name(weights.name)
        with open(os.path.join(folder, _safe_name(name)), "wb") as f:
            f.write(weights.getvalue())
    try:
        names = None
        if labels is not None:
            names = [
                ln.strip()
                for ln in labels.getvalue().decode("utf-8-sig").splitlines()
                if ln.strip()
            ]
        clf = registry.load_classifier(
            path, labels=names, arch=arch, **identity.normalisation(norm)
        )
        size = clf.input_size or (224, 224)
        probs = clf.predict(np.zeros((size[0], size[1], 3), np.uint8))
    except (lc.LimecraftError, lc.ModelError, UnicodeDecodeError) as e:
        # The message names the file as the user knows it, never the server's path.
        why = str(e).replace(repr(path), f"'{up.name}'").replace(path, up.name)
        if arch is None and "state_dict" in why:
            why += ". If it is a state_dict, choose its architecture below"
        _refuse_model_file(f"That model was not used: {md(why)}")
        if path != s.model_name:  # a refused file is not kept, nor its folder
            shutil.rmtree(folder, ignore_errors=True)
        return
    old = s.model_name
    in_use = any(r.model_name == old for r in state.recent())
    if old != path and old.startswith(state.tmpdir()) and os.path.exists(old) and not in_use:
        # the previous upload, with its weights file if any, when it has a folder of its own
        # (its model stays loaded while cached)
        if os.path.dirname(os.path.dirname(old)) == state.tmpdir():
            shutil.rmtree(os.path.dirname(old), ignore_errors=True)
        else:
            os.remove(old)
    A.set_model(s, path, names, arch, norm)
    st.session_state["model_pick"] = path  # the registry picker follows, or it would undo this
    s.message = None
    n = int(np.asarray(probs).shape[-1])
    warn = ""
    if names is not None and len(names) != n:
        warn = f" The labels file has {len(names)} names but the model gives {n} scores: " + (
            "the extra names are not used." if len(names) > n else "the rest are 'class i'."
        )
    session().model_note = (
        "warning" if warn else "success",
        f"Now using **{md(up.name)}** ({n} classes).{md(warn)}",
    )


HUB_PREFIXES = ("timm:", "hf:")


def _model_by_name(s: Analysis) -> None:
    """A timm model by name or a Hugging Face classifier (repo id or local folder)."""
    spec = (st.session_state.get("model_by_name") or "").strip()
    session().model_note = None
    if not spec.startswith(HUB_PREFIXES):
        session().model_note = (
            "error",
            "Give a timm model as `timm:<name>` (e.g. `timm:resnet18`) or a Hugging Face image "
            "classifier as `hf:<repo id or folder>`.",
        )
        return
    wait = registry.zoo.download_timeout()
    said = (
        f" (weights not in the cache are fetched; it gives up after {wait:g} s without an answer)"
    )
    try:
        with st.spinner(f"Loading {spec}{said if wait > 0 else ''}…"):
            clf = registry.load_classifier(spec)
            size = clf.input_size or (224, 224)
            probs = clf.predict(np.zeros((size[0], size[1], 3), np.uint8))
    except (lc.LimecraftError, lc.ModelError) as e:
        session().model_note = ("error", f"That model was not used: {md(str(e))}")
        return
    A.set_model(s, spec, None)
    st.session_state["model_pick"] = spec
    s.message = None
    n = int(np.asarray(probs).shape[-1])
    session().model_note = ("success", f"Now using **{md(spec)}** ({n} classes).")


def model_facts(s: Analysis) -> str | None:
    """One line on the model in use: format, input size, classes, normalisation."""
    ref = A.model_ref(s)
    try:
        clf = runtime.classifier(s)
    except (lc.LimecraftError, lc.ModelError):
        return None
    described = hub.is_hub_spec(ref.name) or ref.name.lower().endswith(".onnx")
    if registry.is_registered(ref.name) or described:
        try:
            info = registry.model_info(ref.name)
        except lc.LimecraftError:
            return None
        fmt, n = info.description, info.num_classes
        if not n:  # an ONNX graph with a symbolic class count: count the scores
            probs = runtime.predict(s, s.image)
            n = 0 if probs is None else len(probs)
    else:
        from models.custom import file_format

        probs = runtime.predict(s, s.image)
        n = 0 if probs is None else len(probs)
        try:
            fmt = file_format(ref.name, arch=ref.arch)
        except lc.LimecraftError:
            fmt = "model file"
    size = getattr(clf, "input_size", None)
    names = [clf.label(i) for i in range(min(n, 4))]
    more = ", …" if n > 4 else ""
    return (
        f"**{md(ref.display_name)}** · {md(fmt)} · input "
        f"{f'{size[1]}×{size[0]} px' if size else 'any size'} · {n} classes "
        f"({md(', '.join(names))}{more}) · normalisation {md(getattr(clf, 'normalize', '?'))}"
    )


def _recent_button(r: Recent) -> None:
    st.button(
        r.summary,
        key=f"recent-{r.id[:12]}",
        on_click=state.open_recent,
        args=(r.id,),
        icon=":material/history:",
        help="Go back to this analysis (the current one is kept here)",
        width="stretch",
    )


def _recent_list() -> None:
    """The recent analyses: the first few as buttons (more work outranks less, so a burst of
    uploads never hides a crafted analysis), every other one under "More" (none is lost)."""
    top, more = state.shown(state.recent())
    if not top:
        return
    st.markdown("**Recent analyses**")
    for r in top:
        _recent_button(r)
    if more:
        # a fixed key: the box stays open while its label's count changes
        with st.expander(f"More ({len(more)})", key="recent_more"):
            for r in more:
                _recent_button(r)


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
            placeholder={"audit": "an image from an audit", "restore": "a restored image"}.get(
                s.source, "uploaded image"
            ),
        )
        st.file_uploader(
            "…or upload an image",
            type=state.UPLOAD_TYPES,
            key=_upload_key(),
            on_change=_load_upload,
            args=(_upload_key(),),
        )
        # said once, under the upload (and in the main area) in the run that refused it: the
        # next run (another page, another click) drops it, as for a refused model
        image_note, session().image_note = session().image_note, None
        if image_note:
            error(image_note)
        st.markdown("**Model**")
        infos = registry.list_models()
        options = [m.name for m in infos]
        label = {m.name: f"{m.name}{'' if m.ready else ' (not available)'}" for m in infos}
        if s.model_name not in options:
            options = [s.model_name, *options]
            label[s.model_name] = f"your model: {A.model_ref(s).display_name}"
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
        # said once, where the user acted: the next run (another page, another click) drops it
        ses = session()
        note, ses.model_note = ses.model_note, None
        # The expander's arguments stay the same on every run: a changed argument makes it a
        # new element, and the browser would drop the files already picked inside it.
        with st.expander("Upload your own model"):
            st.file_uploader(
                "Model file (.onnx, .pt2, TorchScript .pt, or a state_dict)",
                type=[x.lstrip(".") for x in formats.suffixes()],
                key=_model_upload_key(),
            )
            st.file_uploader(
                "Its weights file (.data), for an ONNX model saved with its weights apart",
                type=["data"],
                key="model_data_upload",
                help="torch.onnx.export(..., dynamo=True) writes m.onnx and m.onnx.data: choose "
                "m.onnx above and m.onnx.data here.",
            )
            st.file_uploader("Labels (one class name per line)", type=["txt"], key="labels_upload")
            st.selectbox(
                "Architecture (for a state_dict)",
                [ARCH_AUTO, *registry.zoo.ZOO],
                key="model_arch",
                help="A state_dict holds only weights: name the torchvision architecture they "
                "belong to. A .pt2 or TorchScript file carries its own.",
            )
            st.selectbox(
                "Input normalisation",
                ["none", "imagenet", "half", identity.PIXELS_0_255],
                key="model_normalize",
                help="none: the model takes pixels in [0, 1]; imagenet: it expects ImageNet's "
                "mean and standard deviation subtracted (torchvision's models do); half: "
                "(x − 0.5) / 0.5, pixels in [-1, 1] (TF-style models such as EfficientNet-Lite "
                "and MobileNet); 0-255: an ONNX graph that takes pixels in 0-255 (many Keras and "
                "TensorFlow exports)",
            )
            st.button("Use this model", key="use_model", on_click=_model_upload, args=(s,))
            st.text_input(
                "…or a timm or Hugging Face model",
                key="model_by_name",
                placeholder="timm:resnet18 or hf:<repo id or folder>",
                help="timm models by name, Hugging Face image classifiers by repo id or a "
                "folder written by save_pretrained (safetensors only; no remote code). Weights "
                "are downloaded when the machine is online.",
            )
            st.button("Use this name", key="use_model_name", on_click=_model_by_name, args=(s,))
            if note is not None:
                {"error": error, "warning": st.warning, "success": st.success}[note[0]](note[1])
        facts = model_facts(s)
        if facts:
            st.caption(facts)
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
    probs = runtime.predict(s, s.image)
    if probs is None:
        return
    remote = getattr(runtime.classifier(s), "status", None)
    if remote is not None:  # LIMECRAFT_RAY_ADDRESS: the model runs on a Ray Serve cluster
        where = "on the Ray Serve cluster" if remote.mode == "remote" else "locally (fallback)"
        st.caption(f"Model runs {where} at {md(remote.address)}. {md(remote.message)}")
    order = np.argsort(-probs)[:5]
    st.markdown("**Model's top-5 prediction**")
    warning = runtime.model_fit_warning(s)
    if warning:
        st.caption(":orange[Not meaningful for this image: see the warning on Explain.]")
    for i in order:
        p = float(probs[i])
        st.progress(p, text=f"{md(runtime.class_label(s, int(i)))} · {p:.3f}")
