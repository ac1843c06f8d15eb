"""The one plug point between the engine and a model: the :class:`Scorer` protocol.

The engine sends a scene (the image, the fill and the label map, once) and (N, K) binary masks;
a scorer composes the perturbed images wherever its model lives and returns their scores. The
local :class:`~limecraft_core.Classifier` implements it; so do the multi-session work queue and
the Ray Serve client in ``serving/``, side by side and by composition (each holds what it wraps).
A scorer may also offer gradients (:class:`GradientScorer`): the local Classifier does, for the
gradient methods of the table of explainers; the queue and the Ray client do not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from .fill_table import Fill

__all__ = ["GradientScorer", "Scorer"]


@runtime_checkable
class Scorer(Protocol):
    """What :func:`limecraft_core.explain` needs of a model.

    Attributes
    ----------
    name : str, recorded in the explanation's settings
    device : torch.device, where the engine puts the scene tensors
    input_size : (h, w) or None; the engine composes at this size (None: the image's own)
    normalize, precision : str, recorded in the settings
    channels_last : bool, recorded in the settings
    """

    name: str
    device: torch.device
    input_size: tuple[int, int] | None
    normalize: str
    precision: str
    channels_last: bool

    def label(self, index: int) -> str:
        """Name of class ``index``."""
        ...

    def run_masks(
        self,
        image: torch.Tensor,
        fill: torch.Tensor | Fill,
        labels: torch.Tensor,
        masks: np.ndarray,
        batch_size: int,
        *,
        progress: Callable[[int, int], None] | None = None,
        cancel: Callable[[], bool] | None = None,
        expand: int = 0,
    ) -> torch.Tensor:
        """Scores of the perturbations ``masks`` of the scene.

        Parameters
        ----------
        image : (3, h, w) float32 tensor in [0, 1] on ``device``
        fill : (3, h, w) float32 tensor in [0, 1] on ``device`` (a static fill), or a
            per-mask :class:`~limecraft_core.perturb.Fill` (``inpaint``: each perturbation is
            inpainted from its own kept pixels). Compose with
            :func:`~limecraft_core.perturb.compose_batch`, which handles both.
        labels : (h, w) int64 tensor on ``device``, region ids 0..K-1
        masks : (N, K) bool ndarray; True keeps a region, False fills it
        batch_size : int, images per forward pass
        progress : callable(done, total), optional
        cancel : callable() -> bool, optional; True stops with ``Cancelled``
        expand : int, grow hidden regions by this many pixels

        Returns
        -------
        (N, C) float32 tensor of raw scores.
        """
        ...


@runtime_checkable
class GradientScorer(Scorer, Protocol):
    """A :class:`Scorer` that also offers its model's gradients (the local Classifier).

    The gradient methods of the table of explainers (``ig``, ``gradcam``) need it; a scorer
    without it (the work queue, a Ray Serve client) makes them refuse before any model pass.
    """

    def gradient_model(self) -> Any:
        """The model as a differentiable function of the pixels
        (:class:`~limecraft_core.gradients.GradientModel`).

        Raises
        ------
        LimecraftError : this model gives no gradients (e.g. an ONNX graph), and why
        """
        ...
