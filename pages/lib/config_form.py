"""The app's settings controls, generated from the engine's schema (``limecraft_core.config``).

One widget per setting: its label and help come from the field's metadata, its range from
``limecraft_core.limits.LIMITS`` (the app's narrower range where one is given). Nothing here
retypes a setting; a new field in the schema shows up in the app by itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import streamlit as st

import limecraft_core as lc
from limecraft_core.config import FieldSpec, fields, spec
from pages.lib.session import session

__all__ = [
    "WIDGETS",
    "WIDTH_CHOICES",
    "describe_changes",
    "forget_widgets",
    "key_of",
    "setting_widget",
    "settings_form",
]

KEY_PREFIX = "set_"
WIDTH_CHOICES: tuple[float | str, ...] = (0.1, 0.25, 0.5, 1.0, "uniform")
SIZE_CHOICES = (100, 200, 500, 1000, 2000, 5000, 10000, 20000)
WORKING_SIZES = ("auto", 192, 256, 384, 512, 768, 1024, 2048, None)
DEFAULT_LABEL = "default"


def key_of(name: str, prefix: str = KEY_PREFIX) -> str:
    """The widget key of a setting. It changes when another analysis comes in (the session's
    ``view`` counter), so that the widget starts from that analysis' value: a browser keeps a
    widget's old value under the same key. A session's first analysis keeps the plain key.
    Another page's own copy of a setting (the Audit page's) takes another ``prefix``."""
    view = session().view
    return f"{prefix}{name}" if not view else f"{prefix}{name}-{view}"


def forget_widgets() -> None:
    """Drop the settings widgets' own state, so that they show the session's config again
    (after a restore, or when the config changed outside the widgets)."""
    for k in [k for k in st.session_state if str(k).startswith(KEY_PREFIX)]:
        del st.session_state[k]


def _label(s: FieldSpec) -> str:
    return s.name.replace("_", " ").capitalize()


def _shown(v: Any) -> str:
    if v is None or v is False:
        return "off"
    if v is True:
        return "on"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v)) or "none"
    return str(v)


def describe_changes(changed: dict[str, Any]) -> str:
    """The settings that differ from the defaults (``ExplainConfig.changed()``) as the widgets
    name them, e.g. ``Samples 3000, Early stop off``."""
    return ", ".join(f"{_label(spec(name))} {_shown(v)}" for name, v in changed.items())


def _range(s: FieldSpec) -> tuple[float | None, float | None]:
    lim = s.limit
    if lim is None:
        return None, None
    if lim.app is not None:
        return lim.app
    return lim.lo, lim.hi


def _number(s: FieldSpec, value: Any, col: Any, key: str, label: str) -> Any:
    lo, hi = _range(s)
    is_int = s.kind == "int"
    cast = int if is_int else float
    lo = None if lo is None else cast(lo)
    hi = None if hi is None else cast(hi)
    if lo is not None and s.limit is not None and s.limit.lo_open and not is_int:
        lo = max(lo, 1e-6)
    if value is not None:
        value = cast(
            min(max(value, lo if lo is not None else value), hi if hi is not None else value)
        )
    empty = s.optional and s.default is None  # empty is None, the default behaviour
    return col.number_input(
        label,
        min_value=lo,
        max_value=hi,
        value=value,
        step=1 if is_int else None,
        key=key,
        help=s.help + (" (empty: the default)" if empty else ""),
        placeholder=DEFAULT_LABEL if empty else None,
    )


# ----------------------------------------------------------------------------- the widgets
# One function per kind of setting (limecraft_core.config.KINDS), in the table WIDGETS below:
# (spec, value, column, key, label, help) -> the value the widget shows.


def _bool(s: FieldSpec, value: Any, col: Any, key: str, label: str, help_: str) -> Any:
    if s.optional:
        opts = [None, True, False]
        return col.selectbox(
            label,
            opts,
            index=opts.index(value),
            key=key,
            help=help_,
            format_func=lambda v: DEFAULT_LABEL if v is None else ("on" if v else "off"),
        )
    return col.checkbox(label, bool(value), key=key, help=help_)


def _choice(s: FieldSpec, value: Any, col: Any, key: str, label: str, help_: str) -> Any:
    choices = [c for c in s.choices if c != "given"]
    return col.selectbox(
        label,
        choices,
        index=choices.index(value) if value in choices else 0,
        key=key,
        help=help_,
    )


def _numeric(s: FieldSpec, value: Any, col: Any, key: str, label: str, help_: str) -> Any:
    if s.optional and s.default is not None:
        # None is "off" (e.g. early stop): a checkbox, then the value when it is on (a number
        # box cannot be emptied once it holds a value)
        on = col.checkbox(label, value is not None, key=key + "_on", help=help_)
        if not on:
            return None
        value = s.default if value is None else value
        return _number(s, value, col, key, f"{label}: value")
    return _number(s, value, col, key, label)


def _width(s: FieldSpec, value: Any, col: Any, key: str, label: str, help_: str) -> Any:
    uniform = col.checkbox("Uniform kernel", value == "uniform", key=key + "_uniform", help=help_)
    lo, hi = _range(s)
    width = col.number_input(
        label,
        float(lo),
        float(hi),
        0.25 if value == "uniform" else float(value),
        0.05,
        key=key,
        disabled=uniform,
        help=help_,
    )
    return "uniform" if uniform else float(width)


def _fill(s: FieldSpec, value: Any, col: Any, key: str, label: str, help_: str) -> Any:
    options = [*lc.FILLS, "custom colour"]
    now = value if value in lc.FILLS else "custom colour"
    fill = col.selectbox(label, options, index=options.index(now), key=key, help=help_)
    if fill == "custom colour":
        fill = col.color_picker(
            "Fill colour",
            value if isinstance(value, str) and value.startswith("#") else "#808080",
            key=key + "_colour",
        )
    return fill


def _several(choices: Any, format_func: Any = str):
    """A multiselect over ``choices`` plus the values already chosen."""

    def widget(s: FieldSpec, value: Any, col: Any, key: str, label: str, help_: str) -> Any:
        options = list(dict.fromkeys([*choices(), *value]))
        if s.kind == "ints":
            options = sorted(options)
        return tuple(
            col.multiselect(
                label, options, list(value), key=key, help=help_, format_func=format_func
            )
        )

    return widget


def _working_size(s: FieldSpec, value: Any, col: Any, key: str, label: str, help_: str) -> Any:
    options = list(dict.fromkeys([*WORKING_SIZES, value]))
    return col.selectbox(
        label,
        options,
        index=options.index(value),
        key=key,
        help=help_,
        format_func=lambda v: "full size" if v is None else str(v),
    )


def _on_craft(s: FieldSpec, value: Any, col: Any, key: str, label: str, help_: str) -> Any:
    raise ValueError(
        f"no widget for {s.name} ({s.kind}): it is set on the Craft page, by the method's own "
        "controls and per drawn region"
    )


#: The widget of each kind of setting; the keys are limecraft_core.config.KINDS's
#: (tests/limecraft_core/config/test_kinds.py checks it).
WIDGETS: dict[str, Any] = {
    "int": _numeric,
    "float": _numeric,
    "bool": _bool,
    "choice": _choice,
    "width": _width,
    "fill": _fill,
    "widths": _several(lambda: WIDTH_CHOICES),
    "ints": _several(lambda: SIZE_CHOICES),
    "fills": _several(lambda: lc.FILLS),
    "params": _on_craft,
    "inner": _on_craft,
    "working_size": _working_size,
}


def setting_widget(s: FieldSpec, value: Any, col: Any = st, prefix: str = KEY_PREFIX) -> Any:
    """One setting's widget (``WIDGETS``, by the setting's kind); returns the value it shows
    (None where the default applies)."""
    return WIDGETS[s.kind](s, value, col, key_of(s.name, prefix), _label(s), s.help)


def settings_form(
    cfg: lc.ExplainConfig, names: Iterable[str], columns: int = 2, prefix: str = KEY_PREFIX
) -> dict[str, Any]:
    """Widgets for the named settings, laid out in columns; returns {name: value shown}."""
    cols = st.columns(columns)
    current = cfg.flat()
    return {
        name: setting_widget(spec(name), current[name], cols[i % columns], prefix)
        for i, name in enumerate(names)
    }


def advanced_names(page: str, shown: Iterable[str]) -> list[str]:
    """The page's settings not shown elsewhere on it, in schema order."""
    shown = set(shown)
    return [s.name for s in fields() if s.page == page and s.name not in shown]
