"""The kinds of setting value, as one table (``KINDS``).

For each kind: how a value is checked, read from text (the command line), written as text, and
written to JSON.

A setting (``FieldSpec``) names its kind; every front end reads the kind from here: the engine's
checks (:func:`check_value`), the command line's ``--flag VALUE``
(:func:`limecraft_core.config.parse_text`), the analysis files' JSON
(:meth:`limecraft_core.config.ExplainConfig.to_dict`) and the app's widgets
(``pages/lib/config_form.py``'s ``WIDGETS``, keyed by the same names). A new kind is one row
here and one widget there; ``tests/limecraft_core/config/test_kinds.py`` checks that every kind
has both, and that every setting's value makes the round trips through text and JSON.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._validate import LimecraftError, check_choice, check_int
from ..fill_table import check_fill_name
from ..limits import LIMITS, PARAM_RANGES
from .fields import FieldSpec


def _jsonable(v: Any) -> Any:
    """A setting's value as JSON: lists for tuples, a custom function by its name."""
    if isinstance(v, tuple):
        return list(v)
    if callable(v):
        return f"custom:{getattr(v, '__name__', 'function')}"
    return v


def _text(v: Any) -> str:
    """A setting's value as typed on the command line: lists comma-separated."""
    if isinstance(v, tuple):
        return ",".join(_text(x) for x in v)
    return str(v)


@dataclass(frozen=True)
class Kind:
    """One kind of setting value."""

    name: str
    #: the value checked and normalised (tuples for lists, floats for numbers); raises
    #: LimecraftError with the setting's name
    check: Callable[[FieldSpec, Any], Any]
    #: the value from the command line's text (then checked); raises ValueError
    parse: Callable[[str], Any]
    #: what the command line expects, for its message when ``parse`` fails
    expects: str
    to_json: Callable[[Any], Any] = _jsonable
    to_text: Callable[[Any], str] = _text


# ----------------------------------------------------------------------------- checks


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


def _as_tuple(name: str, v: Any) -> tuple:
    if v is None:
        return ()
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise LimecraftError(f"{name} must be a list, got {v!r}")
    return tuple(v)


def _bool(spec: FieldSpec, v: Any) -> bool:
    if not isinstance(v, bool):
        raise LimecraftError(f"{spec.name} must be true or false, got {v!r}")
    return v


def _fill(spec: FieldSpec, v: Any) -> Any:
    if callable(v):  # a library user's own fill function (recorded by its name)
        return v
    return check_fill_name(v, spec.name)


def _ints(spec: FieldSpec, v: Any) -> tuple[int, ...]:
    lim = LIMITS[spec.name]
    sizes = {
        check_int(f"{spec.name} size", n, int(lim.lo), int(lim.hi)) for n in _as_tuple(spec.name, v)
    }
    return tuple(sorted(sizes))


def _params(spec: FieldSpec, v: Any) -> tuple[tuple[str, Any], ...]:
    name = spec.name
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


def _inner(spec: FieldSpec, v: Any) -> Any:
    lim = LIMITS[spec.name]
    if isinstance(v, (list, tuple)):
        return tuple(
            None if x is None else check_int(spec.name, x, int(lim.lo), int(lim.hi)) for x in v
        )
    return check_int(spec.name, v, int(lim.lo), int(lim.hi))


def _working_size(spec: FieldSpec, v: Any) -> Any:
    if v == "auto":
        return v
    lim = LIMITS[spec.name]
    return check_int(spec.name, v, int(lim.lo), int(lim.hi))


# ----------------------------------------------------------------------------- text


def _parts(t: str) -> list[str]:
    return [x.strip() for x in t.split(",") if x.strip()]


def _parse_bool(t: str) -> bool:
    if t.lower() in ("1", "true", "yes", "on"):
        return True
    if t.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(t)


def _parse_params(t: str) -> tuple[tuple[str, float], ...]:
    pairs = []
    for part in _parts(t):
        k, _, v = part.partition("=")
        pairs.append((k.strip(), float(v)))
    return tuple(pairs)


def _parse_inner(t: str) -> Any:
    parts = _parts(t)
    return int(parts[0]) if len(parts) == 1 else tuple(int(x) for x in parts)


def _width(t: str) -> float | str:
    return t if t == "uniform" else float(t)


def _params_text(v: Any) -> str:
    return ",".join(f"{k}={x}" for k, x in v)


def _params_json(v: Any) -> dict:
    return dict(v)


# ----------------------------------------------------------------------------- the table

KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("int", lambda s, v: _check_limit(s.name, v, "int"), int, "an integer"),
        Kind("float", lambda s, v: _check_limit(s.name, v, "float"), float, "a number"),
        Kind("bool", _bool, _parse_bool, "bool"),
        Kind("choice", lambda s, v: check_choice(s.name, v, s.choices), str, "choice"),
        # a number > 0 or "uniform"
        Kind("width", lambda s, v: _check_width(s.name, v), _width, "width"),
        # a fill name or #RRGGBB
        Kind("fill", _fill, str, "fill"),
        # a list of widths
        Kind(
            "widths",
            lambda s, v: tuple(_check_width(f"{s.name} entry", w) for w in _as_tuple(s.name, v)),
            lambda t: tuple(_width(x) for x in _parts(t)),
            "widths",
        ),
        # a list of ints
        Kind(
            "ints",
            _ints,
            lambda t: tuple(int(x) for x in _parts(t)),
            "integers separated by commas",
        ),
        # a list of fills
        Kind(
            "fills",
            lambda s, v: tuple(check_fill_name(f, f"{s.name} entry") for f in _as_tuple(s.name, v)),
            lambda t: tuple(_parts(t)),
            "fills",
        ),
        # name=value pairs
        Kind(
            "params", _params, _parse_params, "params", to_json=_params_json, to_text=_params_text
        ),
        # an int, or one per handcrafted region
        Kind("inner", _inner, _parse_inner, "inner"),
        # an int, "auto", or None (full size)
        Kind("working_size", _working_size, lambda t: t if t == "auto" else int(t), "working_size"),
    )
}


def check_value(spec: FieldSpec, v: Any) -> Any:
    """The value of one setting, checked and normalised by its kind."""
    if v is None and spec.optional:
        return None
    return KINDS[spec.kind].check(spec, v)
