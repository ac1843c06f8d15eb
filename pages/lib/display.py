"""Pictures and text for the browser: display sizes, region ids, escaped user text, errors.

Thin helpers over the engine's renderers; no session state.
"""

from __future__ import annotations

import io
import re
import threading
import weakref
from collections.abc import Sequence

import numpy as np
import streamlit as st
from PIL import Image

from limecraft_core import render
from limecraft_core.trust import name_regions
from pages.lib.session import session

DISPLAY_WIDTH = 560  # px sent to the browser for the main pictures
VERDICT_TEXT = {
    "stable": ":green-badge[stable]",
    "borderline": ":orange-badge[borderline]",
    "unstable": ":red-badge[unstable]",
}
NARROW_PX = 720  # a main area narrower than this stacks side-by-side columns


def to_display(a: np.ndarray, width: int = DISPLAY_WIDTH) -> Image.Image:
    """A picture for the browser, ``width`` px wide (aspect kept): large photos are shrunk so
    pages stay light, small images are enlarged so drawing on them is comfortable."""
    im = Image.fromarray(a)
    if im.width != width:
        resample = Image.Resampling.LANCZOS if im.width > width else Image.Resampling.NEAREST
        im = im.resize((width, max(1, round(im.height * width / im.width))), resample)
    return im


DRAW_LONG_SIDE = 2 * DISPLAY_WIDTH  # pictures are drawn from copies no larger than this
_drawn: dict[tuple[int, int, int], tuple[weakref.ref, weakref.ref, np.ndarray, np.ndarray]] = {}
_drawn_lock = threading.Lock()


def for_drawing(
    image: np.ndarray, labels: np.ndarray, long_side: int = DRAW_LONG_SIDE
) -> tuple[np.ndarray, np.ndarray]:
    """The image and its label map at most ``long_side`` px on the long side, to draw the
    page's pictures from: a 6000x4000 photo's overlays, heatmaps and outlines would take seconds
    each at full size, to be shrunk to a few hundred pixels in the browser anyway. The image is
    box-filtered, the labels are sampled under each pixel's centre. Smaller images come back as
    they are. The copies are kept while the arrays they were made from live, so each rerun
    reuses them."""
    if max(labels.shape) <= long_side:
        return image, labels
    key = (id(image), id(labels), long_side)
    with _drawn_lock:
        hit = _drawn.get(key)
    if hit is not None and hit[0]() is image and hit[1]() is labels:
        return hit[2], hit[3]
    small_labels = labels_for_drawing(labels, long_side)
    size = small_labels.shape
    small = np.asarray(
        Image.fromarray(image).resize((size[1], size[0]), Image.Resampling.BOX), np.uint8
    )
    with _drawn_lock:
        for k in [k for k, v in _drawn.items() if v[0]() is None or v[1]() is None]:
            del _drawn[k]  # the arrays they were made from are gone
        _drawn[key] = (weakref.ref(image), weakref.ref(labels), small, small_labels)
    return small, small_labels


def labels_for_drawing(labels: np.ndarray, long_side: int = DRAW_LONG_SIDE) -> np.ndarray:
    """The label map at most ``long_side`` px on the long side (see :func:`for_drawing`)."""
    from limecraft_core.regions import resize_nearest

    h, w = labels.shape
    if max(h, w) <= long_side:
        return labels
    scale = long_side / max(h, w)
    return resize_nearest(labels, (max(1, round(h * scale)), max(1, round(w * scale))))


def jpeg_bytes(a: np.ndarray, width: int = DISPLAY_WIDTH) -> bytes:
    buf = io.BytesIO()
    to_display(a, width).save(buf, format="JPEG", quality=88)
    return buf.getvalue()


def png_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG")
    return buf.getvalue()


_id_positions = st.cache_data(max_entries=64, show_spinner=False)(render.id_positions)


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


@st.cache_data(max_entries=32, show_spinner=False)
def _outlined(image: np.ndarray, labels: np.ndarray, width: int) -> np.ndarray:
    from skimage.segmentation import find_boundaries

    from limecraft_core.regions import resize_nearest

    im = np.asarray(to_display(image, width), np.float64)
    # Labels at display size, so the lines are one display pixel thin at any size.
    edge = find_boundaries(resize_nearest(labels, im.shape[:2]), mode="inner")
    im[edge] = 0.35 * im[edge] + 0.65 * 255  # light lines: the photo's colours stay readable
    return im.astype(np.uint8)


def outlined(
    image: np.ndarray, labels: np.ndarray, width: int = DISPLAY_WIDTH, max_labels: int = 150
) -> Image.Image:
    """The photo itself at display size, with thin region outlines and each region's id."""
    return label_ids(_outlined(image, labels, width), labels, width, max_labels)


_WIDTH_JS = """
export default function ({ parentElement, data, setStateValue }) {
  // Reports the width only when it matters: below the limit (the page must adapt) or when it
  // grows back above it. A wide window never reports, so it never causes an extra rerun.
  const host = parentElement.host || parentElement;
  const limit = (data && data.limit) || 0;
  let last = 0, timer = null;
  const send = () => {
    const w = Math.floor(host.getBoundingClientRect().width);
    if (w <= 0) return;
    const narrow = w < limit && Math.abs(w - last) >= 8;
    const widened = last > 0 && last < limit && w >= limit;
    if (narrow || widened) { last = w; setStateValue("width", w); }
  };
  const ro = new ResizeObserver(() => { clearTimeout(timer); timer = setTimeout(send, 150); });
  ro.observe(host);
  send();
  return () => { ro.disconnect(); clearTimeout(timer); };
}
"""
_width_probe = st.components.v2.component(
    "limecraft.column_width", html="<div></div>", js=_WIDTH_JS, isolate_styles=False
)


def column_width(key: str, limit: int) -> int:
    """The width in CSS px of the column this is called in, as the browser lays it out, when it
    is under ``limit``; else ``limit`` (a wide column is not reported, so it costs no rerun;
    AppTest, which runs no browser, always gets ``limit``)."""
    out = _width_probe(
        key=key, data={"limit": limit}, default={"width": None}, on_width_change=lambda: None
    )
    w = out.get("width") if out is not None else None
    return min(int(w), limit) if isinstance(w, (int, float)) and w > 0 else limit


def measure_main() -> None:
    """Measure the main area's width once per run (app.py calls it before the page)."""
    session().main_px = column_width("main_room", NARROW_PX)


def columns(spec: list[float], **kwargs):
    """``st.columns(spec)`` when the main area is wide enough, else the same number of
    full-width containers one under the other (a canvas or a picture in a third of 480 px is
    unusable). The width is the browser's (:func:`measure_main`)."""
    if session().main_px >= NARROW_PX:
        return st.columns(spec, **kwargs)
    return [st.container() for _ in spec]


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$])")


def md(text: object) -> str:
    """User text (file names, region names, class labels) made inert for st.markdown."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def md_sentence(text: object) -> str:
    """User or engine text as a whole sentence for st.markdown: made inert, with a full stop
    unless it ends with one (the engine's messages do not)."""
    raw = str(text).rstrip()
    return md(raw) + ("" if raw.endswith((".", "!", "?")) else ".")


def error(msg: str) -> None:
    st.error(msg, icon=":material/error:")


def named_reason(reason: str, names: Sequence[str]) -> str:
    """A verdict's reason with each region it names by id called as the app calls it: "region 0
    (watermark) is first in all 40 resamples" (its id, then its name when it has one)."""

    def label(i: int) -> str:
        name = names[i] if 0 <= i < len(names) else ""
        return f"region {i} ({name})" if name else f"region {i}"

    return name_regions(reason, label)
