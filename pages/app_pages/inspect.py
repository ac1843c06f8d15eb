"""Inspect: edit a region (colour, move, rotate, scale, blur, remove) or add the ImageNet-W
watermark, and watch the prediction move."""

from __future__ import annotations

import functools

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core.edits import Edit, apply_edit, apply_edits
from pages.lib import analysis as A
from pages.lib import (
    caches,
    display,
    explain_run,
    frame,
    runtime,
    state,
    transplant_view,
    watermark_view,
)
from pages.lib.session import session
from pages.lib.views import results

frame.start()  # the sidebar and the page's frame, inside this page's run (pages/lib/frame.py)

#: The radio's choices; "no change" (None) is the pending edit after Apply: an applied edit is
#: never offered again as a pending one (a remove or watermark edit has no slider to reset).
NO_CHANGE = "no change"
KINDS: dict[str, str | None] = {
    NO_CHANGE: None,
    "colour": "color",
    "move": "move",
    "rotate": "rotate",
    "scale": "scale",
    "blur": "blur",
    "remove": "remove",
    "watermark": "watermark",
}


@st.cache_data(max_entries=32, show_spinner=False)
def edited(image: np.ndarray, labels: np.ndarray, edits: tuple[Edit, ...]):
    return apply_edits(image, labels, list(edits))


def _version() -> int:
    return session().edit_version


def _fresh_controls() -> None:
    """The pending-edit controls start again from "no change": the kind goes back to "no
    change" and the sliders get new widget keys, so the browser's copies of the old values
    cannot come back as a second, pending edit. Runs in a button's callback, before the
    radio is drawn again."""
    session().edit_version += 1
    st.session_state["edit_kind"] = NO_CHANGE


class _Sent:
    """The edit controls' values as the browser sent them with a button press, read in the
    button's callback (where ``st.session_state`` already holds them): the same calls as the
    widgets, answered from the state, drawing nothing."""

    def __getattr__(self, name: str):
        if name in ("slider", "number_input", "selectbox", "radio"):
            return lambda *a, key, **kw: st.session_state[key]
        if name == "columns":
            return lambda spec, **kw: [self] * (spec if isinstance(spec, int) else len(spec))
        return lambda *a, **kw: None  # captions and the like


def edit_controls(region: int, h: int, w: int, ui=st) -> Edit | None:
    """The pending edit from the controls (None: "no change", the default). ``ui``: Streamlit
    (draw them) or :class:`_Sent` (read what they sent)."""
    kind = KINDS[ui.radio("Edit", list(KINDS), horizontal=True, key="edit_kind")]
    if kind is None:
        return None
    v = _version()
    c1, c2 = ui.columns(2)
    p: dict = {}
    if kind == "color":
        p["hue"] = c1.slider("Hue (degrees)", -180, 180, 0, key=f"e_hue-{v}")
        p["saturation"] = c2.slider("Saturation ×", 0.0, 3.0, 1.0, 0.05, key=f"e_sat-{v}")
        p["brightness"] = c1.slider("Brightness ×", 0.0, 3.0, 1.0, 0.05, key=f"e_bri-{v}")
        r = c2.slider("Red shift", -1.0, 1.0, 0.0, 0.05, key=f"e_r-{v}")
        g = c2.slider("Green shift", -1.0, 1.0, 0.0, 0.05, key=f"e_g-{v}")
        b = c2.slider("Blue shift", -1.0, 1.0, 0.0, 0.05, key=f"e_b-{v}")
        p["rgb_shift"] = (r, g, b)
    elif kind == "move":
        p["dx"] = c1.slider("Right (px)", -w, w, 0, key=f"e_dx-{v}")
        p["dy"] = c2.slider("Down (px)", -h, h, 0, key=f"e_dy-{v}")
    elif kind == "rotate":
        p["angle"] = c1.slider(
            "Angle (degrees, counter-clockwise)", -180, 180, 0, key=f"e_angle-{v}"
        )
    elif kind == "scale":
        p["factor"] = c1.slider("Scale ×", 0.2, 3.0, 1.0, 0.05, key=f"e_factor-{v}")
    elif kind == "blur":
        p["sigma"] = c1.slider("Blur sigma (px)", 0.0, 20.0, 4.0, 0.5, key=f"e_sigma-{v}")
    elif kind == "watermark":
        p |= watermark_view.edit_controls(c1, c2, h, w, v)
    if kind in ("move", "rotate", "scale", "remove"):
        p["fill"] = c2.selectbox(
            "The hole shows", ["inpaint", "mean", "gray", "black"], key=f"e_fill-{v}"
        )
    return Edit(kind=kind, region=region, **p)


def _apply(s: A.Analysis, pending: Edit | None) -> None:
    """Apply the edit the controls hold when Apply is pressed. The press carries the sliders'
    values; the ``pending`` drawn with the button may be older: a slider moved and Apply
    pressed before the run for the slider's last value had drawn the button again."""
    if pending is None:
        return
    try:
        region = int(st.session_state.get("edit_region", pending.region))
        pending = edit_controls(region, *s.image.shape[:2], ui=_Sent())
    except KeyError:  # a control the browser did not send: the edit as drawn
        pass
    if pending is not None and _changes(s, pending):  # None: "no change" chosen since
        A.apply_edit(s, pending)
    _fresh_controls()


def _changes(s: A.Analysis, edit: Edit) -> bool:
    """Whether ``edit`` changes the image as edited so far (a slider moved back to 0 before
    the press: nothing to stack). An edit that cannot be applied is left to the page, which says
    why."""
    base = edited(s.image, caches.regions(s).labels, tuple(s.edits))
    try:
        return not _same(apply_edit(base.image, base.labels, edit), base)
    except lc.LimecraftError:
        return True


def _same(a, b) -> bool:
    """Whether two edited images (and their label maps) are the same: an edit that changes
    nothing (a 0° rotation, a move by 0) is not stacked."""
    return np.array_equal(a.image, b.image) and np.array_equal(a.labels, b.labels)


def _undo(s: A.Analysis) -> None:
    A.undo_edit(s)
    _fresh_controls()


def _reset(s: A.Analysis) -> None:
    A.reset_edits(s)
    _fresh_controls()


def _weights(s: A.Analysis, k: int) -> np.ndarray | None:
    ex = s.explanation
    if ex is None or ex.n_regions != k:
        return None
    return ex.class_weights[0]


def region_order(s: A.Analysis, names: tuple[str, ...], k: int) -> list[int]:
    """Named regions first (the ones the analyst made), then by |weight| when explained."""
    w = _weights(s, k)
    return sorted(
        range(k),
        key=lambda i: (not names[i], -abs(float(w[i])) if w is not None else 0.0, i),
    )


def region_label(s: A.Analysis, names: tuple[str, ...], i: int) -> str:
    """``id name (weight)``: the id of the maps, the name given on Craft, the weight explained."""
    w = _weights(s, len(names))
    label = f"{i} {names[i]}".strip() if i < len(names) else str(i)
    return label + (f" (weight {w[i]:+.3f})" if w is not None else "")


def follow_control(s: A.Analysis, before: np.ndarray) -> int:
    """The class to follow: its before and after always show, in the prediction table and in
    the paste. Default: the explained class, else the model's top class."""
    order = [int(i) for i in np.argsort(-before)]
    ex = s.explanation
    first = ex.classes[0] if ex is not None and ex.classes else order[0]
    return int(
        st.selectbox(
            "Class to follow",
            order,
            index=order.index(first) if first in order else 0,
            key="edit_follow",
            format_func=lambda i: f"{runtime.class_label(s, i)} ({i})",
            help="Its score before and after always shows, whatever the top classes are; the "
            "paste below follows it too. Default: the explained class",
        )
    )


def prediction_table(s: A.Analysis, before: np.ndarray, after: np.ndarray, follow: int) -> None:
    order = [int(i) for i in np.argsort(-before)[:5]]
    for i in [*np.argsort(-after)[:5], follow]:
        if int(i) not in order:
            order.append(int(i))
    names = [runtime.class_label(s, int(i)) for i in order]
    top = int(order[0])
    d = float(after[top] - before[top])
    new_top = int(np.argmax(after))
    st.markdown(
        f"Top class: **{display.md(names[0])}** {before[top]:.3f} → {after[top]:.3f} ({d:+.3f})"
        + (
            ""
            if new_top == top
            else f"; the edited image is now **{display.md(runtime.class_label(s, new_top))}**"
            f" ({after[new_top]:.3f})"
        )
    )
    if follow != top:
        st.markdown(
            f"Followed class: **{display.md(runtime.class_label(s, follow))}** "
            f"{before[follow]:.3f} → {after[follow]:.3f} ({after[follow] - before[follow]:+.3f})"
        )
    a, b = display.columns([3, 2])
    a.dataframe(
        {
            "class": [
                n + (" (followed)" if i == follow else "")
                for i, n in zip(order, names, strict=True)
            ],
            "original": [float(before[i]) for i in order],
            "edited": [float(after[i]) for i in order],
            "change": [float(after[i] - before[i]) for i in order],
        },
        hide_index=True,
        width="stretch",
        column_config={
            "original": st.column_config.NumberColumn(format="%.4f"),
            "edited": st.column_config.NumberColumn(format="%.4f"),
            "change": st.column_config.NumberColumn(format="%+.4f"),
        },
    )
    b.bar_chart(
        {
            "class": names * 2,
            "probability": [float(before[i]) for i in order] + [float(after[i]) for i in order],
            "image": ["original"] * len(order) + ["edited"] * len(order),
        },
        x="class",
        y="probability",
        color="image",
        stack=False,
        height=260,
    )


def _preview_caption(s: A.Analysis, pending: Edit | None) -> str:
    if pending is None:
        return "edited (no edit pending)" if s.edits else "no edit yet"
    if pending.kind in ("move", "rotate", "scale"):
        return "edited (region mask moves with it)"
    return "edited (the region is gone)" if pending.kind == "remove" else "edited (region outlined)"


s = state.get()
st.title("Inspect")
st.caption(
    "Change one region and watch the prediction move: this is how a shortcut or a bias is caught."
)
if runtime.ready_classifier(s) is None:
    st.stop()
reg = caches.regions(s)
base = edited(s.image, reg.labels, tuple(s.edits))
k = int(base.labels.max()) + 1
# Edits keep the region ids unless a region vanished; then the names no longer line up.
names = reg.names if k == reg.n_regions else ("",) * k
c1, c2 = display.columns([1, 1], gap="large")
with c1:
    region = st.selectbox(
        "Region",
        region_order(s, names, k),
        key="edit_region",
        format_func=functools.partial(region_label, s, names),
        help="Named regions first, then by how much the explanation weighs them",
    )
    pending = edit_controls(int(region), *s.image.shape[:2])
    try:
        preview = base if pending is None else apply_edit(base.image, base.labels, pending)
    except lc.LimecraftError as e:
        display.error(str(e))
        st.stop()
    row = st.container(horizontal=True)  # buttons wrap rather than truncate their labels
    # an edit that changes nothing (a 0° rotation, a move by 0) is not stacked
    unchanged = pending is None or _same(preview, base)
    row.button(
        "Apply edit",
        type="primary",
        key="apply_edit",
        on_click=_apply,
        args=(s, pending),
        disabled=unchanged,
        help=(
            "Choose an edit above"
            if pending is None
            else "This edit changes nothing yet: set how it changes the region"
            if unchanged
            else None
        ),
    )
    row.button("Undo", key="undo_edit", disabled=not s.edits, on_click=_undo, args=(s,))
    row.button("Reset", key="reset_edits", disabled=not s.edits, on_click=_reset, args=(s,))
    if s.edits:
        st.markdown(
            "**Applied edits**\n"
            + "\n".join(
                f"{i + 1}. {display.md(line)}" for i, line in enumerate(A.edit_names(s, reg.names))
            )
        )
with c2:
    a, b = st.columns(2)
    # outlined on display-sized copies: at full size a large photo's outline takes seconds
    base_image, base_labels = display.for_drawing(base.image, base.labels)
    mark = lc.boundaries(base_image, (base_labels == region).astype(np.int32), color=(1, 0.5, 0))
    a.image(
        display.to_display(mark, 280),
        caption="before this edit (region outlined)" if s.edits else "original (region outlined)",
    )
    if preview.region >= 0 and pending is not None:
        preview_image, preview_labels = display.for_drawing(preview.image, preview.labels)
        edited_outline = lc.boundaries(
            preview_image, (preview_labels == preview.region).astype(np.int32), color=(1, 0.5, 0)
        )
    else:
        edited_outline = preview.image
    b.image(display.to_display(edited_outline, 280), caption=_preview_caption(s, pending))
watermark_view.region_buttons(s, "inspect")
before = runtime.predict(s, s.image)
after = runtime.predict(s, preview.image)
follow: int | None = None
if before is not None and after is not None:
    st.subheader("Prediction: original and edited")
    follow = follow_control(s, before)
    prediction_table(s, before, after, follow)
    st.divider()
    transplant_view.section(
        s, base.image, base.labels, int(region), region_label(s, names, int(region)), follow
    )

st.divider()
st.subheader("Re-explain the edited image")
st.caption(
    "Explains exactly the edited image in the preview above; the edited region's mask is "
    "moved, rotated and scaled along with the object."
)
if st.button("Explain the edited image", key="explain_edited"):
    try:
        k2 = int(preview.labels.max()) + 1
        edited_regions = lc.regions_from_labels(
            preview.labels, list(names) if k2 == len(names) else None
        )
        run = caches.run_key(preview.image, edited_regions, A.model_ref(s), s.config)
        ex = explain_run.run_explain(
            preview.image, edited_regions, run, "Explaining the edited image"
        )
        A.set_edited(s, preview.image, ex)
    except (lc.LimecraftError, lc.ModelError) as e:
        display.error(f"Explain failed: {e}")
if s.edited_explanation is not None and s.edited_image is not None:
    same = np.array_equal(s.edited_image, preview.image)
    if not same:
        st.info(
            "This explanation is of the edited image shown here, which differs from the preview "
            "above: press the button to explain the preview.",
            icon=":material/info:",
        )
    st.image(display.to_display(s.edited_image, 280), caption="the explained image")
    scored = runtime.predict(s, s.edited_image)
    if follow is not None and before is not None and scored is not None:
        st.markdown(
            f"Followed class on the explained image: **{display.md(runtime.class_label(s, follow))}"
            f"** {scored[follow]:.3f} (the original: {before[follow]:.3f})"
        )
    results(s, s.edited_explanation, key="edited", image=s.edited_image)
