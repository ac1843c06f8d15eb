"""The model registry: zoo names offline, the user's own model files, and their safety."""

import json
import pickle
import re
import zipfile
from pathlib import Path

import pytest
import torch
from toys import ChannelMeans

from limecraft_core import LimecraftError, ModelError, explain
from models import registry, zoo
from models.custom import load_model_file


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    return tmp_path / "torch" / "hub" / "checkpoints"


def test_zoo_has_every_required_name_with_offline_metadata():
    required = {
        "resnet50",
        "resnet18",
        "vgg16",
        "densenet121",
        "inception_v3",
        "mobilenet_v3_large",
        "efficientnet_b0",
        "convnext_tiny",
        "vit_b_16",
        "swin_t",
    }
    assert required <= set(zoo.ZOO)
    for name in required:
        spec = zoo.ZOO[name]
        assert len(spec.categories) == 1000
        assert spec.input_size == (299 if name == "inception_v3" else 224)


@pytest.mark.parametrize("name", sorted(zoo.ZOO))
def test_every_zoo_name_fails_at_once_without_weights(empty_cache, photo, name, monkeypatch):
    tried = []  # offline (conftest): no download is even tried, so nothing can hang
    monkeypatch.setattr(zoo.urllib.request, "urlopen", lambda *a, **k: tried.append(a))
    with pytest.raises(LimecraftError) as e:
        explain(photo, registry.load_classifier(name), samples=20)
    msg = str(e.value)
    assert tried == []
    assert zoo.ZOO[name].filename in msg and str(empty_cache) in msg
    assert "demo" in msg and ".pt2" in msg


def test_a_download_attempt_is_bounded(empty_cache, monkeypatch):
    monkeypatch.setenv("LIMECRAFT_OFFLINE", "0")
    monkeypatch.setenv("LIMECRAFT_DOWNLOAD_TIMEOUT", "1")

    timeouts = []

    def no_network(*a, timeout=None, **k):
        timeouts.append(timeout)
        raise OSError("network unreachable")

    monkeypatch.setattr(zoo.urllib.request, "urlopen", no_network)
    with pytest.raises(LimecraftError, match="download failed: OSError"):
        zoo.build("resnet18")
    # one attempt, bounded by LIMECRAFT_DOWNLOAD_TIMEOUT (urllib's timeout covers the connect
    # and every stalled read), then the error
    assert timeouts == [1.0]


def test_cached_weights_are_used_offline(empty_cache, photo):
    torch.manual_seed(0)
    empty_cache.mkdir(parents=True)
    torch.save(
        zoo.build("resnet18", pretrained=False).state_dict(),
        empty_cache / zoo.ZOO["resnet18"].filename,
    )
    info = registry.model_info("resnet18")
    assert info.ready and info.input_size == 224 and info.num_classes == 1000
    clf = registry.load_classifier("resnet18")
    res = explain(photo, clf, samples=12, segmentation="grid", n_segments=4, batch_size=4)
    assert res.run.model == "resnet18" and res.run.normalize == "imagenet"
    assert res.class_labels[0] == zoo.ZOO["resnet18"].categories[res.target]


def test_list_models_reports_readiness(empty_cache):
    rows = {m.name: m for m in registry.list_models()}
    assert rows["resnet50"].ready is False and "place resnet50-" in rows["resnet50"].reason
    assert rows["demo"].kind == "demo"


def test_unknown_name_lists_the_alternatives():
    with pytest.raises(LimecraftError, match=r"unknown model 'resnet9000'.*demo"):
        registry.load_classifier("resnet9000")


# ------------------------------------------------------------------ the user's model files


def export(model, path, size=32, dynamic=True):
    kw = {"dynamic_shapes": {"x": {0: torch.export.Dim("batch", min=1)}}} if dynamic else {}
    torch.export.save(torch.export.export(model, (torch.rand(2, 3, size, size),), **kw), str(path))
    return path


def test_pt2_with_dynamic_and_static_batch(tmp_path, photo):
    for dynamic in (True, False):
        p = export(ChannelMeans(classes=3), tmp_path / f"m{dynamic}.pt2", dynamic=dynamic)
        clf = registry.load_classifier(str(p), labels=["a", "b", "c"])
        assert clf.input_size == (32, 32)
        res = explain(photo, clf, samples=15, segmentation="grid", batch_size=5)
        assert res.class_labels[0] in ("a", "b", "c")
        # its own size may be given; another is refused with what would fit, not torch's guard
        assert registry.load_classifier(str(p), input_size=32).input_size == (32, 32)
        with pytest.raises(LimecraftError) as e:
            registry.load_classifier(str(p), input_size=48)
        assert str(e.value) == (
            f"model file 'm{dynamic}.pt2' was exported for 32x32 inputs, so input size 48 does "
            "not fit it: leave the input size out (it is read from the program), or export the "
            "model again with a dynamic height and width"
        )


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_file(tmp_path, photo):
    p = tmp_path / "m.pt"
    torch.jit.script(ChannelMeans(classes=3)).save(str(p))
    clf = registry.load_classifier(str(p), input_size=40)
    res = explain(photo, clf, samples=15, segmentation="grid")
    assert res.run.input_size == [40, 40]


def test_state_dict_with_architecture(tmp_path, photo):
    torch.manual_seed(0)
    net = torch.hub.load  # noqa: F841 (only to show no hub call is made below)
    model = zoo.build("mobilenet_v3_large", pretrained=False)
    model.classifier[-1] = torch.nn.Linear(model.classifier[-1].in_features, 7)
    p = tmp_path / "weights.pth"
    torch.save(model.state_dict(), p)
    clf = registry.load_classifier(str(p), arch="mobilenet_v3_large", input_size=64)
    out = clf.predict(photo)
    assert out.shape == (7,)
    with pytest.raises(LimecraftError, match="unknown architecture"):
        registry.load_classifier(str(p), arch="lenet")
    with pytest.raises(LimecraftError, match="does not fit resnet18") as e:
        registry.load_classifier(str(p), arch="resnet18")
    # what does not fit, shortened: resnet18's keys missing, mobilenet's not resnet18's
    msg = str(e.value)
    assert re.search(r"\d+ of resnet18's keys are missing \(conv1\.weight, bn1\.weight, ", msg)
    assert re.search(r"\d+ keys are not resnet18's \(features\.0\.0\.weight, ", msg), msg
    assert "more)" in msg and msg.endswith("Choose the architecture it was saved from")
    # a tensor of another shape: resnet18's own keys, one with fewer outputs per channel
    other = zoo.build("resnet18", pretrained=False).state_dict()
    other["conv1.weight"] = other["conv1.weight"][:32]
    torch.save(other, p)
    with pytest.raises(LimecraftError, match=r"1 tensors have another shape \(conv1\.weight "
                       r"32x3x7x7 here, 64x3x7x7 in resnet18\)"):  # fmt: skip
        registry.load_classifier(str(p), arch="resnet18")


class _Payload:
    """Unpickling this runs code: it writes a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


def test_booby_trapped_pickle_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned.txt"
    p = tmp_path / "evil.pth"
    torch.save({"fc.weight": torch.zeros(2, 3), "trap": _Payload(marker)}, p)
    with pytest.raises(LimecraftError, match="refused"):
        registry.load_classifier(str(p), arch="resnet18")
    # a whole pickled model (torch.save(model)) is refused without --arch too
    whole = tmp_path / "whole.pt"
    torch.save(_Payload(marker), whole)
    with pytest.raises(LimecraftError, match="refused because unpickling can run code"):
        load_model_file(whole)
    assert not marker.exists()


def test_booby_trapped_pt2_is_refused_and_never_runs(tmp_path):
    """torch.export.load itself would unpickle a weight marked use_pickle with
    weights_only=False; LIMEcraft's loader refuses it."""
    marker = tmp_path / "pwned.txt"
    good = export(ChannelMeans(classes=2), tmp_path / "good.pt2")
    evil = tmp_path / "evil.pt2"
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(evil, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("model_weights_config.json"):
                cfg = json.loads(data)
                for entry in cfg["config"].values():
                    entry["use_pickle"] = True
                data = json.dumps(cfg).encode()
            elif "/data/weights/weight_" in info.filename:
                data = pickle.dumps(_Payload(marker))
            zout.writestr(info, data)
    with pytest.raises(LimecraftError, match="refused"):
        load_model_file(evil)
    assert not marker.exists()


def test_model_file_limits_and_garbage(tmp_path, monkeypatch):
    empty = tmp_path / "empty.pt2"
    empty.write_bytes(b"")
    with pytest.raises(LimecraftError, match="empty"):
        load_model_file(empty)
    junk = tmp_path / "junk.pt2"
    junk.write_bytes(b"PK\x03\x04 nonsense")
    with pytest.raises(LimecraftError, match=r"torch\.export"):
        load_model_file(junk)
    big = export(ChannelMeans(), tmp_path / "big.pt2")
    monkeypatch.setattr("models.custom.MAX_MODEL_BYTES", 100)
    with pytest.raises(LimecraftError, match="over the limit"):
        load_model_file(big)


def test_output_shape_is_checked(tmp_path, photo):
    class Flat(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=(1, 2, 3))

    p = export(Flat(), tmp_path / "flat.pt2")
    with pytest.raises(ModelError, match=r"shape \(N, C\).*returned shape \(\d+,\)"):
        explain(photo, registry.load_classifier(str(p)), samples=12, segmentation="grid")


def test_loaded_models_are_shared(tmp_path):
    p = export(ChannelMeans(), tmp_path / "m.pt2")
    a = registry.load_module(str(p))
    b = registry.load_module(str(p))
    assert a is b


def test_the_registry_imports_torchvision_only_to_build_a_zoo_model():
    """``torchvision.models`` loads torch._dynamo, about 3 s of every app server's and command
    line's start; the demo, ONNX, hub and EfficientNet-Lite0 models never need it, so only the
    zoo's and the custom models' builders import it."""
    import subprocess
    import sys

    from conftest import ROOT

    code = (
        "import sys, models.registry, serving; from models import zoo; "
        "print('torchvision' in sys.modules, end=' '); "
        "zoo.ZOO['resnet18'].categories; print('torchvision' in sys.modules)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and r.stdout.split() == ["False", "True"], (r.stdout, r.stderr[-2000:])
