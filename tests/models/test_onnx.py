"""ONNX model files through onnxruntime: same explanations as torch, layouts, batches, outputs."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from onnx_graphs import CLASSES, SIZE, TinyCNN, graph_file

import limecraft_core as lc
from limecraft.cli import main
from models import registry
from models.onnx_model import OnnxModule, inspect_onnx, load_onnx

SETTINGS = {"samples": 120, "seed": 0, "segmentation": "grid", "n_segments": 9, "top_labels": 2}


def image() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (48, 48, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def net() -> TinyCNN:
    return TinyCNN().eval()


@pytest.fixture(scope="module")
def folder(tmp_path_factory, net):
    d = tmp_path_factory.mktemp("onnx")
    torch.onnx.export(
        net,
        (torch.rand(2, 3, SIZE, SIZE),),
        str(d / "exported.onnx"),
        dynamo=True,
        input_names=["x"],
        dynamic_shapes=({0: torch.export.Dim("batch")},),
        verbose=False,
    )
    return d


def explain(model, **kw):
    return lc.explain(image(), model, **{**SETTINGS, **kw})


def same(a: lc.Explanation, b: lc.Explanation, tol: float = 1e-4) -> None:
    assert a.classes == b.classes
    np.testing.assert_allclose(a.class_weights, b.class_weights, atol=tol, rtol=0)
    np.testing.assert_allclose(a.predictions, b.predictions, atol=tol, rtol=0)


def test_torch_export_gives_the_torch_models_explanation(folder, net):
    path = folder / "exported.onnx"
    clf = registry.load_classifier(str(path), device="cpu")
    assert isinstance(clf.model, OnnxModule)
    assert clf.model.graph.layout == "NCHW" and clf.model.graph.batch is None
    assert clf.input_size == (SIZE, SIZE) and clf.precision == "fp32" and not clf.channels_last
    twin = lc.Classifier(net, input_size=SIZE, device="cpu", precision="fp32")
    same(explain(clf), explain(twin))
    same(explain(clf, output_space="raw"), explain(twin, output_space="raw"))


def test_precision_and_channels_last_asked_for_are_ignored_for_onnx(folder):
    clf = registry.load_classifier(
        str(folder / "exported.onnx"), device="cpu", precision="bf16", channels_last=True
    )
    assert clf.precision == "fp32" and clf.channels_last is False
    assert np.isfinite(clf.predict(image())).all()


def test_nhwc_graph_explains_like_its_nchw_twin(tmp_path, net):
    nchw = registry.load_classifier(str(graph_file(tmp_path / "a.onnx", net)), device="cpu")
    nhwc = registry.load_classifier(
        str(graph_file(tmp_path / "b.onnx", net, layout="NHWC")), device="cpu"
    )
    assert nhwc.model.graph.layout == "NHWC" and nhwc.input_size == (SIZE, SIZE)
    same(explain(nhwc), explain(nchw))


def test_fixed_batch_one_is_split_and_says_so(tmp_path, net):
    dyn = registry.load_classifier(str(graph_file(tmp_path / "d.onnx", net)), device="cpu")
    path = graph_file(tmp_path / "one.onnx", net, batch=1)
    one = registry.load_classifier(str(path), device="cpu")
    assert one.model.graph.batch == 1
    assert "fixed batch 1" in one.model.description and "split" in one.model.description
    assert "split" in registry.model_info(str(path)).description
    same(explain(one, batch_size=7), explain(dyn, batch_size=7))


@pytest.mark.parametrize("where", ["node", "hidden"])
def test_softmax_outputs_are_not_softmaxed_twice(tmp_path, net, where):
    logits = registry.load_classifier(str(graph_file(tmp_path / "l.onnx", net)), device="cpu")
    probs = registry.load_classifier(
        str(graph_file(tmp_path / f"p{where}.onnx", net, softmax=where)), device="cpu"
    )
    assert probs.model.outputs == "probabilities" and logits.model.outputs == "logits"
    assert "log p" in probs.model.description
    a, b = explain(probs), explain(logits)
    same(a, b)
    assert 0 < a.predictions[0] < 1
    # raw is log p for a probability graph
    p = torch.softmax(torch.as_tensor(logits.predict(image())), 0).numpy()
    np.testing.assert_allclose(probs.predict(image()), np.log(p), atol=1e-5)


def test_outputs_option_overrides_the_detection(tmp_path, net):
    path = str(graph_file(tmp_path / "p.onnx", net, softmax="node"))
    as_logits = registry.load_classifier(path, device="cpu", outputs="logits")
    assert as_logits.model.outputs == "logits"
    assert np.allclose(as_logits.predict(image()).sum(), 1, atol=1e-5)
    assert registry.load_module(path, outputs="logits") is as_logits.model  # cached per options
    assert registry.load_module(path) is not as_logits.model


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(["a", "b", "c", "d", "e"]),
        "a,b,c,d,e",
        "a\nb\nc\nd\ne\n",
        '{"0":"a","1":"b","2":"c","3":"d","4":"e"}',
    ],
)
def test_labels_come_from_metadata(tmp_path, net, text):
    path = str(graph_file(tmp_path / "m.onnx", net, metadata={"classes": text}))
    clf = registry.load_classifier(path, device="cpu")
    assert clf.labels == ("a", "b", "c", "d", "e")
    assert registry.load_classifier(path, labels=list("vwxyz")).labels == tuple("vwxyz")
    assert "labels in metadata" in registry.model_info(path).description


def test_input_range_0_255(tmp_path, net):
    base = registry.load_classifier(str(graph_file(tmp_path / "a.onnx", net)), device="cpu")
    path = str(graph_file(tmp_path / "k.onnx", net, scale_255=True, layout="NHWC"))
    wide = registry.load_classifier(path, device="cpu", input_range="0-255")
    same(explain(wide), explain(base))
    with pytest.raises(lc.LimecraftError, match="0-255"):
        registry.load_classifier(path, input_range="0-255", normalize="imagenet")
    with pytest.raises(lc.LimecraftError, match="input_range must be one of"):
        registry.load_classifier(path, input_range="0-100")


def test_onnx_options_are_refused_for_other_models():
    with pytest.raises(lc.LimecraftError, match=r"\.onnx model files only"):
        registry.load_classifier("demo", input_range="0-255")


def test_fixed_size_conflicting_with_input_size_is_refused(tmp_path, net):
    path = str(graph_file(tmp_path / "a.onnx", net))
    with pytest.raises(lc.LimecraftError, match="32x32"):
        registry.load_classifier(path, input_size=64)


def bad_graph(path, *, rank=4, inputs=1, dtype=TensorProto.FLOAT, opset=17):
    ins = [
        helper.make_tensor_value_info(f"x{i}", dtype, ["N", 3, 8, 8, 1][:rank])
        for i in range(inputs)
    ]
    node = helper.make_node("Identity", ["k"], ["y"])
    k = numpy_helper.from_array(np.zeros((1, 2), np.float32), "k")
    g = helper.make_graph(
        [node], "bad", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [k]
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


@pytest.mark.parametrize(
    ("case", "make", "match"),
    [
        (
            "truncated",
            lambda p, f: p.write_bytes(f.read_bytes()[:300]),
            "not an ONNX model|onnxruntime",
        ),
        ("not onnx", lambda p, f: p.write_bytes(b"hello, I am text\n" * 20), "not an ONNX model"),
        ("rank 3", lambda p, f: bad_graph(p, rank=3), "rank-3 input"),
        ("no inputs", lambda p, f: bad_graph(p, inputs=0), "has no inputs"),
        ("two inputs", lambda p, f: bad_graph(p, inputs=2), "2 inputs"),
        ("int input", lambda p, f: bad_graph(p, dtype=TensorProto.INT64), "int64 input"),
        ("opset 999", lambda p, f: bad_graph(p, opset=999), "opset 999"),
        ("empty", lambda p, f: p.write_bytes(b""), "empty"),
    ],
)
def test_bad_files_are_one_clear_error(folder, tmp_path, case, make, match):
    p = tmp_path / "bad.onnx"
    make(p, folder / "exported.onnx")
    with pytest.raises(lc.LimecraftError, match=match) as e:
        load_onnx(p)
    assert "\n" not in str(e.value)


def test_inspect_reads_without_a_session(tmp_path, net):
    g = inspect_onnx(graph_file(tmp_path / "a.onnx", net, layout="NHWC", batch=1, softmax="node"))
    assert (g.layout, g.batch, g.input_size, g.num_classes, g.softmax_output) == (
        "NHWC",
        1,
        (SIZE, SIZE),
        CLASSES,
        "softmax",
    )


def test_cli_explains_an_onnx_file_with_its_metadata_labels(tmp_path, net, capsys):
    path = graph_file(
        tmp_path / "m.onnx", net, softmax="node", metadata={"labels": "a,b,c,d,e"}, layout="NHWC"
    )
    png = tmp_path / "i.png"
    from PIL import Image

    Image.fromarray(image()).save(png)
    out = tmp_path / "out"
    argv = ["explain", str(png), "--out", str(out), "--model", str(path), "--samples", "40"]
    code = main([*argv, "--segmentation", "grid", "--n-segments", "4", "--device", "cpu"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert re.search(r'^target="[a-e]"; class=\d; probability=0\.\d+;', printed.out, re.M)
    doc = json.loads((out / "explanation.json").read_text())
    assert doc["inputs"]["input_range"] == "0-1"


def test_a_model_folder_names_onnx_models_for_the_registry(tmp_path, net, monkeypatch):
    """``$LIMECRAFT_MODEL_DIR/NAME.onnx`` is the registry name NAME (the app's list, the CLI,
    Ray Serve), with its class names from ``NAME.txt``; an unreadable file is listed as not
    available, with the reason."""
    from models import registry

    graph_file(tmp_path / "skin.onnx", net, layout="NHWC")
    (tmp_path / "skin.txt").write_text("\n".join(f"lesion {i}" for i in range(CLASSES)))
    (tmp_path / "broken.onnx").write_bytes(b"not onnx at all")
    monkeypatch.setenv("LIMECRAFT_MODEL_DIR", str(tmp_path))
    listed = {m.name: m for m in registry.list_models()}
    assert (
        listed["skin"].ready
        and listed["skin"].kind == "onnx"
        and "NHWC" in listed["skin"].description
    )
    assert not listed["broken"].ready and listed["broken"].reason
    assert registry.is_registered("skin") and registry.model_info("skin").name == "skin"
    clf = registry.load_classifier("skin", device="cpu")
    assert clf.label(1) == "lesion 1"
    res = lc.explain(image(), clf, **SETTINGS)
    assert res.class_labels[0].startswith("lesion ")
    monkeypatch.delenv("LIMECRAFT_MODEL_DIR")
    assert not registry.is_registered("skin")


@pytest.mark.slow
def test_the_app_takes_a_0_255_onnx_upload_and_a_timm_name(at, tmp_path, net):
    """An ONNX graph that takes 0-255 pixels (as Keras exports often do), uploaded with the
    0-255 choice, predicts what its 0-1 twin predicts; the choice is refused for a torch file;
    a timm name offline is one clear line and the model stays."""
    from pages.lib import analysis as A
    from pages.lib import analysis_file as AF
    from pages.lib import identity

    g255 = graph_file(tmp_path / "keras255.onnx", net, layout="NHWC", scale_255=True)
    g01 = graph_file(tmp_path / "twin.onnx", net, layout="NHWC")
    s = at.session_state["limecraft_session"].app
    at.sidebar.file_uploader(key="model_upload").set_value(
        ("keras255.onnx", g255.read_bytes(), "application/octet-stream")
    )
    at.sidebar.selectbox(key="model_normalize").set_value(identity.PIXELS_0_255)
    at.run()
    next(b for b in at.sidebar.button if b.label == "Use this model").click().run()
    assert not at.exception, at.exception
    assert s.model_name.endswith("keras255.onnx") and s.model_normalize == identity.PIXELS_0_255
    assert any(m.value.startswith("Now using **keras255") for m in at.sidebar.success)
    from pages.lib import runtime  # the app's own loader

    got = runtime.classifier(A.model_ref(s)).predict(s.image)
    want = __import__("models.registry", fromlist=["x"]).load_classifier(str(g01)).predict(s.image)
    np.testing.assert_allclose(got, want, atol=1e-5)
    back = AF.from_json(AF.to_json(s))
    assert back.model_normalize == identity.PIXELS_0_255
    # a timm name that cannot be had offline: one line, the model stays
    at.sidebar.text_input(key="model_by_name").set_value("timm:no_such_model_at_all").run()
    next(b for b in at.sidebar.button if b.label == "Use this name").click().run()
    assert not at.exception
    assert s.model_name.endswith("keras255.onnx")
    assert any("That model was not used" in e.value for e in at.sidebar.error)


def _apart(path, net, name: str = "apart.onnx"):
    """The TinyCNN graph saved as torch.onnx.export(..., dynamo=True) saves it: the model in
    ``name``, its weights in ``name + '.data'`` beside it."""
    one = onnx.load(str(graph_file(path / "one.onnx", net)))
    onnx.save_model(
        one,
        str(path / name),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=name + ".data",
        size_threshold=0,
    )
    return path / name


def test_weights_kept_apart_are_read_beside_the_model_and_said_when_missing(tmp_path, net):
    from models.onnx_model import weights_files

    apart = _apart(tmp_path, net)
    assert (
        weights_files(apart) == ("apart.onnx.data",) and weights_files(tmp_path / "one.onnx") == ()
    )
    x = image()
    want = load_onnx(tmp_path / "one.onnx", device="cpu")
    got = load_onnx(apart, device="cpu")
    clf = lambda m: lc.Classifier(m, input_size=SIZE, device="cpu")  # noqa: E731
    np.testing.assert_allclose(clf(got).predict(x), clf(want).predict(x), atol=1e-6)
    # without its weights file: what is missing, and two ways out
    (tmp_path / "apart.onnx.data").rename(tmp_path / "elsewhere.data")
    with pytest.raises(lc.LimecraftError) as e:
        registry.load_classifier(str(apart), device="cpu")
    msg = str(e.value)
    assert "keeps its weights in a separate file, 'apart.onnx.data', which is not beside it" in msg
    assert "onnx.save(onnx.load('apart.onnx'), 'one_file.onnx')" in msg
    assert "\n" not in msg
    # a weights file named outside the model's folder is refused, present or not
    model = onnx.load(str(apart), load_external_data=False)
    for t in model.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = "../elsewhere.data"
    onnx.save(model, str(tmp_path / "outside.onnx"))
    with pytest.raises(lc.LimecraftError, match="outside its own folder"):
        inspect_onnx(tmp_path / "outside.onnx")


def test_the_app_takes_an_onnx_model_with_its_weights_file(at, tmp_path, net):
    """The README's recipe without external_data=False: m.onnx alone is refused with what to
    do; with its weights file chosen beside it (under any name), the model is used."""
    apart = _apart(tmp_path, net, "m.onnx")
    s = at.session_state["limecraft_session"].app
    before = s.model_name
    at.sidebar.file_uploader(key="model_upload").set_value(
        ("m.onnx", apart.read_bytes(), "application/octet-stream")
    )
    at.run()
    use = lambda: next(b for b in at.sidebar.button if b.label == "Use this model")  # noqa: E731
    use().click().run()
    assert not at.exception, at.exception
    assert s.model_name == before
    (err,) = [e.value.replace("\\", "") for e in at.sidebar.error]  # markdown escapes
    assert "That model was not used" in err and "'m.onnx.data', which is not beside it" in err
    assert "Its weights file" in err
    at.sidebar.file_uploader(key="model_upload-1").set_value(
        ("m.onnx", apart.read_bytes(), "application/octet-stream")
    )
    at.sidebar.file_uploader(key="model_data_upload").set_value(
        ("weights.data", (tmp_path / "m.onnx.data").read_bytes(), "application/octet-stream")
    )
    at.run()
    use().click().run()
    assert not at.exception, at.exception
    assert s.model_name.endswith("m.onnx") and not at.sidebar.error
    said = [m.value.replace("\\", "") for m in at.sidebar.success]
    assert any(m.startswith("Now using **m.onnx**") for m in said), said
    from pages.lib import runtime

    got = runtime.classifier(__import__("pages.lib.analysis", fromlist=["x"]).model_ref(s))
    want = registry.load_classifier(str(tmp_path / "one.onnx"), device="cpu")
    np.testing.assert_allclose(got.predict(s.image), want.predict(s.image), atol=1e-6)
