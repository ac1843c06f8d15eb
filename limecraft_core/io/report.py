"""Exports of an explanation: a self-contained HTML report, and the regions as CSV.

Pure functions returning text; the caller writes or serves it. The report is rendered from the
Jinja2 template ``templates/report.html.j2`` with autoescaping on, so every piece of user text
(region names, file names, class labels, edit descriptions) is escaped by the template engine.
Images are inlined as PNG data URLs and the CSS is inline: the page fetches nothing.
"""

from __future__ import annotations

import base64
import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from typing import Any

import jinja2
import numpy as np
from PIL import Image

from .. import render
from .._validate import LimecraftError
from ..result import Explanation
from ..trust import fidelity, field_metric_rows

__all__ = ["PredictionChange", "ReportEdit", "html_report", "regions_csv"]

#: Pictures in the report are at least this many px on their long side (small images are
#: upscaled) and at most ``_MAX_SIDE`` (large ones are scaled down to keep the file small).
MIN_SIDE_PX = 512
_MAX_SIDE = 1024
#: Regions in the report's short table; the full table is folded below it.
TOP_REGIONS = 10
#: Regions tinted for and against the class in the evidence picture.
_TOP_K = 5
#: Above this many regions the region map carries no ids (they would cover it).
_MAX_ID_LABELS = 80


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class PredictionChange:
    """One class's model output before and after an edit.

    Attributes
    ----------
    label : str, the class label (user text: escaped in the report)
    original, edited : float, the model's output on the image before and after
    """

    label: str
    original: float
    edited: float

    @property
    def change(self) -> float:
        return float(self.edited) - float(self.original)


@dataclass(frozen=True, eq=False)
class ReportEdit:
    """One step of the inspection: an edit, the image before and after it, and what it changed.

    Attributes
    ----------
    description : str, e.g. ``"remove region 0 (fill inpaint) (tag)"``
    before, after : (H, W, 3) uint8 ndarrays, the image before and after this edit (the app
        applies edits cumulatively: the first edit's ``before`` is the original image)
    changes : sequence of PredictionChange, the top classes' outputs before and after

    Raises
    ------
    LimecraftError
        If an image is not (H, W, 3) uint8.
    """

    description: str
    before: np.ndarray
    after: np.ndarray
    changes: Sequence[PredictionChange] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for name in ("before", "after"):
            a = np.asarray(getattr(self, name))
            if a.ndim != 3 or a.shape[2] != 3 or a.dtype != np.uint8:
                raise LimecraftError(
                    f"ReportEdit.{name} must be an (H, W, 3) uint8 image, got {a.dtype} {a.shape}"
                )
        object.__setattr__(self, "changes", tuple(self.changes))


# ----------------------------------------------------------------------------- the view model
# What the template shows, as plain values: every number is formatted here, every piece of
# text is left raw for the template to escape.


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


@dataclass(frozen=True)
class _Summary:
    label: str
    score: str
    region: str | None  # the region that drives the class (None: no region supports it)
    region_id: int | None
    named: bool  # the region has a name of its own (its id is then added)
    effect: str  # what hiding it does, e.g. "lowers the star score by 0.79"
    fit: str
    r2: str
    stability: str  # e.g. "stable across 5 repeats", or ""


@dataclass(frozen=True)
class _Check:
    name: str
    result: str
    verdict: str
    tone: str  # good, warn, bad or info


@dataclass(frozen=True)
class _Region:
    id: int
    name: str
    pixels: int
    weight: float
    delta: float
    kept_alone: float


@dataclass(frozen=True)
class _Setting:
    group: str
    name: str
    value: str
    default: str
    help: str
    changed: bool


@dataclass(frozen=True)
class _Change:
    label: str
    original: str
    edited: str
    change: float


@dataclass(frozen=True)
class _Edit:
    description: str
    before: _Picture
    after: _Picture
    changes: tuple[_Change, ...]


# ----------------------------------------------------------------------------- pictures


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


# ----------------------------------------------------------------------------- text


def _num(v: float, digits: int = 2) -> str:
    return f"{v:.{digits}f}" if v is not None and np.isfinite(v) else "—"


def _summary(ex: Explanation) -> _Summary:
    """The one-sentence conclusion: class, the region that drives it, its effect, the verdicts."""
    label = ex.class_labels[0]
    w = np.asarray(ex.weights, np.float64)
    top = int(np.argmax(w))
    region, effect = None, ""
    # A weight too small to be tinted in the evidence picture does not drive anything.
    if w[top] > 0 and w[top] >= render.MIN_SHARE * np.abs(w).max():
        region = _region_name(ex, top)
        d = float(ex.deltas[0, top])
        if not np.isfinite(d):
            effect = f"its weight is {w[top]:+.2f} (hiding it alone was not measured)"
        elif d >= 0:
            effect = f"hiding it lowers the {label} score by {d:.2f}"
        else:
            effect = f"yet hiding it alone raises the {label} score by {-d:.2f}"
    st = ex.trust.stability
    return _Summary(
        label=label,
        score=_num(float(ex.predictions[0])),
        region=region,
        region_id=top if region is not None else None,
        named=bool(ex.region_names[top]),
        effect=effect,
        fit=fidelity(ex.score),
        r2=_num(ex.score),
        stability=f"{st.verdict} across {st.runs}" if st is not None else "",
    )


def _ids(ex: Explanation, ids: Sequence[int]) -> str:
    return ", ".join(
        f"{ex.region_names[i]} ({i})" if ex.region_names[i] else f"region {i}" for i in ids
    )


def _checks(ex: Explanation) -> list[_Check]:
    """Every trust check that ran, with its verdict (computed in limecraft_core.trust)."""
    fit = fidelity(ex.score)
    out = [
        _Check(
            "Surrogate fit",
            f"weighted R² {ex.score:.3f} over {ex.n_regions} regions and "
            f"{ex.run.samples_used} samples",
            fit,
            {"good": "good", "fair": "warn"}.get(fit, "bad"),
        )
    ]
    t = ex.trust
    if t.stability is not None:
        s = t.stability
        out.append(
            _Check(
                f"Stability over {s.runs}",
                (f"{s.reason[0].upper()}{s.reason[1:]}. " if s.reason else "")
                + (
                    f"{len(s.matter)} regions matter: Kendall's W over them "
                    f"{s.matter_kendall_w:.2f}, top-k overlap {s.matter_topk:.2f}, sign flips "
                    f"{s.matter_sign_flips:.0%}; "
                    if s.reason
                    else ""
                )
                + f"Kendall's W over the top-10 {s.kendall_w:.3f}, top-5 overlap "
                f"{s.jaccard_top5:.2f}"
                + (
                    f"; {len(s.inconsistent_sign)} regions change sign (sign entropy > 0)"
                    if s.inconsistent_sign
                    else ""
                ),
                s.verdict,
                {"stable": "good", "borderline": "warn"}.get(s.verdict, "bad"),
            )
        )
    if t.early_stop is not None:
        e = t.early_stop
        out.append(
            _Check(
                "Early stop",
                f"{e.samples_used} of {e.samples_requested} samples"
                + (
                    ": two halves of the sample were stable by the stability verdict's rule"
                    if e.stopped
                    else ""
                ),
                "stopped early" if e.stopped else "ran to the end",
                "info",
            )
        )
    if t.convergence is not None:
        c = t.convergence
        out.append(
            _Check(
                "Convergence",
                f"the verdict at {', '.join(map(str, c.sizes))} samples: "
                + ", ".join(c.verdicts or [f"W {v:.2f}" for v in c.kendall_w]),
                f"stable from {c.needed} samples" if c.needed else f"not stable by {c.sizes[-1]}",
                "good" if c.needed else "warn",
            )
        )
    if t.kernel_sweep is not None:
        k = t.kernel_sweep
        out.append(
            _Check(
                "Kernel widths",
                f"widths {', '.join(map(str, k.widths))}; R² "
                + ", ".join(f"{v:.2f}" for v in k.scores)
                + (f"; width-sensitive: {_ids(ex, k.sensitive)}" if k.sensitive else ""),
                "width-sensitive" if k.sensitive else "robust to the width",
                "warn" if k.sensitive else "good",
            )
        )
    if t.faithfulness is not None:
        f = t.faithfulness
        held = f"; held-out R² {f.heldout_r2:.2f}" if f.heldout_r2 is not None else ""
        out.append(
            _Check(
                "Faithfulness",
                f"deletion AUC {f.deletion_auc:.3f} (random {f.random_deletion_auc:.3f}), "
                f"insertion AUC {f.insertion_auc:.3f} (random {f.random_insertion_auc:.3f}){held}",
                "beats random orders" if f.beats_random else "does not beat random orders",
                "good" if f.beats_random else "bad",
            )
        )
    if t.fills is not None:
        fc = t.fills
        out.append(
            _Check(
                "Fills",
                "top region per fill: "
                + ", ".join(
                    f"{n}: {_ids(ex, [i])}" for n, i in zip(fc.fills, fc.top1, strict=True)
                ),
                "the same top region" if fc.agree else "the top region depends on the fill",
                "good" if fc.agree else "warn",
            )
        )
    out += _localisation_check(ex)
    return out


def _localisation_check(ex: Explanation) -> list[_Check]:
    """The localisation against the expected regions, when they were marked."""
    loc = ex.trust.localisation
    if loc is None:
        return []
    return [
        _Check(
            "Localisation",
            f"against the expected regions {_ids(ex, loc.regions)}: relevance mass "
            f"{loc.relevance_mass:.0%}, relevance rank accuracy "
            f"{loc.relevance_rank_accuracy:.0%}, pointing game "
            f"{'hit' if loc.pointing_game else 'miss'}",
            "the top region is expected" if loc.pointing_game else "the top region is not expected",
            "good" if loc.pointing_game else "bad",
        )
    ]


def _regions(ex: Explanation) -> list[_Region]:
    """Every region, largest |weight| first."""
    order = np.argsort(-np.abs(ex.weights), kind="stable")
    return [
        _Region(
            id=int(k),
            name=ex.region_names[k],
            pixels=int(ex.region_pixels[k]),
            weight=float(ex.weights[k]),
            delta=float(ex.deltas[0, k]),
            kept_alone=float(ex.kept_alone[0, k]),
        )
        for k in order
    ]


def _value(v: Any) -> str:
    """A setting's value as a reader wants it: None is the default behaviour, lists are lists."""
    if v is None:
        return "default"
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, (list, tuple)):
        if not v:
            return "—"
        if all(isinstance(x, (list, tuple)) and len(x) == 2 for x in v):
            return ", ".join(f"{a}={b}" for a, b in v)
        return ", ".join("default" if x is None else str(x) for x in v)
    if isinstance(v, Mapping):
        return ", ".join(f"{a}={b}" for a, b in v.items()) or "—"
    if callable(v):
        return f"custom: {getattr(v, '__name__', 'function')}"
    return str(v)


def _settings(ex: Explanation) -> list[_Setting]:
    """Every setting in schema order, marked where it differs from the default."""
    changed = ex.config.changed()
    return [
        _Setting(s.group, s.name, _value(v), _value(s.default), s.help, s.name in changed)
        for s, v in ex.config.items()
    ]


def _run_facts(ex: Explanation) -> list[tuple[str, str]]:
    return [(k, _value(v)) for k, v in ex.run.to_dict().items()]


def _edits(edits: Sequence[ReportEdit]) -> list[_Edit]:
    out = []
    for e in edits:
        if not isinstance(e, ReportEdit):
            raise LimecraftError(
                f"edits must be ReportEdit values (description, before, after, changes); "
                f"got {type(e).__name__}"
            )
        out.append(
            _Edit(
                description=e.description,
                before=_picture(e.before, "before: " + e.description),
                after=_picture(e.after, "after: " + e.description),
                changes=tuple(
                    _Change(c.label, _num(c.original, 4), _num(c.edited, 4), c.change)
                    for c in e.changes
                ),
            )
        )
    return out


def _segmentation(ex: Explanation) -> str:
    seg = ex.config.segmentation
    what = "a given label map" if seg.method == "given" else f"{seg.method} superpixels"
    return f"{what}, {ex.run.handcrafted} handcrafted, {ex.run.merged} merged"


# ----------------------------------------------------------------------------- template


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("limecraft_core.io", "templates"),
        autoescape=True,  # every {{ }} is HTML-escaped; no text is marked safe anywhere
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["signed"] = lambda v, d=3: f"{v:+.{d}f}" if np.isfinite(v) else "—"
    env.filters["plain"] = lambda v, d=3: f"{v:.{d}f}" if np.isfinite(v) else "—"
    env.filters["tone"] = lambda v: (
        "" if not np.isfinite(v) or v == 0 else "pos" if v > 0 else "neg"
    )
    return env


def html_report(
    *,
    image: np.ndarray,
    explanation: Explanation,
    pictures: Mapping[str, np.ndarray] | None = None,
    edits: Sequence[ReportEdit] = (),
    source: str = "",
    notes: Sequence[str] = (),
    generated: datetime | None = None,
) -> str:
    """A self-contained HTML report of an explanation, readable on screen and printable on A4.

    In order: the conclusion in one sentence (class, the region that drives it, what hiding it
    does, the verdicts), large pictures with legends, the trust checks, the inspection's edits
    (before and after, with the prediction changes), the top regions (the full table folded),
    the settings that differ from the defaults (the full list folded), timings and versions.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, the explained image (its size matches the explanation's)
    explanation : Explanation
    pictures : mapping of caption -> (h, w, 3) uint8 ndarray, optional
        Pictures to show instead of the report's own (which are drawn from the explanation,
        with legends). Each is scaled to at least 512 px on its long side.
    edits : sequence of ReportEdit, the inspection's steps in order (empty: no section)
    source : where the image came from (a file name)
    notes : sentences shown under the conclusion
    generated : timestamp to print (default: now, UTC)

    Returns
    -------
    str, the HTML document; it makes no request when opened.

    Raises
    ------
    LimecraftError
        If the image does not match the explanation, or an edit is not a ReportEdit.
    """
    ex = explanation
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise LimecraftError(
            f"image must be an (H, W, 3) uint8 array, got {image.dtype} {image.shape}"
        )
    if image.shape[:2] != ex.segments.shape:
        raise LimecraftError(
            f"the image is {image.shape[1]}x{image.shape[0]} but the explanation's regions are "
            f"{ex.segments.shape[1]}x{ex.segments.shape[0]}: pass the explained image"
        )
    regions = _regions(ex)
    settings = _settings(ex)
    when = (generated or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            ex=ex,
            source=source or "image",
            size=f"{image.shape[1]}×{image.shape[0]} px",
            generated=when,
            summary=_summary(ex),
            notes=list(notes),
            figures=_given_figures(pictures) if pictures else _figures(image, ex),
            checks=_checks(ex),
            metrics=field_metric_rows(ex.trust),
            edits=_edits(edits),
            top_regions=regions[:TOP_REGIONS],
            regions=regions,
            changed=[s for s in settings if s.changed],
            settings=settings,
            segmentation=_segmentation(ex),
            run=_run_facts(ex),
            timings=[(k, f"{v:.3f} s") for k, v in ex.timings.items()],
            versions=list(ex.versions.items()),
            output_space=ex.config.targets.output_space,
        )
    )


def regions_csv(explanation: Explanation, cls: int | None = None) -> str:
    """The regions table for class ``cls`` (default: the target) as CSV text."""
    rows = explanation.regions_table(cls)
    buf = io.StringIO()
    w = csv.DictWriter(
        buf, fieldnames=["id", "key", "name", "pixels", "weight", "delta", "kept_alone"]
    )
    w.writeheader()
    for r in rows:
        # A leading =, +, - or @ would make a spreadsheet run a formula: quote it as text.
        name = r["name"]
        if name[:1] in ("=", "+", "-", "@"):
            name = "'" + name
        w.writerow({**r, "name": name})
    return buf.getvalue()
