"""The model registry that the engine, the CLI and the app all use.

A *name* is ``demo`` (LIMEcraft's offline demo model), ``efficientnet_lite0`` (a real ImageNet
classifier whose weights come from the package registry, :mod:`models.efficientnet_lite`) or a
torchvision zoo name (``resnet50``, ...). A *path* is a model file (``.pt2``, TorchScript, a state_dict with ``arch``, or ``.onnx``
run by onnxruntime, see :mod:`models.onnx_model`). Loaded models are cached per process (per
path and options) and shared: inference on them is thread-safe.

Everything here runs locally; whether a model runs on a Ray Serve cluster instead is decided
above, in :func:`serving.load_scorer` (``models`` never imports ``serving``).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from limecraft_core import Classifier, LimecraftError
from limecraft_core._validate import check_int

from . import efficientnet_lite as lite
from . import formats, zoo
from .gate import gated

__all__ = [
    "DEFAULT_MODEL",
    "SOURCES",
    "Ask",
    "ModelInfo",
    "Source",
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
#: Set when models run on Ray Serve (read by ``serving.remote``; here only for readiness).
_RAY_ADDRESS_ENV = "LIMECRAFT_RAY_ADDRESS"
_LOCK = threading.Lock()
_MODULES: dict[tuple, torch.nn.Module] = {}


@dataclass(frozen=True)
class ModelInfo:
    """What the registry knows about a name, without loading the model.

    Attributes
    ----------
    name : str
    kind : {"demo", "real", "zoo", "onnx", "timm", "hf"}
    input_size : int
    num_classes : int
    normalize : {"none", "imagenet", "half"}
    ready : bool, whether it can run now (weights present)
    reason : str, why not, and what to do ("" when ready)
    description : str
    """

    name: str
    kind: str
    input_size: int
    num_classes: int
    normalize: str
    ready: bool
    reason: str
    description: str


def _demo_info() -> ModelInfo:
    from . import demo

    ready = demo.WEIGHTS_PATH.exists()
    return ModelInfo(
        name="demo",
        kind="demo",
        input_size=demo.IMAGE_SIZE,
        num_classes=len(demo.CLASS_NAMES),
        normalize="none",
        ready=ready,
        reason="" if ready else f"{demo.WEIGHTS_PATH} is missing; run python -m models.train_demo",
        description="LIMEcraft's shapes classifier with a planted shortcut (offline)",
    )


def _lite_info() -> ModelInfo:
    reason = lite.missing_packages()
    return ModelInfo(
        name=lite.NAME,
        kind="real",
        input_size=lite.INPUT_SIZE,
        num_classes=1000,
        normalize=lite.NORMALIZE,
        ready=not reason,
        reason=reason,
        description="EfficientNet-Lite0, ImageNet-1k weights (offline, from the package registry)",
    )


def _zoo_info(name: str) -> ModelInfo:
    spec = zoo.ZOO[name]
    cached = zoo.is_cached(name)
    if cached:
        reason = ""
    elif _served_by_ray():  # the Ray Serve replicas hold the weights
        cached, reason = True, ""
    else:
        reason = (
            f"weights not in the cache: place {spec.filename} in {zoo.weights_path(name).parent}"
            + ("" if zoo.download_timeout() <= 0 else " (a download will be tried first)")
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


def _served_by_ray() -> bool:
    """Whether ``LIMECRAFT_RAY_ADDRESS`` is set, so registry names run on Ray Serve."""
    return bool(os.environ.get(_RAY_ADDRESS_ENV, "").strip())


def list_models() -> list[ModelInfo]:
    """Every registered name, demo first, in the sources' order."""
    return [(src.listed or src.info)(n) for src in SOURCES for n in src.names()]


def _named_info(name: str, path: Path) -> ModelInfo:
    try:
        return dataclasses.replace(_onnx_info(str(path)), name=name)
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


def _onnx_info(path: str) -> ModelInfo:
    """What an ONNX file's graph says (read without a session; LimecraftError if unusable)."""
    from .onnx_model import inspect_onnx

    g = inspect_onnx(path)
    size = f"{g.input_size[0]}x{g.input_size[1]}" if g.input_size else "any size"
    batch = "dynamic batch" if g.batch is None else f"fixed batch {g.batch}, batches are split"
    outs = {"softmax": ", softmax outputs", "log_softmax": ", log-softmax outputs"}
    return ModelInfo(
        name=Path(path).name,
        kind="onnx",
        input_size=g.input_size[0] if g.input_size else 224,
        num_classes=g.num_classes or 0,
        normalize="none",
        ready=True,
        reason="",
        description=f"ONNX opset {g.opset}, {g.layout}, {size}, {batch}"
        + outs.get(g.softmax_output, "")
        + (", labels in metadata" if g.labels else ""),
    )


_HUB: dict[tuple, object] = {}


def is_hub(spec: str) -> bool:
    """Whether ``spec`` names a timm model (``timm:<name>``) or a Hugging Face image classifier
    (``hf:<repo id or folder>``)."""
    from . import hub

    return isinstance(spec, str) and hub.is_hub_spec(spec)


def hub_model(spec: str, *, pretrained: bool = True):
    """The loaded :class:`models.hub.HubModel` for a ``timm:`` or ``hf:`` spec (cached)."""
    from . import hub

    key = ("hub", spec, pretrained)
    with _LOCK:
        found = _HUB.get(key)
    if found is None:
        found = hub.load_hub(spec, pretrained=pretrained)  # outside the lock: it may download
        with _LOCK:
            found = _HUB.setdefault(key, found)
    return found


def _hub_info(spec: str) -> ModelInfo:
    hm = hub_model(spec)
    return ModelInfo(
        name=spec,
        kind=hm.kind,
        input_size=hm.input_size[0],
        num_classes=hm.num_classes,
        normalize=hm.normalize,
        ready=True,
        reason="",
        description=hm.description,
    )


def model_info(name: str) -> ModelInfo:
    """Information on one registered name, an ``.onnx`` file (its graph, not run), or a
    ``timm:``/``hf:`` model (loaded)."""
    return source_of(name).info(name)


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
    if name == "demo":
        from . import demo

        if tuple(image_shape[:2]) != (demo.IMAGE_SIZE, demo.IMAGE_SIZE):
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


def is_registered(spec: str) -> bool:
    """Whether ``spec`` is a registry name (``demo``, a zoo name, or an ONNX model of
    ``$LIMECRAFT_MODEL_DIR``), not a model file."""
    return isinstance(spec, str) and any(spec in src.names() for src in SOURCES)


def _is_onnx(spec: str) -> bool:
    return isinstance(spec, str) and Path(spec).suffix.lower() == ".onnx"


#: load_module/load_classifier keywords that only ONNX files take (see models.onnx_model).
_ONNX_DEFAULTS = {"input_range": "0-1", "outputs": "auto", "layout": "auto"}


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
    onnx_opts = _onnx_options(spec, onnx_options)
    src = source_of(spec, arch)  # raises for unknown names
    if src.format is not None:  # a file: cached on its path, its time and its options
        p = Path(spec)
        key: tuple = ("file", str(p.resolve()), p.stat().st_mtime_ns if p.exists() else 0, arch)
        if onnx_opts is not None:
            from limecraft_core import resolve_device

            key += (tuple(sorted(onnx_opts.items())), resolve_device(device).type)
    else:
        key = ("name", spec, pretrained)
    with _LOCK:
        if key not in _MODULES:
            device_ = key[-1] if onnx_opts is not None else device
            _MODULES[key] = src.load(spec, arch, pretrained, device_, onnx_opts)
        return _MODULES[key]


def _onnx_options(spec: str, given: dict[str, str | None]) -> dict[str, str] | None:
    """The ONNX options with defaults filled in for an .onnx spec; None for any other spec."""
    unknown = set(given) - set(_ONNX_DEFAULTS)
    if unknown:
        raise TypeError(f"unexpected keyword arguments: {', '.join(sorted(unknown))}")
    if not _is_onnx(spec):
        set_ = [k for k, v in given.items() if v is not None and v != _ONNX_DEFAULTS[k]]
        if set_:
            raise LimecraftError(f"{', '.join(set_)} applies to .onnx model files only")
        return None
    return {k: given.get(k) or v for k, v in _ONNX_DEFAULTS.items()}


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


def _lite_onnx(
    input_size: int | None,
    normalize: str | None,
    labels: Sequence[str] | None,
    arch: str | None,
    *onnx_options: str | None,
) -> Classifier:
    """EfficientNet-Lite0 on a CPU in fp32: its module exported once to ONNX Runtime."""
    if arch is not None:
        raise LimecraftError(
            f"arch ({arch!r}) applies to state_dict model files only; {lite.NAME} is a registry name"
        )
    # refuses the options only .onnx files take
    _onnx_options(lite.NAME, dict(zip(_ONNX_DEFAULTS, onnx_options, strict=True)))
    net = load_module(lite.NAME)
    key = ("name", lite.NAME, "onnx")
    with _LOCK:
        if key not in _MODULES:
            _MODULES[key] = lite.exported(net)
        module = _MODULES[key]
    clf = Classifier(
        gated(module),
        input_size=input_size or lite.INPUT_SIZE,
        normalize=normalize or lite.NORMALIZE,
        labels=labels or lite.imagenet_names(),
        device="cpu",
        precision="fp32",
        channels_last=False,
        name=lite.NAME,
    )
    clf.precision_reason = lite.ONNX_REASON
    return clf


def _onnx_fit(
    module: torch.nn.Module,
    input_size: int | None,
    normalize: str | None,
    labels: Sequence[str] | None,
) -> tuple[int | tuple[int, int], str, Sequence[str] | None]:
    """Size, normalisation and class names for an ONNX module, checked against its graph."""
    fixed = module.graph.input_size
    if fixed is not None and input_size is not None and (input_size, input_size) != fixed:
        raise LimecraftError(
            f"the ONNX model {module.name!r} takes {fixed[0]}x{fixed[1]} inputs; an input size "
            f"of {input_size} does not fit it (leave the input size unset)"
        )
    norm = normalize or "none"
    if norm != "none" and module.input_range == "0-255":
        raise LimecraftError(
            f"normalize={norm!r} with input range 0-255: normalised values have no pixel range; "
            "use one or the other"
        )
    return fixed or input_size or 224, norm, labels if labels is not None else module.labels


# ----------------------------------------------------------------------------- the sources


class Ask(NamedTuple):
    """What a caller asked :func:`load_classifier` for (None: the source's own default)."""

    input_size: int | None
    normalize: str | None
    labels: Sequence[str] | None
    device: str
    precision: str
    arch: str | None
    pretrained: bool
    channels_last: bool | None
    input_range: str | None
    outputs: str | None
    layout: str | None


@dataclass(frozen=True)
class Source:
    """One kind of model the registry serves: the plug point for a model format.

    :data:`SOURCES` is tried in order, and the first source whose ``matches`` holds serves the
    spec: :func:`model_info`, :func:`load_module`, :func:`load_classifier`,
    :func:`list_models` and :func:`is_registered` all read it. A file source names its
    :class:`models.formats.FileFormat`, the table that the app's model uploader and the CLI's
    help read. Adding a model source is one more entry here (and, for a new kind of file, one
    in ``models.formats``): docs/architecture.md.

    Attributes
    ----------
    kind : str, what it is ("demo", "onnx", "file", ...)
    matches : (spec, arch) -> bool, whether it serves this spec
    info : spec -> ModelInfo, without running the model (LimecraftError when it cannot say)
    load : (spec, arch, pretrained, device, onnx options or None) -> torch.nn.Module, built
        anew (:func:`load_module` caches it)
    fit : (spec, module, Ask) -> the Classifier's keywords it decides (input_size, normalize,
        labels, name; precision and channels_last where it fixes them)
    names : () -> the registry names it lists (none for files)
    format : the model files it reads (:mod:`models.formats`; None for names)
    classifier : optional (spec, Ask) -> Classifier or None, for a source that builds its own
        classifier (None: the default, ``load`` then ``fit``)
    listed : optional name -> ModelInfo for :func:`list_models` (default ``info``), e.g. one
        that lists a broken file with its reason instead of raising
    """

    kind: str
    matches: Callable[[str, str | None], bool]
    info: Callable[[str], ModelInfo]
    load: Callable[[str, str | None, bool, str, dict | None], torch.nn.Module]
    fit: Callable[[str, torch.nn.Module, Ask], dict[str, Any]]
    names: Callable[[], Iterable[str]] = tuple
    format: formats.FileFormat | None = None
    classifier: Callable[[str, Ask], Classifier | None] | None = None
    listed: Callable[[str], ModelInfo] | None = None


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


# the built-in sources' parts


def _not_a_module(spec: str, *_: Any) -> torch.nn.Module:
    raise LimecraftError(f"{spec!r} is loaded with its classifier (load_classifier), not alone")


def _hub_classifier(spec: str, ask: Ask) -> Classifier:
    if ask.normalize not in (None, "none"):
        raise LimecraftError(
            "timm: and hf: models apply their own normalisation (from their config); "
            "leave --normalize unset"
        )
    return hub_model(spec, pretrained=ask.pretrained).classifier(
        input_size=ask.input_size,
        labels=ask.labels,
        device=ask.device,
        precision=ask.precision,
        channels_last=ask.channels_last,
    )


def _onnx_load(spec: str, arch, pretrained, device: str, onnx: dict | None) -> torch.nn.Module:
    from .onnx_model import load_onnx

    return load_onnx(spec, device=device, **(onnx if onnx is not None else _ONNX_DEFAULTS))


def _onnx_fit_of(spec: str, module: torch.nn.Module, ask: Ask) -> dict[str, Any]:
    size, norm, names = _onnx_fit(module, ask.input_size, ask.normalize, ask.labels)
    name = Path(spec).name
    return dict(input_size=size, normalize=norm, labels=names, name=name, **_FP32)


_FP32 = {"precision": "fp32", "channels_last": False}  # onnxruntime runs fp32, NCHW as given


def _is_model_file(spec: str, arch: str | None) -> bool:
    return (
        arch is not None
        or any(sep in spec for sep in ("/", "\\"))
        or Path(spec).suffix.lower() in formats.TORCH.suffixes
    )


def _file_info(spec: str) -> ModelInfo:
    raise _unknown_model(spec)  # a model file says what it is only when it is loaded


def _file_load(spec: str, arch: str | None, *_: Any) -> torch.nn.Module:
    from .custom import load_model_file

    return load_model_file(spec, arch=arch)


def _file_fit(spec: str, module: torch.nn.Module, ask: Ask) -> dict[str, Any]:
    fixed = getattr(module, "limecraft_input_size", None)
    size = ask.input_size
    if size is not None:  # out of range: the same message as for any model
        check_int("input_size", size, 8, 4096)
    if fixed is not None and size is not None and (size, size) != fixed:
        raise LimecraftError(
            f"model file {Path(spec).name!r} was exported for {fixed[0]}x{fixed[1]} inputs, "
            f"so input size {size} does not fit it: leave the input size out (it is read "
            "from the program), or export the model again with a dynamic height and width"
        )
    return dict(
        input_size=size or fixed or 224,
        normalize=ask.normalize or "none",
        labels=ask.labels,
        name=Path(spec).name,
    )


def _demo_load(*_: Any) -> torch.nn.Module:
    from . import demo

    try:
        return demo.load_demo_model()
    except FileNotFoundError as e:
        raise LimecraftError(str(e)) from None


def _demo_fit(spec: str, module: torch.nn.Module, ask: Ask) -> dict[str, Any]:
    from . import demo

    return dict(
        input_size=ask.input_size or demo.IMAGE_SIZE,
        normalize=ask.normalize or "none",
        labels=ask.labels or demo.CLASS_NAMES,
        name="demo",
    )


def _lite_load(spec: str, arch, pretrained: bool, *_: Any) -> torch.nn.Module:
    if not pretrained:
        raise LimecraftError(f"{lite.NAME} comes only with its ImageNet weights")
    return lite.build()


def _lite_fit(spec: str, module: torch.nn.Module, ask: Ask) -> dict[str, Any]:
    return dict(
        input_size=ask.input_size or lite.INPUT_SIZE,
        normalize=ask.normalize or lite.NORMALIZE,
        labels=ask.labels or lite.imagenet_names(),
        name=lite.NAME,
    )


def _lite_classifier(spec: str, ask: Ask) -> Classifier | None:
    if lite.runtime_for(ask.device, ask.precision) != "onnx":
        return None  # torch: the default
    return _lite_onnx(
        ask.input_size, ask.normalize, ask.labels, ask.arch, ask.input_range, ask.outputs,
        ask.layout,
    )  # fmt: skip


def _zoo_fit(spec: str, module: torch.nn.Module, ask: Ask) -> dict[str, Any]:
    zs = zoo.ZOO[spec]
    return dict(
        input_size=ask.input_size or zs.input_size,
        normalize=ask.normalize or "imagenet",
        labels=ask.labels or zs.categories,
        name=spec,
    )


def _folder_classifier(spec: str, ask: Ask) -> Classifier:
    path = folder_models()[spec]
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


def _folder_load(spec: str, arch, pretrained, device: str, onnx) -> torch.nn.Module:
    from limecraft_core import resolve_device

    return _onnx_load(
        str(folder_models()[spec]), arch, pretrained, resolve_device(device).type, None
    )


#: The model sources, in the order they are tried (see :class:`Source`).
SOURCES: list[Source] = [
    Source(
        "hub",
        matches=lambda spec, arch: is_hub(spec),  # first: "hf:org/name" holds a slash
        info=_hub_info,
        load=lambda spec, arch, pretrained, *_: hub_model(spec, pretrained=pretrained).module,
        fit=lambda *_: {},
        classifier=_hub_classifier,
    ),
    Source(
        "onnx",
        matches=lambda spec, arch: _is_onnx(spec),
        info=_onnx_info,
        load=_onnx_load,
        fit=_onnx_fit_of,
        format=formats.ONNX,
    ),
    Source(
        "demo",
        matches=lambda spec, arch: spec == "demo" and arch is None,
        info=lambda spec: _demo_info(),
        load=_demo_load,
        fit=_demo_fit,
        names=lambda: ("demo",),
    ),
    Source(
        "real",
        matches=lambda spec, arch: spec == lite.NAME,
        info=lambda spec: _lite_info(),
        load=_lite_load,
        fit=_lite_fit,
        names=lambda: (lite.NAME,),
        classifier=_lite_classifier,
    ),
    Source(
        "zoo",
        matches=lambda spec, arch: spec in zoo.ZOO and arch is None,
        info=_zoo_info,
        load=lambda spec, arch, pretrained, *_: zoo.build(spec, pretrained=pretrained),
        fit=_zoo_fit,
        names=lambda: tuple(zoo.ZOO),
    ),
    Source(
        "folder",
        matches=lambda spec, arch: arch is None and spec in folder_models(),
        info=lambda spec: dataclasses.replace(_onnx_info(str(folder_models()[spec])), name=spec),
        load=_folder_load,
        fit=lambda *_: {},
        names=lambda: tuple(folder_models()),
        classifier=_folder_classifier,
        listed=lambda spec: _named_info(spec, folder_models()[spec]),
    ),
    Source(
        "file",
        matches=_is_model_file,
        info=_file_info,
        load=_file_load,
        fit=_file_fit,
        format=formats.TORCH,
    ),
]
