"""The analysis file's schema: ``limecraft-analysis`` version 1, read through the one
validation layer, :mod:`limecraft_core.codecs.schema`.

:func:`pages.lib.analysis_file.from_dict` checks a file with :class:`AnalysisDoc` and builds
the :class:`~pages.lib.analysis.Analysis` from what it parsed; every check's message names the
part that is wrong.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import inspect
import math
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo

import limecraft_core as lc
from limecraft_core._validate import MAX_PIXELS
from limecraft_core.classifier import NORMALIZATIONS
from limecraft_core.codecs.npz import is_map, load_npz, npz_members
from limecraft_core.codecs.schema import Bad, Schema, fixed, one_of
from limecraft_core.config import SegmentationConfig
from limecraft_core.edits import Edit
from limecraft_core.io import decode_image
from limecraft_core.limits import LIMITS
from limecraft_core.regions.types import HAND_ORIGINS, check_origin
from pages.lib.analysis import (
    APP_WORKING_SIZE,
    MAX_EDITS,
    MAX_HAND_REGIONS,
    MAX_MERGES,
    MAX_NAME,
    MAX_OTHER_MODELS,
    MAX_PASTE_TARGETS,
    REGION_COLOURS,
    SOURCES,
    HandRegion,
    Paste,
    Results,
    SegSettings,
    within_app,
)
from pages.lib.identity import PIXELS_0_255

__all__ = ["FORMAT", "FORMAT_VERSION", "MAX_JSON_BYTES", "AnalysisDoc"]

FORMAT = "limecraft-analysis"
FORMAT_VERSION = 1
#: A saved analysis (or an exported file) is refused above this size.
MAX_JSON_BYTES = 100 * 2**20

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


def _hand_origin(v: Any) -> str:
    try:
        return check_origin(v, HAND_ORIGINS)
    except lc.LimecraftError as e:
        raise Bad("{up} " + str(e)) from None


def _hand(d: _HandDoc) -> HandRegion:
    if not d.uid.isalnum():
        raise Bad("{loc} uid must be letters and digits")
    return HandRegion(d.name, d.mask, d.inner, d.colour, d.uid, d.expected, d.origin)


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
    origin: Annotated[str, BeforeValidator(_hand_origin)] = "drawn"  # absent before origins


def _regions(d: _RestoredDoc) -> lc.Regions:
    try:
        return lc.Regions(
            d.atoms,
            tuple(d.atom_keys),
            tuple(d.atom_names),
            tuple(tuple(g) for g in d.groups),
            tuple(d.group_names),
            atom_origins=tuple(d.atom_origins or ()),
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
    atom_origins: list[str] | None = None  # absent before origins: derived from the keys


class AnalysisDoc(Schema):
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
