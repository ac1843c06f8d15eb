"""The user's own model files, loaded without ever unpickling arbitrary objects.

- ``.pt2``: a ``torch.export`` program. torch's own loader falls back to full unpickling for some
  payloads; here every pickle inside the archive is read with ``weights_only=True`` or refused.
- TorchScript (``torch.jit.save``): TorchScript's own restricted format, which holds no Python
  objects.
- A state_dict (``torch.save(model.state_dict())``) with a torchvision architecture name, read
  with ``torch.load(weights_only=True)``.

A whole pickled model (``torch.save(model)``) is refused: unpickling it could run any code.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
import threading
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from limecraft_core import LimecraftError
from limecraft_core._validate import check_int

from . import formats
from .source import Ask, Source

__all__ = ["MAX_MODEL_BYTES", "SOURCE", "load_model_file"]

#: Largest model file accepted (``LIMECRAFT_MAX_MODEL_BYTES`` overrides), 2 GiB by default.
MAX_MODEL_BYTES = int(os.environ.get("LIMECRAFT_MAX_MODEL_BYTES", str(2 << 30)))
_EXPORT_LOCK = threading.Lock()


class _Refused(Exception):
    pass


def _refuse_pickle(*_a: Any, **_k: Any) -> Any:
    raise _Refused("the file holds pickled Python objects, which LIMEcraft never unpickles")


class _SafePickle:
    """Stands in for the ``pickle`` module inside torch's .pt2 loader: loads nothing."""

    loads = staticmethod(_refuse_pickle)
    load = staticmethod(_refuse_pickle)

    def __getattr__(self, name: str) -> Any:
        return getattr(pickle, name)


def _safe_torch_load(f: Any, *args: Any, **kwargs: Any) -> Any:
    kwargs["weights_only"] = True
    kwargs.setdefault("map_location", "cpu")
    return _ORIG_TORCH_LOAD(f, *args, **kwargs)


_ORIG_TORCH_LOAD = torch.load


@contextlib.contextmanager
def _quiet_torch_export() -> Iterator[None]:
    """torch.export logs a traceback when a file cannot be read; the error we raise says it all."""
    log = logging.getLogger("torch.export")
    saved = log.disabled
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = saved


def _check_file(path: Path) -> None:
    if not path.exists():
        raise LimecraftError(f"model file {str(path)!r} does not exist")
    if not path.is_file():
        raise LimecraftError(f"model file {str(path)!r} is not a file")
    size = path.stat().st_size
    if size == 0:
        raise LimecraftError(f"model file {str(path)!r} is empty")
    if size > MAX_MODEL_BYTES:
        raise LimecraftError(
            f"model file {str(path)!r} is {size / 2**20:.0f} MiB, over the limit of "
            f"{MAX_MODEL_BYTES / 2**20:.0f} MiB (set LIMECRAFT_MAX_MODEL_BYTES to raise it)"
        )


def _zip_names(path: Path) -> list[str]:
    try:
        with zipfile.ZipFile(path) as z:
            return z.namelist()
    except (zipfile.BadZipFile, OSError):
        return []


def _load_export(path: Path) -> torch.nn.Module:
    """Load a torch.export program with every inner pickle restricted to tensors."""
    from torch.export.pt2_archive import _package

    if not zipfile.is_zipfile(path):
        raise LimecraftError(
            f"model file {str(path)!r} is not a torch.export program (a .pt2 file is a zip "
            "archive, and this is not one)"
        )
    with _EXPORT_LOCK, _quiet_torch_export():
        saved_pickle, saved_load, saved_c = _package.pickle, torch.load, torch._C._pickle_load_obj
        _package.pickle = _SafePickle()  # type: ignore[assignment]
        torch.load = _safe_torch_load  # type: ignore[assignment]
        torch._C._pickle_load_obj = _refuse_pickle  # type: ignore[assignment]
        try:
            with warnings.catch_warnings():  # torch's warnings about the file are not ours to raise
                warnings.simplefilter("ignore")
                ep = torch.export.load(str(path))
        except _Refused as e:
            raise LimecraftError(f"model file {str(path)!r} was refused: {e}") from None
        except pickle.UnpicklingError as e:
            raise LimecraftError(
                f"model file {str(path)!r} was refused: it holds objects other than tensors ({e})"
            ) from None
        except Exception as e:
            raise LimecraftError(
                f"model file {str(path)!r} is not a torch.export program that this torch can read "
                f"({type(e).__name__}: {e})"
            ) from None
        finally:
            _package.pickle = saved_pickle
            torch.load = saved_load  # type: ignore[assignment]
            torch._C._pickle_load_obj = saved_c  # type: ignore[assignment]
    shape = _export_input_shape(ep)
    batch = shape[0] if shape and isinstance(shape[0], int) else None
    module = _StaticBatch(ep.module(), batch) if batch else ep.module()
    if shape and len(shape) == 4 and all(isinstance(v, int) for v in shape[2:]):
        # The program was traced at a fixed size: the registry feeds it that size.
        module.limecraft_input_size = (int(shape[2]), int(shape[3]))
    return module


def _export_input_shape(ep: Any) -> tuple | None:
    """Shape of the program's first user input; ints where static, None where symbolic."""
    for spec in ep.graph_signature.input_specs:
        if spec.kind.name == "USER_INPUT":
            node = next(n for n in ep.graph.nodes if n.name == spec.arg.name)
            val = node.meta.get("val")
            if val is None:
                return None
            return tuple(int(d) if isinstance(d, int) else None for d in val.shape)
    return None


class _StaticBatch(torch.nn.Module):
    """Feeds a model traced with a fixed batch size in chunks of that size."""

    def __init__(self, inner: Callable[[torch.Tensor], torch.Tensor], batch: int) -> None:
        super().__init__()
        self.inner = inner
        self.batch = batch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = []
        for i in range(0, x.shape[0], self.batch):
            chunk = x[i : i + self.batch]
            n = chunk.shape[0]
            if n < self.batch:  # pad the last chunk
                chunk = torch.cat([chunk, chunk[-1:].expand(self.batch - n, *chunk.shape[1:])])
            outs.append(self.inner(chunk)[:n])
        return torch.cat(outs)


def _num_classes(state: dict[str, torch.Tensor]) -> int:
    """The output size: rows of the last 2-D weight in the state_dict (the classifier)."""
    last = [v for k, v in state.items() if k.endswith("weight") and v.ndim == 2]
    if not last:
        raise LimecraftError("the state_dict has no linear classifier weight; is it a classifier?")
    return int(last[-1].shape[0])


def _load_state_dict(path: Path, arch: str) -> torch.nn.Module:
    from models.zoo import ZOO, torchvision_models

    if arch not in ZOO:
        raise LimecraftError(f"unknown architecture {arch!r}; choose one of {', '.join(ZOO)}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise LimecraftError(
            f"model file {str(path)!r} was refused: it holds Python objects other than tensors, "
            f"and unpickling those could run code ({str(e).splitlines()[0]})"
        ) from None
    except Exception as e:
        raise LimecraftError(
            f"model file {str(path)!r} could not be read as a state_dict ({type(e).__name__}: {e})"
        ) from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise LimecraftError(f"model file {str(path)!r} is not a state_dict (a dict of tensors)")
    spec = ZOO[arch]
    kwargs = dict(spec.builder_kwargs)
    kwargs["num_classes"] = _num_classes(state)
    model = getattr(torchvision_models(), arch)(weights=None, **kwargs)
    try:
        model.load_state_dict(state)
    except RuntimeError:
        raise LimecraftError(_misfit(state, model.state_dict(), arch)) from None
    return model.eval()


def _shortened(keys: list[str], most: int = 3) -> str:
    shown = ", ".join(keys[:most])
    return shown + (f", … ({len(keys) - most} more)" if len(keys) > most else "")


def _misfit(state: dict, own: dict, arch: str) -> str:
    """Why a state_dict does not fit ``arch``: its missing and unexpected keys and the tensors
    of another shape, each list shortened."""
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [
        f"{k} {'x'.join(map(str, state[k].shape))} here, "
        f"{'x'.join(map(str, own[k].shape))} in {arch}"
        for k in own
        if k in state and tuple(state[k].shape) != tuple(own[k].shape)
    ]
    why = []
    if missing:
        why.append(f"{len(missing)} of {arch}'s keys are missing ({_shortened(missing)})")
    if unexpected:
        why.append(f"{len(unexpected)} keys are not {arch}'s ({_shortened(unexpected)})")
    if shapes:
        why.append(f"{len(shapes)} tensors have another shape ({_shortened(shapes, 2)})")
    return (
        f"the state_dict does not fit {arch}: "
        + "; ".join(why or ["its tensors do not load"])
        + ". Choose the architecture it was saved from"
    )


def load_model_file(path: str | Path, *, arch: str | None = None) -> torch.nn.Module:
    """Load a model file safely.

    Parameters
    ----------
    path : ``.pt2`` (torch.export), TorchScript, or a state_dict file (with ``arch``)
    arch : str, optional; a torchvision architecture name for a state_dict

    Returns
    -------
    torch.nn.Module (or a TorchScript module) mapping (N, 3, H, W) to scores.

    Raises
    ------
    LimecraftError
        For a missing, empty, oversized, unreadable or unsafe file.
    """
    p = Path(path)
    _check_file(p)
    if arch is not None:
        return _load_state_dict(p, arch)
    names = _zip_names(p)
    if p.suffix.lower() == ".pt2" or any(n.endswith("archive_format") for n in names):
        return _load_export(p)
    if any("/code/" in n or n.startswith("code/") for n in names) or any(
        n.endswith("constants.pkl") for n in names
    ):
        try:
            return torch.jit.load(io.BytesIO(p.read_bytes()), map_location="cpu").eval()
        except Exception as e:
            raise LimecraftError(
                f"model file {str(path)!r} is not a TorchScript model this torch can read ({e})"
            ) from None
    raise LimecraftError(
        f"model file {str(path)!r} is neither a torch.export (.pt2) nor a TorchScript program. "
        "A whole pickled model (torch.save(model)) is refused because unpickling can run code: "
        "export it with torch.export.save or torch.jit.save, or save its state_dict and name its "
        "torchvision architecture"
    )


def file_format(path: str | Path, *, arch: str | None = None) -> str:
    """What kind of model file this is, in words: ``torch.export (.pt2)``, ``TorchScript`` or
    ``state_dict (resnet18)``. The file is not loaded; call after :func:`load_model_file`."""
    if arch is not None:
        return f"state_dict ({arch})"
    p = Path(path)
    names = _zip_names(p)
    if p.suffix.lower() == ".pt2" or any(n.endswith("archive_format") for n in names):
        return "torch.export (.pt2)"
    return "TorchScript"


# --- the registry's source ------------------------------------------------------------------


def _is_model_file(spec: str, arch: str | None) -> bool:
    return (
        arch is not None
        or any(sep in spec for sep in ("/", "\\"))
        or Path(spec).suffix.lower() in formats.TORCH.suffixes
    )


def _fit(spec: str, module: torch.nn.Module, ask: Ask) -> dict[str, Any]:
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


#: torch model files (``.pt2``, TorchScript, a state_dict with its ``arch``), and any path; a
#: file says what it is only when it is loaded (no ``info``).
SOURCE = Source(
    "file",
    matches=_is_model_file,
    info=None,
    load=lambda spec, arch, *_: load_model_file(spec, arch=arch),
    fit=_fit,
    format=formats.TORCH,
)
