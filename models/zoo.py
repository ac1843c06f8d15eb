"""torchvision's ImageNet classifiers, with weights from the torch hub cache (offline first).

Input size, normalisation and the 1000 category names come from each weights enum, which holds
them offline. Weights are read from ``$TORCH_HOME/hub/checkpoints`` (the torch hub cache); when a
file is missing, one download is tried with a short timeout, then a clear error says which file to
place where.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from limecraft_core import LimecraftError

from .source import Ask, ModelInfo, Source, served_by_ray

__all__ = ["SOURCE", "ZOO", "ZooSpec", "build", "download_timeout", "weights_path"]

if TYPE_CHECKING:
    import torchvision.models as tvm


def torchvision_models() -> Any:
    """``torchvision.models``, imported when a zoo model is built or described: importing it
    loads torch._dynamo (about 3 s), which the app, the CLI and the other models never need."""
    import torchvision.models

    return torchvision.models


@dataclass(frozen=True)
class ZooSpec:
    """One torchvision architecture and its ImageNet weights."""

    name: str
    weights_enum: str
    builder_kwargs: tuple[tuple[str, object], ...] = ()

    @property
    def weights(self) -> tvm.WeightsEnum:
        return getattr(torchvision_models(), self.weights_enum).DEFAULT

    @property
    def input_size(self) -> int:
        return int(self.weights.transforms().crop_size[0])

    @property
    def categories(self) -> list[str]:
        return list(self.weights.meta["categories"])

    @property
    def filename(self) -> str:
        return self.weights.url.rsplit("/", 1)[-1]


ZOO: dict[str, ZooSpec] = {
    s.name: s
    for s in [
        ZooSpec("resnet50", "ResNet50_Weights"),
        ZooSpec("resnet18", "ResNet18_Weights"),
        ZooSpec("vgg16", "VGG16_Weights"),
        ZooSpec("densenet121", "DenseNet121_Weights"),
        ZooSpec(
            "inception_v3", "Inception_V3_Weights", (("aux_logits", True), ("init_weights", False))
        ),
        ZooSpec("mobilenet_v3_large", "MobileNet_V3_Large_Weights"),
        ZooSpec("efficientnet_b0", "EfficientNet_B0_Weights"),
        ZooSpec("convnext_tiny", "ConvNeXt_Tiny_Weights"),
        ZooSpec("vit_b_16", "ViT_B_16_Weights"),
        ZooSpec("swin_t", "Swin_T_Weights"),
    ]
}


def weights_path(name: str) -> Path:
    """Where the torch hub cache keeps this model's weights (``$TORCH_HOME/hub/checkpoints``)."""
    return Path(torch.hub.get_dir()) / "checkpoints" / ZOO[name].filename


def download_timeout() -> float:
    """Seconds one download attempt may take to connect or stall (``LIMECRAFT_DOWNLOAD_TIMEOUT``).

    ``0`` (or ``LIMECRAFT_OFFLINE=1``) means never try to download.
    """
    if os.environ.get("LIMECRAFT_OFFLINE", "") not in ("", "0"):
        return 0.0
    try:
        return max(0.0, float(os.environ.get("LIMECRAFT_DOWNLOAD_TIMEOUT", "5")))
    except ValueError:
        return 5.0


def _missing_message(name: str, why: str) -> str:
    path = weights_path(name)
    return (
        f"the ImageNet weights for {name} are not available ({why}). Place {path.name} "
        f"(from {ZOO[name].weights.url}) in {path.parent} (set TORCH_HOME to use another cache), "
        "or use the offline demo model (model 'demo'), or your own model file (.pt2 or TorchScript .pt)"
    )


def _download(name: str, timeout: float) -> Path:
    """One bounded attempt to fetch the weights; checks the hash prefix in the file name."""
    spec = ZOO[name]
    dst = weights_path(name)
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, suffix=".part")
    try:
        h = hashlib.sha256()
        with (
            os.fdopen(fd, "wb") as f,
            urllib.request.urlopen(spec.weights.url, timeout=timeout) as r,
        ):
            while chunk := r.read(1 << 20):
                h.update(chunk)
                f.write(chunk)
        prefix = spec.filename.rsplit("-", 1)[-1].split(".")[0]
        if not h.hexdigest().startswith(prefix):
            raise LimecraftError(f"downloaded weights for {name} failed their hash check")
        shutil.move(tmp, dst)
        return dst
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def build(name: str, *, pretrained: bool = True) -> torch.nn.Module:
    """Build a zoo model; with ``pretrained`` load its ImageNet weights (never hangs).

    Raises
    ------
    LimecraftError
        If the weights are neither cached nor downloadable within the timeout; the message
        names the file to place in the cache and the alternatives.
    """
    spec = ZOO[name]
    if not pretrained:
        return getattr(torchvision_models(), name)(weights=None, **dict(spec.builder_kwargs)).eval()
    path = weights_path(name)
    if not path.exists():
        timeout = download_timeout()
        if timeout <= 0:
            raise LimecraftError(_missing_message(name, "not in the cache, and downloads are off"))
        try:
            _download(name, timeout)
        except LimecraftError:
            raise
        except Exception as e:  # DNS failure, refused, timeout, HTTP error
            raise LimecraftError(
                _missing_message(
                    name, f"not in the cache, and the download failed: {type(e).__name__}"
                )
            ) from None
    model = getattr(torchvision_models(), name)(weights=None, **dict(spec.builder_kwargs))
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    except Exception as e:
        raise LimecraftError(
            f"the cached weights {path} could not be loaded ({type(e).__name__}: {e}); "
            "delete the file and place a fresh copy"
        ) from None
    return model.eval()


def is_cached(name: str) -> bool:
    """True if the weights file is in the torch hub cache."""
    return weights_path(name).exists()


# --- the registry's source ------------------------------------------------------------------


def _info(name: str) -> ModelInfo:
    spec = ZOO[name]
    cached = is_cached(name)
    if cached:
        reason = ""
    elif served_by_ray():  # the Ray Serve replicas hold the weights
        cached, reason = True, ""
    else:
        reason = (
            f"weights not in the cache: place {spec.filename} in {weights_path(name).parent}"
            + ("" if download_timeout() <= 0 else " (a download will be tried first)")
        )
    return ModelInfo(
        name=name,
        kind="zoo",
        input_size=spec.input_size,
        num_classes=len(spec.categories),
        normalize="imagenet",
        ready=cached,
        reason=reason,
        description=f"torchvision {name}, ImageNet-1k",
    )


def _fit(name: str, module: torch.nn.Module, ask: Ask) -> dict[str, object]:
    spec = ZOO[name]
    return dict(
        input_size=ask.input_size or spec.input_size,
        normalize=ask.normalize or "imagenet",
        labels=ask.labels or spec.categories,
        name=name,
    )


#: The torchvision names (``resnet50``, ...).
SOURCE = Source(
    "zoo",
    matches=lambda spec, arch: spec in ZOO and arch is None,
    info=_info,
    load=lambda spec, arch, pretrained, *_: build(spec, pretrained=pretrained),
    fit=_fit,
    names=lambda: tuple(ZOO),
)
