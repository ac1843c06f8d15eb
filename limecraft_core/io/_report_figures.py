"""The HTML report's pictures, as data URLs.

The image, the overlay, the heatmap and the region map at a readable size, with the regions' ids
placed on them.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image

from .. import render
from ..result import Explanation

#: Pictures in the report are at least this many px on their long side (small images are
#: upscaled) and at most ``_MAX_SIDE`` (large ones are scaled down to keep the file small).
MIN_SIDE_PX = 512


_MAX_SIDE = 1024


#: Regions tinted for and against the class in the evidence picture.
_TOP_K = 5


#: Above this many regions the region map carries no ids (they would cover it).
_MAX_ID_LABELS = 80


@dataclass(frozen=True)
class _Picture:
    src: str  # a data URL
    width: int
    height: int
    alt: str


@dataclass(frozen=True)
class _Label:
    """A region id written over a picture, at (x, y) in percent of its size."""

    text: str
    x: float
    y: float


@dataclass(frozen=True)
class _Legend:
    picture: _Picture | None = None  # a legend drawn by limecraft_core.render
    scale: tuple[str, str, str] | None = None  # (CSS gradient, left end text, right end text)
    note: str = ""


@dataclass(frozen=True)
class _Figure:
    caption: str
    picture: _Picture
    legend: _Legend | None = None
    labels: tuple[_Label, ...] = ()


def _png_url(a: np.ndarray) -> str:
    buf = io.BytesIO()
    # Light compression: level 6 (the default) is 7x slower here for files only 15% smaller.
    Image.fromarray(a).save(buf, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _factor(shape: tuple[int, ...], long_side: int = MIN_SIDE_PX) -> int:
    """The integer upscaling factor that brings the long side to at least ``long_side``."""
    return max(1, math.ceil(long_side / max(shape[0], shape[1])))


def _resize(a: np.ndarray, width: int, height: int) -> np.ndarray:
    """(h, w, 3) uint8 picture, resized smoothly."""
    return np.asarray(Image.fromarray(a).resize((width, height), Image.Resampling.LANCZOS))


def _display(a: np.ndarray) -> np.ndarray:
    """A picture at a readable size: at least MIN_SIDE_PX on the long side, at most _MAX_SIDE."""
    a = np.ascontiguousarray(a, dtype=np.uint8)
    h, w = a.shape[:2]
    f = _factor(a.shape)
    if f > 1:
        return _resize(a, w * f, h * f)
    if max(h, w) > _MAX_SIDE:
        s = _MAX_SIDE / max(h, w)
        return _resize(a, max(1, round(w * s)), max(1, round(h * s)))
    return a


def _picture(a: np.ndarray, alt: str) -> _Picture:
    big = _display(a)
    return _Picture(src=_png_url(big), width=big.shape[1], height=big.shape[0], alt=alt)


def _upscaled(image: np.ndarray, segments: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The image (smooth) and its label map (nearest) at the report's drawing size, so that
    region boundaries are drawn one display pixel wide instead of one image pixel wide."""
    f = _factor(image.shape)
    if f == 1:
        return image, segments
    h, w = segments.shape
    return _resize(image, w * f, h * f), np.repeat(np.repeat(segments, f, axis=0), f, axis=1)


def _css(rgb: np.ndarray) -> str:
    r, g, b = (round(float(v) * 255) for v in rgb)
    return f"rgb({r},{g},{b})"


def _gradient() -> str:
    """The diverging scale of the heatmaps as a CSS gradient (negative on the left)."""
    stops = render.diverging_colors(np.linspace(-1, 1, 11), 1.0)
    return "linear-gradient(to right," + ",".join(_css(c) for c in stops) + ")"


def _region_name(ex: Explanation, k: int) -> str:
    return ex.region_names[k] or f"region {k}"


def _id_labels(segments: np.ndarray, ids: Sequence[int]) -> tuple[_Label, ...]:
    """Labels for the given region ids, placed well inside each region."""
    h, w = segments.shape
    wanted = set(ids)
    return tuple(
        _Label(text=str(k), x=100 * x / w, y=100 * y / h)
        for k, x, y in render.id_positions(segments)
        if k in wanted
    )


def _long_side(shape: tuple[int, ...]) -> int:
    """The long side, in px, at which the report draws an explanation's pictures."""
    long = max(shape[0], shape[1])
    return long * _factor(shape) if long <= _MAX_SIDE else _MAX_SIDE


def _figures(image: np.ndarray, ex: Explanation) -> list[_Figure]:
    """The report's own pictures of the explanation, large, each with its legend."""
    label = ex.class_labels[0]
    big, seg = _upscaled(image, ex.segments)
    w = np.asarray(ex.weights, np.float64)
    overlay = render.weight_overlay(
        image, ex.segments, w, k=_TOP_K, long_side=_long_side(image.shape)
    )
    legend = render.overlay_legend(
        max(overlay.shape[1], MIN_SIDE_PX // 2),
        class_label=label,
        k=_TOP_K,
        vmax=render.tinted_regions(w).vmax,
    )
    figures = [
        _Figure(caption="The image", picture=_picture(image, "the explained image")),
        _Figure(
            caption=f"Evidence: the regions for and against {label}",
            picture=_picture(overlay, "the regions for and against the class, with their ids"),
            legend=_Legend(
                picture=_picture(legend, "legend of the evidence picture"),
                note="The numbers are region ids, as in the tables below.",
            ),
        ),
    ]
    hm = render.heatmap(big, seg, w)
    figures.append(
        _Figure(
            caption=f"Weight of every region for {label}",
            picture=_picture(hm.image, "weight heatmap"),
            legend=_Legend(
                scale=(_gradient(), f"{hm.vmin:+.3g} against", f"for {hm.vmax:+.3g}"),
                note="The surrogate's weight of each region; the plain image where it is 0.",
            ),
        )
    )
    deltas = np.asarray(ex.deltas[0], np.float64)
    if np.isfinite(deltas).any():
        dm = render.delta_map(big, seg, deltas)
        figures.append(
            _Figure(
                caption=f"Change in the {label} score when a region alone is hidden",
                picture=_picture(dm.image, "prediction change when hidden"),
                legend=_Legend(
                    scale=(_gradient(), f"{dm.vmin:+.3g} rises", f"drops {dm.vmax:+.3g}"),
                    note="Measured by the model, one region hidden at a time.",
                ),
            )
        )
    many = ex.n_regions > _MAX_ID_LABELS
    figures.append(
        _Figure(
            caption=f"The {ex.n_regions} regions",
            picture=_picture(render.region_map(big, seg), "regions"),
            labels=() if many else _id_labels(ex.segments, range(ex.n_regions)),
        )
    )
    return figures


def _given_figures(pictures: Mapping[str, np.ndarray]) -> list[_Figure]:
    return [_Figure(caption=c, picture=_picture(p, c)) for c, p in pictures.items()]
