"""One analysis: everything a person builds in the app, as one serialisable value.

An :class:`Analysis` holds the image, the model, the segmentation settings, the handcrafted
regions, the merges, the selection, the :class:`~limecraft_core.ExplainConfig`, the applied
edits and the results. Pages change it only through the small named actions below (pure
functions, no Streamlit), and the same value is saved as the user works, exported, and restored:
:func:`to_json` / :func:`from_json` write and read the one format, ``limecraft-analysis``
version 1. A file is untrusted: :func:`from_dict` checks every part and raises
:class:`~limecraft_core.LimecraftError` with a plain message.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

import limecraft_core as lc
from limecraft_core._validate import MAX_PIXELS
from limecraft_core.classifier import NORMALIZATIONS
from limecraft_core.config import SegmentationConfig
from limecraft_core.edits import Edit
from limecraft_core.io import decode_image, encode_png
from limecraft_core.io.npz import encode_npz, load_npz, npz_members
from limecraft_core.limits import LIMITS
from models import registry

__all__ = [
    "APP_CONFIG",
    "FORMAT",
    "FORMAT_VERSION",
    "REGION_COLOURS",
    "Analysis",
    "HandRegion",
    "Merge",
    "SegSettings",
    "from_json",
    "to_json",
]

FORMAT = "limecraft-analysis"
FORMAT_VERSION = 1
#: The app's default settings: the engine's. Every result has a stability verdict from its one
#: sample (resampled; no extra model pass), and sampling stops once that verdict is stable.
APP_CONFIG = lc.ExplainConfig()
#: A saved analysis (or an exported file) is refused above this size.
MAX_JSON_BYTES = 100 * 2**20
MAX_HAND_REGIONS = 200
MAX_MERGES = 1000
MAX_EDITS = 200
MAX_NAME = 200
# Streamlit's named colours (usable in labels as :name[text]) and how they are drawn.
REGION_COLOURS = {
    "red": "#e6194b",
    "blue": "#4363d8",
    "orange": "#f58231",
    "violet": "#911eb4",
    "green": "#3cb44b",
    "gray": "#808080",
}
SOURCES = ("gallery", "upload", "restore", "audit")
#: The expected area that came with an image (an audit's expected mask), in the "expected"
#: choices beside the handcrafted regions.
AREA = "area"


def next_colour(n: int) -> str:
    names = list(REGION_COLOURS)
    return names[n % len(names)]


def colour_rgb(name: str) -> tuple[int, int, int]:
    h = REGION_COLOURS[name]
    return int(h[1:3], 16), int(h[3:5], 16), int(h[5:7], 16)


def _uid() -> str:
    return secrets.token_hex(4)


@dataclass
class HandRegion:
    """A region the analyst drew or uploaded; ``uid`` names its widgets and survives a reload."""

    name: str
    mask: np.ndarray  # (H, W) bool
    inner: int = 1  # 1: one feature; N > 1: segmented inside into about N pieces
    colour: str = "red"  # a key of REGION_COLOURS
    uid: str = field(default_factory=_uid)
    expected: bool = False  # the analyst expects the model to rely on it (localisation)


class Merge(NamedTuple):
    """Regions merged into one: the merged regions' keys, its name, and the key it gets."""

    keys: tuple[str, ...]
    name: str
    key: str


APP_WORKING_SIZE = 0  # the app's per-method working size (see working_size)


@dataclass(frozen=True)
class SegSettings:
    """Craft's superpixel controls."""

    method: str = "slic"
    n_segments: int = 40
    outer: str = "segment"  # "segment" the rest, or keep it as "one" background feature
    params: tuple[tuple[str, float], ...] = ()  # the method's own parameters, beyond the count
    inner_method: str = "slic"  # inside handcrafted regions cut into pieces
    working_size: int | str | None = APP_WORKING_SIZE  # the schema's values, or the app's default


def working_size(method: str, chosen: int | str | None = 0) -> int | str | None:
    """The app segments at most at this size so previews answer within 0.5 s: quickshift and
    felzenszwalb cost grows with the square of the area (labels are scaled back up). A size
    chosen on Craft (the schema's values: px, "auto", or None for full size) replaces it."""
    if chosen != APP_WORKING_SIZE:
        return chosen
    return {"quickshift": 192, "felzenszwalb": 192}.get(method, 512)


@dataclass(eq=False)
class Analysis:
    """This session's work. Fields after ``edited_explanation`` are not part of the value."""

    image: np.ndarray  # (H, W, 3) uint8
    image_name: str
    tag_mask: np.ndarray | None = None  # the demo tag's pixels (gallery demo images)
    note: str = ""
    source: str = "gallery"  # where the image came from: gallery, upload, restore
    model_name: str = registry.DEFAULT_MODEL  # LIMECRAFT_DEFAULT_MODEL, else the demo model
    model_labels: list[str] | None = None
    model_arch: str | None = None  # the torchvision architecture of an uploaded state_dict
    model_normalize: str | None = None  # an uploaded model's input normalisation (None: none)
    seg: SegSettings = field(default_factory=SegSettings)
    hand: list[HandRegion] = field(default_factory=list)
    merges: list[Merge] = field(default_factory=list)
    restored: lc.Regions | None = None  # a restored explanation's own map, until regions change
    selected: frozenset[str] = frozenset()
    config: lc.ExplainConfig = APP_CONFIG  # the settings as typed (saved before any Explain)
    stopped_from: int | None = None  # the samples the last Explain allowed, when it was stopped
    edits: list[Edit] = field(default_factory=list)
    explanation: lc.Explanation | None = None
    explanation_auto: lc.Explanation | None = None
    trust_explanation: lc.Explanation | None = None
    edited_image: np.ndarray | None = None  # the edited image that edited_explanation explains
    edited_explanation: lc.Explanation | None = None
    # the results of the other models this analysis used, by model (the last MAX_OTHER_MODELS)
    other_models: dict[ModelRef, Results] = field(default_factory=dict)
    # the expected mask an audit judged the image against (not a region of the map), and
    # whether it counts as expected now
    expected_area: np.ndarray | None = None
    area_expected: bool = True
    # --- session only, never saved
    id: str = ""
    canvas_version: int = 0
    message: str | None = None
    tmpdir: str = ""  # the session's private folder (uploaded model files)

    @property
    def image_key(self) -> str:
        """A short hash of the image: the same picture again is recognised."""
        return digest(self.image)[:16]


def new(
    image: np.ndarray,
    name: str,
    *,
    tag_mask: np.ndarray | None = None,
    note: str = "",
    source: str = "gallery",
    like: Analysis | None = None,
) -> Analysis:
    """A fresh analysis of ``image``; ``like`` lends its model and settings (not its regions)."""
    a = Analysis(image=image, image_name=name, tag_mask=tag_mask, note=note, source=source)
    if like is not None:
        a.model_name, a.model_labels = like.model_name, like.model_labels
        a.model_arch, a.model_normalize = like.model_arch, like.model_normalize
        a.seg, a.config = like.seg, like.config
    return a


# ----------------------------------------------------------------------------- questions


def has_work(a: Analysis) -> bool:
    """Whether replacing the image would lose something the user made."""
    return bool(
        a.hand
        or a.merges
        or a.edits
        or a.restored is not None
        or a.explanation is not None
        or a.explanation_auto is not None
        or a.trust_explanation is not None
        or a.edited_explanation is not None
    )


def summary(a: Analysis) -> str:
    """One line for the recent-analyses list, e.g. ``chelsea · 2 regions, 1 edit, results``."""
    parts = []
    n = len(a.hand)
    if n:
        parts.append(f"{n} region{'s' if n != 1 else ''}")
    if a.merges:
        parts.append(f"{len(a.merges)} merge{'s' if len(a.merges) != 1 else ''}")
    if a.edits:
        parts.append(f"{len(a.edits)} edit{'s' if len(a.edits) != 1 else ''}")
    if a.explanation is not None or a.trust_explanation is not None:
        parts.append("results")
    return f"{a.image_name} · {', '.join(parts) or 'no changes'}"


def handcrafted_count(a: Analysis) -> int:
    """Handcrafted regions in the current map (a restored map counts its ``hand:`` regions)."""
    if a.restored is not None:
        return sum("hand:" in k for k in a.restored.keys)
    return len(a.hand)


def within_app(config: lc.ExplainConfig) -> lc.ExplainConfig:
    """``config`` with every number inside the range the app's controls offer (a file may hold
    values that only the CLI accepts, and a widget given a value outside its range stops)."""
    changed = {}
    for spec, v in config.items():
        lim = spec.limit
        if lim is None or lim.app is None or spec.kind not in ("int", "float") or v is None:
            continue
        lo, hi = lim.app
        clamped = min(max(v, lo), hi)
        if clamped != v:
            changed[spec.name] = type(v)(clamped)
    try:
        return config.replace(**changed) if changed else config
    except lc.LimecraftError:  # e.g. convergence sizes above the clamped samples
        return APP_CONFIG


def segmentation_config(a: Analysis, *, handcrafted: bool = True) -> SegmentationConfig:
    """The engine's segmentation settings for Craft's controls and regions (recorded as is)."""
    hand = a.hand if handcrafted else []
    seg = a.seg
    return SegmentationConfig(
        method=seg.method,
        n_segments=seg.n_segments,
        params=seg.params,
        inner_segments=tuple(h.inner for h in hand) if hand else None,
        inner_method=seg.inner_method,
        outer_segments=(1 if seg.outer == "one" else seg.n_segments) if hand else None,
        working_size=working_size(seg.method, seg.working_size),
    )


def edit_names(a: Analysis, names: tuple[str, ...]) -> list[str]:
    """The applied edits, each with the region's name where it has one."""
    out = []
    for e in a.edits:
        name = names[e.region] if e.region < len(names) else ""
        line = e.describe()
        if name:  # "remove region 0 'tag' (fill inpaint)": the name right after the id
            line = line.replace(f"region {e.region}", f"region {e.region} '{name}'", 1)
        out.append(line)
    return out


# ----------------------------------------------------------------------------- actions


def _regions_changed(a: Analysis) -> None:
    a.selected, a.restored = frozenset(), None


def _results_stale(a: Analysis) -> None:
    _set_results(a, Results())


@dataclass(frozen=True)
class Results:
    """One model's results in an analysis: kept when another model is picked, and shown again
    when the analyst comes back to it."""

    explanation: lc.Explanation | None = None
    explanation_auto: lc.Explanation | None = None
    trust_explanation: lc.Explanation | None = None
    edited_image: np.ndarray | None = None
    edited_explanation: lc.Explanation | None = None

    def any(self) -> bool:
        return any(getattr(self, f.name) is not None for f in dataclasses.fields(self))


MAX_OTHER_MODELS = 4  # other models' results kept in an analysis (the oldest go first)


def _results_of(a: Analysis) -> Results:
    return Results(*(getattr(a, f.name) for f in dataclasses.fields(Results)))


def _set_results(a: Analysis, r: Results) -> None:
    for f in dataclasses.fields(Results):
        setattr(a, f.name, getattr(r, f.name))


def add_region(a: Analysis, mask: np.ndarray, name: str = "") -> HandRegion:
    """A handcrafted region from a (H, W) bool mask; named ``region N`` when ``name`` is empty."""
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != a.image.shape[:2]:
        raise lc.LimecraftError(
            f"the region is {mask.shape[1]}x{mask.shape[0]} but the image is "
            f"{a.image.shape[1]}x{a.image.shape[0]}"
        )
    if not mask.any():
        raise lc.LimecraftError("Nothing is drawn yet: draw a shape on the image first.")
    if len(a.hand) >= MAX_HAND_REGIONS:
        raise lc.LimecraftError(f"at most {MAX_HAND_REGIONS} handcrafted regions")
    h = HandRegion(
        name=(name.strip() or f"region {len(a.hand) + 1}")[:MAX_NAME],
        mask=mask.copy(),
        colour=next_colour(len(a.hand)),
    )
    a.hand.append(h)
    _regions_changed(a)
    return h


def add_tag(a: Analysis) -> None:
    """The demo image's tag as a handcrafted region named ``tag``."""
    if a.tag_mask is not None and not any(h.name == "tag" for h in a.hand):
        add_region(a, a.tag_mask, "tag")


def update_region(a: Analysis, uid: str, name: str, inner: int) -> None:
    for h in a.hand:
        if h.uid == uid and (h.name != name or h.inner != int(inner)):
            h.name, h.inner = name[:MAX_NAME], int(inner)
            _regions_changed(a)


def expected_mask(a: Analysis) -> np.ndarray | None:
    """The union of the handcrafted regions marked as expected and of the expected area (when
    it counts), or None when there is none."""
    marked = [h.mask for h in a.hand if h.expected]
    if a.expected_area is not None and a.area_expected:
        marked.append(a.expected_area)
    return np.logical_or.reduce(marked) if marked else None


def expected_ids(a: Analysis) -> set[str]:
    """The uids of the handcrafted regions marked as expected, and :data:`AREA` when the
    expected area counts."""
    ids = {h.uid for h in a.hand if h.expected}
    if a.expected_area is not None and a.area_expected:
        ids.add(AREA)
    return ids


def set_expected(a: Analysis, uids: set[str] | frozenset[str]) -> None:
    """Mark exactly these handcrafted regions (and the expected area, :data:`AREA`) as
    expected; the results' localisation follows (no model pass: it reads the weights)."""
    for h in a.hand:
        h.expected = h.uid in uids
    a.area_expected = AREA in uids
    mask = expected_mask(a)
    for name in ("explanation", "trust_explanation", "edited_explanation"):
        ex = getattr(a, name)
        if ex is not None and ex.segments.shape == a.image.shape[:2]:
            setattr(a, name, ex.with_localisation(mask))


def delete_region(a: Analysis, uid: str) -> None:
    a.hand = [h for h in a.hand if h.uid != uid]
    a.merges = []
    _regions_changed(a)


def set_segmentation(a: Analysis, seg: SegSettings) -> None:
    if seg != a.seg:
        a.seg = seg
        _regions_changed(a)


def toggle_selection(a: Analysis, key: str) -> None:
    a.selected = a.selected ^ {key}


def clear_selection(a: Analysis) -> None:
    a.selected = frozenset()


def merge(a: Analysis, regions: lc.Regions, ids: list[int], name: str = "") -> None:
    """Merge regions ``ids`` of the current map into one named region."""
    merged = lc.merge_regions(regions, ids, name=name.strip() or None)
    ys, xs = np.nonzero(regions.labels == ids[0])
    new_key = merged.keys[merged.labels[ys[0], xs[0]]]
    if a.restored is not None:  # merging on a restored map: keep working on that map
        a.restored = merged
    else:
        a.merges.append(
            Merge(tuple(regions.keys[i] for i in ids), name.strip() or "merged", new_key)
        )
    a.selected = frozenset()


def split(a: Analysis, regions: lc.Regions, region_id: int) -> None:
    """Split a merged region back into its pieces."""
    key = regions.keys[region_id]
    if a.restored is not None:
        a.restored = lc.split_region(regions, region_id)
    a.merges = [m for m in a.merges if m.key != key]


def apply_edit(a: Analysis, edit: Edit) -> None:
    if len(a.edits) >= MAX_EDITS:
        raise lc.LimecraftError(f"at most {MAX_EDITS} edits")
    a.edits.append(edit)


def undo_edit(a: Analysis) -> None:
    if a.edits:
        a.edits.pop()


def reset_edits(a: Analysis) -> None:
    a.edits = []


def set_model(
    a: Analysis,
    name: str,
    labels: list[str] | None = None,
    arch: str | None = None,
    normalize: str | None = None,
) -> None:
    """Another model: the old model's results are kept for it, and the new model's earlier
    results, if this analysis has any, come back."""
    new = (name, labels, arch, normalize)
    if new != (a.model_name, a.model_labels, a.model_arch, a.model_normalize):
        held = _results_of(a)
        if held.any():
            a.other_models.pop(model_ref(a), None)
            a.other_models[model_ref(a)] = held
            while len(a.other_models) > MAX_OTHER_MODELS:
                del a.other_models[next(iter(a.other_models))]
        a.model_name, a.model_labels, a.model_arch, a.model_normalize = new
        _set_results(a, a.other_models.pop(model_ref(a), Results()))


@dataclass(frozen=True)
class ModelRef:
    """Which model an analysis uses, hashable (a cache key): a registry name or a file path,
    the class names given with an uploaded file, and a state_dict's architecture."""

    name: str
    labels: tuple[str, ...] | None = None
    arch: str | None = None
    normalize: str | None = None

    @property
    def display_name(self) -> str:
        """The name a person knows it by: a registry name, or the uploaded file's own name."""
        return os.path.basename(self.name) if ("/" in self.name or "\\" in self.name) else self.name


#: The app's "normalisation" choice for an ONNX graph that takes pixels in 0-255 (no mean/std).
PIXELS_0_255 = "0-255"


def normalisation(choice: str | None) -> dict[str, Any]:
    """The loader's keywords for the app's normalisation choice: ``normalize``, or for an ONNX
    graph that takes 0-255 pixels, ``input_range`` with no normalisation."""
    if choice == PIXELS_0_255:
        return {"normalize": "none", "input_range": "0-255"}
    return {"normalize": choice}


def model_ref(a: Analysis) -> ModelRef:
    return ModelRef(
        a.model_name,
        tuple(a.model_labels) if a.model_labels else None,
        a.model_arch,
        a.model_normalize,
    )


def set_explanation(a: Analysis, ex: lc.Explanation, config: lc.ExplainConfig) -> None:
    a.config, a.explanation, a.explanation_auto = config, with_expected(a, ex), None


def with_expected(a: Analysis, ex: lc.Explanation) -> lc.Explanation:
    """``ex`` with its localisation against the regions marked as expected (none: removed)."""
    return ex.with_localisation(expected_mask(a))


def set_edited(a: Analysis, image: np.ndarray, ex: lc.Explanation) -> None:
    a.edited_image, a.edited_explanation = image.copy(), with_expected(a, ex)


def restore_explanation(a: Analysis, ex: lc.Explanation) -> None:
    """A plain explanation JSON: its regions become the map, its settings the settings."""
    if ex.segments.shape != a.image.shape[:2]:
        raise lc.LimecraftError(
            f"That explanation is for a {ex.segments.shape[1]}x{ex.segments.shape[0]} image; "
            f"load the same image first (it is {a.image.shape[1]}x{a.image.shape[0]})."
        )
    a.hand, a.merges, a.selected, a.edits = [], [], frozenset(), []
    _results_stale(a)
    a.explanation = ex
    a.restored = lc.Regions(ex.segments, ex.region_keys, ex.region_names)
    a.config = within_app(ex.config)


def from_audit(
    image: np.ndarray,
    name: str,
    ex: lc.Explanation,
    *,
    model: ModelRef,
    expected: np.ndarray | None = None,
    tag_mask: np.ndarray | None = None,
    note: str = "",
) -> Analysis:
    """One image of an audit as a new analysis: its regions and explanation as the audit made
    them, and its expected mask as the expected area (so Explain and Trust measure against it
    at once)."""
    a = new(image, name, tag_mask=tag_mask, note=note, source="audit")
    a.model_name, a.model_labels = model.name, list(model.labels) if model.labels else None
    a.model_arch, a.model_normalize = model.arch, model.normalize
    a.expected_area = None if expected is None else np.asarray(expected, bool).copy()
    restore_explanation(a, ex)
    a.explanation = with_expected(a, ex)
    return a


# ----------------------------------------------------------------------------- the format


def _normalize(v: Any) -> str | None:
    if v is not None and v not in (*NORMALIZATIONS, PIXELS_0_255):
        raise _fail(f"model normalize must be one of {', '.join(NORMALIZATIONS)}, {PIXELS_0_255}")
    return v


def digest(a: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(str((a.shape, a.dtype.str)).encode())
    h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


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
        },
        "selected": sorted(a.selected),
        "settings": a.config.to_dict(),
        "edits": [{f.name: getattr(e, f.name) for f in dataclasses.fields(e)} for e in a.edits],
        "results": _results_dict(_results_of(a)),
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
    }


def to_json(a: Analysis) -> str:
    return json.dumps(to_dict(a), separators=(",", ":"))


# ----------------------------------------------------------------------------- reading


def _fail(msg: str) -> lc.LimecraftError:
    return lc.LimecraftError(f"analysis file: {msg}")


def _obj(d: Any, what: str) -> dict:
    if not isinstance(d, dict):
        raise _fail(f"{what} must be an object")
    return d


def _list(d: Any, what: str, most: int) -> list:
    if not isinstance(d, list):
        raise _fail(f"{what} must be a list")
    if len(d) > most:
        raise _fail(f"{what} has {len(d)} entries; at most {most}")
    return d


def _text(v: Any, what: str, most: int = MAX_NAME) -> str:
    if not isinstance(v, str) or len(v) > most:
        raise _fail(f"{what} must be a string of at most {most} characters")
    return v


def _int(v: Any, what: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise _fail(f"{what} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def _bool(v: Any, what: str) -> bool:
    if not isinstance(v, bool):
        raise _fail(f"{what} must be true or false, got {v!r}")
    return v


def _image(v: Any, what: str) -> np.ndarray:
    try:
        data = base64.b64decode(_text(v, what, 4 * MAX_JSON_BYTES), validate=True)
    except ValueError:
        raise _fail(f"{what} is not base64") from None
    return decode_image(data, f"the analysis file's {what}")


def _array(v: Any, what: str, shape: tuple[int, int] | None, kinds: str) -> np.ndarray:
    """A 2-D array from base64 npz, its header checked before it is inflated."""
    try:
        raw = base64.b64decode(_text(v, what, 4 * MAX_JSON_BYTES), validate=True)
        # the header before the data: a few KB of zeros can inflate to GBs
        (a,) = npz_members(raw)
        if a.name != "a" or len(a.shape) != 2 or a.pixels > MAX_PIXELS or a.dtype.kind not in kinds:
            raise _fail(f"{what} must be a 2-D map of at most {MAX_PIXELS:,} pixels")
        arr = load_npz(raw)["a"]
    except lc.LimecraftError:
        raise
    except Exception as e:
        raise _fail(f"{what} could not be decoded ({type(e).__name__})") from None
    if shape is not None and arr.shape != shape:
        raise _fail(f"{what} is {arr.shape[1]}x{arr.shape[0]}; the image is {shape[1]}x{shape[0]}")
    return arr


def _explanation(v: Any, what: str, shape: tuple[int, int]) -> lc.Explanation | None:
    if v is None:
        return None
    try:
        ex = lc.Explanation.from_dict(v)
    except lc.LimecraftError as e:
        raise _fail(f"{what}: {e}") from None
    if ex.segments.shape != shape:
        raise _fail(f"{what} is for another image size")
    return ex


def _segmentation(d: Any) -> SegSettings:
    d = _obj(d, "segmentation")
    method = d.get("method")
    if method not in lc.METHODS:
        raise _fail(f"segmentation method must be one of {', '.join(lc.METHODS)}")
    lim = LIMITS["n_segments"]
    lo, hi = lim.app or (lim.lo, lim.hi)
    n = _int(d.get("n_segments"), "segmentation n_segments", int(lo), int(hi))
    outer = d.get("outer")
    if outer not in ("segment", "one"):
        raise _fail("segmentation outer must be 'segment' or 'one'")
    params = _list(d.get("params", []), "segmentation params", 10)
    size = d.get("working_size", APP_WORKING_SIZE)
    try:
        checked = SegmentationConfig(
            method=method,
            params=tuple(tuple(p) for p in params),
            inner_method=d.get("inner_method", "slic"),
            working_size="auto" if size == APP_WORKING_SIZE else size,
        )
    except (lc.LimecraftError, TypeError) as e:
        raise _fail(f"segmentation: {e}") from None
    return SegSettings(
        method,
        n,
        outer,
        tuple((str(k), float(v)) for k, v in checked.params),
        checked.inner_method,
        size,
    )


def _hand(d: Any, shape: tuple[int, int], i: int) -> HandRegion:
    d = _obj(d, f"regions[{i}]")
    lim = LIMITS["inner_segments"]
    colour = d.get("colour")
    if colour not in REGION_COLOURS:
        raise _fail(f"regions[{i}] colour must be one of {', '.join(REGION_COLOURS)}")
    uid = _text(d.get("uid"), f"regions[{i}] uid", 32)
    if not uid.isalnum():
        raise _fail(f"regions[{i}] uid must be letters and digits")
    return HandRegion(
        name=_text(d.get("name"), f"regions[{i}] name"),
        mask=_array(d.get("mask"), f"regions[{i}] mask", shape, "bui").astype(bool),
        inner=_int(d.get("inner"), f"regions[{i}] inner", int(lim.lo), int(lim.app[1])),
        colour=colour,
        uid=uid,
        expected=_bool(d.get("expected", False), f"regions[{i}] expected"),
    )


def _restored(d: Any, shape: tuple[int, int]) -> lc.Regions | None:
    if d is None:
        return None
    d = _obj(d, "restored_regions")
    atoms = _array(d.get("atoms"), "restored_regions atoms", shape, "iu").astype(np.int32)
    try:
        return lc.Regions(
            atoms,
            tuple(
                _text(k, "a region key", 10_000)
                for k in _list(d.get("atom_keys"), "atom_keys", 100_000)
            ),
            tuple(
                _text(k, "a region name") for k in _list(d.get("atom_names"), "atom_names", 100_000)
            ),
            tuple(
                tuple(_int(x, "a group atom", 0, 10**6) for x in _list(g, "a group", 100_000))
                for g in _list(d.get("groups"), "groups", 100_000)
            ),
            tuple(
                _text(k, "a region name")
                for k in _list(d.get("group_names"), "group_names", 100_000)
            ),
        )
    except lc.LimecraftError:
        raise
    except Exception as e:
        raise _fail(f"restored_regions do not fit together ({e})") from None


def _edit(d: Any, i: int) -> Edit:
    d = _obj(d, f"edits[{i}]")
    known = {f.name for f in dataclasses.fields(Edit)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise _fail(f"edits[{i}]: unknown field {unknown[0]!r}")
    try:
        return Edit(**d)
    except (lc.LimecraftError, TypeError) as e:
        raise _fail(f"edits[{i}]: {e}") from None


def from_dict(d: Any) -> Analysis:
    """Read :func:`to_dict`'s output, checking every part.

    Raises
    ------
    LimecraftError
        If ``d`` is not such an analysis or any part is out of range or does not fit.
    """
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise lc.LimecraftError(f"not a LIMEcraft analysis (missing format: {FORMAT})")
    if d.get("format_version") != FORMAT_VERSION:
        raise _fail(f"unsupported format_version {d.get('format_version')!r}")
    img = _obj(d.get("image"), "image")
    image = _image(img.get("png"), "image")
    shape = image.shape[:2]
    tag = img.get("tag_mask")
    area = img.get("expected_area")
    source = img.get("source")
    if source not in SOURCES:
        raise _fail(f"image source must be one of {', '.join(SOURCES)}")
    model = _obj(d.get("model"), "model")
    labels = model.get("labels")
    if labels is not None:
        labels = [_text(x, "a class label", 1000) for x in _list(labels, "labels", 100_000)]
    merges = []
    for i, m in enumerate(_list(d.get("merges", []), "merges", MAX_MERGES)):
        m = _obj(m, f"merges[{i}]")
        keys = tuple(_text(k, "a merged key", 10_000) for k in _list(m.get("keys"), "keys", 10_000))
        merges.append(
            Merge(
                keys,
                _text(m.get("name"), "a merge name"),
                _text(m.get("key"), "a merge key", 100_000),
            )
        )
    try:
        config = within_app(lc.ExplainConfig.from_dict(d.get("settings")))
    except lc.LimecraftError as e:
        raise _fail(f"settings: {e}") from None
    results = _results_from(d.get("results", {}), "results", image)
    others = {}
    for i, o in enumerate(_list(d.get("other_models", []), "other_models", MAX_OTHER_MODELS)):
        o = _obj(o, f"other_models[{i}]")
        m = _obj(o.get("model"), f"other_models[{i}].model")
        names = m.get("labels")
        ref = ModelRef(
            _text(m.get("name"), "model name", 4096),
            None
            if names is None
            else tuple(_text(x, "a class label", 1000) for x in _list(names, "labels", 100_000)),
            None if m.get("arch") is None else _text(m.get("arch"), "arch", 100),
            _normalize(m.get("normalize")),
        )
        others[ref] = _results_from(o.get("results", {}), f"other_models[{i}].results", image)
    a = Analysis(
        image=image,
        image_name=_text(img.get("name"), "image name", 300),
        tag_mask=None if tag is None else _array(tag, "tag_mask", shape, "bui").astype(bool),
        expected_area=None
        if area is None
        else _array(area, "expected_area", shape, "bui").astype(bool),
        area_expected=_bool(img.get("area_expected", True), "image area_expected"),
        note=_text(img.get("note", ""), "image note", 1000),
        source=source,
        model_name=_text(model.get("name"), "model name", 4096),
        model_labels=labels,
        model_arch=None if model.get("arch") is None else _text(model.get("arch"), "arch", 100),
        model_normalize=_normalize(model.get("normalize")),
        seg=_segmentation(d.get("segmentation")),
        hand=[
            _hand(h, shape, i)
            for i, h in enumerate(_list(d.get("regions", []), "regions", MAX_HAND_REGIONS))
        ],
        merges=merges,
        restored=_restored(d.get("restored_regions"), shape),
        selected=frozenset(
            _text(k, "a selected key", 10_000)
            for k in _list(d.get("selected", []), "selected", 10_000)
        ),
        config=config,
        edits=[_edit(e, i) for i, e in enumerate(_list(d.get("edits", []), "edits", MAX_EDITS))],
        other_models=others,
    )
    _set_results(a, results)
    return a


def _results_from(res: Any, where: str, image: np.ndarray) -> Results:
    """One model's results as :func:`_results_dict` writes them."""
    res = _obj(res, where)
    shape = image.shape[:2]
    edited = res.get("edited")
    edited_image = edited_ex = None
    if edited is not None:
        edited = _obj(edited, f"{where}.edited")
        edited_image = _image(edited.get("image"), "edited image")
        if edited_image.shape != image.shape:
            raise _fail("the edited image must have the image's size")
        edited_ex = _explanation(edited.get("explanation"), f"{where}.edited", shape)
    return Results(
        explanation=_explanation(res.get("explanation"), f"{where}.explanation", shape),
        explanation_auto=_explanation(res.get("automatic"), f"{where}.automatic", shape),
        trust_explanation=_explanation(res.get("trust"), f"{where}.trust", shape),
        edited_image=edited_image,
        edited_explanation=edited_ex,
    )


def from_json(text: str | bytes) -> Analysis:
    """Read an analysis file (see :func:`from_dict`); at most ``MAX_JSON_BYTES``."""
    if len(text) > MAX_JSON_BYTES:
        raise lc.LimecraftError(f"the file is over {MAX_JSON_BYTES // 2**20} MB")
    try:
        d = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise lc.LimecraftError(f"not a JSON document: {e}") from None
    except RecursionError:
        raise lc.LimecraftError("not a usable JSON document: it is nested too deeply") from None
    return from_dict(d)
