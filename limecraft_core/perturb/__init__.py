"""Perturbations: binary masks over regions, what a hidden region shows, and batched composition.

Perturbed images are never built one at a time in Python: each batch is composed on the model's
device as ``where(masks[:, labels], image, fill)`` and only the model's outputs are kept. The
``inpaint`` fill depends on which regions are hidden together, so it has no fixed fill image:
it is a per-mask :class:`Fill`, which composes each batch itself.

- :mod:`.masks`: ``sample_masks`` and ``MaskSample`` (which regions each perturbation keeps);
- :mod:`.fills`: ``FILLS`` (every named ``Fill``), ``fill_of``, ``make_fill``, ``scene_fill`` and
  ``check_fill`` (what a hidden region shows);
- :mod:`.inpaint`: ``inpaint``, pull-push interpolation on the device;
- :mod:`.compose`: ``compose_batch``, ``perturbed_images``, ``run_masks`` and the batch size;
- :mod:`.cache`: ``MaskCache``, so that no perturbation is scored twice.
"""

from __future__ import annotations

from ..fill_table import check_fill_name, fill_error
from ..limits import SCHEMES
from .cache import MaskCache
from .compose import compose_batch, default_batch_size, perturbed_images, run_masks
from .fills import FILLS, Fill, FillSpec, check_fill, fill_of, make_fill, scene_fill
from .inpaint import inpaint
from .masks import MaskSample, sample_masks

__all__ = [
    "FILLS",
    "SCHEMES",
    "Fill",
    "FillSpec",
    "MaskCache",
    "MaskSample",
    "check_fill",
    "check_fill_name",
    "compose_batch",
    "default_batch_size",
    "fill_error",
    "fill_of",
    "inpaint",
    "make_fill",
    "perturbed_images",
    "run_masks",
    "sample_masks",
    "scene_fill",
]
