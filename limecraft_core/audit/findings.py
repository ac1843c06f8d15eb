"""The findings across an audit's rows, and the rows in the order to read them.

The findings are plain sentences, per-class aggregates, the location map's summary and the
typed :class:`Finding` values discovered across images (:mod:`.grouping`), the headline first.

**A finding's risk** (ShortKit-style, stated): four indicators, each a plain test on its images:

- *prevalent*: it covers at least ``PREVALENT`` (half) of the images of its main class;
- *one place*: its regions overlap its medoid's by a mean IoU of at least ``ONE_PLACE`` (0.5);
- *one class*: at least ``ONE_CLASS`` (80%) of its images are predicted its main class;
- *strong*: its regions hold a median share of at least ``STRONG`` (25%) of their image's |weight|.

Two or more give ``HIGH``, one ``MODERATE``, none ``LOW``. The findings are ranked by risk,
then (with expected masks) the ``outside`` finding first, the analyst's own question, then by
**score**: their share of the explained images times the median share of |weight| their
regions hold. **The headline**: once the audit has proved its top findings
(:func:`~.proving.prove_findings`), the first *confirmed* finding (removal and insertion both
beat the null), else :data:`NO_FINDING`; before that (or for an audit read from an older file)
the first finding.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .findings_text import (
    _ZONES,
    _border_sentences,
    _frame,
    _map_sentence,
    _mask_sentences,
    _median,
    _peak,
    _plural,
)
from .grouping import (
    CROSS,
    MIN_IMAGES,
    MIN_PREVALENCE,
    PLACE_DISTANCE,
    find_carriers,
    group_regions,
    view_distances,
)
from .proof import Intervention
from .regions import REGION_GRID, RegionDescriptor
from .rows import AuditRow

PREVALENT = 0.5
ONE_PLACE = 0.5
ONE_CLASS = 0.8
STRONG = 0.25
RISKS = ("LOW", "MODERATE", "HIGH")
EXEMPLARS = 5
#: The risk rule in words, as the report states it.
RISK_RULE = (
    f"two or more of four indicators give HIGH, one MODERATE, none LOW: prevalent (it covers at "
    f"least {PREVALENT:.0%} of its main class's images), one place (its regions overlap the "
    f"medoid's by a mean IoU of at least {ONE_PLACE}), one class (at least {ONE_CLASS:.0%} of its "
    f"images are predicted one class), strong (its regions hold a median share of at least "
    f"{STRONG:.0%} of their image's |weight|)"
)
NO_FINDING = (
    f"No finding above the null: no group of alike strong regions (at least {MIN_IMAGES} images "
    f"and {MIN_PREVALENCE:.0%} of those of its class, or {MIN_IMAGES} alike in place and look "
    "whatever class they push) was confirmed by hiding it and pasting it against a same-area null."
)


@dataclass(frozen=True)
class TruthScore:
    """A finding's membership scores against the analyst's truth (threshold-free).

    Attributes
    ----------
    auroc : float, area under the ROC curve of the membership scores against the truth
    ap : float, their average precision
    images : int, the explained images the truth names
    positives : int, those that carry the artifact
    """

    auroc: float
    ap: float
    images: int
    positives: int

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 5) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass(frozen=True, eq=False)
class Finding:
    """Alike strong regions across images: one thing the model may rely on.

    Attributes
    ----------
    kind : str, how its regions are alike: ``"place"``, ``"look"``, ``"place and look"``,
        ``"place and look, any class"`` (the grouping's cross-class path), or
        ``"outside"`` (with expected masks: the images whose prediction rests outside them)
    sentence : str, the finding in plain words
    mask : (REGION_GRID, REGION_GRID) bool ndarray, the cells at least half of its regions
        cover (the medoid's region when none is)
    regions : tuple of (image key, region id), its region in each of its images
    images : int
    coverage : float, its share of the images explained
    classes : tuple of (label, images, share of its images), the most frequent first
    class_coverage : float, the share of its main class's images it covers
    medoid : str, the key of its most typical image
    exemplars : tuple of str, up to ``EXEMPLARS`` keys, the medoid first, then the most alike
    weight_share : float, the median share of |weight| its regions hold
    indicators : tuple of str, the risk indicators that hold (see the module docstring)
    risk : str, one of :data:`RISKS`
    score : float, coverage x weight_share
    membership : tuple of (image key, float in [0, 1]), every explained image's likeness to the
        medoid's region, its strong regions and its others (``AuditRow.proposed``) alike
        (threshold-free: rank the images by it)
    intervention : Intervention or None, its removal and insertion against the null (None: not
        proved; the sentence says why when it could not be)
    truth : TruthScore or None, its membership against the analyst's truth (``--truth``)
    carriers : tuple of (image key, region id), the images that hold its region: its own and
        those where an alike region is not among the strongest (:func:`~.grouping.find_carriers`;
        empty in files written before carriers were kept)
    """

    kind: str
    sentence: str
    mask: np.ndarray
    regions: tuple[tuple[str, int], ...]
    images: int
    coverage: float
    classes: tuple[tuple[str, int, float], ...]
    class_coverage: float
    medoid: str
    exemplars: tuple[str, ...]
    weight_share: float
    indicators: tuple[str, ...]
    risk: str
    score: float
    membership: tuple[tuple[str, float], ...]
    intervention: Intervention | None = None
    truth: TruthScore | None = None
    carriers: tuple[tuple[str, int], ...] = ()

    @property
    def more_carriers(self) -> tuple[tuple[str, int], ...]:
        """Its carriers beyond its own images: where its region is not among the strongest."""
        mine = {k for k, _ in self.regions}
        return tuple(c for c in self.carriers if c[0] not in mine)

    @property
    def confirmed(self) -> bool:
        return self.intervention is not None and self.intervention.confirmed

    def to_dict(self) -> dict[str, Any]:
        d = {k: round(v, 5) if isinstance(v, float) else v for k, v in asdict(self).items()}
        return {
            **d, "mask": {"grid": REGION_GRID, "cells": np.argwhere(self.mask).tolist()},
            "regions": [{"key": k, "region": r} for k, r in self.regions],
            "classes": [{"label": c, "images": n, "share": round(s, 5)} for c, n, s in self.classes],
            "exemplars": list(self.exemplars), "indicators": list(self.indicators),
            "membership": {k: round(v, 5) for k, v in self.membership},
            "carriers": [{"key": k, "region": r} for k, r in self.carriers],
            "intervention": None if self.intervention is None else self.intervention.to_dict(),
            "truth": None if self.truth is None else self.truth.to_dict(),
        }  # fmt: skip


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
    discovered : tuple of Finding, the findings across images, the headline first
    headline : str, the headline finding's sentence, or :data:`NO_FINDING`
    proved : bool, the top findings were proved (then the headline is a confirmed one)
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
    discovered: tuple[Finding, ...] = ()
    headline: str = NO_FINDING
    proved: bool = False

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
            "headline": self.headline,
            "discovered": [f.to_dict() for f in self.discovered],
            "proved": self.proved,
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


_KIND_TEXT = {
    "place": "Regions at one place",
    "look": "Regions of one look",
    "place and look": "Regions of one look at one place",
    "place and look, any class": "Regions of one look at one place, whatever class they push,",
    "outside": "Top regions outside the expected region",
}


def _where(mask: np.ndarray) -> str:
    g = mask.shape[0]
    y, x = np.argwhere(mask).mean(axis=0)
    zone = lambda v: 0 if v < g / 3 else (2 if v >= g - g / 3 else 1)  # noqa: E731
    return _ZONES[zone(y)][zone(x)]


def _indicators(
    members: list[tuple[AuditRow, RegionDescriptor]], medoid: RegionDescriptor,
    ok: Sequence[AuditRow],
) -> tuple[tuple[str, ...], str, int]:  # fmt: skip
    """The risk indicators that hold, the main class and its images in the whole audit."""
    main, n_main = Counter(r.label for r, _ in members).most_common(1)[0]
    in_class = sum(r.label == main for r in ok)
    descs = [d for _, d in members]
    iou = 1.0 - view_distances([medoid, *descs], "place")[0, 1:] * PLACE_DISTANCE
    tests = (
        ("prevalent", n_main / in_class >= PREVALENT),
        ("one place", float(np.mean(iou)) >= ONE_PLACE),
        ("one class", n_main / len(members) >= ONE_CLASS),
        ("strong", float(np.median([d.share for d in descs])) >= STRONG),
    )
    return tuple(name for name, holds in tests if holds), main, in_class


def _finding(
    kind: str, members: list[tuple[AuditRow, RegionDescriptor]],
    medoid: tuple[AuditRow, RegionDescriptor], ok: Sequence[AuditRow],
) -> Finding:  # fmt: skip
    descs = [d for _, d in members]
    freq = np.mean([d.grid_mask() for d in descs], axis=0)
    mask = freq >= 0.5 if (freq >= 0.5).any() else medoid[1].grid_mask()
    indicators, main, in_class = _indicators(members, medoid[1], ok)
    likeness, carriers = find_carriers(kind, members, medoid[1], ok, main)
    others = sorted(
        (r.key for r, _ in members if r.key != medoid[0].key), key=lambda k: -likeness[k]
    )
    counts = Counter(r.label for r, _ in members).most_common()
    share = float(np.median([d.share for d in descs]))
    coverage = len(members) / len(ok)
    risk = RISKS[min(len(indicators), 2)]
    sentence = (
        f"{_KIND_TEXT[kind]} ({medoid[1].colour}, {_where(mask)}, "
        f"{float(np.median([d.area for d in descs])):.0%} of the image) push "
        + (
            _pushed(counts, len(members), len(ok))
            if kind == CROSS
            else _pushes(main, counts[0][1], in_class, len(members), len(ok))
        )
        + f"median {share:.0%} of the |weight|): risk {risk}"
        + (f" ({', '.join(indicators)})." if indicators else ".")
        + _carried(len(carriers), len(members), len(ok))
    )
    return Finding(
        kind=kind, sentence=sentence, mask=mask,
        regions=tuple((r.key, d.region) for r, d in members), images=len(members),
        coverage=coverage, classes=tuple((c, n, n / len(members)) for c, n in counts),
        class_coverage=counts[0][1] / in_class, medoid=medoid[0].key,
        exemplars=(medoid[0].key, *others[: EXEMPLARS - 1]), weight_share=share,
        indicators=indicators, risk=risk, score=coverage * share,
        membership=tuple(likeness.items()), carriers=carriers,
    )  # fmt: skip


def _carried(carriers: int, members: int, images: int) -> str:
    if carriers <= members:
        return ""
    more = carriers - members
    return (
        f" The same region is in {_plural(more, 'more image')}, where it is not among the "
        f"strongest ({carriers} of {images} in all)."
    )


def _pushes(main: str, n_main: int, in_class: int, n: int, images: int) -> str:
    return f"'{main}' in {n} of {images} images ({n_main} of the {in_class} '{main}' images; "


def _pushed(counts: list, n: int, images: int) -> str:
    """A cross-class finding's classes in words: how many, the first three, where it is."""
    names = ", ".join(f"'{c}'" for c, _ in counts[:3]) + (", ..." if len(counts) > 3 else "")
    return f"{len(counts)} classes ({names}) in {n} of {images} images ("


def _outside(ok: Sequence[AuditRow]) -> Finding | None:
    """Today's flag with expected masks as a finding: the flagged images' top regions."""
    members = [
        (r, r.regions[0])
        for r in ok
        if "outside" in r.flags and r.regions and r.regions[0].region == r.top_region
    ]
    if not members:
        return None
    dist = view_distances([d for _, d in members], "place")
    return _finding("outside", members, members[int(np.argmin(dist.sum(axis=1)))], ok)


def discover(rows: Sequence[AuditRow]) -> tuple[Finding, ...]:
    """The findings across images (:func:`~.grouping.group_regions`, and with expected masks the
    ``outside`` flag), the headline first: highest risk, then ``outside``, then highest score.

    Parameters
    ----------
    rows : the audit's rows (any order); rows without regions take no part

    Returns
    -------
    tuple of Finding; empty when there is none.
    """
    rows = list(rows)
    ok = [r for r in rows if r.ok]

    def pair(m: tuple[int, int]) -> tuple[AuditRow, RegionDescriptor]:
        return rows[m[0]], rows[m[0]].regions[m[1]]

    out = [
        _finding(g.kind, [pair(m) for m in g.members], pair(g.medoid), ok)
        for g in group_regions(rows)
    ]
    extra = _outside(ok)
    out += [extra] if extra is not None else []
    return tuple(sorted(out, key=lambda f: (-RISKS.index(f.risk), f.kind != "outside", -f.score)))


def headline(found: Sequence[Finding], *, proved: bool) -> str:
    """The headline sentence: the first confirmed finding once proved, else the first; or
    :data:`NO_FINDING` (see the module docstring)."""
    first = next((f for f in found if f.confirmed or not proved), None)
    return NO_FINDING if first is None else first.sentence


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
    found = discover(rows)
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
        discovered=found,
        headline=headline(found, proved=False),
    )
