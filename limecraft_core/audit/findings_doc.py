"""The ``findings`` block of ``audit.json`` read back through its schema (format versions 3 and 4).

:meth:`Findings.to_dict` writes it; :func:`findings_from_dict` checks every part (a file is
untrusted) and rebuilds the :class:`~.findings.Findings`, its :class:`~.findings.Finding` values
with their interventions and truth scores included, so that a loaded audit shows what was
proved when it ran, not a recomputation without the model.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import numpy as np
from annotated_types import MaxLen
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Strict

from .._validate import LimecraftError
from ..codecs.schema import Bad, Schema, check
from .findings import RISKS, ClassSummary, Finding, Findings, TruthScore
from .proof import Intervention
from .regions import REGION_GRID

__all__ = ["findings_from_dict"]

_S = Annotated[str, Strict(), MaxLen(100_000)]
_I = Annotated[int, Strict()]


def _nan(v: Any) -> Any:
    return math.nan if v is None else v


_F = Annotated[float, BeforeValidator(_nan), Strict()]


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Intervention(_Part):
    target_class: _I
    images: _I
    removal_mean: _F
    removal_null_mean: _F
    removal_margin: _F
    clean_images: _I
    flip_rate: _F
    mean_gain: _F
    null_gain: _F
    insertion: _S
    confirmed: Annotated[bool, Strict()]


class _Truth(_Part):
    auroc: _F
    ap: _F
    images: _I
    positives: _I


class _Region(_Part):
    key: _S
    region: _I


class _Class(_Part):
    label: _S
    images: _I
    share: _F


def _cells(v: list[tuple[int, int]]) -> list[tuple[int, int]]:
    if any(not (0 <= y < REGION_GRID and 0 <= x < REGION_GRID) for y, x in v):
        raise Bad(f"{{loc}}: a cell lies outside the {REGION_GRID} x {REGION_GRID} grid")
    return v


class _Mask(_Part):
    grid: Annotated[_I, AfterValidator(lambda g: _fixed_grid(g))]
    cells: Annotated[list[tuple[_I, _I]], AfterValidator(_cells)]


def _fixed_grid(g: int) -> int:
    if g != REGION_GRID:
        raise Bad(f"{{loc}} must be {REGION_GRID}, not {g}")
    return g


def _risk(v: str) -> str:
    if v not in RISKS:
        raise Bad(f"{{loc}} must be one of {', '.join(RISKS)}, not {v!r}")
    return v


class _Finding(_Part):
    kind: _S
    sentence: _S
    mask: _Mask
    regions: list[_Region]
    images: _I
    coverage: _F
    classes: Annotated[list[_Class], MaxLen(100_000)]
    class_coverage: _F
    medoid: _S
    exemplars: list[_S]
    weight_share: _F
    indicators: list[_S]
    risk: Annotated[_S, AfterValidator(_risk)]
    score: _F
    membership: dict[str, _F]
    intervention: _Intervention | None = None
    truth: _Truth | None = None
    carriers: list[_Region] = []

    def value(self) -> Finding:
        mask = np.zeros((REGION_GRID, REGION_GRID), bool)
        for y, x in self.mask.cells:
            mask[y, x] = True
        iv, tr = self.intervention, self.truth
        return Finding(
            kind=self.kind, sentence=self.sentence, mask=mask,
            regions=tuple((r.key, r.region) for r in self.regions), images=self.images,
            coverage=self.coverage, classes=tuple((c.label, c.images, c.share) for c in self.classes),
            class_coverage=self.class_coverage, medoid=self.medoid,
            exemplars=tuple(self.exemplars), weight_share=self.weight_share,
            indicators=tuple(self.indicators), risk=self.risk, score=self.score,
            membership=tuple(self.membership.items()),
            intervention=None if iv is None else Intervention(**iv.model_dump()),
            truth=None if tr is None else TruthScore(**tr.model_dump()),
            carriers=tuple((r.key, r.region) for r in self.carriers),
        )  # fmt: skip


class _ClassSummary(_Part):
    label: _S
    images: _I
    flagged: _I
    mean_score: _F
    mean_top_share: _F
    mean_dependence: _F
    median_relevance_mass: float | None
    pointing_hits: _I | None
    border: _I
    stable: _I


def _grid(v: Any) -> Any:
    if v is None:
        return None
    a = np.asarray(v, np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or not np.isfinite(a).all():
        raise Bad("{loc} must be a square grid of numbers")
    return a


class _FindingsDoc(Schema):
    sentences: list[_S]
    images: _I
    ok: _I
    errors: _I
    flagged: _I
    with_masks: _I
    classes: list[_ClassSummary]
    location_map: Annotated[Any, BeforeValidator(_grid)] = None
    frame_share: _F = math.nan
    frame_area: _F = 0.0
    peak: _S = ""
    headline: _S
    discovered: list[_Finding]
    proved: Annotated[bool, Strict()] = False


def findings_from_dict(d: Any) -> Findings:
    """Read :meth:`Findings.to_dict`'s output back, checking every field.

    Raises
    ------
    LimecraftError
        For a missing or wrong field, worded with where it sits (``discovered[0].risk``).
    """
    if not isinstance(d, dict):
        raise LimecraftError("audit.json: findings must be an object")
    doc = check(_FindingsDoc, d, prefix="audit.json: findings: ")
    return Findings(
        sentences=tuple(doc.sentences), images=doc.images, ok=doc.ok, errors=doc.errors,
        flagged=doc.flagged, with_masks=doc.with_masks,
        classes=tuple(ClassSummary(**c.model_dump()) for c in doc.classes),
        location=doc.location_map, frame_share=doc.frame_share, frame_area=doc.frame_area,
        peak=doc.peak, discovered=tuple(f.value() for f in doc.discovered),
        headline=doc.headline, proved=doc.proved,
    )  # fmt: skip
