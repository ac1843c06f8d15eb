"""The explanation file's parts that are not the result itself.

Its format name and version, :class:`RunInfo` (what was resolved while an explanation ran), and
its schema (``ExplanationDoc``, read through the one validation layer,
:mod:`limecraft_core.codecs.schema`).

:meth:`limecraft_core.Explanation.from_dict` checks a file with ``ExplanationDoc`` and builds the
result from what it parsed; every check's message names the part that is wrong.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator, Field, ValidationInfo, model_validator

from ._validate import MAX_PIXELS, LimecraftError
from .agreement import Agreement, PairAgreement
from .codecs.npz import encode_npz, is_map, load_npz, npz_members
from .codecs.schema import Bad, Schema, fixed, one_of
from .comparison import Comparison
from .config import ExplainConfig
from .config import fields as setting_fields
from .explainer_table import Attribution
from .merge_hint import ESTIMATORS, MergeHint, PairInteraction
from .regions.types import check_origin
from .trust import TrustResults

__all__ = ["JSON_FORMAT", "JSON_VERSION", "TRUST_KEYS", "ExplanationDoc", "RunInfo", "encode_array"]

JSON_FORMAT = "limecraft-explanation"
JSON_VERSION = 2


@dataclass(frozen=True)
class RunInfo:
    """What was resolved while an explanation ran (not settings: facts about the run).

    Attributes
    ----------
    model : str, the scorer's name
    input_size : [h, w] or None, the model's input size (None: the image's own)
    normalize, device, precision : str
    channels_last : bool
    batch_size : int, images per forward pass
    samples_used : int, N after early stopping (else the samples asked for)
    model_passes : int, images the model actually scored (after dedup)
    n_regions : int
    handcrafted : int, regions that are (pieces of) handcrafted regions
    merged : int, regions made by merging several pieces
    kernel : str, the kernel function's name
    precision_reason : str, why that precision ran (``precision="auto"`` decides on a CPU)
    """

    model: str = "custom"
    input_size: list[int] | None = None
    normalize: str = "none"
    device: str = "cpu"
    precision: str = "fp32"
    channels_last: bool = False
    batch_size: int = 0
    samples_used: int = 0
    model_passes: int = 0
    n_regions: int = 0
    handcrafted: int = 0
    merged: int = 0
    kernel: str = ""
    precision_reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> RunInfo:
        if not isinstance(d, dict):
            raise LimecraftError("explanation JSON: 'run' must be an object")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


TRUST_KEYS = tuple(f.name for f in dataclasses.fields(TrustResults))  # one list: trust.py's


def _plain_json(v: Any, depth: int = 0) -> Any:
    """Accept only plain JSON values (dicts, lists, numbers, strings, null), a few levels deep."""
    if depth > 6:
        raise ValueError("nested too deeply")
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise ValueError("object keys must be strings")
        return {k: _plain_json(x, depth + 1) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain_json(x, depth + 1) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise ValueError(f"unexpected value {v!r}")


def encode_array(a: np.ndarray) -> dict[str, Any]:
    return {"encoding": "npz-base64", "data": base64.b64encode(encode_npz({"a": a})).decode()}


def _decode_array(d: Any) -> np.ndarray:
    if (
        not isinstance(d, dict)
        or d.get("encoding") != "npz-base64"
        or not isinstance(d.get("data"), str)
    ):
        raise LimecraftError("explanation JSON: 'segments' must be {encoding: npz-base64, data}")
    try:
        raw = base64.b64decode(d["data"], validate=True)
        # Read the array's header before inflating it: a few KB of zeros can inflate to GBs.
        (a,) = npz_members(raw)
        if not is_map(a, "iu"):
            raise LimecraftError(
                f"explanation JSON: 'segments' must be a 2-D integer label map of at most "
                f"{MAX_PIXELS:,} pixels; it is {a.dtype} of shape {a.shape}"
            )
        return load_npz(raw)["a"]
    except LimecraftError:
        raise
    except Exception as e:
        raise LimecraftError(f"explanation JSON: 'segments' could not be decoded ({e})") from None


def _version(v: Any) -> int:
    if v not in (1, JSON_VERSION) or isinstance(v, bool):
        raise LimecraftError(f"unsupported explanation format_version {v!r}")
    return int(v)


def _segments(v: Any, info: ValidationInfo) -> np.ndarray:
    """The label map: ids 0..K-1 with no gaps (K goes into the context for the parts after)."""
    if v is None:
        raise LimecraftError(
            "this explanation JSON was saved without segments; it cannot be restored"
        )
    seg = _decode_array(v)
    if seg.ndim != 2 or not np.issubdtype(seg.dtype, np.integer):
        raise Bad("segments must be a 2-D integer array")
    k = int(seg.max()) + 1
    if seg.min() != 0 or len(np.unique(seg)) != k:
        raise Bad("segments must hold ids 0..K-1 with no gaps")
    info.context["k"] = k
    return seg.astype(np.int32)


def _k_regions(v: Any, info: ValidationInfo) -> Any:
    k = info.context.get("k")
    if not isinstance(v, list) or (k is not None and len(v) != k):
        raise Bad(f"'regions' must list {k} regions")
    return v


def _some_classes(v: Any) -> Any:
    if not isinstance(v, list) or not v:
        raise Bad("'classes' must be a non-empty list")
    return v


def _numbers(v: Any, k: int | None, what: str, nullable: bool = False) -> np.ndarray:
    """A list of ``k`` numbers (``nullable``: null is NaN), finite unless null."""
    if not isinstance(v, list) or (k is not None and len(v) != k):
        raise Bad(f"{what} must be a list of {k} numbers")
    if nullable:
        v = [np.nan if x is None else x for x in v]
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        raise Bad(f"{what} must hold numbers only")
    a = np.asarray(v, dtype=np.float64)
    if not nullable and not np.isfinite(a).all():
        raise Bad(f"{what} must be {k} finite numbers")
    return a


def _vec(nullable: bool = False) -> BeforeValidator:
    """A list of K numbers (``nullable``: null is NaN)."""

    def ok(v: Any, info: ValidationInfo) -> np.ndarray:
        return _numbers(v, info.context.get("k"), f"classes[].{info.field_name}", nullable)

    return BeforeValidator(ok)


def _num(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Bad(f"expected a number, got {v!r}")
    return float(v)


def _class_index(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**31:
        raise Bad(f"a class index must be an integer in [0, 2**31), got {v!r}")
    return v


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise Bad(f"expected a string, got {v!r}")
    return v


def _table(value: Callable[[Any], Any]) -> BeforeValidator:
    """An object whose keys are text and whose values ``value`` reads."""

    def ok(v: Any) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise Bad("{loc} must be an object")
        return {_text(a): value(b) for a, b in v.items()}

    return BeforeValidator(ok)


def _settings_of(v: Any, info: ValidationInfo) -> tuple[ExplainConfig, RunInfo | None]:
    """The config (and, for version 1's flat dict, the run facts mixed into it)."""
    if not isinstance(v, dict):
        raise Bad("'settings' must be an object")
    if info.data.get("format_version") == JSON_VERSION:
        return ExplainConfig.from_dict(_plain_json(v)), None
    # Version 1: one flat dict mixing settings and run facts; unknown keys are left out.
    names = {s.name for s in setting_fields()}
    flat = {
        k: (tuple(x) if isinstance(x, list) else x)
        for k, x in _plain_json(v).items()
        if k in names and x is not None
    }
    if isinstance(flat.get("segmentation_params"), dict):
        flat["segmentation_params"] = tuple(flat["segmentation_params"].items())
    run = RunInfo.from_dict({k: v[k] for k in _V1_RUN_KEYS if k in v})
    return ExplainConfig.from_flat(flat), run


def _trust(v: Any) -> TrustResults:
    return TrustResults.from_dict({key: _plain_json(x) for key, x in v.items()})


Text = Annotated[str, BeforeValidator(_text)]
Number = Annotated[float, BeforeValidator(_num)]
ClassIndex = Annotated[int, BeforeValidator(_class_index)]


def _origin(v: Any) -> str | None:
    """A region's origin; None where a file written before origins were recorded has none."""
    if v is None:
        return None
    try:
        return check_origin(v)
    except LimecraftError as e:
        raise Bad("{loc}: " + str(e).replace("region origin ", "", 1)) from None


class _Region(Schema):
    key: Text
    name: Text
    origin: Annotated[str | None, BeforeValidator(_origin)] = None


class _Class(Schema):
    index: ClassIndex
    label: Text
    prediction: Number
    intercept: Number
    score: Number
    local_prediction: Number
    weights: Annotated[np.ndarray, _vec()]
    deltas: Annotated[np.ndarray, _vec(nullable=True)]
    kept_alone: Annotated[np.ndarray, _vec(nullable=True)]


class _Top(Schema):
    index: ClassIndex
    label: Text
    score: Number


def _values(v: Any, info: ValidationInfo) -> np.ndarray:
    return _numbers(v, info.context.get("k"), "{loc}")


def _region_ids(v: Any, info: ValidationInfo) -> tuple[int, ...]:
    k = info.context.get("k") or 0
    if not isinstance(v, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) and 0 <= x < k for x in v
    ):
        raise Bad(f"{{loc}} must list region ids in [0, {k})")
    return tuple(v)


def _interactions(v: Any, info: ValidationInfo) -> np.ndarray | None:
    if v is None:
        return None
    k = info.context.get("k")
    if not isinstance(v, list) or (k is not None and len(v) != k):
        raise Bad(f"{{loc}} must be null or {k} rows of {k} numbers")
    return np.stack([_numbers(row, k, "{loc}", nullable=True) for row in v]) if v else None


def _share(v: Any) -> float:
    x = _num(v)
    if not 0.0 <= x <= 1.0:
        raise Bad("{loc} must be a share in [0, 1]")
    return x


def _some_methods(v: Any) -> Any:
    if not isinstance(v, dict) or not v:
        raise Bad("explainers.methods must be a non-empty object")
    return v


Share = Annotated[float, BeforeValidator(_share)]


class _Method(Schema):
    title: Text
    values: Annotated[np.ndarray, BeforeValidator(_values)]
    note: Text = ""


class _Pair(Schema):
    a: Text
    b: Text
    feature: Share
    rank: Share
    sign: Share
    signed_rank: Share
    spearman: Annotated[float, BeforeValidator(lambda v: np.nan if v is None else _num(v))]


class _Agreement(Schema):
    k: Annotated[int, BeforeValidator(_class_index)]
    pairs: list[_Pair]
    spread: Annotated[np.ndarray, BeforeValidator(_values)]
    disagreeing: Annotated[tuple, BeforeValidator(_region_ids)]
    sentence: Text


def _pair_ids(v: Any, info: ValidationInfo) -> tuple[int, int] | None:
    if v is None:
        return None
    ids = _region_ids(v, info)
    if len(ids) != 2 or ids[0] >= ids[1]:
        raise Bad("{loc} must be null or two region ids, the lower first")
    return ids  # type: ignore[return-value]


def _tested(v: Any, info: ValidationInfo) -> tuple[PairInteraction, ...]:
    if not isinstance(v, list) or not all(isinstance(t, list) and len(t) == 4 for t in v):
        raise Bad("{loc} must list [a, b, index, se] rows")
    rows = []
    for a, b, index, se in v:
        a, b = _pair_ids([a, b], info)  # type: ignore[misc]
        nums = _numbers([index, se], 2, "{loc}", nullable=True)
        rows.append(PairInteraction(a, b, float(nums[0]), float(nums[1])))
    return tuple(rows)


class _Merge(Schema):
    """The ``explainers`` block's ``merge`` part (optional: files written before it lack it)."""

    pair: Annotated[tuple[int, int] | None, BeforeValidator(_pair_ids)] = None
    index: Annotated[float, BeforeValidator(lambda v: np.nan if v is None else _num(v))] = np.nan
    estimator: Annotated[
        str, BeforeValidator(one_of(ESTIMATORS, "{loc} must be exact or sample"))
    ] = "exact"
    threshold: Number = 0.0
    tested: Annotated[tuple, BeforeValidator(_tested)] = ()
    sentence: Text = ""

    def value(self) -> MergeHint:
        return MergeHint(
            self.pair, self.index, self.estimator, self.threshold, self.tested, self.sentence
        )


class _Explainers(Schema):
    """The ``explainers`` block: several methods over the explanation's regions (optional)."""

    target: ClassIndex
    label: Text
    passes: Annotated[int, BeforeValidator(_class_index)] = 0
    methods: Annotated[dict[str, _Method], BeforeValidator(_some_methods)]
    agreement: _Agreement
    interactions: Annotated[np.ndarray | None, BeforeValidator(_interactions)] = None
    merge: _Merge | None = None

    def comparison(self, k: int) -> Comparison:
        ag = self.agreement
        return Comparison(
            target=self.target,
            label=self.label,
            attributions=tuple(Attribution(n, m.values, m.note) for n, m in self.methods.items()),
            agreement=Agreement(
                k=ag.k,
                methods=tuple(m.title for m in self.methods.values()),
                pairs=tuple(PairAgreement(**p.model_dump()) for p in ag.pairs),
                spread=ag.spread,
                disagreeing=ag.disagreeing,
                sentence=ag.sentence,
            ),
            interactions=self.interactions,
            passes=self.passes,
            n_regions=k,
            merge=None if self.merge is None else self.merge.value(),
        )


class ExplanationDoc(Schema):
    """An explanation file (version 2, or version 1's flat settings)."""

    format: Annotated[
        str,
        fixed(JSON_FORMAT, "not a LIMEcraft explanation (missing format: limecraft-explanation)"),
    ] = None  # type: ignore[assignment]
    format_version: Annotated[int, BeforeValidator(_version)] = None  # type: ignore[assignment]
    segments: Annotated[np.ndarray, BeforeValidator(_segments)] = None  # type: ignore[assignment]
    regions: Annotated[list[_Region], BeforeValidator(_k_regions)] = None  # type: ignore[assignment]
    classes: Annotated[list[_Class], BeforeValidator(_some_classes)] = None  # type: ignore[assignment]
    settings: Annotated[tuple, BeforeValidator(_settings_of)]
    run: Annotated[RunInfo, BeforeValidator(RunInfo.from_dict)] = Field(default_factory=dict)
    top_predictions: list[_Top] = Field(default_factory=list)
    timings: Annotated[dict, _table(_num)] = Field(default_factory=dict)
    versions: Annotated[dict, _table(_text)] = Field(default_factory=dict)
    trust: Annotated[TrustResults, BeforeValidator(_trust)]
    explainers: _Explainers | None = None

    @model_validator(mode="before")
    @classmethod
    def _gather_trust(cls, d: Any) -> Any:
        """The trust checks sit at the top level, each under its own key."""
        if isinstance(d, dict):
            return {**d, "trust": {k: d[k] for k in TRUST_KEYS if k in d}}
        return d


_V1_RUN_KEYS = (
    "model",
    "input_size",
    "normalize",
    "device",
    "precision",
    "channels_last",
    "batch_size",
    "samples_used",
    "model_passes",
    "n_regions",
    "kernel",
)
