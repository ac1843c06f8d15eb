"""The model registry that the engine, the CLI and the app all use: the sources, lookup and load.

A *name* is ``demo`` (LIMEcraft's offline demo model), ``efficientnet_lite0`` (a real ImageNet
classifier whose weights come from the package registry, :mod:`models.efficientnet_lite`), a
torchvision zoo name (``resnet50``, ...) or an ONNX model of ``$LIMECRAFT_MODEL_DIR``. A *path*
is a model file (``.pt2``, TorchScript, a state_dict with ``arch``, or ``.onnx`` run by
onnxruntime, see :mod:`models.onnx_model`); ``timm:`` and ``hf:`` specs name hub models. Each
kind is a :class:`~models.source.Source` declared beside the code that loads it, and
:data:`SOURCES` lists them in the order they are tried. Loaded models are cached per process
(per path and options) and shared: inference on them is thread-safe.

Everything here runs locally; whether a model runs on a Ray Serve cluster instead is decided
above, in :func:`serving.load_scorer` (``models`` never imports ``serving``).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import torch

from limecraft_core import Classifier, LimecraftError, resolve_device

from . import custom, demo, hub, onnx_model, zoo
from . import efficientnet_lite as lite
from .gate import gated
from .source import Ask, ModelInfo, Source

__all__ = [
    "BUILT_IN",
    "DEFAULT_MODEL",
    "MODEL_DIR_ENV",
    "SOURCES",
    "fit_warning",
    "folder_models",
    "is_registered",
    "list_models",
    "load_classifier",
    "load_module",
    "model_info",
    "source_of",
]


def _default_model() -> str:
    """``LIMECRAFT_DEFAULT_MODEL`` (a registered name), else the real ImageNet model
    (``efficientnet_lite0``) when its packages are installed, else ``demo``."""
    name = os.environ.get("LIMECRAFT_DEFAULT_MODEL", "").strip()
    if not name:
        return "demo" if lite.missing_packages() else lite.NAME
    if name not in BUILT_IN and name not in zoo.ZOO:
        raise LimecraftError(
            f"LIMECRAFT_DEFAULT_MODEL={name!r} is not a registered model; use one of: "
            f"{', '.join(BUILT_IN)}, {', '.join(zoo.ZOO)} (or leave it unset for "
            f"{lite.NAME})"
        )
    return name


#: The names that ship with LIMEcraft (no download): the demo model and the real one.
BUILT_IN = ("demo", lite.NAME)


#: The app's first model: ``LIMECRAFT_DEFAULT_MODEL`` when set (checked at import), else the
#: real ImageNet model, efficientnet_lite0 (demo where its packages are missing).
DEFAULT_MODEL = _default_model()
_LOCK = threading.Lock()
_MODULES: dict[tuple, torch.nn.Module] = {}


# ----------------------------------------------------------------------------- lookup


def source_of(spec: str, arch: str | None = None) -> Source:
    """The source that serves ``spec`` (LimecraftError for an unknown name)."""
    for src in SOURCES:
        if src.matches(spec, arch):
            return src
    raise _unknown_model(spec)


def _unknown_model(spec: str) -> LimecraftError:
    return LimecraftError(
        f"unknown model {spec!r}; registered: {', '.join(m.name for m in list_models())}, "
        "or give a path to a .pt2 / TorchScript .pt / .onnx file"
    )


def list_models() -> list[ModelInfo]:
    """Every registered name, demo first, in the sources' order."""
    return [(src.listed or src.info)(n) for src in SOURCES for n in src.names()]


def model_info(name: str) -> ModelInfo:
    """Information on one registered name, an ``.onnx`` file (its graph, not run), or a
    ``timm:``/``hf:`` model (loaded)."""
    src = source_of(name)
    if src.info is None:  # a model file says what it is only when it is loaded
        raise _unknown_model(name)
    return src.info(name)


def is_registered(spec: str) -> bool:
    """Whether ``spec`` is a registry name (``demo``, a zoo name, or an ONNX model of
    ``$LIMECRAFT_MODEL_DIR``), not a model file."""
    return isinstance(spec, str) and any(spec in src.names() for src in SOURCES)


def fit_warning(
    name: str,
    image_shape: tuple[int, ...],
    other_model: str = "upload your own model in the sidebar",
) -> str | None:
    """Why a registered model cannot mean anything for an image of this shape, or None.

    The demo model was trained only on 128x128 synthetic shape pictures; on anything else its
    scores are numbers without meaning, however confident they look. The real ImageNet model
    fits any photo; only a tiny one is worth a word. ``other_model`` says how to choose another
    model where the warning is read (the app's words by default; the CLI says --model)."""
    if name == "demo" and tuple(image_shape[:2]) != (demo.IMAGE_SIZE, demo.IMAGE_SIZE):
        return (
            "The demo model knows only LIMEcraft's synthetic shapes (circle, square, "
            f"triangle, star on {demo.IMAGE_SIZE}×{demo.IMAGE_SIZE} px pictures). On this "
            "image its prediction, its fit and its badges mean nothing: use a model trained "
            f"for images like this one ({other_model})."
        )
    if name == lite.NAME and min(image_shape[:2]) < 32:
        return (
            f"This image is {image_shape[1]}×{image_shape[0]} px; {lite.NAME} sees photos at "
            f"{lite.INPUT_SIZE}×{lite.INPUT_SIZE}, so at this size its prediction rests on a few "
            "blurred pixels."
        )
    return None


# ----------------------------------------------------------------------------- load


def load_module(
    spec: str,
    *,
    arch: str | None = None,
    pretrained: bool = True,
    device: str = "auto",
    **onnx_options: str | None,
) -> torch.nn.Module:
    """Load (once per process) the module behind a name or a file path.

    ``.onnx`` files take ``input_range``, ``outputs`` and ``layout`` (see
    :func:`models.onnx_model.load_onnx`) and ``device`` (which picks onnxruntime's provider);
    the session is cached per path and those options. Other specs refuse those options.
    """
    onnx_opts = onnx_model.options_for(spec, onnx_options)
    src = source_of(spec, arch)  # raises for unknown names
    if src.format is not None:  # a file: cached on its path, its time and its options
        p = Path(spec)
        key: tuple = ("file", str(p.resolve()), p.stat().st_mtime_ns if p.exists() else 0, arch)
        if onnx_opts is not None:
            key += (tuple(sorted(onnx_opts.items())), resolve_device(device).type)
    else:
        key = ("name", spec, pretrained)
    with _LOCK:
        if key not in _MODULES:
            device_ = key[-1] if onnx_opts is not None else device
            _MODULES[key] = src.load(spec, arch, pretrained, device_, onnx_opts)
        return _MODULES[key]


def load_classifier(
    spec: str,
    *,
    input_size: int | None = None,
    normalize: str | None = None,
    labels: Sequence[str] | None = None,
    device: str = "auto",
    precision: str = "auto",
    arch: str | None = None,
    pretrained: bool = True,
    channels_last: bool | None = None,
    input_range: str | None = None,
    outputs: str | None = None,
    layout: str | None = None,
) -> Classifier:
    """A :class:`~limecraft_core.Classifier` for a registry name or a model file.

    Registry names bring their own input size, normalisation and class names; the keyword
    arguments override them. Model files default to the size a ``.pt2`` program was traced at
    (else 224 px), no normalisation, and ``class i`` names.

    ``.onnx`` files run on onnxruntime (CUDA provider where installed, else CPU) in fp32,
    without channels_last whatever ``precision``/``channels_last`` say; their size comes from
    the graph when fixed, their class names from its metadata unless ``labels`` is given, and
    they take ``input_range`` ("0-1" or "0-255"), ``outputs`` ("auto", "logits",
    "probabilities") and ``layout`` ("auto", "NCHW", "NHWC"): see :mod:`models.onnx_model`.

    The model always runs in this process; :func:`serving.load_scorer` picks a Ray Serve
    deployment instead when ``LIMECRAFT_RAY_ADDRESS`` is set.
    """
    if not isinstance(spec, str) or not spec:
        raise LimecraftError("model must be a registry name or a file path")
    src = source_of(spec, arch)
    ask = Ask(
        input_size, normalize, labels, device, precision, arch, pretrained, channels_last,
        input_range, outputs, layout,
    )  # fmt: skip
    if src.classifier is not None:  # a source that builds its own
        clf = src.classifier(spec, ask)
        if clf is not None:
            return clf
    module = load_module(
        spec,
        arch=arch,
        pretrained=pretrained,
        device=device,
        input_range=input_range,
        outputs=outputs,
        layout=layout,
    )
    fit = {"device": device, "precision": precision, "channels_last": channels_last}
    return Classifier(
        gated(module),  # unchanged unless a test holds the model (LIMECRAFT_TEST_GATE)
        **(fit | src.fit(spec, module, ask)),
    )


# ----------------------------------------------------------------------------- a folder's names

MODEL_DIR_ENV = "LIMECRAFT_MODEL_DIR"


def folder_models() -> dict[str, Path]:
    """The ONNX models of ``$LIMECRAFT_MODEL_DIR``, by name: ``NAME.onnx`` is the registry name
    ``NAME`` (its class names from ``NAME.txt`` beside it, one per line, else its metadata).
    This is how a team names its own models for the app's list and for Ray Serve."""
    folder = os.environ.get(MODEL_DIR_ENV, "").strip()
    if not folder or not Path(folder).is_dir():
        return {}
    return {
        f.stem: f
        for f in sorted(Path(folder).glob("*.onnx"))
        if f.stem not in BUILT_IN and f.stem not in zoo.ZOO and f.is_file()
    }


def _folder_labels(path: Path) -> list[str] | None:
    txt = path.with_suffix(".txt")
    if not txt.is_file():
        return None
    names = [ln.strip() for ln in txt.read_text(encoding="utf-8-sig").splitlines() if ln.strip()]
    return names or None


def _folder_info(name: str) -> ModelInfo:
    return dataclasses.replace(onnx_model.SOURCE.info(str(folder_models()[name])), name=name)


def _folder_listed(name: str) -> ModelInfo:
    path = folder_models()[name]
    try:
        return _folder_info(name)
    except LimecraftError as e:  # listed, but says why it cannot run
        return ModelInfo(
            name=name,
            kind="onnx",
            input_size=224,
            num_classes=0,
            normalize="none",
            ready=False,
            reason=str(e),
            description=f"ONNX file {path.name}",
        )


def _folder_classifier(name: str, ask: Ask) -> Classifier:
    path = folder_models()[name]
    return load_classifier(
        str(path),
        input_size=ask.input_size,
        normalize=ask.normalize,
        labels=ask.labels or _folder_labels(path),
        device=ask.device,
        input_range=ask.input_range,
        outputs=ask.outputs,
        layout=ask.layout,
    )


def _folder_load(name: str, arch, pretrained, device: str, onnx) -> torch.nn.Module:
    path = str(folder_models()[name])
    return onnx_model.SOURCE.load(path, arch, pretrained, resolve_device(device).type, None)


#: A registry name for each ONNX model of ``$LIMECRAFT_MODEL_DIR`` (loaded as its file).
_FOLDER = Source(
    "folder",
    matches=lambda spec, arch: arch is None and spec in folder_models(),
    info=_folder_info,
    load=_folder_load,
    fit=lambda *_: {},
    names=lambda: tuple(folder_models()),
    classifier=_folder_classifier,
    listed=_folder_listed,
)


#: The model sources, in the order they are tried (see :class:`~models.source.Source`); each
#: but the folder's is declared beside the code that loads its models.
SOURCES: list[Source] = [
    hub.SOURCE,  # first: "hf:org/name" holds a slash
    onnx_model.SOURCE,
    demo.SOURCE,
    lite.SOURCE,
    zoo.SOURCE,
    _FOLDER,
    custom.SOURCE,
]
