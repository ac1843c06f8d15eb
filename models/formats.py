"""The model files LIMEcraft reads, by suffix: one table that the registry's file sources
(:data:`models.registry.SOURCES`), the app's model uploader and the CLI's help all read.

No torch here: the CLI's ``--help`` reads it and answers at once.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FILE_FORMATS", "ONNX", "TORCH", "FileFormat", "in_words", "suffixes"]


@dataclass(frozen=True)
class FileFormat:
    """A kind of model file.

    Attributes
    ----------
    kind : str, the registry source that reads it
    suffixes : the file suffixes, lower case with the dot
    words : the files in words, for the app and the CLI
    """

    kind: str
    suffixes: tuple[str, ...]
    words: str


ONNX = FileFormat("onnx", (".onnx",), "an .onnx file (run by onnxruntime)")
TORCH = FileFormat(
    "file",
    (".pt2", ".pt", ".pth", ".ts", ".bin"),
    "a .pt2 (torch.export) or TorchScript (.pt, .ts) program, or a state_dict (.pt, .pth, "
    ".bin) with its architecture",
)
#: Every model file format, in the order the registry tries them.
FILE_FORMATS: tuple[FileFormat, ...] = (ONNX, TORCH)


def suffixes() -> tuple[str, ...]:
    """Every model-file suffix, in the formats' order (".onnx", ".pt2", ...)."""
    return tuple(dict.fromkeys(x for f in FILE_FORMATS for x in f.suffixes))


def in_words() -> str:
    """The model files, in words: "an .onnx file (...), or a .pt2 (...) ..."."""
    return ", or ".join(f.words for f in FILE_FORMATS)
