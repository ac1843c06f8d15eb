"""What a hidden region shows, as the engine composes it.

:func:`make_fill` gives a static fill's image and :func:`scene_fill` what a scorer composes
with: that image as a tensor, or a per-mask :class:`~limecraft_core.fill_table.Fill` itself. The
fills themselves are the table :data:`~limecraft_core.fill_table.FILLS`.
"""

from __future__ import annotations

import numpy as np
import torch

from .._validate import LimecraftError, as_float_image
from ..fill_table import FILLS, Fill, FillSpec, fill_of
from ..tensors import to_chw

__all__ = ["FILLS", "Fill", "FillSpec", "check_fill", "fill_of", "make_fill", "scene_fill"]


def check_fill(fill: FillSpec) -> FillSpec:
    """Return ``fill`` if it is valid, else raise LimecraftError listing the choices."""
    fill_of(fill)
    return fill


def make_fill(
    image: np.ndarray,
    labels: np.ndarray,
    fill: FillSpec = "mean",
    *,
    blur_sigma: float | None = None,
) -> np.ndarray:
    """What each hidden region shows, for a static fill.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float in [0, 1]
    labels : (H, W) int ndarray, 0..K-1
    fill : a name of :data:`FILLS`, a colour, a :class:`Fill` or a callable
        ``mean``: each region's mean colour (the lime package's default). ``gray``, ``black``
        or ``#RRGGBB``: a constant colour. ``blur``: a Gaussian blur of the image
        (sigma ``blur_sigma``, default 1/20 of the shorter side). ``inpaint-each``: each region
        filled alone from everything around it, hidden neighbours included (computed once). A
        callable ``(image, labels) -> fill``. ``inpaint`` is a per-mask fill: what a hidden
        region shows depends on the whole mask, so there is no one fill image; compose it with
        :func:`~limecraft_core.perturb.compose_batch` (:func:`scene_fill` gives what that takes)
        or :func:`~limecraft_core.perturb.perturbed_images`.

    Returns
    -------
    (H, W, 3) float32 ndarray in [0, 1].

    Raises
    ------
    LimecraftError
        For an unknown fill, a per-mask fill, or a fill function that returns the wrong shape
        or NaN.
    """
    img = as_float_image(image)
    f = fill_of(fill)
    if f.static is None:
        raise LimecraftError(
            f"the {f.name} fill depends on each perturbation's mask, so it has no one fill "
            "image: compose it with compose_batch or perturbed_images"
        )
    return np.asarray(f.static(img, labels, blur_sigma), np.float32)


def scene_fill(
    image: np.ndarray,
    labels: np.ndarray,
    fill: FillSpec,
    device: torch.device | str = "cpu",
    *,
    blur_sigma: float | None = None,
) -> torch.Tensor | Fill:
    """What a scorer composes with (:func:`~limecraft_core.perturb.compose_batch`, the
    :class:`~limecraft_core.Scorer` protocol's ``fill``): a static fill's (3, H, W) float32
    tensor on ``device``, or the per-mask :class:`Fill` itself."""
    f = fill_of(fill)
    if f.is_per_mask:
        return f
    a = make_fill(image, labels, f, blur_sigma=blur_sigma)
    return to_chw(a, device)
