"""An audit's folder on disk: the edge between :mod:`limecraft_core.audit` and files.

The command line (``python -m limecraft audit``) and the app's Audit page both write and
read this layout, so a folder (or a zip of it) made by one opens in the other::

    DIR/audit.json      format limecraft-audit: the settings, the model, the findings (plain
                        sentences, per-class aggregates, the location map, the findings across
                        images with their interventions) and every row; written at the end
                        (after the prove phase), and on an interruption with "complete": false
    DIR/audit.csv       the rows
    DIR/audit.html      the findings as a self-contained page (it fetches nothing)
    DIR/images/KEY/     one folder per image, written as soon as the image is finished:
        image.png           the image as explained (decoded, EXIF orientation applied)
        explanation.json    as ``explain`` writes it (with an ``inputs`` block)
        segments.npy        the regions' label map
        overlay.png         as ``explain`` writes it
        expected.png        the expected mask, when one was given
        thumb.jpg           the image and its overlay, small, for the report and the app
        overlay.jpg
        location.npy        its location grid (normalised image coordinates)
        row.json            its summary row and the settings key, written last: an image
                            whose row.json is there is finished

Every file is written to a temporary name and renamed, so a crash or Ctrl-C never leaves half
a file; ``--resume`` keeps every image whose ``row.json`` matches the image file, its mask and
the settings, and explains the rest.

The dataset itself (images listed, masks matched, a zip unpacked) is read in :mod:`.dataset`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator

from .. import render
from .._validate import LimecraftError
from ..audit import (
    AuditItem,
    AuditOutcome,
    AuditRow,
    Findings,
    describe_proposed,
    findings,
    findings_from_dict,
    prove_findings,
    read_truth,
    score_truth,
    sort_rows,
)
from ..codecs.schema import Bad, Schema, check, fixed, read_json
from ..config import ExplainConfig
from ..result import Explanation
from .audit_report import thumbnails
from .dataset import _read
from .images import decode_image, decode_mask, encode_png

__all__ = [
    "FORMAT",
    "TRUTH_FILE",
    "AuditFolder",
    "LoadedAudit",
    "load_audit",
    "settings_key",
]

FORMAT = "limecraft-audit"
#: The analyst's truth kept beside an audit scored on the Audit page (:meth:`AuditFolder.score_truth`)
TRUTH_FILE = "truth.csv"


#: 2: each row keeps its strongest regions (``regions``) and the findings list the findings
#: across images (``headline``, ``discovered``). 3: the findings carry their interventions and
#: truth scores and are read back through their schema (``audit.findings_from_dict``); versions
#: 1 and 2 are still read, their findings recomputed from the rows (1: rows without regions). 4:
#: rows keep their other regions (``proposed``), findings their ``carriers`` (absent in 3).
FORMAT_VERSION = 4
READ_VERSIONS = (1, 2, 3, 4)  # an older LIMEcraft refuses a newer file by its version


#: The audit's PNGs are written fast (zlib level 1): 4x quicker than the default, 10% larger.
FAST_PNG = 1


MAX_AUDIT_JSON_BYTES = 200 * 2**20


_KEY = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


def settings_key(
    config: ExplainConfig,
    model: dict[str, Any],
    top_k: int,
    *,
    proposers: Sequence[str] = (),
    regions_masks: bool = False,
) -> str:
    """A hash of everything a finished image's results depend on beyond its files: the
    settings, the model, the overlay's top k, the proposers of its regions and whether the
    analyst's own regions masks are used (their bytes enter each image's digest). Without
    proposers or regions masks the key is the one audits made before they existed."""
    fields: dict[str, Any] = {"settings": config.to_dict(), "model": model, "top_k": top_k}
    if proposers or regions_masks:
        fields["regions"] = {"propose": list(proposers), "regions_masks": bool(regions_masks)}
    doc = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(doc.encode()).hexdigest()[:32]


def _atomic(path: Path, data: bytes) -> None:
    # A temporary name of this writer's own: a stopped audit run and the page's next run write
    # the same audit.json at once (audits.write_findings), and with one shared name the second
    # os.replace found the first one's file gone (FileNotFoundError on Cancel).
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class AuditFolder:
    """The ``--out`` folder of an audit (see the module docstring).

    Parameters
    ----------
    path : the folder; created when missing
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise LimecraftError(f"--out {str(self.path)!r} exists and is not a folder")
        if not create:
            return
        try:
            (self.path / "images").mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise LimecraftError(
                f"cannot create the audit folder {str(self.path)!r}: {e.strerror or e}"
            ) from None

    @staticmethod
    def holds_audit(path: str | Path) -> bool:
        """Whether ``path`` already holds an audit (finished or not)."""
        p = Path(path)
        return (p / "audit.json").exists() or any((p / "images").glob("*/row.json"))

    def image_dir(self, key: str) -> Path:
        if not _KEY.match(key) or key in (".", ".."):
            raise LimecraftError(f"not an audit image key: {key!r}")
        return self.path / "images" / key

    # ------------------------------------------------------------------ per image

    def finished(self, item: AuditItem, key: str) -> AuditRow | None:
        """The row of ``item`` if it was finished with the same files and settings key."""
        try:
            d = json.loads((self.image_dir(item.key) / "row.json").read_text())
            row = AuditRow.from_dict(d.get("row"))
        except (OSError, ValueError, AttributeError, LimecraftError):
            return None
        if d.get("settings_key") != key or row.digest != item.digest or not row.ok:
            return None
        if not (self.image_dir(item.key) / "location.npy").exists():
            return None
        if "proposed" not in d["row"]:  # a row of format 3 or older: describe its others
            row = self._with_proposed(row, key)
        return row

    def _with_proposed(self, row: AuditRow, key: str) -> AuditRow:
        """``row`` with its other regions (``AuditRow.proposed``) described from its saved image
        and explanation, no model pass, its ``row.json`` rewritten so; as it was if unreadable."""
        try:
            image, ex = self.image(row.key), self.explanation(row.key)
        except LimecraftError:
            return row
        row = replace(row, proposed=describe_proposed(image, ex, row.regions))
        doc = {"row": row.to_dict(), "settings_key": key}
        _atomic(self.image_dir(row.key) / "row.json", json.dumps(doc).encode())
        return row

    def write(self, outcome: AuditOutcome, key: str, *, top_k: int, inputs: dict) -> None:
        """Write one finished image's files; ``row.json`` last."""
        d = self.image_dir(outcome.row.key)
        d.mkdir(parents=True, exist_ok=True)
        row_file = d / "row.json"
        if row_file.exists():  # it is being redone: no stale row marks it finished meanwhile
            row_file.unlink()
        ex, inp = outcome.explanation, outcome.input
        if ex is not None and inp is not None:
            doc = ex.to_dict()
            doc["inputs"] = {"image_file": outcome.row.file, **inputs}
            _atomic(d / "image.png", encode_png(inp.image, FAST_PNG))
            _atomic(d / "explanation.json", json.dumps(doc, indent=2).encode())
            buf = io.BytesIO()
            np.save(buf, ex.segments)
            _atomic(d / "segments.npy", buf.getvalue())
            overlay = render.explanation_overlay(inp.image, ex, top_k)
            _atomic(d / "overlay.png", encode_png(overlay, FAST_PNG))
            if inp.expected is not None:
                _atomic(d / "expected.png", encode_png((inp.expected * 255).astype(np.uint8)))
            else:
                (d / "expected.png").unlink(missing_ok=True)
            thumb, over = thumbnails(inp.image, ex, inp.expected)
            _atomic(d / "thumb.jpg", thumb)
            _atomic(d / "overlay.jpg", over)
            buf = io.BytesIO()
            np.save(buf, outcome.grid.astype(np.float32))
            _atomic(d / "location.npy", buf.getvalue())
        else:  # an error: nothing of an earlier result may stand beside its row
            for f in d.iterdir():
                if f.name != "row.json":
                    f.unlink()
        _atomic(row_file, json.dumps({"row": outcome.row.to_dict(), "settings_key": key}).encode())

    def grid(self, key: str) -> np.ndarray | None:
        try:
            g = np.load(self.image_dir(key) / "location.npy", allow_pickle=False)
        except (OSError, ValueError):
            return None
        return g if g.ndim == 2 and g.shape[0] == g.shape[1] else None

    def image(self, key: str) -> np.ndarray:
        return decode_image(_read(self.image_dir(key) / "image.png", "image"), key)

    def explanation(self, key: str) -> Explanation:
        return Explanation.from_json(_read(self.image_dir(key) / "explanation.json", "explanation"))

    def regions_of(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """An explained image as it was explained (``image.png``) and its label map
        (``segments.npy``), for the prove phase and the exemplars."""
        image = self.image(key)
        try:
            segments = np.load(self.image_dir(key) / "segments.npy", allow_pickle=False)
        except (OSError, ValueError) as e:
            raise LimecraftError(f"image {key!r}: its segments.npy cannot be read: {e}") from None
        return image, segments

    def picture(self, key: str, name: str) -> bytes | None:
        try:
            return (self.image_dir(key) / name).read_bytes()
        except OSError:
            return None

    # ------------------------------------------------------------------ the whole

    def finish(
        self,
        rows: Iterable[AuditRow],
        *,
        config: ExplainConfig,
        key: str,
        model: dict[str, Any],
        source: dict[str, Any],
        complete: bool,
        run: dict[str, Any] | None = None,
        predict: Any = None,
        truth: dict[str, bool] | None = None,
    ) -> Findings:
        """Write audit.json, audit.csv and audit.html for ``rows`` (in their given order).

        With ``predict`` (callable(image) -> class probabilities) and a complete audit, the top
        findings are proved first (:func:`~limecraft_core.audit.prove_findings`, reading each
        image and its regions from this folder); with ``truth`` ({file: carries the artifact}),
        or else the truth.csv that :meth:`score_truth` kept here, each finding gets its AUROC
        and AP.
        """
        rows = list(rows)
        grids = [g for r in rows if r.ok for g in [self.grid(r.key)] if g is not None]
        found = findings(rows, grids)
        if predict is not None and complete:
            found = prove_findings(found, rows, self.regions_of, predict)
        name = "--truth"
        try:
            if truth is None and (self.path / TRUTH_FILE).is_file():  # kept by score_truth
                name = TRUTH_FILE
                text = _read(self.path / TRUTH_FILE, name).decode("utf-8", "replace")
                truth = read_truth(text, [r.file for r in rows], name=name, skip_unknown=True)
            if truth:
                found = score_truth(found, rows, truth, name=name)
        except LimecraftError as e:  # e.g. the images with the artifact all failed
            found = replace(found, sentences=(*found.sentences, f"{name}: {e}."))
        doc = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "complete": bool(complete),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "source": source,
            "model": model,
            "settings": config.to_dict(),
            "settings_key": key,
            "run": run or {},
            "findings": found.to_dict(),
            "rows": [r.to_dict() for r in rows],
        }
        self._publish(doc, found, rows, config)
        return found

    def _publish(
        self, doc: dict[str, Any], found: Findings, rows: list[AuditRow], config: ExplainConfig
    ) -> None:
        """audit.json (``doc``), audit.csv and audit.html."""
        from .audit_report import audit_csv, audit_html, carrier_pictures, exemplar_pictures

        _atomic(self.path / "audit.json", json.dumps(doc, indent=1).encode())
        _atomic(self.path / "audit.csv", audit_csv(rows).encode())
        pictures = {
            r.key: (self.picture(r.key, "thumb.jpg"), self.picture(r.key, "overlay.jpg"))
            for r in rows
            if r.ok
        }
        html = audit_html(
            found,
            sort_rows(rows),
            pictures,
            model=str(doc["model"].get("name", "")),
            config=config,
            complete=doc["complete"],
            created=doc["created"],
            exemplars=exemplar_pictures(found, self.regions_of),
            carriers=carrier_pictures(found, self.regions_of),
        )
        _atomic(self.path / "audit.html", html.encode())

    def score_truth(self, text: str, *, name: str = "the truth CSV") -> Findings:
        """Score the findings of the audit in this folder against the analyst's truth, the CSV
        ``text`` (columns ``file`` and ``artifact``, as ``--truth`` reads), and write them back
        into audit.json and audit.html: each finding gets its AUROC and AP; what was proved
        stays proved, nothing is explained again. The CSV is kept as truth.csv, so that the
        findings written later (a resume, the prove phase) are scored against it too.

        Raises
        ------
        LimecraftError
            If the folder holds no audit, or the CSV does not fit it (the message says what to
            change); the audit's files are then left as they were.
        """
        audit = load_audit(self.path)
        rows = list(audit.rows)
        truth = read_truth(text, [r.file for r in rows], name=name)
        found = score_truth(audit.findings, rows, truth, name=name)
        doc = json.loads(_read(self.path / "audit.json", "audit.json"))
        doc["findings"] = found.to_dict()
        _atomic(self.path / TRUTH_FILE, text.encode("utf-8"))
        self._publish(doc, found, rows, audit.config)
        return found


@dataclass(frozen=True, eq=False)
class LoadedAudit:
    """A finished (or interrupted) audit read back from its folder.

    Attributes
    ----------
    folder : AuditFolder
    rows : tuple of AuditRow, in the audit's order
    findings : Findings, as audit.json stores them (format 3 on: with their interventions), or
        recomputed from the rows and the images' location grids (formats 1 and 2)
    config : ExplainConfig, the settings it ran with
    model : dict, the model it ran with (``name`` and the options)
    source : dict, where its images came from
    complete : bool
    created : str
    """

    folder: AuditFolder
    rows: tuple[AuditRow, ...]
    findings: Findings
    config: ExplainConfig
    model: dict[str, Any]
    source: dict[str, Any]
    complete: bool
    created: str

    @cached_property
    def _by_key(self) -> dict[str, AuditRow]:
        return {r.key: r for r in self.rows}

    def row(self, key: str) -> AuditRow:
        try:
            return self._by_key[key]
        except KeyError:
            raise LimecraftError(f"the audit has no image {key!r}") from None

    def image(self, key: str) -> np.ndarray:
        return self.folder.image(key)

    def expected(self, key: str) -> np.ndarray | None:
        p = self.folder.image_dir(key) / "expected.png"
        return decode_mask(_read(p, "expected mask"), key) != 0 if p.exists() else None

    def explanation(self, key: str) -> Explanation:
        return self.folder.explanation(key)


def _rows(v: Any) -> tuple[AuditRow, ...]:
    if not isinstance(v, list) or len(v) > 1_000_000:
        raise Bad("audit.json: rows must be a list")
    return tuple(AuditRow.from_dict(r) for r in v)


def _settings(v: Any) -> ExplainConfig:
    try:
        return ExplainConfig.from_dict(v)
    except LimecraftError as e:
        raise Bad(f"audit.json: settings: {e}") from None


def _created(v: Any) -> str:
    if not isinstance(v, str) or len(v) > 100:
        raise Bad("audit.json: created must be a string")
    return v


def _version(v: Any) -> int:
    if type(v) is not int or v not in READ_VERSIONS:
        raise LimecraftError(f"audit.json has an unsupported format_version {v!r}")
    return v


def _object(v: Any) -> dict:
    return {k: x for k, x in v.items() if isinstance(k, str)} if isinstance(v, dict) else {}


class _AuditDoc(Schema):
    """``audit.json``: what :meth:`AuditFolder.finish` writes (the rows' own schema is
    :class:`AuditRow`'s). ``model`` and ``source`` are kept as given, for display."""

    format: Annotated[
        str, fixed(FORMAT, f"audit.json is not a LIMEcraft audit (format {FORMAT} missing)")
    ] = ""
    format_version: Annotated[int, BeforeValidator(_version)] = 0
    rows: Annotated[tuple[AuditRow, ...], BeforeValidator(_rows)] = ()
    settings: Annotated[ExplainConfig, BeforeValidator(_settings)] = None  # type: ignore[assignment]
    model: Annotated[dict, BeforeValidator(_object)] = None  # type: ignore[assignment]
    source: Annotated[dict, BeforeValidator(_object)] = None  # type: ignore[assignment]
    complete: Annotated[bool, BeforeValidator(bool)] = False
    created: Annotated[str, BeforeValidator(_created)] = ""
    findings: Any = None


def load_audit(path: str | Path) -> LoadedAudit:
    """Read an audit folder (``audit.json`` and its ``images/``), checking every part.

    Raises
    ------
    LimecraftError
        If the folder holds no audit.json, or it is not a LIMEcraft audit or does not fit.
    """
    folder = Path(path)
    if not (folder / "audit.json").is_file():
        inner = sorted(folder.rglob("audit.json"), key=lambda p: len(p.parts))
        if not inner:
            raise LimecraftError(
                "no audit.json there: give the folder an audit wrote (python -m limecraft "
                "audit ... --out DIR), or a zip of it"
            )
        folder = inner[0].parent
    d = read_json(
        _read(folder / "audit.json", "audit.json"),
        max_bytes=MAX_AUDIT_JSON_BYTES,
        too_big=f"audit.json is over {MAX_AUDIT_JSON_BYTES // 2**20} MB",
        not_json="audit.json is not JSON",
    )
    if not isinstance(d, dict):
        raise LimecraftError(f"audit.json is not a LIMEcraft audit (format {FORMAT} missing)")
    doc = check(_AuditDoc, d)
    rows = doc.rows
    af = AuditFolder(folder, create=False)
    for r in rows:
        af.image_dir(r.key)  # every key is a plain folder name
    if doc.format_version >= 3:
        found = findings_from_dict(doc.findings)
    else:
        grids = [g for r in rows if r.ok for g in [af.grid(r.key)] if g is not None]
        found = findings(rows, grids)
    return LoadedAudit(
        folder=af,
        rows=rows,
        findings=found,
        config=doc.settings,
        model=doc.model,
        source=doc.source,
        complete=doc.complete,
        created=doc.created,
    )
