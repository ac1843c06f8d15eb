"""The findings across an audit's rows, and the rows in the order to read them.

The findings are plain sentences (the headline first), per-class aggregates and the location
map's summary.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .rows import DEPENDENCE, AuditRow

#: The border frame of the location map's summary: this share of each side.
FRAME = 0.1


@dataclass(frozen=True)
class ClassSummary:
    """The audited images predicted as one class.

    Attributes
    ----------
    label : str
    images, flagged : int
    mean_score, mean_top_share, mean_dependence : float
    median_relevance_mass : float or None (no expected masks)
    pointing_hits : int or None, images whose top region is inside the expected region
    border : int, images whose top region touches the border
    stable : int, images with a stable verdict
    """

    label: str
    images: int
    flagged: int
    mean_score: float
    mean_top_share: float
    mean_dependence: float
    median_relevance_mass: float | None
    pointing_hits: int | None
    border: int
    stable: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()
        }


@dataclass(frozen=True)
class Findings:
    """What an audit found, in plain sentences first.

    Attributes
    ----------
    sentences : tuple of str, the summary, most important first
    images, ok, errors, flagged : int
    with_masks : int, images that had an expected mask
    classes : tuple of ClassSummary, the most frequent predicted class first
    location : (MAP_GRID, MAP_GRID) float ndarray, the mean of the images' location grids
        (None when no image was explained)
    frame_share : float, share of the location map's total in the border frame (the outer
        ``FRAME`` of each side), to compare with the frame's share of the area (``frame_area``)
    frame_area : float
    peak : str, where the location map is strongest, e.g. "top-left corner" or "centre"
    """

    sentences: tuple[str, ...]
    images: int
    ok: int
    errors: int
    flagged: int
    with_masks: int
    classes: tuple[ClassSummary, ...]
    location: np.ndarray | None
    frame_share: float
    frame_area: float
    peak: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "sentences": list(self.sentences),
            "images": self.images,
            "ok": self.ok,
            "errors": self.errors,
            "flagged": self.flagged,
            "with_masks": self.with_masks,
            "classes": [c.to_dict() for c in self.classes],
            "location_map": None if self.location is None else np.round(self.location, 5).tolist(),
            "frame_share": _finite(self.frame_share),
            "frame_area": self.frame_area,
            "peak": self.peak,
        }


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def sort_rows(rows: Iterable[AuditRow]) -> list[AuditRow]:
    """Flagged images first (the prediction depending most on the flagged region first), then
    the other explained images by how much hiding their top region removes, then errors."""

    def key(r: AuditRow) -> tuple:
        dep = r.dependence if math.isfinite(r.dependence) else -1.0
        return (not r.ok, not r.flagged, -dep, r.file)

    return sorted(rows, key=key)


_ZONES = (
    ("top-left corner", "top edge", "top-right corner"),
    ("left edge", "centre", "right edge"),
    ("bottom-left corner", "bottom edge", "bottom-right corner"),
)


def _peak(location: np.ndarray) -> str:
    g = location.shape[0]
    y, x = np.unravel_index(int(np.argmax(location)), location.shape)
    zone = lambda v: 0 if v < g / 4 else (2 if v >= g - g / 4 else 1)  # noqa: E731
    return _ZONES[zone(y)][zone(x)]


def _frame(location: np.ndarray) -> tuple[float, float]:
    g = location.shape[0]
    m = max(1, round(FRAME * g))
    inner = np.zeros_like(location, bool)
    inner[m : g - m, m : g - m] = True
    total = float(location.sum())
    share = float(location[~inner].sum() / total) if total > 0 else math.nan
    return share, float((~inner).mean())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _by_label(rows: Sequence[AuditRow]) -> str:
    """ "19 are predicted 'star', 8 'circle' and 3 'square'"."""
    counts = Counter(r.label for r in rows).most_common()
    if not counts:
        return ""
    (first, n0), rest = counts[0], counts[1:]
    parts = [f"{n0} {'is' if n0 == 1 else 'are'} predicted '{first}'"]
    parts += [f"{n} '{label}'" for label, n in rest]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _median(values: Sequence[float]) -> float:
    return float(np.median(values)) if len(values) else math.nan


def _classes(ok: Sequence[AuditRow]) -> tuple[ClassSummary, ...]:
    out = []
    for label, n in Counter(r.label for r in ok).most_common():
        rs = [r for r in ok if r.label == label]
        masked = [r for r in rs if r.has_mask]
        deps = [r.dependence for r in rs if math.isfinite(r.dependence)]
        out.append(
            ClassSummary(
                label=label,
                images=n,
                flagged=sum(r.flagged for r in rs),
                mean_score=float(np.mean([r.score for r in rs])),
                mean_top_share=float(np.mean([r.top_share for r in rs])),
                mean_dependence=float(np.mean(deps)) if deps else math.nan,
                median_relevance_mass=_median([r.relevance_mass for r in masked])
                if masked
                else None,
                pointing_hits=sum(bool(r.pointing_game) for r in masked) if masked else None,
                border=sum(r.top_touches_border for r in rs),
                stable=sum(r.verdict == "stable" for r in rs),
            )
        )
    return tuple(out)


def _mask_sentences(masked: list[AuditRow], n: int) -> list[str]:
    """The headline with expected masks, the pointing game, the relevance mass, the unjudged."""
    out = [r for r in masked if r.flagged]
    miss = [r for r in masked if not r.pointing_game]
    s = [
        f"In {len(out)} of {len(masked)} images the prediction rests outside the expected "
        f"region: the top region lies outside it and hiding that region alone removes at least "
        f"{DEPENDENCE:.0%} of the score" + (f"; {_by_label(out)}." if out else "."),
        f"The top region lies outside the expected region in {len(miss)} of {len(masked)} "
        f"images (pointing game: {_plural(len(masked) - len(miss), 'hit')})"
        + (
            f"; in {len(miss) - len(out)} of them the prediction survives hiding it, so the "
            "object holds it up as well."
            if len(miss) > len(out)
            else "."
        ),
    ]
    parts = [
        f"median {_median(ms):.2f} in {who}"
        for ms, who in (
            ([r.relevance_mass for r in out], "the flagged images"),
            ([r.relevance_mass for r in masked if not r.flagged], "the others"),
        )
        if ms
    ]
    s.append("Relevance mass inside the expected region: " + " and ".join(parts) + ".")
    if len(masked) < n:
        k = n - len(masked)
        s.append(
            f"{_plural(k, 'image')} had no expected mask and "
            f"{'was' if k == 1 else 'were'} not judged against one."
        )
    return s


def _border_sentences(ok: list[AuditRow], headline: bool) -> list[str]:
    """Without masks the headline (the border flag), with them one line."""
    border = [r for r in ok if r.top_touches_border]
    if not headline:
        return [f"The top region touches the image border in {len(border)} of {len(ok)} images."]
    s = [
        f"In {len(border)} of {len(ok)} images the top region touches the image border (flagged)"
        + (f"; {_by_label(border)}." if border else ".")
    ]
    if border:
        dep = sum(r.dependence >= DEPENDENCE for r in border)
        s.append(
            f"In {dep} of them hiding that region alone removes at least {DEPENDENCE:.0%} of the "
            "score."
        )
    return s


def _map_sentence(frame_share: float, frame_area: float, peak: str) -> str:
    ratio = frame_share / frame_area if frame_area else math.nan
    lean = (
        "the explanations lean on the border"
        if ratio >= 1.5
        else "the explanations lean on the centre"
        if ratio <= 0.67
        else "about as much as its area"
    )
    return (
        f"Location map: the outer {FRAME:.0%} of each side ({frame_area:.0%} of the area) holds "
        f"{frame_share:.0%} of the mean |weight| ({lean}); it is strongest at the {peak}."
    )


def findings(rows: Sequence[AuditRow], grids: Sequence[np.ndarray] = ()) -> Findings:
    """Plain sentences, per-class aggregates and the location map of an audit.

    Parameters
    ----------
    rows : the audit's rows (any order)
    grids : the explained images' :func:`location_grid` arrays (any order)

    Returns
    -------
    Findings. The first sentence is the headline: with expected masks, how many images'
    predictions rest outside the expected region and what they are predicted; without, how
    many top regions touch the border.
    """
    ok = [r for r in rows if r.ok]
    errors = [r for r in rows if not r.ok]
    masked = [r for r in ok if r.has_mask]
    location = np.mean(np.stack(grids), axis=0) if len(grids) else None
    frame_share, frame_area = _frame(location) if location is not None else (math.nan, 0.0)
    peak = _peak(location) if location is not None else ""
    s: list[str] = []
    if not ok:
        s.append(
            f"No image could be explained ({_plural(len(errors), 'error')}): see the error rows."
            if errors
            else "The audit has no images yet."
        )
    if masked:
        s += _mask_sentences(masked, len(ok))
    if ok:
        s += _border_sentences(ok, headline=not masked)
    if location is not None and math.isfinite(frame_share):
        s.append(_map_sentence(frame_share, frame_area, peak))
    if ok:
        verdicts = Counter(r.verdict for r in ok)
        counts = [f"{verdicts[v]} {v}" for v in ("stable", "borderline", "unstable") if verdicts[v]]
        s.append("Stability: " + ", ".join(counts) + ".")
    if errors and ok:
        s.append(f"{_plural(len(errors), 'image')} could not be audited: see the error rows.")
    return Findings(
        sentences=tuple(s),
        images=len(rows),
        ok=len(ok),
        errors=len(errors),
        flagged=sum(r.flagged for r in ok),
        with_masks=len(masked),
        classes=_classes(ok),
        location=location,
        frame_share=frame_share,
        frame_area=frame_area,
        peak=peak,
    )
