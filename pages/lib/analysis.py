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
import binascii
import dataclasses
import hashlib
import inspect
import json
import math
import os
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, NamedTuple

import numpy as np
from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo

import limecraft_core as lc
from limecraft_core._validate import MAX_PIXELS
from limecraft_core.classifier import NORMALIZATIONS
from limecraft_core.codecs.npz import encode_npz, is_map, load_npz, npz_members
from limecraft_core.codecs.schema import Bad, Schema, check, fixed, one_of, read_json
from limecraft_core.config import SegmentationConfig
from limecraft_core.edits import Edit
from limecraft_core.io import decode_image, encode_png
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
    "Paste",
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

#: At most this many images in one paste (each is scored 2 + NULL_DRAWS times, and shown).
MAX_PASTE_TARGETS = 8
#: The pasted pictures are kept at most this size (long side, px): they are shown, not scored.
PASTE_PICTURE_PX = 448


@dataclass(frozen=True, eq=False)
class Paste:
    """Inspect's last "paste this region into other images" (the insertion test), kept with the
    analysis as its other results are: a reload, a switch and back, or a restore shows it again.

    Attributes
    ----------
    region : str, the region as Inspect named it (id, name, weight)
    mask : (H, W) bool ndarray, the region in the Inspect image (its edits applied)
    names : tuple of str, the images it was pasted into, in order (gallery names, file names)
    result : the insertion test's numbers (with its null)
    pictures : tuple of (h, w, 3) uint8 ndarrays, the pasted images, at most PASTE_PICTURE_PX
    source : str, the :func:`digest` of the image the region was cut from (its edits applied)
    """

    region: str
    mask: np.ndarray
    names: tuple[str, ...]
    result: lc.Insertion
    pictures: tuple[np.ndarray, ...]
    source: str = ""


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
    paste: Paste | None = None  # Inspect's last paste into other images
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


#: The kinds of work an analysis can hold, each with its count (a table: a new kind of work,
#: such as a kept paste, is one more entry). ``work`` ranks analyses in the recent list and
#: ``summary`` names them; "results" is one kind however many explanations there are.
WORK: tuple[tuple[str, Callable[[Analysis], int]], ...] = (
    ("region", lambda a: len(a.hand) or int(a.restored is not None)),
    ("merge", lambda a: len(a.merges)),
    ("edit", lambda a: len(a.edits)),
    (
        "results",
        lambda a: int(a.explanation is not None or a.edited_explanation is not None),
    ),
    ("Trust", lambda a: int(a.trust_explanation is not None)),
    ("Compare", lambda a: int(a.explanation_auto is not None)),
    ("paste", lambda a: int(a.paste is not None)),
)


def work(a: Analysis) -> int:
    """How much the user made in ``a``: the number of kinds of work it holds (regions, merges,
    edits, results, Trust, Compare, a paste), 0 when it holds none."""
    return sum(bool(count(a)) for _, count in WORK)


def has_work(a: Analysis) -> bool:
    """Whether replacing the image would lose something the user made."""
    return work(a) > 0


def summary(a: Analysis) -> str:
    """One line for the recent-analyses list, e.g. ``chelsea · 2 regions, 1 edit, results``."""
    parts = []
    for name, count in WORK:
        n = count(a)
        if not n:
            continue
        if name == "region" and not a.hand:  # a restored map: its own regions, not drawn here
            parts.append("restored regions")
        elif name[0].islower() and name not in ("results", "paste"):
            parts.append(f"{n} {name}{'s' if n != 1 else ''}")
        else:
            parts.append(name)
    return f"{a.image_name} · {', '.join(parts) or 'no changes'}"


def handcrafted_count(a: Analysis) -> int:
    """Handcrafted regions in the current map (a restored map counts its ``hand:`` regions)."""
    if a.restored is not None:
        return sum("hand:" in k for k in a.restored.keys)
    return len(a.hand)


def _count(n: int, word: str) -> str:
    """``"2 regions"``, ``"1 region"``; empty for none."""
    return f"{n} {word}{'' if n == 1 else 's'}" if n else ""


def contents(a: Analysis) -> list[str]:
    """What the analysis holds, in the words the pages use, e.g. ``["2 regions", "1 edit",
    "results", "Trust"]``; parts it lacks are left out. One line per part."""
    others = len(a.other_models)
    parts = [
        _count(handcrafted_count(a), "region"),
        _count(len(a.merges), "merge"),
        _count(len(a.edits), "edit"),
        "results" if a.explanation is not None else "",
        "LIME versus LIMEcraft" if a.explanation_auto is not None else "",
        "Trust" if a.trust_explanation is not None else "",
        "the edited image's explanation" if a.edited_explanation is not None else "",
        f"a paste into {_count(len(a.paste.names), 'image')}" if a.paste is not None else "",
        f"results of {_count(others, 'other model')}" if others else "",
    ]
    return [p for p in parts if p]


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
    return _segmentation_config(a.seg, tuple(h.inner for h in a.hand) if handcrafted else ())


def _segmentation_config(seg: SegSettings, inner: tuple[int, ...]) -> SegmentationConfig:
    """Craft's controls ``seg`` with handcrafted regions cut into ``inner`` pieces each."""
    return SegmentationConfig(
        method=seg.method,
        n_segments=seg.n_segments,
        params=seg.params,
        inner_segments=inner or None,
        inner_method=seg.inner_method,
        outer_segments=(1 if seg.outer == "one" else seg.n_segments) if inner else None,
        working_size=working_size(seg.method, seg.working_size),
    )


def default_config(a: Analysis) -> lc.ExplainConfig:
    """The app's defaults for this analysis: what Explain would use with every control left as
    it opens (Craft's superpixel controls, each handcrafted region one feature, the engine's
    other settings). The report lists the settings that differ from these, not from the
    engine's (whose segmentation is lime's quickshift, the app's SLIC)."""
    seg = _segmentation_config(SegSettings(), tuple(1 for _ in a.hand))
    return dataclasses.replace(APP_CONFIG, segmentation=seg)


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
    paste: Paste | None = None

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


def set_paste(a: Analysis, paste: Paste) -> None:
    a.paste = paste


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


# ----------------------------------------------------------------------------- reading
# The file's schema: each field carries its check, worded as the file's messages have always
# been; ``{loc}`` is where the value sits (``regions[0]``), ``{up}`` where its parent sits.


def _obj(what: str) -> BeforeValidator:
    def ok(v: Any) -> Any:
        if not isinstance(v, dict):
            raise Bad(f"{what} must be an object")
        return v

    return BeforeValidator(ok)


def _list(what: str, most: int) -> BeforeValidator:
    def ok(v: Any) -> Any:
        if not isinstance(v, list):
            raise Bad(f"{what} must be a list")
        if len(v) > most:
            raise Bad(f"{what} has {len(v)} entries; at most {most}")
        return v

    return BeforeValidator(ok)


def _text(what: str, most: int = MAX_NAME) -> BeforeValidator:
    def ok(v: Any) -> str:
        if not isinstance(v, str) or len(v) > most:
            raise Bad(f"{what} must be a string of at most {most} characters")
        return v

    return BeforeValidator(ok)


def _maybe(check: BeforeValidator) -> BeforeValidator:
    """``check``, or None for null (a missing optional part)."""
    f: Any = check.func
    takes_info = len(inspect.signature(f).parameters) == 2

    def ok(v: Any, info: ValidationInfo) -> Any:
        if v is None:
            return None
        return f(v, info) if takes_info else f(v)

    return BeforeValidator(ok)


def _int(what: str, lo: int, hi: int) -> BeforeValidator:
    def ok(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise Bad(f"{what} must be an integer in [{lo}, {hi}], got {v!r}")
        return v

    return BeforeValidator(ok)


def _bool(what: str) -> BeforeValidator:
    def ok(v: Any) -> bool:
        if not isinstance(v, bool):
            raise Bad(f"{what} must be true or false, got {v!r}")
        return v

    return BeforeValidator(ok)


def _png(what: str, *, sets_shape: bool = False, any_size: bool = False) -> BeforeValidator:
    """A base64 image; the analysis' own image (``sets_shape``) gives the size the masks and
    explanations after it must have (a picture of another image: ``any_size``)."""

    def ok(v: Any, info: ValidationInfo) -> np.ndarray:
        if not isinstance(v, str) or len(v) > 4 * MAX_JSON_BYTES:
            raise Bad(f"{what} is not base64")
        try:
            data = base64.b64decode(v, validate=True)
        except ValueError:
            raise Bad(f"{what} is not base64") from None
        image = decode_image(data, f"the analysis file's {what}")
        if sets_shape:
            info.context["shape"] = image.shape[:2]
        elif not any_size and image.shape[:2] != info.context.get("shape", image.shape[:2]):
            raise Bad(f"the {what} must have the image's size")
        return image

    return BeforeValidator(ok)


def _array(what: str, kinds: str) -> BeforeValidator:
    """A 2-D array from base64 npz of the image's size, its header checked before it is
    inflated (a few KB of zeros can inflate to GBs)."""

    def ok(v: Any, info: ValidationInfo) -> np.ndarray:
        if not isinstance(v, str) or len(v) > 4 * MAX_JSON_BYTES:
            raise Bad(f"{what} must be a string of at most {4 * MAX_JSON_BYTES} characters")
        try:
            raw = base64.b64decode(v, validate=True)
            (a,) = npz_members(raw)
            if not is_map(a, kinds):
                raise Bad(f"{what} must be a 2-D map of at most {MAX_PIXELS:,} pixels")
            arr = load_npz(raw)["a"]
        except Bad:
            raise
        except Exception as e:
            raise Bad(f"{what} could not be decoded ({_why(e)})") from None
        shape = info.context.get("shape", arr.shape)
        if arr.shape != shape:
            raise Bad(
                f"{what} is {arr.shape[1]}x{arr.shape[0]}; the image is {shape[1]}x{shape[0]}"
            )
        return arr.astype(bool) if kinds == "bui" else arr.astype(np.int32)

    return BeforeValidator(ok)


def _why(e: Exception) -> str:
    """Why an array could not be decoded, in a few words."""
    if isinstance(e, binascii.Error):
        return "not base64"
    return str(e) or type(e).__name__


def _explanation(where: str) -> BeforeValidator:
    def ok(v: Any, info: ValidationInfo) -> lc.Explanation | None:
        if v is None:
            return None
        try:
            ex = lc.Explanation.from_dict(v)
        except lc.LimecraftError as e:
            raise Bad(f"{where}: {e}") from None
        if ex.segments.shape != info.context.get("shape", ex.segments.shape):
            raise Bad(f"{where} is for another image size")
        return ex

    return BeforeValidator(ok)


def _settings(v: Any) -> lc.ExplainConfig:
    try:
        return within_app(lc.ExplainConfig.from_dict(v))
    except lc.LimecraftError as e:
        raise Bad(f"settings: {e}") from None


def _edit(v: Any) -> Edit:
    if not isinstance(v, dict):
        raise Bad("{loc} must be an object")
    known = {f.name for f in dataclasses.fields(Edit)}
    unknown = sorted(set(v) - known)
    if unknown:
        raise Bad(f"{{loc}}: unknown field {unknown[0]!r}")
    try:
        return Edit(**v)
    except (lc.LimecraftError, TypeError) as e:
        raise Bad(f"{{loc}}: {e}") from None


def _version(v: Any) -> int:
    if v != FORMAT_VERSION or isinstance(v, bool):
        raise Bad(f"unsupported format_version {v!r}")
    return v


def _normalize(v: Any) -> str | None:
    if v is not None and v not in (*NORMALIZATIONS, PIXELS_0_255):
        raise Bad(f"model normalize must be one of {', '.join(NORMALIZATIONS)}, {PIXELS_0_255}")
    return v


_LABELS = _maybe(_list("labels", 100_000))
Label = Annotated[str, _text("a class label", 1000)]
RegionName = Annotated[str, _text("a region name")]


class _ImageDoc(Schema):
    png: Annotated[np.ndarray, _png("image", sets_shape=True)] = None  # type: ignore[assignment]
    source: Annotated[
        str, BeforeValidator(one_of(SOURCES, f"image source must be one of {', '.join(SOURCES)}"))
    ] = None  # type: ignore[assignment]
    name: Annotated[str, _text("image name", 300)] = None  # type: ignore[assignment]
    tag_mask: Annotated[np.ndarray | None, _maybe(_array("tag_mask", "bui"))] = None
    expected_area: Annotated[np.ndarray | None, _maybe(_array("expected_area", "bui"))] = None
    area_expected: Annotated[bool, _bool("image area_expected")] = True
    note: Annotated[str, _text("image note", 1000)] = ""


class _ModelDoc(Schema):
    labels: Annotated[list[Label] | None, _LABELS] = None
    name: Annotated[str, _text("model name", 4096)] = None  # type: ignore[assignment]
    arch: Annotated[str | None, _maybe(_text("arch", 100))] = None
    normalize: Annotated[str | None, BeforeValidator(_normalize)] = None


class _MergeDoc(Schema):
    keys: Annotated[list[Annotated[str, _text("a merged key", 10_000)]], _list("keys", 10_000)] = (
        None  # type: ignore[assignment]
    )
    name: Annotated[str, _text("a merge name")] = None  # type: ignore[assignment]
    key: Annotated[str, _text("a merge key", 100_000)] = None  # type: ignore[assignment]


class _EditedDoc(Schema):
    image: Annotated[np.ndarray, _png("edited image")] = None  # type: ignore[assignment]
    explanation: Annotated[lc.Explanation | None, _explanation("{up}")] = None


def _numbers(what: str, kind: type) -> BeforeValidator:
    """A list of at most MAX_PASTE_TARGETS numbers (``kind`` int: integers, bool: booleans)."""

    def one(x: Any) -> bool:
        if kind is bool:
            return isinstance(x, bool)
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return False
        return isinstance(x, int) if kind is int else math.isfinite(x)

    def ok(v: Any) -> Any:
        if not isinstance(v, list) or len(v) > MAX_PASTE_TARGETS or not all(map(one, v)):
            name = {bool: "true or false", int: "integers"}.get(kind, "numbers")
            raise Bad(f"{what} must be a list of at most {MAX_PASTE_TARGETS} {name}")
        return v

    return BeforeValidator(ok)


class _PasteDoc(Schema):
    region: Annotated[str, _text("paste region", 400)] = None  # type: ignore[assignment]
    mask: Annotated[np.ndarray, _array("paste mask", "bui")] = None  # type: ignore[assignment]
    target_class: Annotated[int, _int("paste class", 0, 10**6)] = Field(None, alias="class")  # type: ignore[assignment]
    names: Annotated[
        list[Annotated[str, _text("a pasted image's name", 300)]], _list("paste names", 8)
    ] = None  # type: ignore[assignment]
    before: Annotated[list[float], _numbers("paste before", float)] = None  # type: ignore[assignment]
    after: Annotated[list[float], _numbers("paste after", float)] = None  # type: ignore[assignment]
    top_before: Annotated[list[int], _numbers("paste top_before", int)] = None  # type: ignore[assignment]
    top_after: Annotated[list[int], _numbers("paste top_after", int)] = None  # type: ignore[assignment]
    clipped: Annotated[list[bool], _numbers("paste clipped", bool)] = None  # type: ignore[assignment]
    null_after: Annotated[list[float] | None, _maybe(_numbers("paste null_after", float))] = None
    null_draws: Annotated[int, _int("paste null_draws", 0, 100)] = 0
    pictures: Annotated[
        list[Annotated[np.ndarray, _png("pasted picture", any_size=True)]],
        _list("paste pictures", 8),
    ] = None  # type: ignore[assignment]

    source: Annotated[str, _text("paste source", 64)] = ""

    def value(self) -> Paste:
        k = len(self.names)
        lists = (self.before, self.after, self.top_before, self.top_after, self.clipped)
        if k == 0 or any(len(x) != k for x in (*lists, self.pictures, self.null_after or [0] * k)):
            raise lc.LimecraftError(
                "analysis file: paste must have one name, score and picture per image"
            )
        if (self.null_after is None) != (self.null_draws == 0):
            raise lc.LimecraftError("analysis file: paste null_after and null_draws disagree")
        return Paste(
            region=self.region,
            mask=self.mask,
            names=tuple(self.names),
            result=lc.Insertion(
                target_class=self.target_class,
                before=np.asarray(self.before, float),
                after=np.asarray(self.after, float),
                top_before=np.asarray(self.top_before, int),
                top_after=np.asarray(self.top_after, int),
                clipped=np.asarray(self.clipped, bool),
                null_after=None if self.null_after is None else np.asarray(self.null_after, float),
                null_draws=self.null_draws,
            ),
            pictures=tuple(self.pictures),
            source=self.source,
        )


class _ResultsDoc(Schema):
    edited: Annotated[_EditedDoc | None, _maybe(_obj("{loc}"))] = None
    paste: Annotated[_PasteDoc | None, _maybe(_obj("{loc}"))] = None
    explanation: Annotated[lc.Explanation | None, _explanation("{loc}")] = None
    automatic: Annotated[lc.Explanation | None, _explanation("{loc}")] = None
    trust: Annotated[lc.Explanation | None, _explanation("{loc}")] = None

    def value(self) -> Results:
        e = self.edited
        return Results(
            explanation=self.explanation,
            explanation_auto=self.automatic,
            trust_explanation=self.trust,
            edited_image=None if e is None else e.image,
            edited_explanation=None if e is None else e.explanation,
            paste=None if self.paste is None else self.paste.value(),
        )


class _OtherDoc(Schema):
    model: Annotated[_ModelDoc, _obj("{loc}")] = None  # type: ignore[assignment]
    results: Annotated[_ResultsDoc, _obj("{loc}")] = Field(default_factory=dict)


def _seg_settings(d: _SegDoc) -> SegSettings:
    try:
        checked = SegmentationConfig(
            method=d.method,
            params=tuple(tuple(p) for p in d.params),
            inner_method=d.inner_method,
            working_size="auto" if d.working_size == APP_WORKING_SIZE else d.working_size,
        )
    except (lc.LimecraftError, TypeError) as e:
        raise Bad(f"segmentation: {e}") from None
    return SegSettings(
        d.method,
        d.n_segments,
        d.outer,
        tuple((str(k), float(v)) for k, v in checked.params),
        checked.inner_method,
        d.working_size,
    )


_N = LIMITS["n_segments"].app or (LIMITS["n_segments"].lo, LIMITS["n_segments"].hi)
_INNER = LIMITS["inner_segments"]


class _SegDoc(Schema):
    method: Annotated[
        str,
        BeforeValidator(
            one_of(lc.SEGMENTERS, f"segmentation method must be one of {', '.join(lc.SEGMENTERS)}")
        ),
    ] = None  # type: ignore[assignment]
    n_segments: Annotated[int, _int("segmentation n_segments", int(_N[0]), int(_N[1]))] = None  # type: ignore[assignment]
    outer: Annotated[
        str,
        BeforeValidator(
            one_of(("segment", "one"), "segmentation outer must be 'segment' or 'one'")
        ),
    ] = None  # type: ignore[assignment]
    params: Annotated[list, _list("segmentation params", 10)] = Field(default_factory=list)
    inner_method: Any = "slic"
    working_size: Any = APP_WORKING_SIZE


def _hand(d: _HandDoc) -> HandRegion:
    if not d.uid.isalnum():
        raise Bad("{loc} uid must be letters and digits")
    return HandRegion(d.name, d.mask, d.inner, d.colour, d.uid, d.expected)


class _HandDoc(Schema):
    colour: Annotated[
        str,
        BeforeValidator(
            one_of(REGION_COLOURS, f"{{up}} colour must be one of {', '.join(REGION_COLOURS)}")
        ),
    ] = None  # type: ignore[assignment]
    uid: Annotated[str, _text("{up} uid", 32)] = None  # type: ignore[assignment]
    name: Annotated[str, _text("{up} name")] = None  # type: ignore[assignment]
    mask: Annotated[np.ndarray, _array("{up} mask", "bui")] = None  # type: ignore[assignment]
    inner: Annotated[int, _int("{up} inner", int(_INNER.lo), int(_INNER.app[1]))] = None  # type: ignore[assignment,index]
    expected: Annotated[bool, _bool("{up} expected")] = False


def _regions(d: _RestoredDoc) -> lc.Regions:
    try:
        return lc.Regions(
            d.atoms,
            tuple(d.atom_keys),
            tuple(d.atom_names),
            tuple(tuple(g) for g in d.groups),
            tuple(d.group_names),
        )
    except lc.LimecraftError:
        raise
    except Exception as e:
        raise Bad(f"restored_regions do not fit together ({e})") from None


class _RestoredDoc(Schema):
    atoms: Annotated[np.ndarray, _array("restored_regions atoms", "iu")] = None  # type: ignore[assignment]
    atom_keys: Annotated[
        list[Annotated[str, _text("a region key", 10_000)]], _list("atom_keys", 100_000)
    ] = None  # type: ignore[assignment]
    atom_names: Annotated[list[RegionName], _list("atom_names", 100_000)] = None  # type: ignore[assignment]
    groups: Annotated[
        list[
            Annotated[
                list[Annotated[int, _int("a group atom", 0, 10**6)]], _list("a group", 100_000)
            ]
        ],
        _list("groups", 100_000),
    ] = None  # type: ignore[assignment]
    group_names: Annotated[list[RegionName], _list("group_names", 100_000)] = None  # type: ignore[assignment]


class _AnalysisDoc(Schema):
    """A ``limecraft-analysis`` file, version 1."""

    format: Annotated[
        str, fixed(FORMAT, f"not a LIMEcraft analysis (missing format: {FORMAT})")
    ] = None  # type: ignore[assignment]
    format_version: Annotated[int, BeforeValidator(_version)] = None  # type: ignore[assignment]
    image: Annotated[_ImageDoc, _obj("image")] = None  # type: ignore[assignment]
    model: Annotated[_ModelDoc, _obj("model")] = None  # type: ignore[assignment]
    merges: Annotated[list[Annotated[_MergeDoc, _obj("{loc}")]], _list("merges", MAX_MERGES)] = (
        Field(default_factory=list)
    )
    settings: Annotated[lc.ExplainConfig, BeforeValidator(_settings)] = None  # type: ignore[assignment]
    results: Annotated[_ResultsDoc, _obj("{loc}")] = Field(default_factory=dict)
    other_models: Annotated[
        list[Annotated[_OtherDoc, _obj("{loc}")]], _list("other_models", MAX_OTHER_MODELS)
    ] = Field(default_factory=list)
    segmentation: Annotated[_SegDoc, _obj("segmentation"), AfterValidator(_seg_settings)] = None  # type: ignore[assignment]
    regions: Annotated[
        list[Annotated[_HandDoc, _obj("{loc}"), AfterValidator(_hand)]],
        _list("regions", MAX_HAND_REGIONS),
    ] = Field(default_factory=list)
    restored_regions: Annotated[
        _RestoredDoc | None,
        _maybe(_obj("restored_regions")),
        AfterValidator(lambda d: d and _regions(d)),
    ] = None
    selected: Annotated[
        list[Annotated[str, _text("a selected key", 10_000)]], _list("selected", 10_000)
    ] = Field(default_factory=list)
    edits: Annotated[list[Annotated[Edit, BeforeValidator(_edit)]], _list("edits", MAX_EDITS)] = (
        Field(default_factory=list)
    )


def _model_ref(m: _ModelDoc) -> ModelRef:
    return ModelRef(m.name, None if m.labels is None else tuple(m.labels), m.arch, m.normalize)


def from_dict(d: Any) -> Analysis:
    """Read :func:`to_dict`'s output, checking every part (its schema: ``_AnalysisDoc``).

    Raises
    ------
    LimecraftError
        If ``d`` is not such an analysis or any part is out of range or does not fit.
    """
    if not isinstance(d, dict):
        raise lc.LimecraftError(f"not a LIMEcraft analysis (missing format: {FORMAT})")
    doc = check(_AnalysisDoc, d, context={}, prefix="analysis file: ")
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
    _set_results(a, doc.results.value())
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
