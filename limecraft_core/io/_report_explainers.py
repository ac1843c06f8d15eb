"""The report's "Explainers side by side": one small overlay per method and their agreement.

Every method is drawn on one colour scale: its values divided by its own largest |value|
(:func:`limecraft_core.agreement.normalise`), then tinted with the same ``vmax`` of 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import render
from ..agreement import normalise, top_k
from ..comparison import NORMALISATION
from ..merge_hint import MergeHint
from ..result import Explanation
from ._report_checks import _num
from ._report_figures import _Picture, _picture, _region_name

#: The long side of each method's picture, in px: small, so that four fit on a row.
_SIDE = 256
#: Regions tinted on each side of each method's picture.
_TOP_K = 5


@dataclass(frozen=True)
class _Method:
    title: str
    picture: _Picture
    top: str
    note: str


@dataclass(frozen=True)
class _Pair:
    a: str
    b: str
    feature: str
    rank: str
    sign: str
    signed_rank: str
    spearman: str


@dataclass(frozen=True)
class _Explainers:
    label: str
    regions: int
    passes: int
    k: int
    methods: tuple[_Method, ...]
    pairs: tuple[_Pair, ...]
    sentence: str
    disagreeing: str
    normalisation: str
    tinted: int = _TOP_K
    merge: str = ""
    merge_how: str = ""


def _method(image: np.ndarray, ex: Explanation, title: str, values: np.ndarray, note: str):
    overlay = render.weight_overlay(
        image, ex.segments, normalise(values), k=_TOP_K, vmax=1.0, long_side=_SIDE
    )
    first = int(top_k(values, 1)[0])
    return _Method(
        title=title,
        picture=_picture(overlay, f"{title}: the regions for and against the class"),
        top=f"{_region_name(ex, first)} ({values[first]:+.4f})"
        if np.any(values)
        else "none (every region 0)",
        note=note,
    )


def _merge_words(m: MergeHint | None) -> tuple[str, str]:
    """The merge test's sentence and how it was made, or two empty strings without one."""
    if m is None:
        return "", ""
    how = (
        "the exact Shapley interaction index of adjacent disputed regions"
        if m.estimator == "exact"
        else "adjacent disputed regions' interaction, estimated from the shared sample"
    )
    if m.threshold <= 0:  # no method gives any region a value: no scale to set a bar by
        return m.sentence, how
    return m.sentence, f"{how}; a merge needs |index| >= {m.threshold:.2g}"


def _explainers(image: np.ndarray, ex: Explanation) -> _Explainers | None:
    """The section, when the explanation carries several explainers' results (else None)."""
    c = ex.explainers
    if c is None:
        return None
    ag = c.agreement
    disputed = [_region_name(ex, r) for r in ag.disagreeing[:5]]
    more = len(ag.disagreeing) - len(disputed)
    return _Explainers(
        label=c.label,
        regions=c.n_regions,
        passes=c.passes,
        k=ag.k,
        methods=tuple(
            _method(image, ex, t, a.values, a.note)
            for a, t in zip(c.attributions, ag.methods, strict=True)
        ),
        pairs=tuple(
            _Pair(
                p.a,
                p.b,
                _num(p.feature, 2),
                _num(p.rank, 2),
                _num(p.sign, 2),
                _num(p.signed_rank, 2),
                _num(p.spearman, 2),
            )
            for p in ag.pairs
        ),
        sentence=ag.sentence,
        disagreeing=", ".join(disputed) + (f" and {more} more" if more > 0 else "") or "none",
        normalisation=NORMALISATION,
        merge=_merge_words(c.merge)[0],
        merge_how=_merge_words(c.merge)[1],
    )
