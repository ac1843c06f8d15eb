"""Pictures and text for the browser: display sizes, region ids, escaped user text, errors.

Thin helpers over the engine's renderers; no session state.
"""

from __future__ import annotations

import io
import re

import numpy as np
import streamlit as st
from PIL import Image

from limecraft_core import render

DISPLAY_WIDTH = 560  # px sent to the browser for the main pictures


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


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$])")


def md(text: object) -> str:
    """User text (file names, region names, class labels) made inert for st.markdown."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def error(msg: str) -> None:
    st.error(msg, icon=":material/error:")
