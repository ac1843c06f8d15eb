"""What a model source is: the record each backend declares beside its code for the registry.

A *source* is one kind of model the registry serves (the demo model, the torchvision zoo, ONNX
files, torch model files, timm and Hugging Face models, ...). Each backend module declares its
``SOURCE``, a :class:`Source`, next to the code that loads its models, as timm's model families
register themselves beside their code; :data:`models.registry.SOURCES` lists them in the order
they are tried and keeps the lookup and the loading. This module imports no backend.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from . import formats

if TYPE_CHECKING:
    import torch

    from limecraft_core import Classifier

__all__ = ["RAY_ADDRESS_ENV", "Ask", "ModelInfo", "Source", "served_by_ray"]

#: Serve's HTTP address when registry names run on Ray Serve (``serving`` reads it to choose
#: where a model runs; a source reads it for readiness: the replicas hold the weights).
RAY_ADDRESS_ENV = "LIMECRAFT_RAY_ADDRESS"


def served_by_ray() -> bool:
    """Whether ``LIMECRAFT_RAY_ADDRESS`` is set, so registry names run on Ray Serve."""
    return bool(os.environ.get(RAY_ADDRESS_ENV, "").strip())


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


class Ask(NamedTuple):
    """What a caller asked :func:`models.registry.load_classifier` for (None: the source's own
    default)."""

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

    :data:`models.registry.SOURCES` is tried in order, and the first source whose ``matches``
    holds serves the spec: ``model_info``, ``load_module``, ``load_classifier``,
    ``list_models`` and ``is_registered`` all read it. A file source names its
    :class:`models.formats.FileFormat`, the table that the app's model uploader and the CLI's
    help read. Adding a model source is one more record beside its backend and one more entry
    in that list (and, for a new kind of file, one in ``models.formats``):
    docs/architecture.md.

    Attributes
    ----------
    kind : str, what it is ("demo", "onnx", "file", ...)
    matches : (spec, arch) -> bool, whether it serves this spec
    info : spec -> ModelInfo, without running the model (LimecraftError when it cannot say), or
        None for models that say what they are only when loaded (``model_info`` then calls
        the spec unknown)
    load : (spec, arch, pretrained, device, onnx options or None) -> torch.nn.Module, built
        anew (``load_module`` caches it)
    fit : (spec, module, Ask) -> the Classifier's keywords it decides (input_size, normalize,
        labels, name; precision and channels_last where it fixes them)
    names : () -> the registry names it lists (none for files)
    format : the model files it reads (:mod:`models.formats`; None for names)
    classifier : optional (spec, Ask) -> Classifier or None, for a source that builds its own
        classifier (None: the default, ``load`` then ``fit``)
    listed : optional name -> ModelInfo for ``list_models`` (default ``info``), e.g. one
        that lists a broken file with its reason instead of raising
    """

    kind: str
    matches: Callable[[str, str | None], bool]
    info: Callable[[str], ModelInfo] | None
    load: Callable[[str, str | None, bool, str, dict | None], torch.nn.Module]
    fit: Callable[[str, torch.nn.Module, Ask], dict[str, Any]]
    names: Callable[[], Iterable[str]] = tuple
    format: formats.FileFormat | None = None
    classifier: Callable[[str, Ask], Classifier | None] | None = None
    listed: Callable[[str], ModelInfo] | None = None
