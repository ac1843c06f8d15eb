"""Craft regions: automatic superpixels, regions you draw, regions you upload, merges and splits."""

from __future__ import annotations

import functools

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core.config import spec
from limecraft_core.io import decode_mask
from limecraft_core.regions import mask_from_canvas, region_at, toggle
from pages.lib import analysis as A
from pages.lib import caches, config_form, display, frame, propose_view, state, watermark_view
from pages.lib.session import session

frame.start()  # the sidebar and the page's frame, inside this page's run (pages/lib/frame.py)

CANVAS_WIDTH = 480
DRAW_MODES = {
    "freehand (a closed stroke is filled)": "freedraw",
    "polygon (click the first point to close)": "polygon",
    "rectangle": "rect",
    "circle": "circle",
}


def superpixel_controls(s: A.Analysis) -> None:
    # Keys per analysis (state.wkey): the widgets show the analysis after a switch or a reload.
    c1, c2, c3 = st.columns([2, 2, 2])
    method = c1.selectbox(
        "Superpixels",
        lc.SEGMENTERS,
        index=lc.SEGMENTERS.index(s.seg.method),
        key=state.wkey("seg_method"),
    )
    n = c2.slider("Target number of regions", 4, 300, s.seg.n_segments, key=state.wkey("seg_n"))
    outer = c3.radio(
        "Outside your regions",
        ["segment", "one"],
        index=0 if s.seg.outer == "segment" else 1,
        key=state.wkey("seg_outer"),
        horizontal=True,
        format_func=lambda v: "superpixels" if v == "segment" else "one background region",
    )
    with st.expander(f"{method} parameters"):
        params = _method_params(method, dict(s.seg.params) if method == s.seg.method else {})
        inner_method, size = _detail_controls(s)
    A.set_segmentation(s, A.SegSettings(method, int(n), outer, params, inner_method, size))


def _detail_controls(s: A.Analysis) -> tuple[str, int | str | None]:
    """The schema's other segmentation settings: the method inside handcrafted regions, and the
    size the image is segmented at (the app's default keeps previews quick)."""
    c1, c2 = st.columns(2)
    inner = config_form.setting_widget(spec("inner_method"), s.seg.inner_method, c1)
    options = [A.APP_WORKING_SIZE, *config_form.WORKING_SIZES]
    options = list(dict.fromkeys([*options, s.seg.working_size]))
    size = c2.selectbox(
        "Working size",
        options,
        index=options.index(s.seg.working_size),
        key=state.wkey("seg_working_size"),
        help=spec("working_size").help,
        format_func=lambda v: (
            "app default (192 px for quickshift and felzenszwalb, else 512)"
            if v == A.APP_WORKING_SIZE
            else ("full size" if v is None else str(v))
        ),
    )
    return inner, size


# (parameter, label, min, max, default, step) per method; the count sets the scale parameters.
METHOD_PARAMS = {
    "slic": [
        ("compactness", "Compactness (higher: squarer regions)", 0.1, 100.0, 10.0, 0.5),
        ("sigma", "Smoothing sigma", 0.0, 5.0, 1.0, 0.1),
    ],
    "quickshift": [
        ("ratio", "Colour vs. space ratio", 0.0, 1.0, 0.2, 0.05),
        ("max_dist", "Max distance", 10.0, 500.0, 200.0, 10.0),
    ],
    "felzenszwalb": [("sigma", "Smoothing sigma", 0.0, 5.0, 0.5, 0.1)],
    "watershed": [("compactness", "Compactness", 0.0, 0.1, 0.001, 0.0005)],
    "grid": [],
}


def _method_params(method: str, now: dict[str, float]) -> tuple[tuple[str, float], ...]:
    spec = METHOD_PARAMS[method]
    if not spec:
        st.caption("A regular grid has no parameters beyond the count.")
        return ()
    cols = st.columns(len(spec))
    out = []
    for col, (name, label, lo, hi, default, step) in zip(cols, spec, strict=True):
        v = col.slider(
            label,
            lo,
            hi,
            float(now.get(name, default)),
            step,
            key=state.wkey(f"segp_{method}_{name}"),
            format="%g",
        )
        if v != default:
            out.append((name, float(v)))
    return tuple(out)


def _add_drawn(s: A.Analysis, image_data: np.ndarray | None) -> bool:
    try:
        A.add_region(
            s,
            mask_from_canvas(image_data, s.image.shape[:2]),
            st.session_state.get("new_region_name", ""),
        )
    except lc.LimecraftError as e:
        display.error(str(e))
        return False
    s.canvas_version += 1  # a fresh, empty canvas for the next region
    session().clear_region_name = True
    return True


def drawing(s: A.Analysis) -> None:
    from streamlit_drawable_canvas import st_canvas  # only inside a running app (import gotcha)

    h, w = s.image.shape[:2]
    # As wide as the column the browser gives it (at most CANVAS_WIDTH), so the whole image can
    # be drawn on at any window size; the mask is mapped back to image pixels.
    room = display.column_width("canvas_room", CANVAS_WIDTH)
    width = room if w >= h else max(160, min(room, round(CANVAS_WIDTH * w / h)))
    height = max(1, round(width * h / w))
    if session().clear_region_name:
        session().clear_region_name = False
        st.session_state["new_region_name"] = ""  # allowed: the input is not drawn yet this run
    c1, c2 = st.columns([3, 2])
    mode = c1.selectbox("Drawing tool", list(DRAW_MODES), key="draw_mode")
    c2.text_input(
        "Name of the next region", key="new_region_name", placeholder=f"region {len(s.hand) + 1}"
    )
    st.caption(
        "Draw one region (several strokes are fine), then press **Add as region**. "
        "The canvas toolbar (on hover) has undo and clear."
    )
    st.write("")  # room for the canvas's floating toolbar
    result = st_canvas(
        fill_color="rgba(255, 165, 0, 0.35)",
        stroke_width=3,
        stroke_color="#ff8c00",
        background_image=display.jpeg_bytes(state.with_regions(s.image, s.hand), width),
        height=height,
        width=width,
        drawing_mode=DRAW_MODES[mode],
        return_image_data=True,
        key=f"canvas-{s.canvas_version}",
    )
    data = result.image_data if result is not None else None
    if st.button("Add as region", key="add_region", type="primary") and _add_drawn(s, data):
        st.rerun()


def upload_masks(s: A.Analysis) -> None:
    up = st.file_uploader(
        "Upload a mask (PNG: each non-zero value or non-black colour is one region)",
        type=["png"],
        key="mask_upload",
    )
    if up is None:
        return
    try:
        masks, problem = _mask_regions(s, up.getvalue(), up.name), None
    except lc.LimecraftError as e:
        masks, problem = [], e
    listed = [any(np.array_equal(m, h.mask) for h in s.hand) for m in masks]
    if masks and all(listed):  # this file's regions are in the list already
        n = len(masks)
        what = f"The {n} regions of" if n > 1 else "The region of"
        st.caption(
            f":material/check: {what} '{display.md(up.name)}' {'are' if n > 1 else 'is'} in "
            "the list above. Upload another mask to add more."
        )
        return
    if st.button("Add the mask's regions", key="add_mask"):
        if problem is not None:
            display.error(f"That mask was not used: {problem}")
            return
        for m, there in zip(masks, listed, strict=True):
            if not there:
                A.add_region(s, m, f"{up.name} {len(s.hand) + 1}", "uploaded")
        st.rerun()


def _mask_regions(s: A.Analysis, data: bytes, name: str) -> list[np.ndarray]:
    """The regions of an uploaded mask file, or a LimecraftError that says what is wrong."""
    lab = decode_mask(data, f"'{name}'")
    masks = lc.masks_from_label_image(lab)
    if lab.shape != s.image.shape[:2]:
        raise lc.LimecraftError(
            f"the mask is {lab.shape[1]}x{lab.shape[0]} but the image is "
            f"{s.image.shape[1]}x{s.image.shape[0]}; a mask must have the image's size"
        )
    if not masks:
        raise lc.LimecraftError("the mask has no non-zero pixels, so no region")
    return masks


def demo_walkthrough(s: A.Analysis) -> None:
    """The demo story: the model learned a shortcut (the tag); draw it and see LIME find it."""
    if s.tag_mask is None:
        return
    with st.container(border=True):
        st.markdown(
            f"**Demo walkthrough.** This image: {display.md(s.note)}.  \n"
            "The demo model learned from pictures whose coloured *tag* names the class, like a "
            "watermark, and from untagged pictures of the shapes: it reads the tag when there is "
            "one and looks at the shape only when there is none. 1. On **Explain**, explain with "
            "automatic superpixels: the tag is often split or merged with its surroundings. "
            "2. Draw a box around the tag here (or add it with the button). 3. Explain again and "
            "press **Compare**: the tag stands out. 4. On **Inspect**, remove the tag: the "
            "prediction flips to the shape that is drawn. On **Trust**, check it."
        )
        st.button(
            "Add the tag as a region",
            key="add_tag",
            on_click=A.add_tag,
            args=(s,),
            disabled=any(h.name == "tag" for h in s.hand),
        )


#: How a handcrafted region's origin reads on the page (a proposal: "proposed by text").
ORIGIN_WORDS = {"uploaded": "from an uploaded mask"}


def region_list(s: A.Analysis) -> None:
    if not s.hand:
        st.caption("No handcrafted regions yet.")
        return
    for i, h in enumerate(list(s.hand)):
        c1, c2, c3 = st.columns([3, 2, 0.8], vertical_alignment="bottom")
        name = c1.text_input(
            f":{h.colour}[■] Region {i + 1} name", h.name, key=f"hname-{h.uid}", max_chars=80
        )
        inner = c2.number_input(
            "Pieces inside (1: one feature)", 1, 50, h.inner, key=f"hinner-{h.uid}"
        )
        A.update_region(s, h.uid, name, int(inner))
        c3.button(
            "",
            icon=":material/delete:",
            key=f"hdel-{h.uid}",
            help=f"Delete {display.md(h.name)}",
            on_click=A.delete_region,
            args=(s, h.uid),
        )
        if h.origin != "drawn":  # where it came from, when not drawn here
            c1.caption(ORIGIN_WORDS.get(h.origin, h.origin.replace("proposed:", "proposed by ")))


def _on_pick(s: A.Analysis, labels: np.ndarray, keys: tuple[str, ...]) -> None:
    c = st.session_state.get("pick")
    if not c:
        return
    region = region_at(labels, c["x"], c["y"], c["width"], c["height"])
    s.selected = toggle(s.selected, keys[region])  # the pure toggle (tested in test_canvas)


def selection(s: A.Analysis, reg: lc.Regions) -> None:
    from streamlit_image_coordinates import streamlit_image_coordinates

    labels = reg.labels
    image, drawn = display.for_drawing(s.image, labels)
    picture = lc.region_map(image, drawn, alpha=0.25)
    chosen = [reg.index_of(k) for k in s.selected if k in reg.keys]
    if chosen:
        m = np.isin(drawn, chosen)
        picture[m] = (0.4 * picture[m] + 0.6 * np.array([255, 255, 255])).astype(np.uint8)
    left, right = display.columns([3, 2], gap="large")
    with left:
        streamlit_image_coordinates(
            display.label_ids(picture, drawn, CANVAS_WIDTH),
            width="content",  # shrinks to the column; clicks come back in displayed pixels
            key="pick",
            on_click=functools.partial(_on_pick, s, labels, reg.keys),
            cursor="crosshair",
            image_format="JPEG",
            jpeg_quality=90,
        )
        st.caption(
            f"{reg.n_regions} regions; the ids match the results table. Click regions to "
            "select them (white); click again to deselect."
        )
    right.markdown(f"**Selected:** {', '.join(str(i) for i in sorted(chosen)) or 'none'}")
    name = right.text_input(
        "Name for the merged region", key="merge_name", placeholder="merged region"
    )
    row = right.container(horizontal=True)  # buttons wrap rather than truncate their labels
    if row.button(f"Merge selected ({len(chosen)})", key="merge", disabled=len(chosen) < 2):
        A.merge(s, reg, sorted(chosen), name)
        st.rerun()
    row.button(
        "Clear selection",
        key="clear_sel",
        disabled=not chosen,
        on_click=A.clear_selection,
        args=(s,),
    )
    merged_ids = [i for i, g in enumerate(reg.groups) if len(g) > 1]
    if merged_ids:
        target = right.selectbox(
            "Merged region to split back",
            merged_ids,
            key="split_pick",
            format_func=lambda i: f"{i} {reg.names[i]}",
        )
        if right.button("Split", key="split"):
            A.split(s, reg, target)
            st.rerun()


s = state.get()
st.title("Craft regions")
st.caption(
    "The explanation is made of these regions. Draw the parts that mean something to you; "
    "the rest is covered by automatic superpixels."
)
superpixel_controls(s)
if caches.regions(s).note:
    st.info(caches.regions(s).note, icon=":material/info:")
left, right = display.columns([3, 2], gap="large")
with left:
    st.subheader("Draw a region")
    drawing(s)
with right:
    demo_walkthrough(s)
    if s.tag_mask is None:  # a photo: ImageNet models' published shortcut, one click away
        watermark_view.region_buttons(s, "craft")
    propose_view.section(s)
    st.subheader("Your regions")
    region_list(s)
    upload_masks(s)
st.divider()
st.subheader("Region map: click to select, then merge")
selection(s, caches.regions(s))
