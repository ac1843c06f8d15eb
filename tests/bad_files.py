"""Deliberately bad inputs, shared by the tests of the modules that must refuse them.

Bad images (with the words their refusal must contain), booby-trapped and broken model files,
a folder of all of them (``write_bad_files``), and bad session JSON documents (``JSON_BAD``).
Import by module name, like ``toys``: ``from bad_files import BAD_IMAGES, write_bad_files``.
"""

from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from toys import ChannelMeans

import limecraft_core as lc
from limecraft_core._validate import MAX_PIXELS, MIN_SIDE

# ----------------------------------------------------------------------------- bad images


def encode(im: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt, **kw)
    return buf.getvalue()


def good_image(h: int = 48, w: int = 64) -> np.ndarray:
    rng = np.random.default_rng(3)
    img = np.zeros((h, w, 3), np.uint8)
    img[:, : w // 2] = (200, 40, 40)
    img[:, w // 2 :] = (40, 40, 200)
    return np.clip(img + rng.integers(0, 30, img.shape), 0, 255).astype(np.uint8)


def png_with_size(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` (a decompression bomb's signature)."""
    data = encode(Image.new("L", (1, 1)))
    ihdr = struct.pack(">II", width, height) + data[24:29]
    crc = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr) & 0xFFFFFFFF)
    return data[:16] + ihdr + crc + data[33:]


def bomb_png() -> bytes:
    """A real, fully decodable PNG of 8000 x 7000 = 56 M pixels, compressed to a few kB."""
    return encode(Image.new("1", (8000, 7000)), optimize=True)


BAD_IMAGES = {
    # name: (bytes, words the message must contain)
    "not-an-image": (b"hello, I am a text file\n" * 20, "not an image"),
    "empty": (b"", "empty"),
    "truncated-png": (encode(Image.fromarray(good_image()))[:200], "truncated"),
    "truncated-jpeg": (encode(Image.fromarray(good_image()), "JPEG")[:400], "truncated"),
    "header-only": (encode(Image.fromarray(good_image()))[:33], "truncated|not an image"),
    "too-many-pixels": (png_with_size(20_000, 20_000), f"{MAX_PIXELS:,}"),
    "decompression-bomb": (bomb_png(), f"{MAX_PIXELS:,}"),
    "too-small": (encode(Image.new("RGB", (MIN_SIDE - 1, 40))), f"at least {MIN_SIDE}"),
    "one-pixel": (encode(Image.new("RGB", (1, 1))), f"at least {MIN_SIDE}"),
}

# ----------------------------------------------------------------------------- bad models


class Payload:
    """Unpickling this writes a marker file: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"__import__('pathlib').Path({str(self.marker)!r}).write_text('pwned')",))


def booby_trapped_pickle(marker: Path) -> bytes:
    buf = io.BytesIO()
    torch.save(Payload(marker), buf)  # a "whole model" file
    return buf.getvalue()


def booby_trapped_torchscript(marker: Path) -> bytes:
    """A zip laid out like a TorchScript file, whose pickles hold the payload."""
    buf = io.BytesIO()
    payload = pickle.dumps(Payload(marker), protocol=2)
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("model/version", "3\n")
        z.writestr("model/data.pkl", payload)
        z.writestr("model/constants.pkl", payload)
        z.writestr("model/code/__torch__.py", "class Model:\n  pass\n")
    return buf.getvalue()


def export(model: torch.nn.Module, path: Path, size: int = 32) -> Path:
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(
        model, (torch.rand(2, 3, size, size),), dynamic_shapes={"x": {0: batch}}
    )
    torch.export.save(program, str(path))
    return path


class NaNModel(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3)) * float("nan")


def onnx_graph(path: Path, rank: int = 4, opset: int = 17) -> Path:
    """A channel-means classifier as an ONNX graph: (N, 3, 8, 8) -> GlobalAveragePool -> (N, 3)."""
    import onnx
    from onnx import TensorProto, helper

    shape = ["N", 3, 8, 8, 1][:rank]
    g = helper.make_graph(
        [
            helper.make_node("GlobalAveragePool", ["x"], ["p"]),
            helper.make_node("Flatten", ["p"], ["y"]),
        ],
        "means",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model.metadata_props.add(key="labels", value="red,green,blue")
    onnx.save(model, str(path))
    return path


class FlatModel(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(1, 2, 3))


# ----------------------------------------------------------------------------- a folder of them


def write_bad_files(d: Path) -> Path:
    """Write the battery's files into the folder ``d`` (a few seconds: three torch.export runs).

    Call it from a module-scoped fixture. Booby-trapped files write ``d / "pwned.txt"`` if
    their code ever runs.
    """
    img = good_image()
    Image.fromarray(img).save(d / "good.png")
    for name, (data, _) in BAD_IMAGES.items():
        (d / f"{name}.png").write_bytes(data)
    Image.fromarray(np.ones((5, 7), np.uint8)).save(d / "small_mask.png")
    mask = np.zeros(img.shape[:2], np.uint8)
    mask[5:20, 5:30] = 1
    Image.fromarray(mask).save(d / "mask.png")
    np.save(d / "small.npy", np.zeros((5, 5), np.int64))
    np.save(d / "float.npy", np.zeros(img.shape[:2], np.float64))
    np.save(d / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (d / "labels_bad.txt").write_bytes(b"\xff\xfe\x00\x81bad")
    (d / "labels_empty.txt").write_bytes(b"\n\n")
    marker = d / "pwned.txt"
    (d / "evil.pt").write_bytes(booby_trapped_pickle(marker))
    (d / "evil_ts.pt").write_bytes(booby_trapped_torchscript(marker))
    (d / "junk.pt2").write_bytes(b"PK\x03\x04 not a zip at all")
    export(ChannelMeans(classes=4), d / "toy.pt2")
    export(NaNModel(), d / "nan.pt2")
    export(FlatModel(), d / "flat.pt2")
    data = onnx_graph(d / "means.onnx").read_bytes()
    (d / "truncated.onnx").write_bytes(data[: len(data) // 2])
    (d / "text.onnx").write_text("this is not an ONNX model\n" * 10)
    onnx_graph(d / "rank3.onnx", rank=3)
    onnx_graph(d / "opset999.onnx", opset=999)
    (d / "pickle.onnx").write_bytes(booby_trapped_pickle(marker))
    # a Hugging Face folder with only a pickled checkpoint (booby-trapped): refused, never read
    hf = d / "hf_bin_only"
    hf.mkdir()
    (hf / "config.json").write_text(
        '{"model_type": "vit", "architectures": ["ViTForImageClassification"], '
        '"image_size": 32, "patch_size": 8, "num_labels": 2}'
    )
    (hf / "pytorch_model.bin").write_bytes(booby_trapped_pickle(marker))
    return d


# ----------------------------------------------------------------------------- bad session JSON


def explanation_doc() -> dict:
    """A real explanation of ``good_image()`` (64x48, four grid regions) as a JSON document."""
    ex = lc.explain(
        good_image(), ChannelMeans(classes=4), samples=20, segmentation="grid", n_segments=4
    )
    return ex.to_dict()


def doc_with(doc: dict, path: tuple, value) -> str:
    """``doc`` as JSON text, with the value at ``path`` (keys and indices) replaced."""
    d = json.loads(json.dumps(doc))
    node = d
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return json.dumps(d)


def npz_b64(a: np.ndarray, allow: bool = False) -> str:
    import base64

    buf = io.BytesIO()
    np.savez_compressed(buf, a=a) if not allow else np.savez(buf, a=a)
    return base64.b64encode(buf.getvalue()).decode()


# Each row: id, and a function of a good document that returns the bad JSON text.
JSON_BAD = [
    ("not json", lambda d: "{'format': 1}"),
    ("a list", lambda d: "[1, 2, 3]"),
    ("wrong format", lambda d: doc_with(d, ("format",), "pickle")),
    ("future version", lambda d: doc_with(d, ("format_version",), 99)),
    ("segments missing", lambda d: json.dumps({k: v for k, v in d.items() if k != "segments"})),
    (
        "segments pickled",
        lambda d: doc_with(
            d, ("segments", "data"), npz_b64(np.array([{"a": 1}], dtype=object), allow=True)
        ),
    ),
    (
        "segments with gaps",
        lambda d: doc_with(d, ("segments", "data"), npz_b64(np.full((48, 64), 3, np.int32))),
    ),
    (
        "segments 3-D",
        lambda d: doc_with(d, ("segments", "data"), npz_b64(np.zeros((2, 2, 2), np.int32))),
    ),
    ("weights as text", lambda d: doc_with(d, ("classes", 0, "weights"), ["__import__('os')"] * 4)),
    ("weights too few", lambda d: doc_with(d, ("classes", 0, "weights"), [1.0])),
    ("region name not text", lambda d: doc_with(d, ("regions", 0, "name"), {"$eval": "1"})),
    ("settings not an object", lambda d: doc_with(d, ("settings",), "rm -rf /")),
    (
        "trust nested too deep",
        lambda d: doc_with(d, ("stability",), json.loads("[" * 20 + "]" * 20)),
    ),
]
