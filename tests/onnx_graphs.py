"""A tiny CNN and the same network as a hand-built ONNX graph (NCHW or NHWC, a fixed or a
symbolic batch, logits or softmax outputs, inputs in [0, 1] or [0, 255]): the ONNX tests' model,
and the model the Ray tests serve from a folder."""

from __future__ import annotations

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

SIZE = 32
CLASSES = 5


class TinyCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 6, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(6, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))


def graph_file(
    path,
    net: TinyCNN,
    *,
    layout: str = "NCHW",
    batch: int | str = "N",
    softmax: str = "",
    scale_255: bool = False,
    metadata: dict[str, str] | None = None,
    opset: int = 17,
):
    """The TinyCNN as a hand-built graph (as a Keras export would be, for NHWC).

    softmax: "" (logits), "node" (a Softmax node last) or "hidden" (Softmax, then + 0, so only
    a probe can tell)."""
    shape = [batch, 3, SIZE, SIZE] if layout == "NCHW" else [batch, SIZE, SIZE, 3]
    inits = [
        numpy_helper.from_array(net.conv.weight.detach().numpy(), "cw"),
        numpy_helper.from_array(net.conv.bias.detach().numpy(), "cb"),
        numpy_helper.from_array(net.fc.weight.detach().numpy(), "fw"),
        numpy_helper.from_array(net.fc.bias.detach().numpy(), "fb"),
        numpy_helper.from_array(np.array(255, np.float32), "k255"),
        numpy_helper.from_array(np.zeros(1, np.float32), "zero"),
    ]
    nodes, x = [], "image"
    if scale_255:
        nodes.append(helper.make_node("Div", [x, "k255"], ["scaled"]))
        x = "scaled"
    if layout == "NHWC":
        nodes.append(helper.make_node("Transpose", [x], ["nchw"], perm=[0, 3, 1, 2]))
        x = "nchw"
    nodes += [
        helper.make_node("Conv", [x, "cw", "cb"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["logits"], transB=1),
    ]
    out = "logits"
    if softmax:
        nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], axis=1))
        out = "probs"
    if softmax == "hidden":
        nodes.append(helper.make_node("Add", ["probs", "zero"], ["probs0"]))
        out = "probs0"
    g = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [batch, CLASSES])],
        initializer=inits,
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    for k, v in (metadata or {}).items():
        model.metadata_props.add(key=k, value=v)
    onnx.save(model, str(path))
    return path
