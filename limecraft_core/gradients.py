"""Gradients pooled per region: Integrated Gradients and Grad-CAM over an explanation's regions.

The table of explainers' ``ig`` and ``gradcam`` (:data:`~limecraft_core.explainer_table.
EXPLAINERS`) attribute from the model's gradients, not from scored masks, through captum
(imported when they run). They need a scorer with the gradient capability
(:class:`~limecraft_core.scorer.GradientScorer`: the local :class:`~limecraft_core.Classifier`
over a torch model, or over an ONNX graph that has a torch twin, as EfficientNet-Lite0 has).
Any other scorer (a model file run by ONNX Runtime, the work queue, a Ray Serve replica)
refuses with a :class:`~limecraft_core.LimecraftError` that says why, before any model pass.

They see what the other methods see: the image at the model's input size, the same label map
(ids 0..K-1), and the same output (probability or raw score) of the explained class.

- **Integrated Gradients** runs the straight path from the baseline, the image with every
  region hidden by the fill (the empty coalition's image), to the image, and sums the
  attribution over each region's pixels: the K values add up to f(all) - f(none), as Shapley
  values do (completeness, to the path integral's error; the note states it).
- **Grad-CAM** on the module's last ``Conv2d`` (last registered): the channel-weighted map,
  ReLU'd, upsampled bilinearly to the input size and averaged over each region. Its values
  are >= 0 and on the layer's scale, not the output's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from ._validate import LimecraftError
from .explainer_table import EXPLAINERS, IG_STEPS
from .perturb import Fill, compose_batch

__all__ = ["IG_STEPS", "GradientModel", "GradientScene", "gradient_model_for", "gradient_scene"]


@dataclass(frozen=True, eq=False)
class GradientModel:
    """A model as a differentiable function of the pixels (:meth:`Classifier.gradient_model`).

    Attributes
    ----------
    forward : callable, (B, 3, h, w) float32 tensor in [0, 1] -> (B, C) float32 raw scores,
        with the preprocessing (resize, normalisation) as torch ops, so gradients reach pixels
    module : torch.nn.Module or None, the module that ``forward`` runs (its layers, for
        Grad-CAM); None for a plain callable
    name : str, the model's name
    """

    forward: Callable[[torch.Tensor], torch.Tensor]
    module: torch.nn.Module | None
    name: str


def _region_sum(values: torch.Tensor, labels: torch.Tensor, k: int) -> torch.Tensor:
    """(h, w) per-pixel values summed over each region 0..K-1, as a (K,) float64 tensor."""
    out = torch.zeros(k, dtype=torch.float64, device=values.device)
    return out.index_add_(0, labels.reshape(-1), values.reshape(-1).double())


def last_conv(module: torch.nn.Module | None) -> tuple[str, torch.nn.Conv2d] | None:
    """The last registered ``Conv2d`` of ``module`` and its name, or None when it has none."""
    found = None
    for name, m in module.named_modules() if module is not None else ():
        if isinstance(m, torch.nn.Conv2d):
            found = (name, m)
    return found


@dataclass(frozen=True, eq=False)
class GradientScene:
    """What a gradient method attributes from: a differentiable model and the scene.

    Attributes
    ----------
    model : GradientModel
    image : (3, h, w) float32 tensor in [0, 1], the image at the model's input size
    baseline : (3, h, w) float32 tensor, the image with every region hidden by the fill
    labels : (h, w) int64 tensor, region ids 0..K-1
    n_regions : int, K
    probability : bool, attribute the softmax probability (else the raw score)
    batch_size : int, images per forward and backward pass
    target : int, the explained class (-1 until :meth:`aimed`)
    """

    model: GradientModel
    image: torch.Tensor
    baseline: torch.Tensor
    labels: torch.Tensor
    n_regions: int
    probability: bool
    batch_size: int
    target: int = -1

    def aimed(self, target: int) -> GradientScene:
        """The same scene, explaining class ``target``."""
        return replace(self, target=int(target))

    def output(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C) outputs in the explanation's output space, differentiable in ``x``."""
        raw = self.model.forward(x)
        if not raw.requires_grad and x.requires_grad:
            raise LimecraftError(
                f"the model {self.model.name!r} gives no gradients (its output does not depend "
                "on its input through torch operations); gradient methods need a torch model"
            )
        return torch.softmax(raw, dim=1) if self.probability else raw

    def integrated_gradients(self, steps: int = IG_STEPS) -> tuple[np.ndarray, float, float]:
        """Integrated Gradients summed per region, the completeness gap and what they share.

        Returns
        -------
        values : (K,) float64 ndarray
        gap : float, |sum(values) - (f(image) - f(baseline))|, the path integral's error
        span : float, |f(image) - f(baseline)|, what the values should add up to
        """
        from captum.attr import IntegratedGradients  # run time only

        x, b = self.image[None].float(), self.baseline[None].float()
        attr, delta = IntegratedGradients(self.output).attribute(
            x,
            baselines=b,
            target=self.target,
            n_steps=steps,
            method="gausslegendre",
            internal_batch_size=max(1, self.batch_size),
            return_convergence_delta=True,
        )
        values = _region_sum(attr[0].detach().sum(0), self.labels, self.n_regions).cpu().numpy()
        d = float(delta.reshape(-1)[0])  # captum's: sum(attributions) - (f(image) - f(baseline))
        return values, abs(d), abs(float(values.sum()) - d)

    def grad_cam(self) -> tuple[np.ndarray, str]:
        """Grad-CAM on the last ``Conv2d``, averaged per region, and the layer's name.

        Raises
        ------
        LimecraftError : the model is no torch Module with a Conv2d layer
        """
        from captum.attr import LayerAttribution, LayerGradCam  # run time only

        found = last_conv(self.model.module)
        if found is None:
            raise LimecraftError(
                f"gradcam needs a convolutional layer (torch.nn.Conv2d); the model "
                f"{self.model.name!r} has none: use ig for its gradients"
            )
        name, layer = found
        x = self.image[None].float().clone().requires_grad_(True)
        cam = LayerGradCam(self.output, layer).attribute(
            x, target=self.target, relu_attributions=True
        )
        up = LayerAttribution.interpolate(
            cam.detach().float(), tuple(self.labels.shape), interpolate_mode="bilinear"
        )
        sums = _region_sum(up[0, 0], self.labels, self.n_regions)
        counts = torch.bincount(self.labels.reshape(-1), minlength=self.n_regions)
        return (sums / counts.clamp(min=1)).cpu().numpy(), name


def _scores_only() -> str:
    return ", ".join(n for n, e in EXPLAINERS.items() if not e.gradients)


def gradient_model_for(scorer: object, methods: Sequence[str]) -> GradientModel | None:
    """The scorer's :class:`GradientModel` when ``methods`` (names) need one, else None.

    Raises
    ------
    LimecraftError : the scorer has no gradient capability (an ONNX graph without a torch
        twin, the work queue, a Ray Serve replica); the message says why and what to use
    """
    if not methods:
        return None
    names = " and ".join(methods)
    need = f"{names} need{'s' if len(methods) == 1 else ''} a local torch model"
    get = getattr(scorer, "gradient_model", None)
    if get is None:
        raise LimecraftError(
            f"{need}: the scorer {getattr(scorer, 'name', '?')!r} ({type(scorer).__name__}) "
            "returns scores only (a work queue or a Ray Serve replica scores elsewhere); explain "
            f"with a local torch model, or choose among {_scores_only()}"
        )
    try:
        return get()
    except LimecraftError as e:
        raise LimecraftError(f"{need}: {e}; or choose among {_scores_only()}") from None


def gradient_scene(
    model: GradientModel,
    image: torch.Tensor,
    fill: torch.Tensor | Fill,
    labels: torch.Tensor,
    n_regions: int,
    *,
    probability: bool,
    batch_size: int,
) -> GradientScene:
    """The :class:`GradientScene` of a scene (the engine's ``Scene`` tensors, at the model's
    input size): its baseline is the fill composed with every region hidden, so it is the
    image the other methods score for the empty coalition (any fill, ``inpaint`` included)."""
    none = torch.zeros((1, n_regions), dtype=torch.bool, device=image.device)
    with torch.no_grad():
        baseline = compose_batch(image, fill, labels, none)[0].float()
    return GradientScene(
        model=model,
        image=image.detach().float(),
        baseline=baseline,
        labels=labels,
        n_regions=n_regions,
        probability=probability,
        batch_size=batch_size,
    )
