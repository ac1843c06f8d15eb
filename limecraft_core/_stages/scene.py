"""Stage 2: the image, fill and label map at the model's input size, on its device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..config import FillConfig
from ..perturb import Fill, default_batch_size, scene_fill
from ..regions import (
    Regions,
    resize_nearest,
)
from ..scorer import Scorer
from ..tensors import resize_chw, to_chw


@dataclass(frozen=True, eq=False)
class Scene:
    """The image, fill and label map at the model's input size, on its device.

    Attributes
    ----------
    image : (3, h, w) float32 tensor in [0, 1]
    fill : (3, h, w) float32 tensor in [0, 1] (a static fill), or a per-mask Fill
        (:func:`~limecraft_core.perturb.scene_fill`)
    labels : (h, w) int64 tensor, region ids 0..K-1
    work_image : (h, w, 3) float32 ndarray, the image at that size (for other fills)
    work_labels : (h, w) int ndarray
    n_regions : int, K
    batch_size : int
    """

    image: torch.Tensor
    fill: torch.Tensor | Fill
    labels: torch.Tensor
    work_image: np.ndarray
    work_labels: np.ndarray
    n_regions: int
    batch_size: int

    def fill_for(self, fill: Any, blur_sigma: float | None) -> torch.Tensor | Fill:
        """Another fill of the same scene (for the fill comparison)."""
        return scene_fill(
            self.work_image, self.work_labels, fill, self.image.device, blur_sigma=blur_sigma
        )


def prepare_scene(
    image: np.ndarray, regions: Regions, scorer: Scorer, fill: FillConfig, batch_size: int | None
) -> Scene:
    """Compose at the model's input size: the model would resize anyway, and it is far cheaper."""
    h, w = image.shape[:2]
    dev = scorer.device
    size = scorer.input_size or (h, w)
    labels = regions.labels
    work_labels = labels if size == (h, w) else resize_nearest(labels, size)
    image_t = to_chw(image, dev)
    if size != (h, w):
        image_t = resize_chw(image_t, size)
    work_image = image_t.cpu().numpy().transpose(1, 2, 0)
    return Scene(
        image=image_t,
        fill=scene_fill(work_image, work_labels, fill.fill, dev, blur_sigma=fill.blur_sigma),
        labels=torch.from_numpy(work_labels.astype(np.int64)).to(dev),
        work_image=work_image,
        work_labels=work_labels,
        n_regions=regions.n_regions,
        batch_size=batch_size or default_batch_size(dev, size[0] * size[1]),
    )
