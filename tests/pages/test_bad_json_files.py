"""Every bad JSON file a user can hand LIMEcraft (an analysis, an explanation, an audit row,
an ``audit.json``) is refused with one exact line, through the one schema layer
(``limecraft_core/codecs/schema.py``).

The messages below were recorded from the hand-written validators before the schema replaced
them, and the schema had to give the same words. Seven explanation messages and two analysis
messages were Python's own text (``'int' object is not subscriptable``, ``'weights'``,
``(Error)``) and now say where the problem is. ``None``: the file is accepted (a null score is
NaN, as ``to_dict`` writes it; a run's batch size is a fact shown, not a setting).
"""

import copy
import json

import pytest
from bad_files import explanation_doc
from test_analysis import full  # noqa: F401 (the fixture: an analysis with every part)

import limecraft_core as lc
from limecraft_core.audit.rows import AuditRow
from limecraft_core.io.audit_folder import load_audit
from pages.lib import analysis_file as AF


def _del(path):
    def f(d):
        node = d
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]

    return f


def _set(path, value):
    def f(d):
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value

    return f


EX = {
    "a list": lambda d: [1, 2, 3],
    "format": _set(("format",), "pickle"),
    "version": _set(("format_version",), 99),
    "segments missing": _del(("segments",)),
    "segments not an object": _set(("segments",), "x"),
    "segments not base64": _set(("segments", "data"), "!!!"),
    "weights as text": _set(("classes", 0, "weights"), ["__import__('os')"] * 4),
    "weights too few": _set(("classes", 0, "weights"), [1.0]),
    "weights null": _set(("classes", 0, "weights"), [None] * 4),
    "weights inf": _set(("classes", 0, "weights"), [1e400] * 4),
    "deltas text": _set(("classes", 0, "deltas"), ["x"] * 4),
    "weights missing": _del(("classes", 0, "weights")),
    "region name not text": _set(("regions", 0, "name"), {"$eval": "1"}),
    "region key missing": _del(("regions", 0, "key")),
    "regions not a list": _set(("regions",), {}),
    "regions too few": lambda d: d.update(regions=d["regions"][:1]),
    "classes empty": _set(("classes",), []),
    "classes not a list": _set(("classes",), 3),
    "class not an object": _set(("classes", 0), 3),
    "class index negative": _set(("classes", 0, "index"), -1),
    "class index bool": _set(("classes", 0, "index"), True),
    "class index inf": _set(("classes", 0, "index"), 1e400),
    "class label int": _set(("classes", 0, "label"), 5),
    "class score text": _set(("classes", 0, "score"), "x"),
    "class intercept missing": _del(("classes", 0, "intercept")),
    "top prediction score text": _set(("top_predictions", 0, "score"), "x"),
    "top prediction not an object": _set(("top_predictions", 0), 5),
    "timings text": _set(("timings",), {"a": "b"}),
    "timings list": _set(("timings",), [1]),
    "versions int": _set(("versions",), {"a": 1}),
    "settings missing": _del(("settings",)),
    "settings not an object": _set(("settings",), "rm -rf /"),
    "settings unknown": _set(("settings", "sampling", "note"), "x"),
    "run not an object": _set(("run",), 5),
    "run bad field": _set(("run", "batch_size"), "x"),
    "trust nested": _set(("stability",), json.loads("[" * 20 + "]" * 20)),
    "stability verdict": lambda d: (
        d["stability"].update(verdict="maybe")
        if isinstance(d.get("stability"), dict)
        else d.update(stability={"verdict": "maybe"})
    ),
    "stability not an object": _set(("stability",), 5),
}

AN = {
    "format": _set(("format",), "something"),
    "not an object": lambda d: [1],
    "version": _set(("format_version",), 99),
    "image missing": _del(("image",)),
    "image not an object": _set(("image",), 5),
    "png not base64": _set(("image", "png"), "!!!"),
    "png not an image": _set(("image", "png"), "aGVsbG8="),
    "png missing": _del(("image", "png")),
    "png int": _set(("image", "png"), 5),
    "source": _set(("image", "source"), "web"),
    "image name int": _set(("image", "name"), 5),
    "image name long": _set(("image", "name"), "x" * 301),
    "note long": _set(("image", "note"), "x" * 1001),
    "area_expected text": _set(("image", "area_expected"), "yes"),
    "tag_mask not base64": _set(("image", "tag_mask"), "!!!"),
    "tag_mask not npz": _set(("image", "tag_mask"), "aGVsbG8="),
    "model missing": _del(("model",)),
    "model labels not a list": _set(("model", "labels"), "a,b"),
    "model label int": _set(("model", "labels"), [1]),
    "model name missing": _del(("model", "name")),
    "model arch int": _set(("model", "arch"), 5),
    "model normalize": _set(("model", "normalize"), "weird"),
    "merges not a list": _set(("merges",), 5),
    "merge not an object": _set(("merges", 0), 5),
    "merge keys not a list": _set(("merges", 0, "keys"), 5),
    "merge key int": _set(("merges", 0, "keys"), [5]),
    "merge name int": _set(("merges", 0, "name"), 5),
    "merge key missing": _del(("merges", 0, "key")),
    "settings bad": _set(("settings", "sampling", "samples"), "many"),
    "settings missing": _del(("settings",)),
    "results not an object": _set(("results",), 5),
    "results explanation bad": _set(("results", "explanation", "classes"), []),
    "results automatic bad": _set(("results", "automatic"), 5),
    "results trust bad": _set(("results", "trust", "format"), "x"),
    "edited not an object": _set(("results", "edited"), 5),
    "edited image not base64": _set(("results", "edited", "image"), "!!!"),
    "edited explanation bad": _set(("results", "edited", "explanation", "classes"), []),
    "other_models not a list": _set(("other_models",), 5),
    "other model not an object": _set(("other_models",), [5]),
    "other model's model": _set(("other_models",), [{"model": 5}]),
    "other model's results": _set(("other_models",), [{"model": {"name": "m"}, "results": 5}]),
    "other model's name": _set(("other_models",), [{"model": {"name": 5}, "results": {}}]),
    "segmentation missing": _del(("segmentation",)),
    "segmentation method": _set(("segmentation", "method"), "magic"),
    "segmentation n": _set(("segmentation", "n_segments"), 10**9),
    "segmentation outer": _set(("segmentation", "outer"), "two"),
    "segmentation params evil": _set(("segmentation", "params"), [["evil", 1]]),
    "segmentation params not a list": _set(("segmentation", "params"), 5),
    "segmentation working size": _set(("segmentation", "working_size"), -3),
    "regions not a list": _set(("regions",), {"not": "a list"}),
    "region not an object": _set(("regions", 0), 5),
    "region colour": _set(("regions", 0, "colour"), "chartreuse"),
    "region uid": _set(("regions", 0, "uid"), "../x"),
    "region uid int": _set(("regions", 0, "uid"), 5),
    "region name int": _set(("regions", 0, "name"), 5),
    "region inner": _set(("regions", 0, "inner"), 10**9),
    "region inner bool": _set(("regions", 0, "inner"), True),
    "region expected": _set(("regions", 0, "expected"), "yes"),
    "region mask missing": _del(("regions", 0, "mask")),
    "restored not an object": _set(("restored_regions",), 5),
    "restored empty": _set(("restored_regions",), {}),
    "selected not a list": _set(("selected",), "auto:1"),
    "selected int": _set(("selected",), [1]),
    "edits too many": lambda d: d.update(edits=[d["edits"][0]] * 201),
    "edit unknown field": _set(("edits", 0, "__class__"), "x"),
    "edit hue": _set(("edits", 0, "hue"), 999),
    "edit not an object": _set(("edits", 0), 5),
}

ROW = {
    "not an object": lambda d: [1],
    "unknown field": _set(("evil",), 1),
    "file missing": _del(("file",)),
    "key missing": _del(("key",)),
    "score text": _set(("score",), "high"),
    "score bool": _set(("score",), True),
    "width float": _set(("width",), 1.5),
    "width bool": _set(("width",), True),
    "label int": _set(("label",), 5),
    "label long": _set(("label",), "x" * 10_001),
    "has_mask int": _set(("has_mask",), 1),
    "flags text": _set(("flags",), "outside"),
    "flags many": _set(("flags",), ["outside"] * 11),
    "flag unknown": _set(("flags",), ["rm -rf"]),
    "status": _set(("status",), "maybe"),
    "pointing_game int": _set(("pointing_game",), 1),
    "score null": _set(("score",), None),
    "width null": _set(("width",), None),
}

AUDIT = {
    "not json": lambda d: "{'a': 1}",
    "a list": lambda d: [1],
    "format": _set(("format",), "x"),
    "format missing": _del(("format",)),
    "version": _set(("format_version",), 99),
    "version text": _set(("format_version",), "1"),
    "rows not a list": _set(("rows",), {}),
    "rows missing": _del(("rows",)),
    "row bad": _set(("rows",), [{"file": "a"}]),
    "row key unsafe": _set(("rows",), [{"file": "a", "key": "..", "digest": "d"}]),
    "settings bad": _set(("settings",), 5),
    "settings missing": _del(("settings",)),
    "created int": _set(("created",), 5),
    "created long": _set(("created",), "x" * 101),
    "model not an object": _set(("model",), 5),
    "complete text": _set(("complete",), "yes"),
}


EXPECTED = {
    "EX": {
        "a list": "not a LIMEcraft explanation (missing format: limecraft-explanation)",
        "format": "not a LIMEcraft explanation (missing format: limecraft-explanation)",
        "version": "unsupported explanation format_version 99",
        "segments missing": "this explanation JSON was saved without segments; it cannot be restored",
        "segments not an object": "explanation JSON: 'segments' must be {encoding: npz-base64, data}",
        "segments not base64": "explanation JSON: 'segments' could not be decoded (Only base64 data is allowed)",
        "weights as text": "explanation JSON is malformed: classes[].weights must hold numbers only",
        "weights too few": "explanation JSON is malformed: classes[].weights must be a list of 4 numbers",
        "weights null": "explanation JSON is malformed: classes[].weights must hold numbers only",
        "weights inf": "explanation JSON is malformed: classes[].weights must be 4 finite numbers",
        "deltas text": "explanation JSON is malformed: classes[].deltas must hold numbers only",
        "weights missing": "explanation JSON is malformed: classes[0].weights is missing",
        "region name not text": "explanation JSON is malformed: expected a string, got {'$eval': '1'}",
        "region key missing": "explanation JSON is malformed: regions[0].key is missing",
        "regions not a list": "explanation JSON is malformed: 'regions' must list 4 regions",
        "regions too few": "explanation JSON is malformed: 'regions' must list 4 regions",
        "classes empty": "explanation JSON is malformed: 'classes' must be a non-empty list",
        "classes not a list": "explanation JSON is malformed: 'classes' must be a non-empty list",
        "class not an object": "explanation JSON is malformed: classes[0] must be an object",
        "class index negative": "explanation JSON is malformed: a class index must be an integer in [0, 2**31), got -1",
        "class index bool": "explanation JSON is malformed: a class index must be an integer in [0, 2**31), got True",
        "class index inf": "explanation JSON is malformed: a class index must be an integer in [0, 2**31), got inf",
        "class label int": "explanation JSON is malformed: expected a string, got 5",
        "class score text": "explanation JSON is malformed: expected a number, got 'x'",
        "class intercept missing": "explanation JSON is malformed: classes[0].intercept is missing",
        "top prediction score text": "explanation JSON is malformed: expected a number, got 'x'",
        "top prediction not an object": "explanation JSON is malformed: top_predictions[0] must be an object",
        "timings text": "explanation JSON is malformed: expected a number, got 'b'",
        "timings list": "explanation JSON is malformed: timings must be an object",
        "versions int": "explanation JSON is malformed: expected a string, got 1",
        "settings missing": "explanation JSON is malformed: settings is missing",
        "settings not an object": "explanation JSON is malformed: 'settings' must be an object",
        "settings unknown": "settings.sampling: unknown setting 'note'",
        "run not an object": "explanation JSON: 'run' must be an object",
        "run bad field": None,
        "trust nested": "explanation JSON is malformed: nested too deeply",
        "stability verdict": "unknown stability verdict 'maybe'",
        "stability not an object": "the stability check is malformed: not an object",
    },
    "AN": {
        "format": "not a LIMEcraft analysis (missing format: limecraft-analysis)",
        "not an object": "not a LIMEcraft analysis (missing format: limecraft-analysis)",
        "version": "analysis file: unsupported format_version 99",
        "image missing": "analysis file: image must be an object",
        "image not an object": "analysis file: image must be an object",
        "png not base64": "analysis file: image is not base64",
        "png not an image": "the analysis file's image is not an image that can be read (PNG, JPEG, WebP, BMP, TIFF or GIF)",
        "png missing": "analysis file: image is not base64",
        "png int": "analysis file: image is not base64",
        "source": "analysis file: image source must be one of gallery, upload, restore, audit",
        "image name int": "analysis file: image name must be a string of at most 300 characters",
        "image name long": "analysis file: image name must be a string of at most 300 characters",
        "note long": "analysis file: image note must be a string of at most 1000 characters",
        "area_expected text": "analysis file: image area_expected must be true or false, got 'yes'",
        "tag_mask not base64": "analysis file: tag_mask could not be decoded (not base64)",
        "tag_mask not npz": "analysis file: tag_mask could not be decoded (File is not a zip file)",
        "model missing": "analysis file: model must be an object",
        "model labels not a list": "analysis file: labels must be a list",
        "model label int": "analysis file: a class label must be a string of at most 1000 characters",
        "model name missing": "analysis file: model name must be a string of at most 4096 characters",
        "model arch int": "analysis file: arch must be a string of at most 100 characters",
        "model normalize": "analysis file: model normalize must be one of none, imagenet, half, 0-255",
        "merges not a list": "analysis file: merges must be a list",
        "merge not an object": "analysis file: merges[0] must be an object",
        "merge keys not a list": "analysis file: keys must be a list",
        "merge key int": "analysis file: a merged key must be a string of at most 10000 characters",
        "merge name int": "analysis file: a merge name must be a string of at most 200 characters",
        "merge key missing": "analysis file: a merge key must be a string of at most 100000 characters",
        "settings bad": "analysis file: settings: samples must be an integer, got 'many'",
        "settings missing": "analysis file: settings: settings must be an object of groups",
        "results not an object": "analysis file: results must be an object",
        "results explanation bad": "analysis file: results.explanation: explanation JSON is malformed: 'classes' must be a non-empty list",
        "results automatic bad": "analysis file: results.automatic: not a LIMEcraft explanation (missing format: limecraft-explanation)",
        "results trust bad": "analysis file: results.trust: not a LIMEcraft explanation (missing format: limecraft-explanation)",
        "edited not an object": "analysis file: results.edited must be an object",
        "edited image not base64": "analysis file: edited image is not base64",
        "edited explanation bad": "analysis file: results.edited: explanation JSON is malformed: 'classes' must be a non-empty list",
        "other_models not a list": "analysis file: other_models must be a list",
        "other model not an object": "analysis file: other_models[0] must be an object",
        "other model's model": "analysis file: other_models[0].model must be an object",
        "other model's results": "analysis file: other_models[0].results must be an object",
        "other model's name": "analysis file: model name must be a string of at most 4096 characters",
        "segmentation missing": "analysis file: segmentation must be an object",
        "segmentation method": "analysis file: segmentation method must be one of quickshift, slic, felzenszwalb, watershed, grid",
        "segmentation n": "analysis file: segmentation n_segments must be an integer in [2, 300], got 1000000000",
        "segmentation outer": "analysis file: segmentation outer must be 'segment' or 'one'",
        "segmentation params evil": "analysis file: segmentation: segmentation_params: unknown parameter 'evil'; known: compactness, kernel_size, max_dist, min_size, n_segments, ratio, scale, sigma",
        "segmentation params not a list": "analysis file: segmentation params must be a list",
        "segmentation working size": "analysis file: segmentation: working_size must be in [16, 100000], got -3",
        "regions not a list": "analysis file: regions must be a list",
        "region not an object": "analysis file: regions[0] must be an object",
        "region colour": "analysis file: regions[0] colour must be one of red, blue, orange, violet, green, gray",
        "region uid": "analysis file: regions[0] uid must be letters and digits",
        "region uid int": "analysis file: regions[0] uid must be a string of at most 32 characters",
        "region name int": "analysis file: regions[0] name must be a string of at most 200 characters",
        "region inner": "analysis file: regions[0] inner must be an integer in [1, 50], got 1000000000",
        "region inner bool": "analysis file: regions[0] inner must be an integer in [1, 50], got True",
        "region expected": "analysis file: regions[0] expected must be true or false, got 'yes'",
        "region mask missing": "analysis file: regions[0] mask must be a string of at most 419430400 characters",
        "restored not an object": "analysis file: restored_regions must be an object",
        "restored empty": "analysis file: restored_regions atoms must be a string of at most 419430400 characters",
        "selected not a list": "analysis file: selected must be a list",
        "selected int": "analysis file: a selected key must be a string of at most 10000 characters",
        "edits too many": "analysis file: edits has 201 entries; at most 200",
        "edit unknown field": "analysis file: edits[0]: unknown field '__class__'",
        "edit hue": "analysis file: edits[0]: hue (degrees) must be in [-180.0, 180.0], got 999.0",
        "edit not an object": "analysis file: edits[0] must be an object",
    },
    "ROW": {
        "not an object": "an audit row must be an object",
        "unknown field": "an audit row has an unknown field 'evil'",
        "file missing": "an audit row has no 'file'",
        "key missing": "an audit row has no 'key'",
        "score text": "audit row field 'score' must be a number, got 'high'",
        "score bool": "audit row field 'score' must be a number, got True",
        "width float": "audit row field 'width' must be an integer, got 1.5",
        "width bool": "audit row field 'width' must be an integer, got True",
        "label int": "audit row field 'label' must be a string, got 5",
        "label long": "audit row field 'label' must be a string, got 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "has_mask int": "audit row field 'has_mask' must be true or false, got 1",
        "flags text": "audit row field 'flags' must be a list of flag names, got 'outside'",
        "flags many": "audit row field 'flags' must be a list of flag names, got ['outside', 'outside', 'outside', 'outside', 'outside', 'out",
        "flag unknown": "an audit row has an unknown flag 'rm -rf'",
        "status": "an audit row's status must be ok or error, not 'maybe'",
        "pointing_game int": "audit row field 'pointing_game' must be true or false, got 1",
        "score null": None,
        "width null": "audit row field 'width' must be an integer, got None",
    },
    "AUDIT": {
        "not json": "audit.json is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "a list": "audit.json is not a LIMEcraft audit (format limecraft-audit missing)",
        "format": "audit.json is not a LIMEcraft audit (format limecraft-audit missing)",
        "format missing": "audit.json is not a LIMEcraft audit (format limecraft-audit missing)",
        "version": "audit.json has an unsupported format_version 99",
        "version text": "audit.json has an unsupported format_version '1'",
        "rows not a list": "audit.json: rows must be a list",
        "rows missing": "audit.json: rows must be a list",
        "row bad": "an audit row has no 'key'",
        "row key unsafe": "not an audit image key: '..'",
        "settings bad": "audit.json: settings: settings must be an object of groups",
        "settings missing": "audit.json: settings: settings must be an object of groups",
        "created int": "audit.json: created must be a string",
        "created long": "audit.json: created must be a string",
        "model not an object": "OK model={} complete=True",
        "complete text": "OK model={'name': 'm'} complete=True",
    },
}


def _refusal(read, good, change):
    d = copy.deepcopy(good)
    changed = change(d)
    if changed is not None:
        d = changed
    try:
        read(d)
    except lc.LimecraftError as e:
        return str(e)
    return None


def _row():
    return AuditRow(
        file="a.png",
        key="a",
        digest="d",
        width=4,
        height=4,
        predicted=1,
        label="cat",
        score=0.5,
        flags=("outside",),
        pointing_game=True,
        relevance_mass=0.2,
    ).to_dict()


@pytest.mark.parametrize("case", list(EX))
def test_a_bad_explanation_file_gets_its_exact_message(case):
    read = lambda d: lc.Explanation.from_json(json.dumps(d))  # noqa: E731
    assert _refusal(read, explanation_doc(), EX[case]) == EXPECTED["EX"][case]


def test_a_bad_analysis_file_gets_its_exact_message(full):  # noqa: F811
    good = json.loads(AF.to_json(full))
    got = {case: _refusal(lambda d: AF.from_json(json.dumps(d)), good, c) for case, c in AN.items()}
    assert got == EXPECTED["AN"]
    assert AF.to_json(AF.from_json(AF.to_json(full))) == AF.to_json(full)


@pytest.mark.parametrize("case", list(ROW))
def test_a_bad_audit_row_gets_its_exact_message(case):
    assert _refusal(AuditRow.from_dict, _row(), ROW[case]) == EXPECTED["ROW"][case]


def test_a_bad_audit_json_gets_its_exact_message(tmp_path):
    good = {
        "format": "limecraft-audit",
        "format_version": 1,
        "rows": [],
        "settings": lc.ExplainConfig().to_dict(),
        "model": {"name": "m"},
        "source": {},
        "complete": True,
        "created": "2026",
    }

    def read(d):
        (tmp_path / "audit.json").write_text(d if isinstance(d, str) else json.dumps(d))
        got = load_audit(tmp_path)
        raise lc.LimecraftError(f"OK model={got.model} complete={got.complete}")

    got = {case: _refusal(read, good, c) for case, c in AUDIT.items()}
    assert got == EXPECTED["AUDIT"]
