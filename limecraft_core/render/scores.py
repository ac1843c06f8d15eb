"""Numbers shown beside the pictures: class probabilities from a model's raw scores."""

from __future__ import annotations

import numpy as np


def softmax(logits: np.ndarray) -> np.ndarray:
    """Class probabilities from a model's raw scores (numerically stable).

    Parameters
    ----------
    logits : (C,) float ndarray

    Returns
    -------
    (C,) float64 ndarray, non-negative, summing to 1.
    """
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()
