"""Stage 5: the weighted ridge surrogate per explained class."""

from __future__ import annotations

import numpy as np
import torch

from ..perturb import MaskSample
from ..surrogate import Kernel, SurrogateFit, cosine_distance, fit_ridge
from .score import Scores


def sample_weights(sample: MaskSample, kernel: Kernel) -> np.ndarray:
    """The surrogate's sample weights: kernel similarity times the scheme's importance weights."""
    return kernel(cosine_distance(sample.masks)) * sample.weights


def fit(scores: Scores, classes: list[int], kernel: Kernel, alpha: float) -> SurrogateFit:
    """The weighted ridge surrogate on the main sample, one column per explained class."""
    cls_t = torch.tensor(classes, device=scores.main_out.device)
    return fit_ridge(
        scores.main.masks,
        scores.main_out[:, cls_t],
        sample_weights(scores.main, kernel),
        alpha=alpha,
    )
