"""Model outputs remembered by mask, so that no perturbation is scored twice.

For instance an Explain stopped and resumed, or a check that reuses the samples.
"""

from __future__ import annotations

import numpy as np
import torch


class MaskCache:
    """Model outputs remembered by mask, so that no perturbation is scored twice.

    With few regions most masks repeat: K=6 handcrafted regions have only 64 distinct masks,
    so 1000 samples need at most 64 forward passes. The outputs are deterministic given the
    mask (same image, fill and model), so deduplication is exact up to floating-point
    differences between batch compositions.
    """

    def __init__(self) -> None:
        self._index: dict[bytes, int] = {}
        self._chunks: list[torch.Tensor] = []
        self._stacked: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self._index)

    def missing(self, masks: np.ndarray) -> tuple[np.ndarray, list[bytes], list[bytes]]:
        """The distinct rows of ``masks`` with no output yet, their keys, and every row's key."""
        masks = np.asarray(masks, bool)
        keys = [row.tobytes() for row in np.packbits(masks, axis=1)]
        new: dict[bytes, int] = {}
        for i, key in enumerate(keys):
            if key not in self._index and key not in new:
                new[key] = i
        return masks[list(new.values())], list(new), keys

    def add(self, keys: list[bytes], outputs: torch.Tensor) -> None:
        """Remember ``outputs`` (M, C) for the M mask rows whose keys are ``keys``."""
        if len(keys) != len(outputs):
            raise ValueError("one output row per key")
        for key in keys:
            self._index[key] = len(self._index)
        self._chunks.append(outputs)
        self._stacked = None

    def gather(self, keys: list[bytes]) -> torch.Tensor:
        """(N, C) outputs in the order of ``keys``; every key must have been added."""
        if self._stacked is None:
            self._stacked = torch.cat(self._chunks)
            self._chunks = [self._stacked]  # hold the scores once, not as chunks and a copy
        idx = torch.tensor([self._index[k] for k in keys], device=self._stacked.device)
        return self._stacked.index_select(0, idx)
