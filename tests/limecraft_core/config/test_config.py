"""The settings schema (issue 13): one schema, reachable from the CLI, round-tripping through JSON,
validated at construction, recording what ran; one limits table used by the engine, the CLI and
docs/limits.md; and the size rules of the engine's functions."""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest
from toys import ChannelMeans

import limecraft_core as lc
from limecraft import cli
from limecraft.args import settings_from_args
from limecraft_core import prepare_regions
from limecraft_core._validate import as_float_image
from limecraft_core.config import GROUPS, ExplainConfig, SegmentationConfig, fields
from limecraft_core.limits import LIMITS, Limit
from limecraft_core.result import Explanation

ROOT = Path(__file__).resolve().parents[3]
FIELDS = {s.name: s for s in fields()}

# ----------------------------------------------------------------------------- values per field

# One non-default valid value per field: (the value as the config holds it, the CLI text).
# The CLI text of a bool is None: the flag itself (True) or its --no- form (False).
# Together they make one valid configuration (samples 500, repeats 3, convergence <= samples).
NON_DEFAULT: dict[str, tuple[object, str | None]] = {
    "segmentation": ("slic", "slic"),
    "n_segments": (40, "40"),
    "segmentation_params": ((("compactness", 20.0), ("sigma", 1.0)), "sigma=1,compactness=20"),
    "inner_segments": (4, "4"),
    "inner_method": ("felzenszwalb", "felzenszwalb"),
    "outer_segments": (7, "7"),
    "working_size": (256, "256"),
    "samples": (500, "500"),
    "sampling": ("stratified", "stratified"),
    "p": (0.3, "0.3"),
    "seed": (5, "5"),
    "dedup": (False, None),
    "early_stop": (0.8, "0.8"),
    "early_stop_step": (50, "50"),
    "kernel_width": (0.5, "0.5"),
    "ridge_alpha": (2.5, "2.5"),
    "fill": ("#102030", "#102030"),
    "blur_sigma": (3.0, "3"),
    "mask_expansion": (2, "2"),
    "output_space": ("raw", "raw"),
    "target": (2, "2"),
    "top_labels": (3, "3"),
    "compute_deltas": (False, None),
    "repeats": (3, "3"),
    "kernel_widths": ((0.1, "uniform"), "0.1,uniform"),
    "convergence": ((100, 200), "200,100"),
    "faithfulness": (True, None),
    "compare_fills": (("blur", "inpaint"), "blur,inpaint"),
    "device": ("cpu", "cpu"),
    "precision": ("bf16", "bf16"),
    "channels_last": (True, None),
    "batch_size": (32, "32"),
}

# Flags a field's flag needs beside it (cross-field rules).
COMPANIONS = {"convergence": ["--repeats", "2"]}


def value_of(cfg: ExplainConfig, name: str):
    s = FIELDS[name]
    return getattr(getattr(cfg, s.group), s.attr)


def test_the_tables_of_this_file_cover_every_field():
    """A new field must be added here too (its CLI value, its bad value), or this fails."""
    assert set(NON_DEFAULT) == set(FIELDS)
    assert set(BAD) == set(FIELDS)
    for name, (value, _) in NON_DEFAULT.items():
        assert value != FIELDS[name].default, name


# ----------------------------------------------------------------------------- the CLI


def explain_parser() -> argparse.ArgumentParser:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["explain"]


def flag_args(name: str) -> list[str]:
    s = FIELDS[name]
    value, text = NON_DEFAULT[name]
    if s.kind == "bool":
        return [s.flag if value else "--no-" + s.flag[2:]]
    return [s.flag, text]


@pytest.mark.parametrize("name", list(FIELDS))
def test_every_field_has_a_cli_flag_that_sets_it(name):
    s = FIELDS[name]
    actions = explain_parser()._option_string_actions
    assert s.flag in actions, f"{s.flag} missing from `explain --help`"
    assert actions[s.flag].dest == name
    argv = ["explain", "img.png", "--out", "o", *COMPANIONS.get(name, []), *flag_args(name)]
    cfg = settings_from_args(cli.build_parser().parse_args(argv))
    assert value_of(cfg, name) == NON_DEFAULT[name][0]
    # and nothing else moved from its default, but for the companions
    moved = {n for n in FIELDS if value_of(cfg, n) != FIELDS[n].default}
    assert moved == {name} | ({"repeats"} if name in COMPANIONS else set())


def test_no_flag_gives_the_schemas_defaults():
    cfg = settings_from_args(cli.build_parser().parse_args(["explain", "i.png", "--out", "o"]))
    assert cfg == ExplainConfig()


def test_every_field_on_one_command_line():
    argv = ["explain", "img.png", "--out", "o"]
    for name in FIELDS:
        argv += flag_args(name)
    cfg = settings_from_args(cli.build_parser().parse_args(argv))
    assert cfg == ExplainConfig.from_flat({n: v for n, (v, _) in NON_DEFAULT.items()})


# ----------------------------------------------------------------------------- JSON round trip


def every_field_non_default() -> ExplainConfig:
    return ExplainConfig.from_flat({n: v for n, (v, _) in NON_DEFAULT.items()})


@pytest.mark.parametrize("make", [ExplainConfig, every_field_non_default], ids=["default", "all"])
def test_json_to_config_to_json_is_exact(make):
    c = make()
    d = c.to_dict()
    assert ExplainConfig.from_dict(d).to_dict() == d
    # through JSON text too (tuples become lists, params an object), and back to an equal config
    text = json.dumps(d)
    assert ExplainConfig.from_dict(json.loads(text)) == c
    assert json.dumps(ExplainConfig.from_dict(json.loads(text)).to_dict()) == text
    assert set(d) == set(GROUPS)
    assert {n for g in d.values() for n in g} == set(FIELDS)
    if make is every_field_non_default:
        assert set(c.changed()) == set(FIELDS)


def test_round_trip_of_other_shapes_of_values():
    for flat in (
        {"inner_segments": (None, 3, 1)},
        {"kernel_width": "uniform", "working_size": None},
        {"segmentation": "given"},
        {"early_stop": 1.0, "blur_sigma": 0.25, "target": 0},
    ):
        c = ExplainConfig.from_flat(flat)
        assert ExplainConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c, flat


def test_a_custom_fill_function_is_recorded_by_name_and_not_restored():
    def my_fill(image, labels):
        return image

    c = ExplainConfig.from_flat(fill=my_fill)
    assert c.to_dict()["fill"]["fill"] == "custom:my_fill"
    with pytest.raises(lc.LimecraftError, match=r"custom function .* cannot be restored"):
        ExplainConfig.from_dict(c.to_dict())


@pytest.mark.parametrize(
    ("d", "match"),
    [
        ("samples=5", "settings must be an object of groups"),
        ({"colour": {}}, "unknown group 'colour'"),
        ({"sampling": 3}, r"settings.sampling must be an object"),
        ({"sampling": {"fill": "mean"}}, r"settings.sampling: unknown setting 'fill'"),
        ({"sampling": {"samples": 5}}, r"samples must be in \[10, 200000\], got 5"),
    ],
)
def test_from_dict_refuses_what_is_not_a_config(d, match):
    with pytest.raises(lc.LimecraftError, match=match):
        ExplainConfig.from_dict(d)


def test_an_explanations_json_keeps_config_and_run(photo):
    ex = lc.explain(
        photo,
        ChannelMeans(),
        samples=60,
        seed=4,
        segmentation="slic",
        n_segments=12,
        segmentation_params={"compactness": 5},
        repeats=2,
        convergence=[30, 60],
        kernel_widths=[0.1, "uniform"],
        compare_fills=["blur"],
        faithfulness=True,
        fill="gray",
        mask_expansion=1,
        top_labels=2,
        batch_size=8,
    )
    back = Explanation.from_json(ex.to_json())
    assert back.config == ex.config and back.run == ex.run
    assert back.to_dict()["settings"] == ex.to_dict()["settings"] == ex.config.to_dict()
    assert back.to_dict()["run"] == ex.to_dict()["run"] == ex.run.to_dict()
    # the config that ran is the one asked for (nothing was resolved differently)
    assert ex.config == ExplainConfig.from_flat(
        samples=60,
        seed=4,
        segmentation="slic",
        n_segments=12,
        segmentation_params={"compactness": 5},
        repeats=2,
        convergence=[30, 60],
        kernel_widths=[0.1, "uniform"],
        compare_fills=["blur"],
        faithfulness=True,
        fill="gray",
        mask_expansion=1,
        top_labels=2,
        batch_size=8,
    )
    assert ex.run.batch_size == 8 and ex.run.samples_used == 60 and ex.run.n_regions == ex.n_regions


# ----------------------------------------------------------------------------- validation

# One bad value per field: (value, the message it must give). Out of range, wrong choice, wrong
# type; each message names the field.
BAD: dict[str, tuple[object, str]] = {
    "segmentation": ("kmeans", r"segmentation must be one of quickshift, .*given; got 'kmeans'"),
    "n_segments": (0, r"n_segments must be in \[1, 5000\], got 0"),
    "segmentation_params": ({"zoom": 2}, r"segmentation_params: unknown parameter 'zoom'"),
    "inner_segments": (0, r"inner_segments must be in \[1, 1000\], got 0"),
    "inner_method": ("given", r"inner_method must be one of .*; got 'given'"),
    "outer_segments": (5001, r"outer_segments must be in \[1, 5000\], got 5001"),
    "working_size": (8, r"working_size must be in \[16, 100000\], got 8"),
    "samples": ("many", r"samples must be an integer, got 'many'"),
    "sampling": ("sobol", r"sampling must be one of bernoulli, stratified, antithetic"),
    "p": (0, r"p must be in \(0, 1\], got 0"),
    "seed": (-1, r"seed must be in \[0, 9223372036854775807\], got -1"),
    "dedup": ("yes", r"dedup must be true or false, got 'yes'"),
    "early_stop": (1.5, r"early_stop must be in \(0, 1\], got 1.5"),
    "early_stop_step": (5, r"early_stop_step must be in \[10, 200000\], got 5"),
    "kernel_width": (0, r"kernel_width must be > 0"),
    "ridge_alpha": ("strong", r"ridge_alpha must be a number, got 'strong'"),
    "fill": (
        "plaid",
        r"fill must be one of mean, gray, black, blur, inpaint, inpaint-each or a colour",
    ),
    "blur_sigma": (0, r"blur_sigma must be > 0"),
    "mask_expansion": (65, r"mask_expansion must be in \[0, 64\], got 65"),
    "output_space": ("logits", r"output_space must be one of probability, raw; got 'logits'"),
    "target": (2.5, r"target must be an integer, got 2.5"),
    "top_labels": (101, r"top_labels must be in \[1, 100\], got 101"),
    "compute_deltas": (1, r"compute_deltas must be true or false, got 1"),
    "repeats": (51, r"repeats must be in \[1, 50\], got 51"),
    "kernel_widths": ("0.1", r"kernel_widths must be a list, got '0.1'"),
    "convergence": ([5], r"convergence size must be in \[10, 200000\], got 5"),
    "faithfulness": (None, r"faithfulness must be true or false, got None"),
    "compare_fills": (["plaid"], r"compare_fills entry must be one of"),
    "device": ("tpu", r"device must be one of auto, cpu, cuda; got 'tpu'"),
    "precision": ("fp8", r"precision must be one of auto, fp32, bf16, fp16; got 'fp8'"),
    "channels_last": ("on", r"channels_last must be true or false, got 'on'"),
    "batch_size": (0, r"batch_size must be in \[1, 65536\], got 0"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_every_field_is_validated_at_construction(name):
    value, match = BAD[name]
    s = FIELDS[name]
    with pytest.raises(lc.LimecraftError, match=match):
        GROUPS[s.group](**{s.attr: value})  # the group itself refuses it
    with pytest.raises(lc.LimecraftError, match=match):
        ExplainConfig.from_flat({name: value})
    with pytest.raises(lc.LimecraftError, match=match):
        ExplainConfig().replace(**{name: value})


def test_more_wrong_types_and_choices():
    for flat, match in [
        ({"samples": 100.5}, r"samples must be an integer, got 100.5"),
        ({"samples": True}, r"samples must be an integer, got True"),
        ({"p": "half"}, r"p must be a number, got 'half'"),
        ({"kernel_width": "wide"}, r"kernel_width must be a number, got 'wide'"),
        ({"kernel_widths": [0.25, -1]}, r"kernel_widths entry must be > 0"),
        ({"segmentation_params": {"sigma": "wide"}}, r"sigma must be a number"),
        ({"segmentation_params": [("sigma",)]}, r"must be name=value pairs"),
        ({"inner_segments": [2, 0]}, r"inner_segments must be in \[1, 1000\], got 0"),
        ({"working_size": "big"}, r"working_size must be an integer, got 'big'"),
        ({"fill": "#12345"}, r"fill must be one of"),
        ({"nonsense": 1}, r"unknown setting 'nonsense'; known: "),
    ]:
        with pytest.raises(lc.LimecraftError, match=match):
            ExplainConfig.from_flat(flat)


def test_the_config_is_frozen():
    c = ExplainConfig()
    with pytest.raises(AttributeError):
        c.sampling.samples = 10  # type: ignore[misc]
    with pytest.raises(AttributeError):
        c.sampling = None  # type: ignore[misc]


@pytest.mark.parametrize(
    ("flat", "match"),
    [
        (
            {"samples": 100, "repeats": 2, "convergence": [50, 200]},
            r"convergence size must be in \[10, 100\] \(at most samples\), got 200",
        ),
        ({"convergence": [50, 100]}, r"convergence needs repeats >= 2"),
        ({"convergence": [50, 100], "repeats": 1}, r"convergence needs repeats >= 2"),
        (
            {"samples": 100, "early_stop_step": 200},
            r"early_stop_step must be in \[10, 100\] \(at most samples\), got 200",
        ),
    ],
)
def test_cross_field_rules(photo, flat, match):
    with pytest.raises(lc.LimecraftError, match=match):
        ExplainConfig.from_flat(flat)
    with pytest.raises(lc.LimecraftError, match=match):  # explain builds the same config
        lc.explain(photo, ChannelMeans(), segmentation="grid", **flat)
    # on the edge of each rule: accepted
    ExplainConfig.from_flat(samples=100, repeats=2, convergence=[10, 100])
    ExplainConfig.from_flat(samples=100, early_stop_step=100)


def test_explain_refuses_unknown_keywords_and_a_model_name(photo):
    with pytest.raises(lc.LimecraftError, match="unknown setting 'sample'"):
        lc.explain(photo, ChannelMeans(), sample=100)
    with pytest.raises(lc.LimecraftError, match="load_classifier"):
        lc.explain(photo, "demo", samples=20)


def test_cli_refuses_a_bad_value_with_the_schemas_message(capsys):
    for args, match in [
        (["--samples", "5"], r"samples must be in \[10, 200000\], got 5"),
        (["--p", "0"], r"p must be in \(0, 1\], got 0"),
        (["--compare-fills", "plaid"], "compare_fills entry must be one of"),
        (["--segmentation-params", "zoom=2"], "unknown parameter 'zoom'"),
    ]:
        with pytest.raises(SystemExit) as e:
            cli.build_parser().parse_args(["explain", "i.png", "--out", "o", *args])
        assert e.value.code == 2
        assert re.search(match, capsys.readouterr().err)


TYPED = [n for n, s in FIELDS.items() if s.kind != "bool" and not s.choices]


@pytest.mark.parametrize("name", TYPED)
def test_cli_refuses_unreadable_text_for_every_field_in_one_line(capsys, name):
    """Text that is not a value of the field: exit 2 with one line naming the flag."""
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(["explain", "i.png", "--out", "o", FIELDS[name].flag, "x?"])
    assert e.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("limecraft: error:"), lines
    assert FIELDS[name].flag in lines[0] and "'x?'" in lines[0], lines[0]


# ----------------------------------------------------------------------------- what ran is recorded


@pytest.mark.parametrize("method", lc.SEGMENTERS)
def test_each_segmentation_method_is_recorded_as_it_ran(photo, method):
    kw = {"n_segments": 20, "seed": 3, "working_size": 64}
    ex = lc.explain(photo, ChannelMeans(), segmentation=method, samples=20, **kw)
    assert ex.config.segmentation.method == method
    assert ex.config.segmentation.n_segments == 20 and ex.config.segmentation.working_size == 64
    assert ex.to_dict()["settings"]["segmentation"]["segmentation"] == method
    labels = lc.segment(photo, method, 20, seed=3, working_size=64)
    assert np.array_equal(ex.segments, lc.regions_from_labels(labels).labels)
    assert ex.run.handcrafted == 0 and ex.run.merged == 0
    back = Explanation.from_json(ex.to_json())
    assert back.config == ex.config and back.run == ex.run
    assert back.config.segmentation.method == method


def test_a_given_label_map_is_recorded_as_given(photo):
    labels = lc.segment(photo, "slic", 15)
    # the method asked for did not make the regions: the record says so
    ex = lc.explain(photo, ChannelMeans(), segments=labels, segmentation="slic", samples=20)
    assert ex.config.segmentation == SegmentationConfig(method="given")
    assert ex.to_dict()["settings"]["segmentation"]["segmentation"] == "given"
    assert np.array_equal(ex.segments, lc.regions_from_labels(labels).labels)
    back = Explanation.from_json(ex.to_json())
    assert back.config.segmentation.method == "given" and back.run == ex.run
    with pytest.raises(lc.LimecraftError, match="'given' needs a label map"):
        lc.explain(photo, ChannelMeans(), segmentation="given", samples=20)


def test_handcrafted_regions_record_the_outer_method_and_their_count(photo):
    a = np.zeros(photo.shape[:2], bool)
    a[10:50, 20:80] = True
    b = np.zeros(photo.shape[:2], bool)
    b[40:90, 60:120] = True
    kw = {"inner_segments": [None, 3], "inner_method": "grid", "outer_segments": 5}
    ex = lc.explain(
        photo, ChannelMeans(), regions_mask=[a, b], segmentation="slic", samples=20, seed=2, **kw
    )
    seg = ex.config.segmentation
    assert seg.method == "slic" and seg.inner_method == "grid"
    assert seg.inner_segments == (None, 3) and seg.outer_segments == 5
    hand = [k for k in ex.region_keys if k.startswith("hand:")]
    assert ex.run.handcrafted == len(hand) >= 3  # region a whole, b in pieces
    assert ex.run.merged == 0
    ref = lc.compose_regions(
        as_float_image(photo), [a, b], outer_method="slic", seed=2, **kw
    )  # the same settings, called directly
    assert np.array_equal(ex.segments, ref.labels) and ex.region_keys == ref.keys
    back = Explanation.from_json(ex.to_json())
    assert back.config == ex.config and back.run == ex.run
    assert back.run.handcrafted == ex.run.handcrafted  # "0 handcrafted" after a restore: no more


def test_merged_regions_keep_their_method_and_count_the_merge(photo):
    img = as_float_image(photo)
    asked = SegmentationConfig(method="slic", n_segments=20)
    regions, seg = prepare_regions(img, asked, seed=0)
    assert seg == asked
    merged = lc.merge_regions(regions, [0, 1])
    # the Regions say which segmentation made them, whatever the settings say now
    ex = lc.explain(photo, ChannelMeans(), segments=merged, segmentation="grid", samples=20)
    assert ex.config.segmentation == asked
    assert ex.run.merged == 1 and ex.n_regions == regions.n_regions - 1
    assert np.array_equal(ex.segments, merged.labels)
    back = Explanation.from_json(ex.to_json())
    assert back.config.segmentation == asked and back.run.merged == 1


# ----------------------------------------------------------------------------- the limits table


def outside(lim: Limit, kind: str) -> list:
    """Values just outside a limit's range."""
    step = 1 if kind in ("int", "ints", "inner", "working_size") else 1e-9
    lo = lim.lo if lim.lo_open else lim.lo - step
    return [lo] + ([lim.hi + step] if lim.hi is not None else [])


def inside(lim: Limit, kind: str) -> list:
    step = 1 if kind in ("int", "ints", "inner", "working_size") else 1e-9
    lo = lim.lo + step if lim.lo_open else lim.lo
    return [lo] + ([lim.hi] if lim.hi is not None else [])


def with_context(name: str, v) -> dict:
    """The value as the field holds it, with what cross-field rules need beside it."""
    kind = FIELDS[name].kind
    if kind == "ints":
        return {name: [v], "repeats": 2, "samples": 200_000}
    if name == "early_stop_step":
        return {name: v, "samples": 200_000}
    if kind == "int" or kind in ("inner", "working_size"):
        return {name: int(v)}
    return {name: v}


LIMITED = [n for n in LIMITS if n in FIELDS]


def test_the_limits_table_covers_the_bounded_settings():
    assert len(LIMITED) >= 15
    for name, s in FIELDS.items():
        if s.kind in ("int", "float", "ints", "inner", "working_size"):
            assert name in LIMITS, f"{name} has no entry in limecraft_core.limits.LIMITS"


@pytest.mark.parametrize("name", LIMITED)
def test_the_limits_table_is_the_range_used(name):
    lim, s = LIMITS[name], FIELDS[name]
    for v in outside(lim, s.kind):
        with pytest.raises(lc.LimecraftError, match=re.escape(name)):
            ExplainConfig.from_flat(with_context(name, v))
    for v in inside(lim, s.kind):
        ExplainConfig.from_flat(with_context(name, v))
    action = explain_parser()._option_string_actions[s.flag]
    assert lim.describe() in action.help
    help_text = " ".join(explain_parser().format_help().split())
    assert lim.describe() in help_text


# ----------------------------------------------------------------------------- docs/limits.md


def parameter_rows() -> dict[str, str]:
    text = (ROOT / "docs" / "limits.md").read_text()
    section = text.split("\n## Parameters\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows[line.split("|")[1].strip()] = line
    return rows


def test_docs_limits_table_is_in_step_with_the_limits():
    rows = parameter_rows()
    for name in LIMITED:
        row = rows.get(f"`{name}`")
        assert row is not None, f"docs/limits.md has no Parameters row for `{name}`"
        assert LIMITS[name].describe() in row, (name, LIMITS[name].describe(), row)


def test_docs_limits_table_has_a_row_for_every_setting():
    rows = parameter_rows()
    for name, s in FIELDS.items():
        row = rows.get(f"`{name}`")
        assert row is not None, f"docs/limits.md has no Parameters row for `{name}`"
        for choice in s.choices:
            assert f"`{choice}`" in row, (name, choice)


# ----------------------------------------------------------------------------- size rules


def function_lengths() -> dict[str, int]:
    out = {}
    for p in sorted((ROOT / "limecraft_core").rglob("*.py")):
        tree = ast.parse(p.read_text(), str(p))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                where = f"{p.relative_to(ROOT)}:{node.lineno} {node.name}"
                out[where] = node.end_lineno - node.lineno + 1
    return out


def test_explain_is_a_short_orchestrator():
    import importlib
    import inspect

    module = importlib.import_module("limecraft_core.explain")  # lc.explain is the function
    assert module.explain is lc.explain
    node = next(
        n
        for n in ast.walk(ast.parse(inspect.getsource(module)))
        if isinstance(n, ast.FunctionDef) and n.name == "explain"
    )
    assert node.end_lineno - node.lineno + 1 <= 80


def test_no_engine_function_is_over_80_lines():
    lengths = function_lengths()
    assert any(w.endswith(" explain") for w in lengths)
    assert len(lengths) > 300  # every function of every module, nested ones included
    assert {w: n for w, n in lengths.items() if n > 80} == {}


def test_no_engine_file_is_over_500_lines():
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text().splitlines())
        for p in (ROOT / "limecraft_core").rglob("*.py")
    }
    assert len(sizes) > 40 and "limecraft_core/explain.py" in sizes
    assert {p: n for p, n in sizes.items() if n > 500} == {}


def test_the_cli_reference_lists_every_setting_flag():
    """The command-line reference (docs/cli.md) names every setting's flag (a new setting must
    be documented there too)."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text()
    missing = [s.flag for s in lc.config.fields() if f"`{s.flag}" not in doc]
    assert missing == []


def test_docs_thresholds_table_is_in_step():
    """Every verdict threshold of the limits table has its row in docs/limits.md, with its value."""
    from limecraft_core.limits import THRESHOLDS

    doc = (Path(__file__).resolve().parents[3] / "docs" / "limits.md").read_text()
    for name, value in THRESHOLDS.items():
        row = next((ln for ln in doc.splitlines() if ln.startswith(f"| `{name}` |")), None)
        assert row is not None, name
        assert row.split("|")[2].strip() == f"{value:g}", (name, row)
