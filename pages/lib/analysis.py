"""One analysis: everything a person builds in the app, as one serialisable value.

An :class:`Analysis` holds the image, the model, the segmentation settings, the handcrafted
regions, the merges, the selection, the :class:`~limecraft_core.ExplainConfig`, the applied
edits and the results. Pages change it only through the small named actions below (pure
functions, no Streamlit), and the same value is saved as the user works, exported, and restored:
its file format, ``limecraft-analysis`` version 1, is in :mod:`pages.lib.analysis_file`.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

import limecraft_core as lc
from limecraft_core.config import SegmentationConfig
from limecraft_core.edits import Edit
from limecraft_core.regions.types import HAND_ORIGINS, check_origin
from models import registry
from pages.lib.identity import ModelRef, digest

__all__ = ["APP_CONFIG", "REGION_COLOURS", "Analysis", "HandRegion", "Merge", "Paste",
           "SegSettings"]  # fmt: skip

#: The app's default settings: the engine's. Every result has a stability verdict from its one
#: sample (resampled; no extra model pass), and sampling stops once that verdict is stable.
APP_CONFIG = lc.ExplainConfig()
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
    origin: str = "drawn"  # drawn, uploaded (a mask file) or proposed:<proposer>


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
        "the explainers compared" if getattr(a.explanation, "explainers", None) else "",
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
    set_results(a, Results())


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


def results_of(a: Analysis) -> Results:
    return Results(*(getattr(a, f.name) for f in dataclasses.fields(Results)))


def set_results(a: Analysis, r: Results) -> None:
    for f in dataclasses.fields(Results):
        setattr(a, f.name, getattr(r, f.name))


def add_region(a: Analysis, mask: np.ndarray, name: str = "", origin: str = "drawn") -> HandRegion:
    """A handcrafted region from a (H, W) bool mask; named ``region N`` when ``name`` is empty;
    ``origin``: ``drawn``, ``uploaded`` (a mask file) or ``proposed:<proposer>``."""
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
        origin=check_origin(origin, HAND_ORIGINS),
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


def preselect(a: Analysis, keys: tuple[str, ...]) -> None:
    """Select exactly the regions ``keys`` (a merge suggestion, for Craft's "Merge selected")."""
    a.selected = frozenset(keys)


def set_comparison(a: Analysis, cmp: lc.Comparison) -> None:
    """The explainers compared over the explanation's regions, kept with it (saved, restored)."""
    if a.explanation is not None:
        a.explanation = dataclasses.replace(a.explanation, explainers=cmp)


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
        held = results_of(a)
        if held.any():
            a.other_models.pop(model_ref(a), None)
            a.other_models[model_ref(a)] = held
            while len(a.other_models) > MAX_OTHER_MODELS:
                del a.other_models[next(iter(a.other_models))]
        a.model_name, a.model_labels, a.model_arch, a.model_normalize = new
        set_results(a, a.other_models.pop(model_ref(a), Results()))


def model_ref(a: Analysis) -> ModelRef:
    """The model this analysis uses, as the cache key it is loaded under."""
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
    a.restored = lc.Regions(
        ex.segments, ex.region_keys, ex.region_names, atom_origins=ex.region_origins
    )
    a.config = within_app(ex.config)
