"""The analyst's truth (which images carry an artifact) and each finding's AUROC and AP against it.

The truth is a CSV with the columns ``file`` (the image as the audit names it) and ``artifact``
(1 when it carries the suspected artifact, 0 when not). Each finding's membership scores
(threshold-free) are scored against it with scikit-learn's ``roc_auc_score`` and
``average_precision_score`` over the explained images the CSV names.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import replace

from .._validate import LimecraftError
from .findings import Findings, TruthScore
from .rows import AuditRow

__all__ = ["read_truth", "score_truth"]

_COLUMNS = ("file", "artifact")


def read_truth(
    text: str, files: Sequence[str], *, name: str = "--truth", skip_unknown: bool = False
) -> dict[str, bool]:
    """The truth CSV's rows as ``{file: carries the artifact}``, checked against the audit's files.

    Parameters
    ----------
    text : str, the CSV's text (a header row naming ``file`` and ``artifact``, in any case; the
        columns apart by ``,``, ``;`` or a tab, as the header row has them)
    files : the audit's image files, as its rows name them
    name : str, what the messages call the CSV
    skip_unknown : bool, leave out the rows of files that are not in ``files`` (a truth kept
        for a whole folder, read for the images audited so far) instead of refusing them

    Raises
    ------
    LimecraftError
        For a missing column, a value other than 0 or 1, a file named twice or not audited, or a
        truth of one value only (AUROC needs both).
    """
    text = text.lstrip("\ufeff")
    head = text.split("\n", 1)[0]
    # a spreadsheet's export: its columns may be apart by ';' or a tab, and named in capitals
    sep = next((c for c in (",", ";", "\t") if c in head), ",")
    reader = csv.DictReader(io.StringIO(text), delimiter=sep)
    if reader.fieldnames:
        reader.fieldnames = [f.strip().lower() for f in reader.fieldnames]
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise LimecraftError(
            f"{name} has no column {missing[0]!r}: its first line must name the columns "
            "file,artifact (artifact 1 when the image carries it, 0 when not)"
        )
    known, out = set(files), {}
    for n, row in enumerate(reader, start=2):
        file, value = (row["file"] or "").strip(), (row["artifact"] or "").strip()
        if value not in ("0", "1"):
            raise LimecraftError(f"{name} line {n}: artifact must be 0 or 1, not {value!r}")
        if file not in known and skip_unknown:
            continue
        if file not in known:
            example = next(iter(sorted(known)), "")
            raise LimecraftError(
                f"{name} line {n}: {file!r} is not one of the audited images; name each as the "
                f"audit does, its path relative to the images folder (e.g. {example!r})"
            )
        if file in out:
            raise LimecraftError(f"{name} line {n}: {file!r} is named twice")
        out[file] = value == "1"
    if len(set(out.values())) < 2:
        has = "1" if any(out.values()) else "0"
        raise LimecraftError(
            f"AUROC needs both: {name} must name images with the artifact (1) and without it (0); "
            f"it has {'only ' + has + 's' if out else 'no rows'}"
        )
    return out


def score_truth(
    found: Findings, rows: Sequence[AuditRow], truth: Mapping[str, bool], *, name: str = "--truth"
) -> Findings:
    """Each finding with its :class:`~.findings.TruthScore`: AUROC and AP of its membership scores
    over the explained images that ``truth`` names (by file; ``name``: what messages call it).

    Raises
    ------
    LimecraftError
        When the explained images the truth names are all of one value.
    """
    from sklearn.metrics import average_precision_score, roc_auc_score

    keys = {r.key: truth[r.file] for r in rows if r.ok and r.file in truth}
    if len(set(keys.values())) < 2:
        raise LimecraftError(
            f"AUROC needs both: the explained images that {name} names must include images "
            "with the artifact (1) and without it (0)"
        )
    y = [int(v) for v in keys.values()]
    out = []
    for f in found.discovered:
        member = dict(f.membership)
        s = [member.get(k, 0.0) for k in keys]
        score = TruthScore(
            float(roc_auc_score(y, s)), float(average_precision_score(y, s)), len(y), sum(y)
        )
        out.append(replace(f, truth=score))
    return replace(found, discovered=tuple(out))
