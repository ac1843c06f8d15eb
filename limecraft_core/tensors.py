"""One conversion from image arrays to tensors, and one resize, for the engine and its edges.

The edges: the classifier, the scene, the fills, superpixels' working copy, Ray Serve's client,
the demo model.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["resize_chw", "to_chw"]


def to_chw(image: np.ndarray, device: torch.device | str | None = None) -> torch.Tensor:
    """An (H, W, C) or (B, H, W, C) array as a contiguous (C, H, W) or (B, C, H, W) tensor of
    the same dtype (a copy; on ``device`` when given)."""
    a = np.asarray(image)
    order = (2, 0, 1) if a.ndim == 3 else (0, 3, 1, 2)
    if a.ndim not in (3, 4):
        raise ValueError(f"an image is (H, W, C) or (B, H, W, C); got shape {a.shape}")
    t = torch.from_numpy(np.ascontiguousarray(a.transpose(order)))
    return t if device is None else t.to(device)


def resize_chw(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """A (C, H, W) or (B, C, H, W) float tensor resized to ``size`` (h, w): antialiased
    bilinear, the resize every model input and working copy gets."""
    one = x.ndim == 3
    out = F.interpolate(
        x[None] if one else x,
        size=tuple(size),
        mode="bilinear",
        antialias=True,
        align_corners=False,
    )
    return out[0] if one else out
