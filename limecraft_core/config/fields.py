"""One setting's description (``FieldSpec``: its help, kind, page, choices and range) and the checks a value of each kind goes through."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._validate import LimecraftError, check_choice, check_int, parse_colour
from ..limits import FILLS, LIMITS, PARAM_RANGES

OUTPUT_SPACES = ("probability", "raw")


#: The audit's settings unless given (the rest are explain's defaults):
#:
#: - its regions are the app's, SLIC with about 40: lime's quickshift parameters (explain's
#:   default) give 10-20 large regions on a 128 px image, which mix a small marker with its
#:   background, so hiding the region no longer hides the marker;
#: - a hidden region is inpainted from the pixels kept around it (``inpaint``, as Inspect's
#:   remove edit does): a marker of flat colour split over two superpixels keeps its colour under
#:   the mean fill (the mean of a flat region is the region), so hiding it changes nothing. On 60
#:   fresh demo images (bench/bench_audit.py's set) the mean fill missed 3 of the 30 images whose
#:   prediction follows the tag; inpaint and blur missed none, with no false alarm.
AUDIT_DEFAULTS: dict[str, Any] = {"segmentation": "slic", "n_segments": 40, "fill": "inpaint"}


#: Images an audit explains at once by default: their chunks share the scorer (see
#: :func:`limecraft_core.audit.run_audit`).
IN_FLIGHT = 4


DEVICES = ("auto", "cpu", "cuda")


PRECISIONS = ("auto", "fp32", "bf16", "fp16")


# How a field is parsed from text (CLI) and shown (app). "choice" fields list their choices.
KINDS = (
    "int",
    "float",
    "bool",
    "choice",
    "width",  # a number > 0 or "uniform"
    "fill",  # a fill name or #RRGGBB
    "widths",  # a list of widths
    "ints",  # a list of ints
    "fills",  # a list of fills
    "params",  # name=value pairs
    "inner",  # an int, or one per handcrafted region
    "working_size",  # an int, "auto", or None (full size)
)


@dataclass(frozen=True)
class FieldSpec:
    """One setting, as every front end sees it."""

    name: str  # the flat name: explain()'s keyword, the CLI flag (--name-with-dashes), JSON key
    group: str
    attr: str  # the attribute in its group
    kind: str
    help: str
    default: Any
    optional: bool  # None is allowed (and means "the default behaviour")
    choices: tuple[str, ...] = ()
    page: str = "explain"  # where the app shows it: explain, trust, craft

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def limit(self):
        return LIMITS.get(self.name)


def _f(
    default: Any,
    help: str,
    kind: str,
    *,
    choices: tuple[str, ...] = (),
    optional: bool = False,
    flat: str | None = None,
    page: str = "explain",
) -> Any:
    assert kind in KINDS, kind
    meta = {
        "help": help,
        "kind": kind,
        "choices": choices,
        "optional": optional,
        "flat": flat,
        "page": page,
    }
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def _check_limit(name: str, value: Any, kind: str, limit: str | None = None) -> Any:
    """``value`` within the limits table's range for ``limit`` (default ``name``); the message
    quotes that range."""
    lim = LIMITS[limit or name]
    if kind == "int":
        return lim.check(name, value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LimecraftError(f"{name} must be a number, got {value!r}")
    v = float(value)
    above = v > lim.lo if lim.lo_open else v >= lim.lo
    if not (math.isfinite(v) and above and (lim.hi is None or v <= lim.hi)):
        rng = lim.describe()
        raise LimecraftError(
            f"{name} must be {'in ' if lim.hi is not None else ''}{rng}, got {value}"
        )
    return v


def _check_width(name: str, v: Any) -> float | str:
    if v == "uniform":
        return "uniform"
    return _check_limit(name, v, "float", "kernel_width")


def _check_fill_name(name: str, v: Any) -> str:
    if isinstance(v, str) and (v in FILLS or parse_colour(v) is not None):
        return v
    raise LimecraftError(
        f"{name} must be one of {', '.join(FILLS)} or a colour like #808080; got {v!r}"
    )


def _as_tuple(name: str, v: Any) -> tuple:
    if v is None:
        return ()
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise LimecraftError(f"{name} must be a list, got {v!r}")
    return tuple(v)


def _check(spec: FieldSpec, v: Any) -> Any:
    """The value of one field, checked and normalised (tuples for lists, floats for numbers)."""
    name, kind = spec.name, spec.kind
    if v is None and spec.optional:
        return None
    if kind == "int":
        return _check_limit(name, v, "int")
    if kind == "float":
        return _check_limit(name, v, "float")
    if kind == "bool":
        if not isinstance(v, bool):
            raise LimecraftError(f"{name} must be true or false, got {v!r}")
        return v
    if kind == "choice":
        return check_choice(name, v, spec.choices)
    if kind == "width":
        return _check_width(name, v)
    if kind == "fill":
        if callable(v):  # a library user's own fill function (recorded by its name)
            return v
        return _check_fill_name(name, v)
    if kind == "widths":
        return tuple(_check_width(f"{name} entry", w) for w in _as_tuple(name, v))
    if kind == "ints":
        lim = LIMITS[name]
        return tuple(
            sorted(
                {check_int(f"{name} size", n, int(lim.lo), int(lim.hi)) for n in _as_tuple(name, v)}
            )
        )
    if kind == "fills":
        return tuple(_check_fill_name(f"{name} entry", f) for f in _as_tuple(name, v))
    if kind == "params":
        if isinstance(v, Mapping):
            v = tuple(v.items())
        pairs = []
        for item in _as_tuple(name, v):
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise LimecraftError(f"{name} must be name=value pairs, got {item!r}")
            key, val = item
            if key not in PARAM_RANGES:
                raise LimecraftError(
                    f"{name}: unknown parameter {key!r}; known: {', '.join(sorted(PARAM_RANGES))}"
                )
            if isinstance(val, bool) or not isinstance(val, numbers.Real):
                raise LimecraftError(f"{name}: {key} must be a number, got {val!r}")
            pairs.append((str(key), val))
        return tuple(sorted(pairs))
    if kind == "inner":
        lim = LIMITS[name]
        if isinstance(v, (list, tuple)):
            return tuple(
                None if x is None else check_int(name, x, int(lim.lo), int(lim.hi)) for x in v
            )
        return check_int(name, v, int(lim.lo), int(lim.hi))
    if kind == "working_size":
        if v == "auto":
            return v
        lim = LIMITS[name]
        return check_int(name, v, int(lim.lo), int(lim.hi))
    raise AssertionError(f"unknown kind {kind}")
