"""The local surrogate: a similarity kernel and a weighted ridge fit.

The fit is closed form, for all classes at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ._validate import LimecraftError, check_float
from .limits import flat_scores

__all__ = [
    "Kernel",
    "SurrogateFit",
    "cosine_distance",
    "exponential_kernel",
    "fit_ridge",
    "make_kernel",
    "uniform_kernel",
]

#: A kernel maps distances (N,) to sample weights (N,).
Kernel = Callable[[np.ndarray], np.ndarray]


def cosine_distance(masks: np.ndarray) -> np.ndarray:
    """Cosine distance between each binary mask and the all-ones original.

    Parameters
    ----------
    masks : (N, K) bool ndarray

    Returns
    -------
    (N,) float64 ndarray; ``1 - sqrt(k / K)`` for k active regions (1 for the empty mask,
    as in scikit-learn's ``pairwise_distances`` used by the lime package).
    """
    k = masks.sum(axis=1, dtype=np.float64)
    return 1.0 - np.sqrt(k / masks.shape[1])


def exponential_kernel(width: float = 0.25) -> Kernel:
    """lime's kernel, ``sqrt(exp(-d**2 / width**2))``."""
    width = check_float("kernel_width", width, 0.0, lo_open=True)

    def kernel(d: np.ndarray) -> np.ndarray:
        return np.sqrt(np.exp(-(d**2) / width**2))

    kernel.__name__ = f"exponential(width={width:g})"
    return kernel


def uniform_kernel() -> Kernel:
    """Every sample weighs the same."""

    def kernel(d: np.ndarray) -> np.ndarray:
        return np.ones_like(d, dtype=np.float64)

    kernel.__name__ = "uniform"
    return kernel


def make_kernel(kernel_width: float | str) -> Kernel:
    """``"uniform"`` gives the uniform kernel; a number the exponential kernel of that width."""
    if isinstance(kernel_width, str):
        if kernel_width == "uniform":
            return uniform_kernel()
        try:
            kernel_width = float(kernel_width)
        except ValueError:
            raise LimecraftError(
                f"kernel_width must be a positive number or 'uniform'; got {kernel_width!r}"
            ) from None
    return exponential_kernel(kernel_width)


@dataclass(frozen=True)
class SurrogateFit:
    """A weighted ridge fit for L classes over K regions.

    Attributes
    ----------
    coef : (L, K) float64 ndarray, the weight of each region per class
    intercept : (L,) float64 ndarray
    score : (L,) float64 ndarray, weighted R^2 on the fitted samples
    local_prediction : (L,) float64 ndarray, the surrogate's output for the original (all on)
    """

    coef: np.ndarray
    intercept: np.ndarray
    score: np.ndarray
    local_prediction: np.ndarray


def flat_columns(y: torch.Tensor) -> torch.Tensor:
    """(L,) bool: the columns of the (N, L) scores ``y`` that are the same for every sample
    (:func:`~limecraft_core.limits.flat_scores`)."""
    spread, largest = y.amax(0) - y.amin(0), y.abs().amax(0)
    return torch.as_tensor(
        flat_scores(spread.cpu().numpy(), largest.cpu().numpy()), device=y.device
    )


def fit_ridge(
    masks: np.ndarray | torch.Tensor,
    outputs: np.ndarray | torch.Tensor,
    sample_weight: np.ndarray | torch.Tensor,
    alpha: float = 1.0,
) -> SurrogateFit:
    """Weighted ridge regression with an unpenalised intercept, solved in closed form.

    Minimises ``sum_i w_i (y_i - x_i b - c)^2 + alpha ||b||^2`` for every output column at
    once, as scikit-learn's ``Ridge(alpha).fit(X, y, sample_weight=w)`` does. Runs in float64
    on the device of ``outputs`` when it is a tensor.

    Parameters
    ----------
    masks : (N, K) bool or float, the interpretable inputs
    outputs : (N, L) float, the model's outputs for each sample
    sample_weight : (N,) float >= 0
    alpha : float >= 0

    Returns
    -------
    SurrogateFit
    """
    alpha = check_float("ridge_alpha", alpha, 0.0)
    device = outputs.device if isinstance(outputs, torch.Tensor) else torch.device("cpu")

    def t(a: np.ndarray | torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(a).to(device=device, dtype=torch.float64)

    x, y, w = t(masks), t(outputs), t(sample_weight)
    if y.ndim == 1:
        y = y[:, None]
    if x.shape[0] != y.shape[0] or w.shape != (x.shape[0],):
        raise LimecraftError("masks, outputs and sample_weight must have the same number of rows")
    if float(w.sum()) <= 0:
        raise LimecraftError("all sample weights are zero; use a wider kernel")
    ws = w / w.sum()
    xm = ws @ x
    ym = ws @ y
    xc, yc = x - xm, y - ym
    a = xc.T @ (ws[:, None] * xc) + (alpha / float(w.sum())) * torch.eye(
        x.shape[1], dtype=x.dtype, device=device
    )
    b = xc.T @ (ws[:, None] * yc)
    try:
        coef = torch.linalg.solve(a, b)
    except RuntimeError:  # singular (alpha = 0 and too few distinct samples)
        coef = torch.linalg.pinv(a) @ b
    # a class whose score is the same for every sample has no weights: what the solve returns
    # there is the rounding of the centring (about 1e-29), not a weight (:func:`flat_columns`)
    coef[:, flat_columns(y)] = 0.0
    intercept = ym - xm @ coef
    pred = x @ coef + intercept
    ss_res = ws @ (y - pred) ** 2
    ss_tot = ws @ yc**2
    perfect = ss_res <= 1e-12 * torch.clamp(ss_tot, min=1e-300)
    score = torch.where(
        ss_tot > 0, 1.0 - ss_res / torch.clamp(ss_tot, min=1e-300), perfect.double()
    )
    local = intercept + coef.sum(dim=0)
    return SurrogateFit(
        coef=coef.T.cpu().numpy(),
        intercept=intercept.cpu().numpy(),
        score=score.cpu().numpy(),
        local_prediction=local.cpu().numpy(),
    )
