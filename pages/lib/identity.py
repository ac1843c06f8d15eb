"""What names the things an analysis uses: its model, as a cache key, and an array's digest.

:class:`ModelRef` is how the app loads, caches and compares a model (a registry name or a file,
with the class names, architecture and normalisation chosen for it); :func:`digest` keys an image
or a mask by its content. Both are plain values, shared by the analysis, the caches and the audits.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PIXELS_0_255", "ModelRef", "digest", "normalisation"]


@dataclass(frozen=True)
class ModelRef:
    """Which model an analysis uses, hashable (a cache key): a registry name or a file path,
    the class names given with an uploaded file, and a state_dict's architecture."""

    name: str
    labels: tuple[str, ...] | None = None
    arch: str | None = None
    normalize: str | None = None

    @property
    def display_name(self) -> str:
        """The name a person knows it by: a registry name, or the uploaded file's own name."""
        return os.path.basename(self.name) if ("/" in self.name or "\\" in self.name) else self.name


#: The app's "normalisation" choice for an ONNX graph that takes pixels in 0-255 (no mean/std).
PIXELS_0_255 = "0-255"


def normalisation(choice: str | None) -> dict[str, Any]:
    """The loader's keywords for the app's normalisation choice: ``normalize``, or for an ONNX
    graph that takes 0-255 pixels, ``input_range`` with no normalisation."""
    if choice == PIXELS_0_255:
        return {"normalize": "none", "input_range": "0-255"}
    return {"normalize": choice}


def digest(a: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(str((a.shape, a.dtype.str)).encode())
    h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()
