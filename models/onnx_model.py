"""ONNX model files, run by onnxruntime behind the same Module interface as torch models.

Loading reads the file's protobuf (``onnx``) and hands it to ``onnxruntime``: no Python code
from the file ever runs, and nothing is unpickled. What LIMEcraft needs is read from the graph:

- **Layout.** A rank-4 input whose 2nd dim is 3 (or 1) is NCHW (PyTorch exports); one whose
  last dim is 3 (or 1) and whose 2nd is not is NHWC (Keras, TensorFlow). Undecidable (every dim
  symbolic) is taken as NCHW; ``layout=`` overrides. A 1-channel input gets the luma of RGB.
- **Size and batch.** A fixed H x W is the input size. A symbolic batch dim is used as is; a
  fixed batch (typically 1) is served by splitting each batch into chunks of that size.
- **Outputs.** ``outputs="auto"`` calls them probabilities when the graph's output comes from a
  ``Softmax`` node (through Identity/Reshape/Flatten/Squeeze/Cast), or when a probe batch gives
  non-negative rows that sum to 1 within 1e-4. A probability graph's module returns ``log(p)``
  (p clamped at 1e-30), so the engine's softmax gives back p exactly and ``output_space=
  "probability"`` never softmaxes twice; its ``raw`` output space is then log-probabilities.
  A ``LogSoftmax`` output is already log p and is treated as logits.
- **Labels.** From metadata (``metadata_props``), the first present of the keys
  :data:`LABEL_KEYS`: a JSON list of names, a JSON object ``{"0": name, ...}``, else names
  separated by newlines (or, failing that, commas).

Inputs are float32 in [0, 1] (``input_range="0-1"``) or 0-255 (``"0-255"``); normalisation,
when asked for, is done by the :class:`~limecraft_core.Classifier` before the module runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from limecraft_core import LimecraftError

from . import formats
from .source import Ask, ModelInfo, Source

__all__ = [
    "INPUT_RANGES",
    "LABEL_KEYS",
    "LAYOUTS",
    "OPTIONS",
    "OUTPUTS",
    "SOURCE",
    "OnnxGraph",
    "OnnxModule",
    "inspect_onnx",
    "load_onnx",
    "options_for",
    "providers_for",
]

INPUT_RANGES = ("0-1", "0-255")
OUTPUTS = ("auto", "logits", "probabilities")
LAYOUTS = ("auto", "NCHW", "NHWC")
#: metadata_props keys read for class names, in this order.
LABEL_KEYS = ("labels", "classes", "class_names")
_EPS = 1e-30
_PASS_THROUGH = {"Identity", "Reshape", "Flatten", "Squeeze", "Cast"}
_LUMA = (0.299, 0.587, 0.114)  # as torchvision's Grayscale


@dataclass(frozen=True)
class OnnxGraph:
    """What the graph says about its input and output (read without a session).

    Attributes
    ----------
    input_name : str
    layout : {"NCHW", "NHWC"}
    channels : {1, 3}
    batch : int or None, a fixed batch size, None when symbolic
    input_size : (h, w) or None when symbolic
    opset : int, the default-domain opset
    num_classes : int or None, the output's last dim when fixed
    softmax_output : {"softmax", "log_softmax", ""}, the node the output comes from
    labels : tuple of str or None, from metadata
    layout_assumed : bool, True when no dim decided the layout
    """

    input_name: str
    layout: str
    channels: int
    batch: int | None
    input_size: tuple[int, int] | None
    opset: int
    num_classes: int | None
    softmax_output: str
    labels: tuple[str, ...] | None
    layout_assumed: bool = False


def _fail(path: Path, why: str) -> LimecraftError:
    return LimecraftError(f"model file {str(path)!r} {why}")


def _read_model(path: Path) -> Any:
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise _fail(path, f"is not an ONNX model (it does not parse: {e})") from None
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.node:
        raise _fail(path, "is not an ONNX model (no graph in it)")
    return model


def _tensors(graph: Any):
    """Every tensor a graph holds: its initializers and its nodes' tensor attributes,
    subgraphs included."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for g in attr.graphs:
                yield from _tensors(g)


def external_data_files(model: Any) -> tuple[str, ...]:
    """The files, beside the model, that hold the weights of an ONNX graph saved with its
    weights apart (``torch.onnx.export(..., dynamo=True)`` writes ``m.onnx`` and
    ``m.onnx.data``), as the graph names them; () for a graph that holds its own."""
    import onnx

    names = []
    for t in _tensors(model.graph):
        if t.data_location == onnx.TensorProto.EXTERNAL:
            names += [e.value for e in t.external_data if e.key == "location"]
    return tuple(dict.fromkeys(names))


def weights_files(path: str | Path) -> tuple[str, ...]:
    """:func:`external_data_files` of the ONNX file at ``path``; () where it does not parse
    (loading it says why)."""
    try:
        return external_data_files(_read_model(Path(path)))
    except LimecraftError:
        return ()


def _check_external_data(path: Path, model: Any) -> None:
    """The weights files a graph names are plain names in its own folder, and are there."""
    for name in external_data_files(model):
        if Path(name).name != name or name.startswith("."):
            raise _fail(
                path,
                f"keeps its weights in {name!r}, outside its own folder; LIMEcraft reads weights "
                "only from a file beside the model",
            )
        if not (path.parent / name).is_file():
            raise _fail(
                path,
                f"keeps its weights in a separate file, {name!r}, which is not beside it: put "
                f"that file in the same folder (in the app, choose it under 'Its weights "
                f"file' and press Use this model again), or save the model as one file with "
                f"onnx.save(onnx.load('{path.name}'), 'one_file.onnx')",
            )


def _opset(path: Path, model: Any) -> int:
    import onnx

    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    opset = max(versions) if versions else 0
    top = onnx.defs.onnx_opset_version()
    if opset > top:
        raise _fail(
            path,
            f"uses ONNX opset {opset}; this installation supports opsets up to {top}: re-export "
            f"the model with opset_version<={top}",
        )
    return opset


def _dims(value_info: Any) -> list[int | None]:
    return [
        int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None
        for d in value_info.type.tensor_type.shape.dim
    ]


def _the_input(path: Path, model: Any) -> Any:
    init = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in init]
    if not inputs:
        raise _fail(path, "has no inputs; LIMEcraft feeds it one image tensor")
    if len(inputs) > 1:
        names = ", ".join(i.name for i in inputs)
        raise _fail(path, f"has {len(inputs)} inputs ({names}); LIMEcraft feeds one image tensor")
    (inp,) = inputs
    import onnx

    elem = inp.type.tensor_type.elem_type
    if elem != onnx.TensorProto.FLOAT:
        raise _fail(
            path,
            f"takes {onnx.TensorProto.DataType.Name(elem).lower()} input {inp.name!r}; "
            "LIMEcraft feeds float32 images",
        )
    rank = len(inp.type.tensor_type.shape.dim)
    if rank != 4:
        raise _fail(
            path,
            f"takes a rank-{rank} input {inp.name!r} of shape {tuple(_dims(inp))}; LIMEcraft feeds "
            "images as a rank-4 tensor, (N, 3, H, W) or (N, H, W, 3)",
        )
    return inp


def _layout(path: Path, dims: list[int | None], layout: str) -> tuple[str, bool]:
    if layout != "auto":
        return layout, False
    if dims[1] in (1, 3):
        return "NCHW", False
    if dims[3] in (1, 3):
        return "NHWC", False
    if dims[1] is None and dims[3] is None:
        return "NCHW", True
    raise _fail(
        path,
        f"takes input of shape {tuple(dims)}, with neither 3 (RGB) nor 1 (grey) channels in the "
        "2nd or last dim",
    )


def _softmax_output(model: Any) -> str:
    producer = {o: n for n in model.graph.node for o in n.output}
    name = model.graph.output[0].name
    for _ in range(16):
        node = producer.get(name)
        if node is None:
            return ""
        if node.op_type == "Softmax":
            return "softmax"
        if node.op_type == "LogSoftmax":
            return "log_softmax"
        if node.op_type not in _PASS_THROUGH or not node.input:
            return ""
        name = node.input[0]
    return ""


def _parse_labels(text: str) -> tuple[str, ...] | None:
    text = text.strip()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, list):
        names = [str(v) for v in value]
    elif isinstance(value, dict):
        try:
            names = [str(v) for _, v in sorted(value.items(), key=lambda kv: int(kv[0]))]
        except ValueError:
            return None
    elif "\n" in text:
        names = [s.strip() for s in text.splitlines() if s.strip()]
    else:
        names = [s.strip() for s in text.split(",") if s.strip()]
    return tuple(names) or None


def _metadata_labels(path: Path, model: Any) -> tuple[str, ...] | None:
    meta = {p.key: p.value for p in model.metadata_props}
    for key in LABEL_KEYS:
        if key in meta:
            names = _parse_labels(meta[key])
            if names is None:
                raise _fail(path, f"has metadata {key!r} that holds no class names")
            return names
    return None


def inspect_onnx(path: str | Path, *, layout: str = "auto") -> OnnxGraph:
    """Read an ONNX file's graph (no session, no code run) and what LIMEcraft needs from it.

    Raises
    ------
    LimecraftError
        One line, for a file that is missing, not ONNX, of too new an opset, or whose input is
        not a single float32 rank-4 image tensor.
    """
    from .custom import _check_file

    path = Path(path)
    if layout not in LAYOUTS:
        raise LimecraftError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    _check_file(path)
    model = _read_model(path)
    _check_external_data(path, model)
    opset = _opset(path, model)
    inp = _the_input(path, model)
    dims = _dims(inp)
    lay, assumed = _layout(path, dims, layout)
    c_dim, hw = (dims[1], dims[2:4]) if lay == "NCHW" else (dims[3], dims[1:3])
    out_dims = _dims(model.graph.output[0]) if model.graph.output else []
    if not model.graph.output:
        raise _fail(path, "has no outputs")
    labels = _metadata_labels(path, model)
    n_cls = out_dims[-1] if out_dims else None
    if labels is not None and n_cls is not None and len(labels) != n_cls:
        raise _fail(
            path,
            f"has {len(labels)} class names in its metadata but {n_cls} outputs; give a labels "
            "file instead (--labels)",
        )
    return OnnxGraph(
        input_name=inp.name,
        layout=lay,
        channels=1 if c_dim == 1 else 3,
        batch=dims[0],
        input_size=(hw[0], hw[1]) if hw[0] and hw[1] else None,
        opset=opset,
        num_classes=n_cls,
        softmax_output=_softmax_output(model),
        labels=labels,
        layout_assumed=assumed,
    )


def providers_for(device: str | torch.device = "auto") -> list[str]:
    """onnxruntime execution providers for a device: CUDA first where present, then CPU."""
    import onnxruntime as ort

    kind = device.type if isinstance(device, torch.device) else device
    available = ort.get_available_providers()
    if kind in ("auto", "cuda") and "CUDAExecutionProvider" in available:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


class OnnxModule(torch.nn.Module):
    """An onnxruntime session seen as a module: (B, 3, H, W) float32 tensor in, (B, C) out.

    The :class:`~limecraft_core.Classifier` resizes and normalises before calling it; this
    converts to the graph's layout, channels and range, runs the session (in chunks of the
    graph's fixed batch, if it has one), and returns logits, or ``log(p)`` for a probability
    graph, on the input's device. Thread-safe (onnxruntime sessions are).

    Attributes
    ----------
    graph : OnnxGraph
    input_range : {"0-1", "0-255"}
    outputs : {"logits", "probabilities"}, as decided (``auto`` resolved)
    providers : list of str, the session's execution providers
    limecraft_input_size : (h, w) or None, the graph's fixed size
    description : str, one line for a sidebar or ``models`` listing
    gradients_unavailable : str, why the gradient methods (ig, gradcam) cannot use it; the
        :class:`~limecraft_core.Classifier` reads it
    """

    gradients_unavailable = (
        "runs in ONNX Runtime, which computes no gradients: load the model as a torch module "
        "(a state_dict or a registry name) for gradient methods"
    )

    def __init__(
        self, session: Any, graph: OnnxGraph, *, input_range: str, outputs: str, name: str
    ) -> None:
        super().__init__()
        self._session = session
        self.graph = graph
        self.input_range = input_range
        self.name = name
        self.providers = list(session.get_providers())
        self.limecraft_input_size = graph.input_size
        self.outputs = outputs if outputs != "auto" else self._detect_outputs()

    @property
    def labels(self) -> tuple[str, ...] | None:
        """Class names from the file's metadata, if any."""
        return self.graph.labels

    @property
    def description(self) -> str:
        g = self.graph
        size = f"{g.input_size[0]}x{g.input_size[1]}" if g.input_size else "any size"
        batch = (
            "dynamic batch"
            if g.batch is None
            else f"fixed batch {g.batch} (batches are split into chunks of {g.batch})"
        )
        outs = (
            "outputs probabilities (explained as log p: raw scores are log-probabilities)"
            if self.outputs == "probabilities"
            else "outputs logits"
        )
        lay = g.layout + (" (assumed)" if g.layout_assumed else "")
        grey = ", 1 channel (grey)" if g.channels == 1 else ""
        return (
            f"ONNX opset {g.opset}, {lay}{grey}, {size}, {batch}, inputs {self.input_range}, "
            f"{outs}, on {self.providers[0]}"
        )

    def extra_repr(self) -> str:
        return self.description

    def _detect_outputs(self) -> str:
        if self.graph.softmax_output == "softmax":
            return "probabilities"
        if self.graph.softmax_output == "log_softmax":
            return "logits"
        h, w = self.graph.input_size or (32, 32)
        probe = np.random.default_rng(0).random((2, 3, h, w), dtype=np.float32)
        scores = self._run(self._to_graph(torch.from_numpy(probe)))
        if scores.ndim == 2 and scores.shape[1] >= 2:
            sums = scores.astype(np.float64).sum(axis=1)
            if (scores >= 0).all() and np.abs(sums - 1).max() <= 1e-4:
                return "probabilities"
        return "logits"

    def _to_graph(self, x: torch.Tensor) -> np.ndarray:
        a = x.detach().to("cpu", torch.float32)
        if self.graph.channels == 1:
            a = (a * a.new_tensor(_LUMA).view(1, 3, 1, 1)).sum(1, keepdim=True)
        if self.graph.layout == "NHWC":
            a = a.permute(0, 2, 3, 1)
        if self.input_range == "0-255":
            a = a * 255.0
        return np.ascontiguousarray(a.numpy())

    def _run(self, arr: np.ndarray) -> np.ndarray:
        step = self.graph.batch or arr.shape[0]
        outs = []
        for i in range(0, arr.shape[0], step):
            chunk = arr[i : i + step]
            n = chunk.shape[0]
            if n < step:  # a fixed batch: pad the last chunk with copies of its last image
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], step - n, axis=0)])
            try:
                out = self._session.run(None, {self.graph.input_name: chunk})[0]
            except Exception as e:
                text = str(e)
                if "allocate" in text.lower() or "out of memory" in text.lower():
                    # the engine halves its batch on this, as for torch
                    raise torch.OutOfMemoryError(text) from e
                raise RuntimeError(text.strip().splitlines()[-1] if text.strip() else text) from e
            outs.append(np.asarray(out)[:n])
        return np.concatenate(outs) if outs else np.zeros((0, 0), np.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Scores for a (B, 3, H, W) float32 batch: logits, or log p for a probability graph."""
        out = torch.from_numpy(np.ascontiguousarray(self._run(self._to_graph(x)), np.float32))
        if self.outputs == "probabilities":
            out = out.clamp_min(_EPS).log()
        return out.to(x.device)


def load_onnx(
    path: str | Path,
    *,
    input_range: str = "0-1",
    outputs: str = "auto",
    layout: str = "auto",
    device: str | torch.device = "auto",
) -> OnnxModule:
    """An :class:`OnnxModule` for an ONNX file (onnxruntime only: no Python code is run).

    Parameters
    ----------
    path : path to a ``.onnx`` file
    input_range : {"0-1", "0-255"}
        What the graph expects its float32 pixels in.
    outputs : {"auto", "logits", "probabilities"}
        What the graph returns; ``auto`` reads the graph, then a probe batch.
    layout : {"auto", "NCHW", "NHWC"}
    device : {"auto", "cpu", "cuda"}
        ``auto``/``cuda`` use onnxruntime's CUDA provider where it is installed, else the CPU.

    Raises
    ------
    LimecraftError
        One line, for any file onnxruntime cannot load or LIMEcraft cannot feed.
    """
    import onnxruntime as ort

    for what, value, choices in (
        ("input_range", input_range, INPUT_RANGES),
        ("outputs", outputs, OUTPUTS),
    ):
        if value not in choices:
            raise LimecraftError(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    path = Path(path)
    graph = inspect_onnx(path, layout=layout)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # errors reach the user as our one line, not as ORT's log
    # As many threads as torch's (OMP_NUM_THREADS where set, else the cores), and no spinning
    # between runs: spinning threads took the cores from the engine's own work between batches
    # (an efficientnet_lite0 Explain took 7.5-8.5 s with it, 5.7-6.5 s without, on 2 cores)
    opts.intra_op_num_threads = max(1, torch.get_num_threads())
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = ort.InferenceSession(str(path), opts, providers=providers_for(device))
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _fail(path, f"cannot be loaded by onnxruntime {ort.__version__} ({first})") from None
    try:
        return OnnxModule(session, graph, input_range=input_range, outputs=outputs, name=path.name)
    except RuntimeError as e:  # the output probe failed
        raise _fail(path, f"fails on a probe batch ({e})") from None


# --- the registry's source ------------------------------------------------------------------

#: The registry's load keywords that only ONNX files take, with their defaults (:func:`load_onnx`).
OPTIONS = {"input_range": "0-1", "outputs": "auto", "layout": "auto"}
_FP32 = {"precision": "fp32", "channels_last": False}  # onnxruntime runs fp32, NCHW as given


def _is_onnx(spec: str) -> bool:
    return isinstance(spec, str) and Path(spec).suffix.lower() == ".onnx"


def options_for(spec: str, given: dict[str, str | None]) -> dict[str, str] | None:
    """The ONNX options with defaults filled in for an .onnx spec; None for any other spec,
    which refuses them (LimecraftError; TypeError for a keyword that is no ONNX option)."""
    unknown = set(given) - set(OPTIONS)
    if unknown:
        raise TypeError(f"unexpected keyword arguments: {', '.join(sorted(unknown))}")
    if not _is_onnx(spec):
        set_ = [k for k, v in given.items() if v is not None and v != OPTIONS[k]]
        if set_:
            raise LimecraftError(f"{', '.join(set_)} applies to .onnx model files only")
        return None
    return {k: given.get(k) or v for k, v in OPTIONS.items()}


def _info(path: str) -> ModelInfo:
    """What an ONNX file's graph says (read without a session; LimecraftError if unusable)."""
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


def _load(spec: str, arch, pretrained, device: str, onnx: dict | None) -> torch.nn.Module:
    return load_onnx(spec, device=device, **(onnx if onnx is not None else OPTIONS))


def _fit(spec: str, module: torch.nn.Module, ask: Ask) -> dict[str, Any]:
    """Size, normalisation and class names for an ONNX module, checked against its graph."""
    fixed = module.graph.input_size
    size = ask.input_size
    if fixed is not None and size is not None and (size, size) != fixed:
        raise LimecraftError(
            f"the ONNX model {module.name!r} takes {fixed[0]}x{fixed[1]} inputs; an input size "
            f"of {size} does not fit it (leave the input size unset)"
        )
    norm = ask.normalize or "none"
    if norm != "none" and module.input_range == "0-255":
        raise LimecraftError(
            f"normalize={norm!r} with input range 0-255: normalised values have no pixel range; "
            "use one or the other"
        )
    labels = ask.labels if ask.labels is not None else module.labels
    name = Path(spec).name
    return dict(input_size=fixed or size or 224, normalize=norm, labels=labels, name=name, **_FP32)


#: ``.onnx`` files, run by onnxruntime in fp32.
SOURCE = Source(
    "onnx",
    matches=lambda spec, arch: _is_onnx(spec),
    info=_info,
    load=_load,
    fit=_fit,
    format=formats.ONNX,
)
