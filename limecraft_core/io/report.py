"""Exports of an explanation: a self-contained HTML report, and the regions as CSV.

Pure functions returning text; the caller writes or serves it. The report is rendered from the
Jinja2 template ``templates/report.html.j2`` with autoescaping on, so every piece of user text
(region names, file names, class labels, edit descriptions) is escaped by the template engine.
Images are inlined as PNG data URLs and the CSS is inline: the page fetches nothing.

The pictures are made in :mod:`._report_figures`, the words and tables in
:mod:`._report_checks`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache

import jinja2
import numpy as np

from .._validate import LimecraftError
from ..config import ExplainConfig
from ..result import Explanation
from ..trust import field_metric_rows
from ._report_checks import (
    TOP_REGIONS,
    _checks,
    _num,
    _regions,
    _run_facts,
    _segmentation,
    _settings,
    _summary,
)
from ._report_explainers import _explainers
from ._report_figures import MIN_SIDE_PX, _figures, _given_figures, _Picture, _picture
from ._report_inspection import ReportPasted, ReportTransplant, _comparison, _transplant

#: Rows of the explanation's own checks that the Trust page's table leaves out.
_EXPLANATION_ONLY = ("Surrogate fit", "Early stop")

__all__ = [
    "MIN_SIDE_PX",
    "PredictionChange",
    "ReportEdit",
    "ReportPasted",
    "ReportTransplant",
    "html_report",
    "regions_csv",
]


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
    trust: Explanation | None = None,
    comparison: Explanation | None = None,
    transplant: ReportTransplant | None = None,
    defaults: ExplainConfig | None = None,
) -> str:
    """The HTML text of a self-contained report of an explanation (it fetches nothing when
    opened), readable on screen and printable on A4.

    In order: the conclusion in one sentence, large pictures with legends, the trust checks,
    LIME versus LIMEcraft, the explainers side by side (when the explanation carries them), the
    region pasted into other images, the edits (before and after, with the prediction changes),
    the top regions and the changed settings (in full, folded), timings and versions.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, the explained image (its size matches the explanation's)
    explanation : Explanation
    pictures : mapping of caption -> (h, w, 3) uint8 ndarray, optional; shown instead of the
        report's own (drawn from the explanation, with legends), at 512 px or more
    edits : sequence of ReportEdit, the inspection's steps in order (empty: no section)
    source : where the image came from (a file name)
    notes : sentences shown under the conclusion
    generated : timestamp to print (default: now, UTC)
    trust : Explanation, optional; the Trust page's run over the same regions: its checks
        beside the explanation's own, and its field metrics when the explanation has none
    comparison : Explanation, optional; the same settings over automatic superpixels only,
        shown beside the explanation when it is for the same class
    transplant : ReportTransplant, optional; a region pasted into other images
    defaults : ExplainConfig, optional; what the settings are compared with (default: the
        engine's); a front end with defaults of its own (the app's SLIC) passes them

    Raises
    ------
    LimecraftError
        If the image does not match the explanation, an edit is not a ReportEdit, ``trust``
        was run over other regions, or ``comparison`` on another image size.
    """
    ex = explanation
    image = _explained_image(image, ex)
    trust_checks, trust_run, metrics = _trust_page(ex, trust)
    regions, settings = _regions(ex), _settings(ex, defaults)
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            ex=ex,
            source=source or "image",
            size=f"{image.shape[1]}×{image.shape[0]} px",
            generated=(generated or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC"),
            summary=_summary(ex),
            notes=list(notes),
            figures=_given_figures(pictures) if pictures else _figures(image, ex),
            checks=_checks(ex),
            trust_checks=trust_checks,
            trust_run=trust_run,
            metrics=metrics,
            edits=_edits(edits),
            comparison=_comparison(image, ex, comparison),
            explainers=_explainers(image, ex),
            transplant=_transplant(transplant),
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


def _explained_image(image: np.ndarray, ex: Explanation) -> np.ndarray:
    """``image`` as an array, checked to be the explained (H, W, 3) uint8 image."""
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
    return image


def _trust_page(ex: Explanation, trust: Explanation | None) -> tuple[list, str, list]:
    """The Trust page's checks, what its run was ("400 samples × 5 repeats, 12.3 s"), and the
    field's metrics to show (the explanation's, else the Trust page's)."""
    metrics = field_metric_rows(ex.trust)
    if trust is None:
        return [], "", metrics
    if trust.region_keys != ex.region_keys or not np.array_equal(trust.segments, ex.segments):
        raise LimecraftError(
            "the trust checks were run over other regions than the explanation's: run them "
            "again on the current regions, or leave them out"
        )
    took = trust.timings.get("total_s")
    run = f"{trust.run.samples_used} samples × {trust.config.trust.repeats} repeats" + (
        f", {took:.1f} s" if took is not None else ""
    )
    # the fit and early stop are the explanation's, in the table above: not repeated here
    checks = [c for c in _checks(trust) if c.name not in _EXPLANATION_ONLY]
    return checks, run, metrics or field_metric_rows(trust.trust)


def regions_csv(explanation: Explanation, cls: int | None = None) -> str:
    """The regions table for class ``cls`` (default: the target) as CSV text."""
    rows = explanation.regions_table(cls)
    buf = io.StringIO()
    w = csv.DictWriter(
        buf, fieldnames=["id", "key", "name", "origin", "pixels", "weight", "delta", "kept_alone"]
    )
    w.writeheader()
    for r in rows:
        # A leading =, +, - or @ would make a spreadsheet run a formula: quote it as text.
        name = r["name"]
        if name[:1] in ("=", "+", "-", "@"):
            name = "'" + name
        w.writerow({**r, "name": name})
    return buf.getvalue()
