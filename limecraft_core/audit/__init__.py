"""A model audited over a dataset: one summary row per image, and the findings across them.

The question an audit answers is wider than "why this prediction?": across the images, does
the model rely on the object, or on something that should not matter (a ruler, a hospital's
marker, a watermark, the demo data's planted tag)? Each image is explained as
:func:`~limecraft_core.explain` explains it; :func:`audit_row` reads the explanation into one
row (the predicted class, the top region and its share of |weight|, the score change when it
is hidden, the stability verdict and, with an expected mask, the relevance mass inside it and
the pointing game), :func:`location_grid` puts its |weights| in normalised image coordinates,
and :func:`findings` turns the rows into plain sentences, per-class aggregates and a location
map. :func:`run_audit` explains many images with several in flight through one scorer, so
that their perturbations share the scorer's forward passes where they fit (a work queue
combines the chunks of images of the same input size; a Ray Serve deployment batches the
requests it gets).

Everything here is pure but for threads: files are read and written at the edge
(:mod:`limecraft_core.io.audit_folder`, the CLI and the app), which hands :func:`run_audit`
callables that load each image and receive each result.

The flags, in plain words:

- with an expected mask (the object): **the prediction rests outside the expected region**:
  the top region (largest weight) lies outside it (a pointing-game miss) *and* hiding that
  region alone removes at least ``THRESHOLDS["audit_dependence"]`` (half) of the score. A
  model that merely also looks at a marker keeps its prediction when the marker is hidden,
  because the object holds it up; one that follows the marker loses it.
- without masks: **the top region touches the image border** (where watermarks, rulers and
  text markers sit).

The rooms: :mod:`.rows` (one image's row, the flags, the audit's settings), :mod:`.regions` and
:mod:`.grouping` (each image's strongest regions, grouped across images), :mod:`.findings` and
:mod:`.findings_text` (the typed findings, the sentences, the per-class aggregates, the location
map's summary), :mod:`.findings_doc` (the findings read back from ``audit.json``),
:mod:`.proof` and :mod:`.proving` (the prove phase: removal and insertion against a null),
:mod:`.truth` (AUROC and AP against the analyst's truth) and :mod:`.runner` (``run_audit``,
several images in flight through one scorer).
"""

from __future__ import annotations

from ..config import AUDIT_DEFAULTS
from .findings import (
    NO_FINDING,
    ClassSummary,
    Finding,
    Findings,
    TruthScore,
    discover,
    findings,
    sort_rows,
)
from .findings_doc import findings_from_dict
from .proof import REMOVAL_MARGIN, Intervention, Proof, prove
from .proving import CLEAN_IMAGES, PROVE_TOP, prove_findings, scorer_predict
from .regions import REGION_GRID, RegionDescriptor, describe_proposed, describe_regions
from .rows import (
    DEPENDENCE,
    FLAG_TEXT,
    MAP_GRID,
    AuditRow,
    audit_config,
    audit_row,
    error_row,
    location_grid,
    touches_border,
)
from .runner import AuditInput, AuditItem, AuditOutcome, run_audit
from .truth import read_truth, score_truth

__all__ = [
    "AUDIT_DEFAULTS",
    "CLEAN_IMAGES",
    "DEPENDENCE",
    "FLAG_TEXT",
    "MAP_GRID",
    "NO_FINDING",
    "PROVE_TOP",
    "REGION_GRID",
    "REMOVAL_MARGIN",
    "AuditInput",
    "AuditItem",
    "AuditOutcome",
    "AuditRow",
    "ClassSummary",
    "Finding",
    "Findings",
    "Intervention",
    "Proof",
    "RegionDescriptor",
    "TruthScore",
    "audit_config",
    "audit_row",
    "describe_proposed",
    "describe_regions",
    "discover",
    "error_row",
    "findings",
    "findings_from_dict",
    "location_grid",
    "prove",
    "prove_findings",
    "read_truth",
    "run_audit",
    "score_truth",
    "scorer_predict",
    "sort_rows",
    "touches_border",
]
