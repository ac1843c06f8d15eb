"""The kinds of setting value as one table (limecraft_core.config.KINDS): every kind has a widget
in the app, a command-line flag and a JSON round trip, and a toy kind plugs in through the
tables alone."""

from __future__ import annotations

import json

import pytest

from limecraft.args import settings_from_args
from limecraft.cli import build_parser
from limecraft_core import LimecraftError
from limecraft_core.config import KINDS, ExplainConfig, Kind, check_setting, fields, parse_text
from pages.lib.config_form import WIDGETS, setting_widget

#: A setting of each kind and a value of it that is not its default.
EXAMPLES = {
    "int": ("samples", 321),
    "float": ("p", 0.3),
    "bool": ("dedup", False),
    "choice": ("segmentation", "slic"),
    "width": ("kernel_width", 0.5),
    "fill": ("fill", "#336699"),
    "widths": ("kernel_widths", (0.5, "uniform")),
    "ints": ("convergence", (50, 100)),
    "fills": ("compare_fills", ("blur", "mean")),
    "params": ("segmentation_params", (("compactness", 20.0),)),
    "inner": ("inner_segments", 4),
    "working_size": ("working_size", 256),
}


def test_every_kind_has_a_widget_and_an_example_and_every_setting_a_kind():
    assert set(WIDGETS) == set(KINDS) == set(EXAMPLES)
    assert {s.kind for s in fields()} <= set(KINDS)
    for kind, (name, value) in EXAMPLES.items():
        spec = next(s for s in fields() if s.name == name)
        assert spec.kind == kind and spec.default != value
        assert check_setting(name, value) == value  # the examples are valid as written


def test_every_kind_from_the_command_line_flag():
    parser = build_parser()
    argv = ["explain", "in.png", "--out", "out", "--repeats", "3"]
    for kind, (name, value) in EXAMPLES.items():
        spec = next(s for s in fields() if s.name == name)
        if kind == "bool":
            argv.append(spec.flag if value else "--no-" + spec.flag[2:])
        else:
            text = KINDS[kind].to_text(value)
            assert parse_text(spec, text) == value, kind  # the text reads back
            argv += [spec.flag, text]
    config = settings_from_args(parser.parse_args(argv))
    flat = config.flat()
    for name, value in EXAMPLES.values():
        assert flat[name] == value, name


def test_every_kind_through_json_and_back():
    config = ExplainConfig.from_flat({**dict(EXAMPLES.values()), "repeats": 3})
    text = json.dumps(config.to_dict())
    back = ExplainConfig.from_dict(json.loads(text))
    assert back == config
    assert json.loads(text)["segmentation"]["segmentation_params"] == {"compactness": 20.0}


def test_a_bad_text_says_what_its_kind_expects():
    spec = next(s for s in fields() if s.name == "convergence")
    with pytest.raises(LimecraftError, match="expected integers separated by commas"):
        parse_text(spec, "50,lots")


def test_a_toy_kind_plugs_in_through_the_tables(monkeypatch):
    """A new kind is a row in KINDS and a widget in WIDGETS: the checks, the command line's
    reading and JSON use it with no other change."""
    from limecraft_core.config.fields import FieldSpec
    from limecraft_core.config.kinds import check_value

    def check(spec, v):
        if not (isinstance(v, str) and v.isupper()):
            raise LimecraftError(f"{spec.name} must be in capitals, got {v!r}")
        return v

    toy = Kind("shout", check, str.upper, "a word", to_json=str.lower, to_text=str.lower)
    monkeypatch.setitem(KINDS, "shout", toy)
    monkeypatch.setitem(WIDGETS, "shout", lambda s, v, col, key, label, help_: v)
    spec = FieldSpec("word", "trust", "word", "shout", "a word", "HI", False)
    assert parse_text(spec, "hello") == "HELLO"
    assert check_value(spec, "HELLO") == "HELLO"
    with pytest.raises(LimecraftError, match="in capitals"):
        check_value(spec, "hello")
    assert KINDS[spec.kind].to_json("HELLO") == "hello"
    assert setting_widget(spec, "HI", col=None) == "HI"


def test_the_craft_pages_kinds_say_where_they_are_set():
    spec = next(s for s in fields() if s.kind == "params")
    with pytest.raises(ValueError, match="set on the Craft page"):
        setting_widget(spec, (), col=None)
