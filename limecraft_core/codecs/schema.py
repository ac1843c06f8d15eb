"""The one validation layer for untrusted JSON.

It checks analysis files, explanation files, audit rows and ``audit.json``.

Every such file is read by :func:`read_json` (one parse, one size limit, one message for text
that is not JSON or is nested too deeply) and checked by a pydantic schema through :func:`check`,
which turns the first schema error into one :class:`~limecraft_core.LimecraftError` line.

A schema is a :class:`Schema` subclass whose fields carry their checks as annotations
(``Annotated[T, BeforeValidator(...)]``). A check raises :class:`Bad` with the file's own wording;
``{loc}`` in its message is replaced by where the value sits (``regions[0].mask``) and ``{up}``
by where its parent sits (``regions[0]``), so one check serves every place it is used. Missing
fields are checked as their default (``validate_default``), so a missing field gets the same
message as a wrong one. Errors that pydantic finds itself (a wrong type under a strict
annotation, a missing required field, an unknown field) are worded by the ``words`` function
that :func:`check` is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from .._validate import LimecraftError

__all__ = ["Bad", "Schema", "check", "fixed", "one_of", "read_json", "where"]

S = TypeVar("S", bound=BaseModel)


class Bad(ValueError):
    """A schema check's message: ``{loc}`` and ``{up}`` are filled in by :func:`check`."""


class Schema(BaseModel):
    """A part of a file. Defaults are checked too, extra keys are ignored (a newer writer's
    additions), and the parsed values (numpy arrays, config objects) are kept as they are."""

    model_config = ConfigDict(
        validate_default=True, arbitrary_types_allowed=True, extra="ignore", frozen=True
    )


def where(loc: Sequence[int | str]) -> str:
    """A location as a reader writes it: ``("regions", 0, "mask")`` is ``regions[0].mask``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _default_words(err: ErrorDetails) -> str:
    loc = where(err["loc"])
    if err["type"] == "missing":
        return f"{loc} is missing"
    if err["type"] == "extra_forbidden":
        return f"unknown field {err['loc'][-1]!r}"
    if err["type"] in ("model_type", "dict_type", "model_attributes_type"):
        return f"{loc} must be an object"
    if err["type"] == "list_type":
        return f"{loc} must be a list"
    return f"{loc}: {err['msg']}"


def check(
    schema: type[S],
    data: Any,
    *,
    context: dict[str, Any] | None = None,
    prefix: str = "",
    words: Callable[[ErrorDetails], str] = _default_words,
) -> S:
    """``data`` checked and parsed by ``schema``.

    Raises
    ------
    LimecraftError
        For the first error: a LimecraftError that a check passed on (a setting out of range,
        an image that cannot be read) as it is; else ``prefix`` and a check's own message (a
        :class:`Bad` or any ValueError, its ``{loc}`` and ``{up}`` filled in), or
        ``words(error)`` for an error pydantic found itself.
    """
    try:
        return schema.model_validate(data, context=context)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        exc = (err.get("ctx") or {}).get("error")
        if isinstance(exc, LimecraftError):
            raise LimecraftError(str(exc)) from None
        raise LimecraftError(prefix + message(err, words)) from None
    except (TypeError, KeyError, AttributeError, OverflowError, RecursionError) as e:
        # a check met a value it did not expect: still one line, never a traceback
        raise LimecraftError(f"{prefix}{type(e).__name__}: {e}") from None


def message(err: ErrorDetails, words: Callable[[ErrorDetails], str] = _default_words) -> str:
    """One schema error in the file's words."""
    exc = (err.get("ctx") or {}).get("error")
    if not isinstance(exc, ValueError):
        return words(err)
    loc = err["loc"]
    return str(exc).replace("{loc}", where(loc)).replace("{up}", where(loc[:-1]))


def fixed(value: Any, words: str) -> BeforeValidator:
    """A field that must be exactly ``value`` (a file's format name, its version); ``{got}``
    in ``words`` is replaced by what it was."""

    def ok(v: Any) -> Any:
        if v != value or type(v) is not type(value):
            raise LimecraftError(words.replace("{got}", repr(v)))
        return v

    return BeforeValidator(ok)


def one_of(values: Any, words: str) -> Callable[[Any], str]:
    """A check that a value is one of the strings ``values`` (a closed set: a status, a colour,
    a method); ``{got}`` in ``words`` is replaced by what it was. Use it as a
    ``BeforeValidator`` or, after a strict type, an ``AfterValidator``."""

    def ok(v: Any) -> str:
        if not isinstance(v, str) or v not in values:
            raise Bad(words.replace("{got}", repr(v)))
        return v

    return ok


def read_json(
    text: str | bytes,
    *,
    max_bytes: int | None = None,
    too_big: str = "",
    not_json: str = "not a JSON document",
) -> Any:
    """Parse untrusted JSON text.

    Raises
    ------
    LimecraftError
        ``too_big`` when the text is over ``max_bytes``; ``"{not_json}: {reason}"`` when it is not
        JSON; a plain message when it is nested too deeply to read.
    """
    if max_bytes is not None and len(text) > max_bytes:
        raise LimecraftError(too_big)
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise LimecraftError(f"{not_json}: {e}") from None
    except RecursionError:
        raise LimecraftError("not a usable JSON document: it is nested too deeply") from None
