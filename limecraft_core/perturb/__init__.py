"""Perturbations: binary masks over regions, what a hidden region shows, and batched composition.

Perturbed images are never built one at a time in Python: each batch is composed on the model's
device as ``where(masks[:, labels], image, fill)`` and only the model's outputs are kept. The
``inpaint`` fill depends on which regions are hidden together, so it has no fixed fill image:
its fill is the marker :data:`PER_MASK` (NaN) and each batch is inpainted as it is composed.

- :mod:`.masks`: ``sample_masks`` and ``MaskSample`` (which regions each perturbation keeps);
- :mod:`.fills`: ``make_fill`` and ``check_fill`` (what a hidden region shows), ``PER_MASK``;
- :mod:`.inpaint`: ``inpaint``, pull-push interpolation on the device;
- :mod:`.compose`: ``compose_batch``, ``perturbed_images``, ``run_masks`` and the batch size;
- :mod:`.cache`: ``MaskCache``, so that no perturbation is scored twice.
"""

from __future__ import annotations

from ..limits import FILLS, SCHEMES
from .cache import MaskCache
from .compose import compose_batch, default_batch_size, perturbed_images, run_masks
from .fills import PER_MASK, Fill, check_fill, make_fill
from .inpaint import inpaint
from .masks import MaskSample, sample_masks

__all__ = [
    "FILLS",
    "PER_MASK",
    "SCHEMES",
    "Fill",
    "MaskCache",
    "MaskSample",
    "check_fill",
    "compose_batch",
    "default_batch_size",
    "inpaint",
    "make_fill",
    "perturbed_images",
    "run_masks",
    "sample_masks",
]
