"""The one interface the engine talks to a model through: a batched classifier on a device.

It takes float32 (B, 3, H, W) tensors in [0, 1] on its device, resizes them to the model's input
size, normalises them, runs the model under ``inference_mode`` (and autocast on a GPU), and
checks that the output is a finite (B, C) array.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from ._system import cpu_flags
from ._validate import LimecraftError, ModelError, as_float_image, check_choice, check_int
from .fill_table import Fill
from .tensors import resize_chw, to_chw

if TYPE_CHECKING:
    from .gradients import GradientModel

__all__ = [
    "NORMALIZATIONS",
    "PRECISIONS",
    "Classifier",
    "ModelError",
    "cpu_has_native_bf16",
    "resolve_device",
]

NORMALIZATIONS: dict[str, tuple[tuple[float, ...], tuple[float, ...]] | None] = {
    "none": None,
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    # TF-style models (EfficientNet-Lite, MobileNet from TF): (x - 0.5) / 0.5, so [-1, 1]
    "half": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
}
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# precision="auto" on a CPU with native bf16 decides per image, on this-many LIME-like
# perturbations of it (the image itself first): bf16 when the top class of the image is the same
# in both precisions, the top class's probability under bf16 correlates with fp32's at least this
# much, and the image's top-2 probabilities (fp32) lie further apart than bf16's error on these
# images. At 0.9, bf16's rounding adds at most about a fifth of the variance LIME fits, as noise;
# the verdict, which resamples the scores, sees it. Random-weight resnet50 on photos measures
# 0.90-0.99 (its scores vary little), convnext_tiny 0.99+; bench/bench_fast.py checks that the top
# regions then agree with an fp32 reference.
BF16_CHECK_ROWS, BF16_MIN_CORR = 8, 0.9


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX-512 BF16 or AMX), where bf16 autocast is
    about twice as fast as fp32 for CNNs. ``LIMECRAFT_CPU_BF16=0`` or ``1`` overrides."""
    import os

    forced = os.environ.get("LIMECRAFT_CPU_BF16")
    if forced in ("0", "1"):
        return forced == "1"
    flags = cpu_flags()
    if flags is None:  # not Linux: fp32
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``auto`` is cuda when available, else cpu. Raises LimecraftError for an unusable device."""
    if isinstance(device, torch.device):
        return device
    check_choice("device", device, ("auto", "cpu", "cuda"))
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise LimecraftError("device 'cuda' was asked for but no CUDA GPU is available; use 'cpu'")
    return torch.device(device)


class Classifier:
    """A batched image classifier on one device; thread-safe for concurrent forwards.

    Parameters
    ----------
    model : torch.nn.Module or callable
        Maps a float32 tensor (B, 3, h, w) to (B, C) scores. A Module is put in eval mode and
        moved to ``device``.
    input_size : int or (h, w), optional
        Inputs are resized (bilinear, antialiased) to this size; ``None`` keeps the image's size.
    normalize : {"none", "imagenet", "half"}
        Applied after resizing, on the device: ImageNet's mean and std, or (x − 0.5) / 0.5
        (TF-style models such as EfficientNet-Lite).
    labels : sequence of str, optional
        Class names; default ``class 0``, ``class 1``, ...
    device : {"auto", "cpu", "cuda"} or torch.device
    precision : {"auto", "fp32", "bf16", "fp16"}
        ``auto`` is bf16 (or fp16) autocast on a GPU. On a CPU it is fp32, except that an
        explanation's perturbations (:meth:`run_masks`) run in bf16 where the CPU does bf16
        natively (:func:`cpu_has_native_bf16`) and bf16 agrees with fp32 on *that image*
        (:meth:`decide_precision`, decided per image and remembered per image, never carried
        from one image to the next). :attr:`precision_reason` says what was chosen and why;
        :meth:`precision_for` says it for one image.
    channels_last : bool, optional
        Default: True for a torch Module with 2-D convolutions (NHWC convolutions are faster on
        CPUs and GPUs); False for other models, where the layout change is only a copy of every
        batch.
    name : str
    gradient_module : callable() -> torch.nn.Module, optional
        The same model as a torch Module, built the first time a gradient method asks
        (:meth:`gradient_model`), for a ``model`` that gives no gradients itself (an ONNX
        graph run by ONNX Runtime, as EfficientNet-Lite0 on a CPU).
    """

    def __init__(
        self,
        model: torch.nn.Module | Callable[[torch.Tensor], Any],
        *,
        input_size: int | tuple[int, int] | None = None,
        normalize: str = "none",
        labels: Sequence[str] | None = None,
        device: str | torch.device = "auto",
        precision: str = "auto",
        channels_last: bool | None = None,
        name: str = "custom",
        gradient_module: Callable[[], torch.nn.Module] | None = None,
    ) -> None:
        if not callable(model):
            raise LimecraftError(
                f"model must be a torch.nn.Module, a callable, or a registry name; got {type(model).__name__}"
            )
        self.device = resolve_device(device)
        check_choice("normalize", normalize, tuple(NORMALIZATIONS))
        check_choice("precision", precision, PRECISIONS)
        if isinstance(input_size, (int, np.integer)):
            input_size = (int(input_size), int(input_size))
        if input_size is not None:
            input_size = (
                check_int("input_size", input_size[0], 8, 4096),
                check_int("input_size", input_size[1], 8, 4096),
            )
        self.input_size: tuple[int, int] | None = input_size
        self.normalize = normalize
        self.name = name
        self._labels = tuple(labels) if labels is not None else None
        self.precision_reason = f"{precision} as asked"
        self._per_image = False
        if precision == "auto":
            precision = "fp32"
            self.precision_reason = "fp32: this CPU has no native bf16 (AVX-512 BF16 or AMX)"
            if self.device.type == "cuda":
                precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
                self.precision_reason = f"{precision} autocast on the GPU"
            elif isinstance(model, torch.nn.Module) and cpu_has_native_bf16():
                self._per_image = True  # decided per image (see decide_precision)
                self.precision_reason = (
                    "decided per image: bf16 where this CPU's native bf16 agrees with fp32 on "
                    "the image, else fp32"
                )
        self.precision = precision
        self._lock = threading.Lock()
        self._gradient_module, self._twin = gradient_module, None
        self._decisions: OrderedDict[bytes, tuple[str, str]] = OrderedDict()
        if channels_last is None:  # it pays for convolutions; elsewhere it is a copy per batch
            channels_last = isinstance(model, torch.nn.Module) and any(
                isinstance(m, torch.nn.Conv2d) for m in model.modules()
            )
        self.channels_last = channels_last
        if isinstance(model, torch.nn.Module):
            with contextlib.suppress(NotImplementedError):  # torch.export modules refuse eval()
                model.eval()
            model = model.to(self.device)
            if self.channels_last:
                model = model.to(memory_format=torch.channels_last)
        self.model = model
        norm = NORMALIZATIONS[normalize]
        self._mean = self._std = None
        if norm is not None:
            self._mean = torch.tensor(norm[0], device=self.device).view(1, 3, 1, 1)
            self._std = torch.tensor(norm[1], device=self.device).view(1, 3, 1, 1)

    def __repr__(self) -> str:
        return (
            f"Classifier(name={self.name!r}, input_size={self.input_size}, "
            f"normalize={self.normalize!r}, device={self.device.type!r}, precision={self.precision!r})"
        )

    def label(self, index: int) -> str:
        """Name of class ``index``."""
        return class_label(self._labels, index)

    @property
    def labels(self) -> tuple[str, ...] | None:
        """Class names, if known."""
        return self._labels

    def preprocess(self, batch: torch.Tensor) -> torch.Tensor:
        """Resize and normalise a (B, 3, H, W) [0, 1] batch on the device."""
        x = batch
        if self.input_size is not None and tuple(x.shape[-2:]) != self.input_size:
            x = resize_chw(x, self.input_size)
        if self._mean is not None:
            x = (x - self._mean) / self._std
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return x

    def gradient_model(self) -> GradientModel:
        """The model as a differentiable function of the pixels, for the gradient methods.

        Its ``forward`` runs :meth:`preprocess` (torch ops) and the model in fp32, outside
        ``inference_mode``, so gradients reach the pixels. A model that gives no gradients
        itself (an ONNX graph: its module says so) runs its ``gradient_module`` instead,
        built once, on first use.

        Returns
        -------
        GradientModel

        Raises
        ------
        LimecraftError : the model gives no gradients and no ``gradient_module`` was given
        """
        from .gradients import GradientModel

        module = self.model
        refusal = _no_gradients(module)
        if refusal:
            if self._gradient_module is None:
                raise LimecraftError(f"the model {self.name!r} {refusal}")
            with self._lock:
                if self._twin is None:
                    self._twin = self._gradient_module().eval().to(self.device)
                module = self._twin

        def forward(batch: torch.Tensor) -> torch.Tensor:
            try:
                out = module(self.preprocess(batch))
            except Exception as e:  # the user's model: report, never crash the caller
                raise ModelError(f"the model {self.name!r} failed: {type(e).__name__}: {e}") from e
            return self._checked(out, batch.shape[0])

        return GradientModel(
            forward, module if isinstance(module, torch.nn.Module) else None, self.name
        )

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        """Scores for a batch.

        Parameters
        ----------
        batch : (B, 3, H, W) float32 tensor in [0, 1] on ``self.device``

        Returns
        -------
        (B, C) float32 tensor on ``self.device``.

        Raises
        ------
        ModelError
            If the model raises, or returns something other than finite (B, C) scores.
        """
        return self._score(batch, self.precision)

    def _score(self, batch: torch.Tensor, precision: str) -> torch.Tensor:
        """:meth:`__call__` in the given precision."""
        return self._checked(self._forward(self.preprocess(batch), precision), batch.shape[0])

    def _forward(self, x: torch.Tensor, precision: str) -> Any:
        autocast = (
            torch.autocast(self.device.type, dtype=_DTYPES[precision])
            if precision in _DTYPES
            else contextlib.nullcontext()
        )
        try:
            with torch.inference_mode(), autocast:
                return self.model(x)
        except torch.OutOfMemoryError:
            raise
        except Exception as e:  # the user's model: report, never crash the caller
            raise ModelError(f"the model {self.name!r} failed: {type(e).__name__}: {e}") from e

    def settle_precision(self, image: np.ndarray | None = None) -> str:
        """The precision an explanation of ``image`` runs in (default scikit-image's chelsea):
        for a server that reports its precision before it scores anything."""
        if image is None:
            from skimage import data

            image = data.chelsea()
        x = to_chw(as_float_image(image))
        return self.decide_precision(x.to(self.device))[0]

    def precision_for(self, image: torch.Tensor) -> tuple[str, str]:
        """(precision, reason) for an explanation of ``image`` ((3, H, W) in [0, 1]): what
        :meth:`run_masks` ran it in, or would."""
        return self.decide_precision(image)

    def decide_precision(self, image: torch.Tensor) -> tuple[str, str]:
        """(precision, reason) for the perturbations of ``image`` ((3, H, W) float in [0, 1]).

        Fixed precisions answer at once. precision="auto" on a native-bf16 CPU decides for this
        image alone and remembers the answer by the image's pixels, so an image gets the same
        answer whatever was explained before it: on :data:`BF16_CHECK_ROWS` perturbations of
        it (the image itself, then random cells of a 4x4 grid hidden with gray, as LIME's
        samples are), bf16 is kept when the image's top class is the same in both precisions,
        the correlation of that class's probability is at least :data:`BF16_MIN_CORR`, and the
        image's top-2 probabilities (fp32) lie further apart than twice bf16's largest error on
        those two classes. Otherwise fp32.
        """
        if not self._per_image:
            return self.precision, self.precision_reason
        x = image.detach().float().cpu().contiguous()
        key = hashlib.sha1(x.numpy().tobytes()).digest() + str(tuple(x.shape)).encode()
        with self._lock:
            found = self._decisions.get(key)
            if found is not None:
                self._decisions.move_to_end(key)
                return found
        decided = self._check_bf16(x.to(self.device))
        with self._lock:
            self._decisions[key] = decided
            while len(self._decisions) > 256:
                self._decisions.popitem(last=False)
        return decided

    def _check_bf16(self, image: torch.Tensor) -> tuple[str, str]:
        """:meth:`decide_precision`'s test on one image (see there)."""
        size = self.input_size or tuple(image.shape[-2:])
        x = resize_chw(image, size)
        rng = np.random.default_rng(0)
        keep = torch.from_numpy(rng.random((BF16_CHECK_ROWS, 4, 4)) < 0.5)
        keep[0] = True  # the image itself first, as in an explanation
        cells = F.interpolate(keep[:, None].float(), size=size, mode="nearest").to(x.device)
        batch = cells * x + (1 - cells) * 0.5
        m = BF16_CHECK_ROWS
        p32 = torch.softmax(self._score(batch, "fp32"), 1).double()
        p16 = torch.softmax(self._score(batch, "bf16"), 1).double()
        top2 = torch.topk(p32[0], min(2, p32.shape[1])).indices
        c = int(top2[0])
        same_top = int(torch.argmax(p16[0])) == c
        if float(p32[:, c].std()) == 0.0:
            corr = 1.0 if bool(torch.equal(p32[:, c], p16[:, c])) else 0.0
        else:
            corr = float(torch.corrcoef(torch.stack([p32[:, c], p16[:, c]]))[0, 1])
            corr = 0.0 if np.isnan(corr) else corr  # bf16 flat where fp32 varies
        err = float((p32[:, top2] - p16[:, top2]).abs().max())
        margin = float(p32[0, c] - p32[0, top2[-1]]) if len(top2) > 1 else 1.0
        close = margin <= 2 * err
        keep_bf16 = same_top and corr >= BF16_MIN_CORR and not close
        chosen = "bf16" if keep_bf16 else "fp32"
        why = (
            "agrees with fp32"
            if keep_bf16
            else "does not agree with fp32"
            if not same_top or corr < BF16_MIN_CORR
            else "is too coarse for it"
        )
        return chosen, (
            f"{chosen}, decided for this image: this CPU does bf16 natively and bf16 {why} on "
            f"{m} perturbations of it (correlation {corr:.4f} of the top class's probability; "
            f"top class {'the same' if same_top else 'changed'}; top-2 margin {margin:.4f}, "
            f"bf16 error {err:.4f})"
        )

    def _checked(self, out: Any, n: int) -> torch.Tensor:
        """The model's output as finite (n, C) float32 scores, or a ModelError saying why not."""
        if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
            out = out[0]  # e.g. inception's (logits, aux) in some modes
        if hasattr(out, "logits") and isinstance(out.logits, torch.Tensor):
            out = out.logits
        if not isinstance(out, torch.Tensor):
            try:
                out = torch.as_tensor(np.asarray(out), device=self.device)
            except Exception:
                raise ModelError(
                    f"the model {self.name!r} returned {type(out).__name__}; it must return (N, C) scores"
                ) from None
        if out.ndim != 2 or out.shape[0] != n:
            raise ModelError(
                f"the model {self.name!r} must return scores of shape (N, C); for a batch of {n} "
                f"images it returned shape {tuple(out.shape)}"
            )
        out = out.float()
        if not bool(torch.isfinite(out).all()):
            raise ModelError(f"the model {self.name!r} returned NaN or infinite scores")
        return out

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
        """Scores for the perturbations ``masks`` of ``image`` (the engine's one entry point).

        The engine sends the image, the fill and the label map once, plus the (N, K) binary
        masks; the perturbed images are composed next to the model. This local version streams
        them through :func:`limecraft_core.perturb.run_masks`. This is the
        :class:`~limecraft_core.scorer.Scorer` protocol's method: ``serving.QueuedScorer`` (a
        work queue shared by sessions) and ``serving.RemoteScorer`` (a Ray Serve replica)
        implement it too, composing and running elsewhere with the same arguments and result.

        Returns
        -------
        (N, C) float32 tensor of raw scores.
        """
        from .perturb import run_masks

        precision = self.decide_precision(image)[0]
        return run_masks(
            lambda batch: self._score(batch, precision),
            image,
            fill,
            labels,
            masks,
            batch_size,
            progress=progress,
            cancel=cancel,
            expand=expand,
        )

    def predict(self, images: np.ndarray, batch_size: int = 32) -> np.ndarray:
        """Raw scores for images given as arrays.

        Parameters
        ----------
        images : (H, W, 3) or (B, H, W, 3) uint8 ndarray, or float in [0, 1]

        Returns
        -------
        (C,) or (B, C) float32 ndarray.
        """
        return predict_arrays(self, images, batch_size, self.device)


def _no_gradients(model: Any) -> str:
    """Why ``model`` gives no gradients ("" when it may): a module says so by its attribute
    ``gradients_unavailable`` (models.onnx_model.OnnxModule does), wherever it is wrapped."""
    if not isinstance(model, torch.nn.Module):
        return ""
    for m in model.modules():
        why = getattr(m, "gradients_unavailable", "")
        if why:
            return str(why)
    return ""


def class_label(labels: Sequence[str] | None, index: int) -> str:
    """Name of class ``index`` from ``labels``, or ``class i`` when there is none."""
    if labels is not None and 0 <= index < len(labels):
        return labels[index]
    return f"class {index}"


def predict_arrays(
    forward: Callable[[torch.Tensor], torch.Tensor],
    images: np.ndarray,
    batch_size: int,
    device: torch.device | str = "cpu",
) -> np.ndarray:
    """Scores of images given as arrays, ``batch_size`` at a time through ``forward``.

    Parameters
    ----------
    images : (H, W, 3) or (B, H, W, 3) uint8 ndarray, or float in [0, 1]

    Returns
    -------
    (C,) or (B, C) float32 ndarray.
    """
    single = images.ndim == 3
    batch = [as_float_image(im) for im in (images[None] if single else images)]
    outs = []
    for i in range(0, len(batch), batch_size):
        outs.append(forward(to_chw(np.stack(batch[i : i + batch_size]), device)).cpu())
    out = torch.cat(outs).numpy()
    return out[0] if single else out
