"""The analysis file: :func:`to_json` / :func:`from_json` write and read the one format of an
:class:`~pages.lib.analysis.Analysis`, ``limecraft-analysis`` version 1.

A file is untrusted: :func:`from_dict` checks every part with the file's schema
(:class:`~pages.lib.analysis_doc.AnalysisDoc`) and raises :class:`~limecraft_core.LimecraftError`
with a plain message. :func:`fingerprint` tells when what :func:`to_json` would write has
changed, so the app saves only then.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

import limecraft_core as lc
from limecraft_core.codecs.npz import encode_npz
from limecraft_core.codecs.schema import check, read_json
from limecraft_core.io import encode_png
from pages.lib.analysis import (
    Analysis,
    Merge,
    Paste,
    Results,
    results_of,
    set_results,
)
from pages.lib.analysis_doc import FORMAT, FORMAT_VERSION, MAX_JSON_BYTES, AnalysisDoc
from pages.lib.identity import ModelRef, digest

__all__ = ["fingerprint", "from_dict", "from_json", "to_dict", "to_json"]


def fingerprint(a: Analysis) -> str:
    """A cheap hash of the value: it changes whenever what :func:`to_json` writes changes.

    Results are immutable, so their identity stands for their content."""
    h = hashlib.blake2b(digest_size=16)
    parts = [
        a.image_name,
        a.note,
        a.source,
        a.model_name,
        a.model_labels,
        a.model_arch,
        a.model_normalize,
        dataclasses.astuple(a.seg),
        [(r.name, r.inner, r.colour, r.uid) for r in a.hand],
        [tuple(m) for m in a.merges],
        sorted(a.selected),
        json.dumps(a.config.to_dict(), sort_keys=True),
        [dataclasses.astuple(e) for e in a.edits],
        a.area_expected,
        [
            id(x)
            for x in (
                a.restored,
                a.explanation,
                a.explanation_auto,
                a.trust_explanation,
                a.edited_explanation,
                a.paste,
            )
        ],
    ]
    parts.append(
        [
            (ref, [id(getattr(r, f.name)) for f in dataclasses.fields(Results)])
            for ref, r in a.other_models.items()
        ]
    )
    h.update(repr(parts).encode())
    for arr in (a.image, a.tag_mask, a.edited_image, a.expected_area, *(r.mask for r in a.hand)):
        h.update(b"-" if arr is None else digest(arr).encode())
    return h.hexdigest()


_PNGS: OrderedDict[str, str] = OrderedDict()  # digest -> base64 PNG, the images saved last
_PNGS_CHARS = 256 * 2**20  # at most this much kept (a noisy 24 Mpx photo is about 50 MB)
_PNGS_LOCK = threading.Lock()


def _b64_png(image: np.ndarray) -> str:
    """The image as base64 PNG. The analysis is saved after every run that changed it, and a
    large photo takes seconds to encode: each image is encoded once (found again by its
    content), at the fast compression level (a file about 10% larger)."""
    key = digest(image)
    with _PNGS_LOCK:
        hit = _PNGS.get(key)
        if hit is not None:
            _PNGS.move_to_end(key)
            return hit
    out = base64.b64encode(encode_png(image, compress_level=1)).decode("ascii")
    with _PNGS_LOCK:
        _PNGS[key] = out
        while len(_PNGS) > 1 and sum(map(len, _PNGS.values())) > _PNGS_CHARS:
            _PNGS.popitem(last=False)
    return out


def _npz(a: np.ndarray) -> str:
    return base64.b64encode(encode_npz({"a": a})).decode("ascii")


def _ex(ex: lc.Explanation | None) -> dict | None:
    return None if ex is None else ex.to_dict()


def to_dict(a: Analysis) -> dict[str, Any]:
    """The analysis as plain JSON values; see the module docstring."""
    r = a.restored
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "image": {
            "name": a.image_name,
            "note": a.note,
            "source": a.source,
            "png": _b64_png(a.image),
            "tag_mask": None if a.tag_mask is None else _npz(a.tag_mask.astype(bool)),
            "expected_area": None
            if a.expected_area is None
            else _npz(a.expected_area.astype(bool)),
            "area_expected": a.area_expected,
        },
        "model": {
            "name": a.model_name,
            "labels": a.model_labels,
            "arch": a.model_arch,
            "normalize": a.model_normalize,
        },
        "segmentation": {
            "method": a.seg.method,
            "n_segments": a.seg.n_segments,
            "outer": a.seg.outer,
            "params": [[k, v] for k, v in a.seg.params],
            "inner_method": a.seg.inner_method,
            "working_size": a.seg.working_size,
        },
        "regions": [
            {
                "name": h.name,
                "inner": h.inner,
                "colour": h.colour,
                "uid": h.uid,
                "expected": h.expected,
                "origin": h.origin,
                "mask": _npz(h.mask),
            }
            for h in a.hand
        ],
        "merges": [{"keys": list(m.keys), "name": m.name, "key": m.key} for m in a.merges],
        "restored_regions": None
        if r is None
        else {
            "atoms": _npz(r.atoms.astype(np.int32)),
            "atom_keys": list(r.atom_keys),
            "atom_names": list(r.atom_names),
            "groups": [list(g) for g in r.groups],
            "group_names": list(r.group_names),
            "atom_origins": list(r.atom_origins),
        },
        "selected": sorted(a.selected),
        "settings": a.config.to_dict(),
        "edits": [{f.name: getattr(e, f.name) for f in dataclasses.fields(e)} for e in a.edits],
        "results": _results_dict(results_of(a)),
        "other_models": [
            {
                "model": {
                    "name": ref.name,
                    "labels": None if ref.labels is None else list(ref.labels),
                    "arch": ref.arch,
                    "normalize": ref.normalize,
                },
                "results": _results_dict(r),
            }
            for ref, r in a.other_models.items()
        ],
    }


def _results_dict(r: Results) -> dict[str, Any]:
    return {
        "explanation": _ex(r.explanation),
        "automatic": _ex(r.explanation_auto),
        "trust": _ex(r.trust_explanation),
        "edited": None
        if r.edited_explanation is None or r.edited_image is None
        else {"image": _b64_png(r.edited_image), "explanation": _ex(r.edited_explanation)},
        "paste": None if r.paste is None else _paste_dict(r.paste),
    }


def _paste_dict(p: Paste) -> dict[str, Any]:
    r = p.result
    return {
        "region": p.region,
        "mask": _npz(p.mask.astype(bool)),
        "class": r.target_class,
        "names": list(p.names),
        "before": r.before.tolist(),
        "after": r.after.tolist(),
        "top_before": r.top_before.tolist(),
        "top_after": r.top_after.tolist(),
        "clipped": r.clipped.tolist(),
        "null_after": None if r.null_after is None else r.null_after.tolist(),
        "null_draws": r.null_draws,
        "pictures": [_b64_png(x) for x in p.pictures],
        "source": p.source,
    }


def to_json(a: Analysis) -> str:
    return json.dumps(to_dict(a), separators=(",", ":"))


def _model_ref(m: Any) -> ModelRef:
    return ModelRef(m.name, None if m.labels is None else tuple(m.labels), m.arch, m.normalize)


def from_dict(d: Any) -> Analysis:
    """Read :func:`to_dict`'s output, checking every part (its schema: ``AnalysisDoc``).

    Raises
    ------
    LimecraftError
        If ``d`` is not such an analysis or any part is out of range or does not fit.
    """
    if not isinstance(d, dict):
        raise lc.LimecraftError(f"not a LIMEcraft analysis (missing format: {FORMAT})")
    doc = check(AnalysisDoc, d, context={}, prefix="analysis file: ")
    img, model = doc.image, doc.model
    a = Analysis(
        image=img.png,
        image_name=img.name,
        tag_mask=img.tag_mask,
        expected_area=img.expected_area,
        area_expected=img.area_expected,
        note=img.note,
        source=img.source,
        model_name=model.name,
        model_labels=model.labels,
        model_arch=model.arch,
        model_normalize=model.normalize,
        seg=doc.segmentation,  # type: ignore[arg-type]
        hand=list(doc.regions),  # type: ignore[arg-type]
        merges=[Merge(tuple(m.keys), m.name, m.key) for m in doc.merges],
        restored=doc.restored_regions,  # type: ignore[arg-type]
        selected=frozenset(doc.selected),
        config=doc.settings,
        edits=list(doc.edits),
        other_models={_model_ref(o.model): o.results.value() for o in doc.other_models},
    )
    set_results(a, doc.results.value())
    return a


def from_json(text: str | bytes) -> Analysis:
    """Read an analysis file (see :func:`from_dict`); at most ``MAX_JSON_BYTES``."""
    return from_dict(
        read_json(
            text,
            max_bytes=MAX_JSON_BYTES,
            too_big=f"the file is over {MAX_JSON_BYTES // 2**20} MB",
        )
    )
