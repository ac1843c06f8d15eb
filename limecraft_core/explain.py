"""LIME over regions, end to end: the ``explain`` call and its result."""

from __future__ import annotations

import base64
import io
import json
import platform
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from . import __version__
from . import trust as _trust
from ._validate import (
    MAX_PIXELS,
    LimecraftError,
    as_float_image,
    check_choice,
    check_float,
    check_int,
    check_label_map,
)
from .classifier import Classifier, resolve_device
from .perturbation import (
    Fill,
    MaskCache,
    MaskSample,
    check_fill,
    default_batch_size,
    make_fill,
    sample_masks,
)
from .segmentation import (
    METHODS,
    Regions,
    compose_regions,
    regions_from_labels,
    resize_nearest,
    segment,
)
from .surrogate import Kernel, cosine_distance, fit_ridge, make_kernel

__all__ = ["OUTPUT_SPACES", "Explanation", "explain", "resolve_classifier"]

OUTPUT_SPACES = ("probability", "raw")
JSON_FORMAT = "limecraft-explanation"
JSON_VERSION = 1


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"limecraft": __version__, "python": platform.python_version()}
    for pkg in ("numpy", "torch", "torchvision", "scikit-image", "pillow"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _nullable(a: np.ndarray) -> list[float | None]:
    return [float(x) if np.isfinite(x) else None for x in a]


def _jsonable(v: Any) -> Any:
    """Settings values as plain JSON types (numpy scalars and tuples become numbers and lists)."""
    if isinstance(v, dict):
        return {str(a): _jsonable(b) for a, b in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


TRUST_KEYS = ("stability", "convergence", "kernel_sweep", "faithfulness", "fills", "early_stop")


def _plain_json(v: Any, depth: int = 0) -> Any:
    """Accept only plain JSON values (dicts, lists, numbers, strings, null), a few levels deep."""
    if depth > 6:
        raise ValueError("nested too deeply")
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise ValueError("object keys must be strings")
        return {k: _plain_json(x, depth + 1) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain_json(x, depth + 1) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise ValueError(f"unexpected value {v!r}")


def _encode_array(a: np.ndarray) -> dict[str, Any]:
    buf = io.BytesIO()
    np.savez_compressed(buf, a=a)
    return {"encoding": "npz-base64", "data": base64.b64encode(buf.getvalue()).decode("ascii")}


def _decode_array(d: Any) -> np.ndarray:
    if (
        not isinstance(d, dict)
        or d.get("encoding") != "npz-base64"
        or not isinstance(d.get("data"), str)
    ):
        raise LimecraftError("explanation JSON: 'segments' must be {encoding: npz-base64, data}")
    try:
        raw = io.BytesIO(base64.b64decode(d["data"], validate=True))
        # Read the array's header before inflating it: a few KB of zeros can inflate to GBs.
        with zipfile.ZipFile(raw) as zf, zf.open("a.npy") as f:
            fmt = np.lib.format
            version = fmt.read_magic(f)
            read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, _, dtype = read(f)
        if len(shape) != 2 or int(np.prod(shape)) > MAX_PIXELS or dtype.kind not in "iu":
            raise LimecraftError(
                f"explanation JSON: 'segments' must be a 2-D integer label map of at most "
                f"{MAX_PIXELS:,} pixels; it is {dtype} of shape {tuple(shape)}"
            )
        raw.seek(0)
        with np.load(raw, allow_pickle=False) as z:
            return z["a"]
    except LimecraftError:
        raise
    except Exception as e:
        raise LimecraftError(f"explanation JSON: 'segments' could not be decoded ({e})") from None


@dataclass(frozen=True, eq=False)
class Explanation:
    """The result of :func:`explain`. Arrays are per explained class (L) and per region (K).

    Attributes
    ----------
    settings : dict, every option's effective value
    segments : (H, W) int32 ndarray, region ids 0..K-1 at the image's own resolution
    region_keys, region_names : tuple of str, per region (stable identity, display name)
    region_pixels : (K,) int64 ndarray
    classes : tuple of int, the explained classes; ``classes[0]`` is the target
    class_labels : tuple of str
    class_weights : (L, K) float64 ndarray, region weights per class
    intercepts, scores, local_predictions : (L,) float64 ndarrays
        The surrogate's intercept, weighted R^2 (fidelity) and prediction for the original.
    predictions : (L,) float64 ndarray, the model's output for the original image
    deltas : (L, K) float64 ndarray, output(original) - output(only region k hidden)
    kept_alone : (L, K) float64 ndarray, output with only region k kept
    top_predictions : tuple of (index, label, score), the model's top 5 on the original
    timings : dict of seconds
    versions : dict of package versions
    trust : dict, the trust checks that were asked for (``stability``, ``convergence``,
        ``kernel_sweep``, ``faithfulness``, ``fills``), each JSON-ready; see ``limecraft_core.trust``
    """

    settings: dict[str, Any]
    segments: np.ndarray
    region_keys: tuple[str, ...]
    region_names: tuple[str, ...]
    region_pixels: np.ndarray
    classes: tuple[int, ...]
    class_labels: tuple[str, ...]
    class_weights: np.ndarray
    intercepts: np.ndarray
    scores: np.ndarray
    local_predictions: np.ndarray
    predictions: np.ndarray
    deltas: np.ndarray
    kept_alone: np.ndarray
    top_predictions: tuple[tuple[int, str, float], ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    trust: dict[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> int:
        """The explained class (top-1 unless a target was given)."""
        return self.classes[0]

    @property
    def weights(self) -> np.ndarray:
        """(K,) float64 ndarray, region weights for the target class."""
        return self.class_weights[0]

    @property
    def intercept(self) -> float:
        """The surrogate's intercept for the target class."""
        return float(self.intercepts[0])

    @property
    def score(self) -> float:
        """Weighted R^2 of the surrogate for the target class."""
        return float(self.scores[0])

    @property
    def verdict(self) -> str | None:
        """``stable``, ``borderline`` or ``unstable`` when repeats were run, else None."""
        return self.trust.get("stability", {}).get("verdict")

    @property
    def n_regions(self) -> int:
        """Number of regions K."""
        return len(self.region_pixels)

    def class_index(self, cls: int) -> int:
        """Row of class ``cls`` in the per-class arrays."""
        try:
            return self.classes.index(int(cls))
        except ValueError:
            raise LimecraftError(
                f"class {cls} was not explained; explained: {list(self.classes)}"
            ) from None

    def regions_table(self, cls: int | None = None) -> list[dict[str, Any]]:
        """One row per region for class ``cls`` (default: the target)."""
        i = 0 if cls is None else self.class_index(cls)
        return [
            {
                "id": k,
                "key": self.region_keys[k],
                "name": self.region_names[k],
                "pixels": int(self.region_pixels[k]),
                "weight": float(self.class_weights[i, k]),
                "delta": float(self.deltas[i, k]),
                "kept_alone": float(self.kept_alone[i, k]),
            }
            for k in range(self.n_regions)
        ]

    def to_dict(self, include_segments: bool = True) -> dict[str, Any]:
        """A JSON-ready dict; see :meth:`to_json`."""
        h, w = self.segments.shape
        d: dict[str, Any] = {
            "format": JSON_FORMAT,
            "format_version": JSON_VERSION,
            "settings": self.settings,
            "image": {"width": int(w), "height": int(h)},
            "target": {
                "index": int(self.target),
                "label": self.class_labels[0],
                "score": float(self.predictions[0]),
            },
            "intercept": self.intercept,
            "score": self.score,
            "regions": [
                {
                    key: (None if isinstance(v, float) and not np.isfinite(v) else v)
                    for key, v in r.items()
                }
                for r in self.regions_table()
            ],
            "classes": [
                {
                    "index": int(c),
                    "label": self.class_labels[i],
                    "prediction": float(self.predictions[i]),
                    "intercept": float(self.intercepts[i]),
                    "score": float(self.scores[i]),
                    "local_prediction": float(self.local_predictions[i]),
                    "weights": self.class_weights[i].tolist(),
                    "deltas": _nullable(self.deltas[i]),
                    "kept_alone": _nullable(self.kept_alone[i]),
                }
                for i, c in enumerate(self.classes)
            ],
            "top_predictions": [
                {"index": int(i), "label": lab, "score": float(s)}
                for i, lab, s in self.top_predictions
            ],
            "timings": self.timings,
            "versions": self.versions,
            **self.trust,
        }
        if include_segments:
            d["segments"] = _encode_array(self.segments.astype(np.int32))
        return d

    def to_json(self, include_segments: bool = True, indent: int | None = 2) -> str:
        """Serialise to JSON. ``segments`` is stored as a base64 compressed ``.npz``."""
        return json.dumps(self.to_dict(include_segments), indent=indent)

    @classmethod
    def from_json(cls, text: str | bytes) -> Explanation:
        """Restore an explanation written by :meth:`to_json` (with segments).

        Raises
        ------
        LimecraftError
            If the text is not such a JSON document, or its parts do not fit together.
        """
        try:
            d = json.loads(text)
        except (ValueError, UnicodeDecodeError) as e:
            raise LimecraftError(f"not a JSON document: {e}") from None
        except RecursionError:
            raise LimecraftError("not a usable JSON document: it is nested too deeply") from None
        return cls.from_dict(d)

    @classmethod
    def from_dict(cls, d: Any) -> Explanation:
        """Restore from :meth:`to_dict`'s output, checking every part."""
        if not isinstance(d, dict) or d.get("format") != JSON_FORMAT:
            raise LimecraftError(
                "not a LIMEcraft explanation (missing format: limecraft-explanation)"
            )
        if d.get("format_version") != JSON_VERSION:
            raise LimecraftError(
                f"unsupported explanation format_version {d.get('format_version')!r}"
            )
        if "segments" not in d:
            raise LimecraftError(
                "this explanation JSON was saved without segments; it cannot be restored"
            )
        seg = _decode_array(d["segments"])
        try:
            if seg.ndim != 2 or not np.issubdtype(seg.dtype, np.integer):
                raise ValueError("segments must be a 2-D integer array")
            k = int(seg.max()) + 1
            if seg.min() != 0 or len(np.unique(seg)) != k:
                raise ValueError("segments must hold ids 0..K-1 with no gaps")
            regions = d["regions"]
            if not isinstance(regions, list) or len(regions) != k:
                raise ValueError(f"'regions' must list {k} regions")
            classes = d["classes"]
            if not isinstance(classes, list) or not classes:
                raise ValueError("'classes' must be a non-empty list")

            def vec(c: dict, key: str, nullable: bool = False) -> np.ndarray:
                v = c[key]
                if not isinstance(v, list) or len(v) != k:
                    raise ValueError(f"classes[].{key} must be a list of {k} numbers")
                if nullable:
                    v = [np.nan if x is None else x for x in v]
                if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
                    raise ValueError(f"classes[].{key} must hold numbers only")
                a = np.asarray(v, dtype=np.float64)
                if not nullable and not np.isfinite(a).all():
                    raise ValueError(f"classes[].{key} must be {k} finite numbers")
                return a

            def num(v: Any) -> float:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise ValueError(f"expected a number, got {v!r}")
                return float(v)

            def class_index(v: Any) -> int:
                if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**31:
                    raise ValueError(f"a class index must be an integer in [0, 2**31), got {v!r}")
                return v

            def text(v: Any) -> str:
                if not isinstance(v, str):
                    raise ValueError(f"expected a string, got {v!r}")
                return v

            settings = d["settings"]
            if not isinstance(settings, dict):
                raise ValueError("'settings' must be an object")
            return cls(
                settings=settings,
                segments=seg.astype(np.int32),
                region_keys=tuple(text(r["key"]) for r in regions),
                region_names=tuple(text(r["name"]) for r in regions),
                region_pixels=np.bincount(seg.ravel(), minlength=k).astype(np.int64),
                classes=tuple(class_index(c["index"]) for c in classes),
                class_labels=tuple(text(c["label"]) for c in classes),
                class_weights=np.stack([vec(c, "weights") for c in classes]),
                intercepts=np.array([num(c["intercept"]) for c in classes]),
                scores=np.array([num(c["score"]) for c in classes]),
                local_predictions=np.array([num(c["local_prediction"]) for c in classes]),
                predictions=np.array([num(c["prediction"]) for c in classes]),
                deltas=np.stack([vec(c, "deltas", True) for c in classes]),
                kept_alone=np.stack([vec(c, "kept_alone", True) for c in classes]),
                top_predictions=tuple(
                    (class_index(t["index"]), text(t["label"]), num(t["score"]))
                    for t in d.get("top_predictions", [])
                ),
                timings={text(a): num(b) for a, b in d.get("timings", {}).items()},
                versions={text(a): text(b) for a, b in d.get("versions", {}).items()},
                trust={key: _plain_json(d[key]) for key in TRUST_KEYS if key in d},
            )
        except LimecraftError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            raise LimecraftError(f"explanation JSON is malformed: {e}") from None


# --------------------------------------------------------------------------- the door


def resolve_classifier(
    model: Any,
    *,
    input_size: int | None = None,
    normalize: str | None = None,
    labels: Sequence[str] | str | Path | None = None,
    device: str = "auto",
    precision: str = "auto",
    arch: str | None = None,
    channels_last: bool | None = None,
) -> Classifier:
    """Turn what the caller gave as ``model`` into a :class:`Classifier`.

    A registry name or a model file path is loaded through ``models.registry`` (the edge where
    files are read); a Module or callable is wrapped; a Classifier is used as is.
    """
    if isinstance(labels, (str, Path)):
        from .io import read_labels

        labels = read_labels(labels)
    if isinstance(model, Classifier):
        return model
    if isinstance(model, (str, Path)):
        from models.registry import load_classifier

        return load_classifier(
            str(model),
            input_size=input_size,
            normalize=normalize,
            labels=labels,
            device=device,
            precision=precision,
            arch=arch,
            channels_last=channels_last,
        )
    return Classifier(
        model,
        input_size=input_size,
        normalize=normalize or "none",
        labels=labels,
        device=device,
        precision=precision,
        channels_last=channels_last,
    )


def _resize(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    return F.interpolate(x[None], size=size, mode="bilinear", antialias=True, align_corners=False)[
        0
    ]


def _regions_for(
    img: np.ndarray,
    segments: Any,
    regions_mask: Any,
    segments_file: Any,
    *,
    segmentation: str,
    n_segments: int | None,
    segmentation_params: dict | None,
    inner_segments: Any,
    inner_method: str,
    outer_segments: int | None,
    region_names: Sequence[str] | None,
    working_size: int | str | None,
    seed: int,
) -> Regions:
    shape = img.shape[:2]
    if segments_file is not None:
        if segments is not None:
            raise LimecraftError("give either segments or segments_file, not both")
        from .io import read_label_map

        segments = read_label_map(segments_file)
    if isinstance(regions_mask, (str, Path)):
        from .io import read_mask

        regions_mask = read_mask(regions_mask)
    if segments is not None and regions_mask is not None:
        raise LimecraftError(
            "give either segments (a finished label map) or regions_mask, not both"
        )
    if isinstance(segments, Regions):
        check_label_map(segments.atoms, shape, "segments")
        return segments
    if segments is not None:
        segments = np.asarray(segments)
        check_label_map(segments, shape, "segments")
        return regions_from_labels(segments)
    if regions_mask is not None:
        return compose_regions(
            img,
            regions_mask,
            names=region_names,
            inner_segments=inner_segments,
            inner_method=inner_method,
            outer_segments=outer_segments,
            outer_method=segmentation,
            outer_params=segmentation_params,
            working_size=working_size,
            seed=seed,
        )
    labels = segment(
        img,
        segmentation,
        n_segments,
        params=segmentation_params,
        working_size=working_size,
        seed=seed,
    )
    return regions_from_labels(labels)


def explain(
    image: np.ndarray,
    model: Any,
    segments: np.ndarray | Regions | None = None,
    regions_mask: Any = None,
    *,
    samples: int = 1000,
    seed: int = 0,
    fill: Fill = "mean",
    kernel_width: float | str = 0.25,
    ridge_alpha: float = 1.0,
    output_space: str = "probability",
    target: int | None = None,
    top_labels: int = 1,
    batch_size: int | None = None,
    device: str = "auto",
    segmentation: str = "quickshift",
    n_segments: int | None = None,
    segmentation_params: dict | None = None,
    segments_file: str | Path | None = None,
    inner_segments: int | Sequence[int | None] | None = None,
    inner_method: str = "slic",
    outer_segments: int | None = None,
    region_names: Sequence[str] | None = None,
    sampling: str = "bernoulli",
    p: float = 0.5,
    kernel: Kernel | None = None,
    labels: Sequence[str] | str | Path | None = None,
    input_size: int | None = None,
    normalize: str | None = None,
    precision: str = "auto",
    channels_last: bool | None = None,
    arch: str | None = None,
    blur_sigma: float | None = None,
    working_size: int | str | None = "auto",
    compute_deltas: bool = True,
    mask_expansion: int = 0,
    dedup: bool = True,
    early_stop: float | None = None,
    early_stop_step: int | None = None,
    repeats: int = 1,
    kernel_widths: Sequence[float | str] | None = None,
    convergence: Sequence[int] | None = None,
    faithfulness: bool = False,
    compare_fills: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> Explanation:
    """Explain a classifier's prediction on an image over regions.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float ndarray in [0, 1]
    model : torch.nn.Module, callable, Classifier, registry name, or ``.pt2`` / ``.pt`` path
        A Module or callable maps float32 (N, 3, H, W) in [0, 1] to (N, C) scores.
    segments : (H, W) int ndarray or Regions, optional
        A finished label map, used as is (relabelled to 0..K-1).
    regions_mask : (H, W) bool/int ndarray, list of bool masks, or PNG path, optional
        Handcrafted regions, composed with ``inner_segments`` / ``outer_segments``
        (see :func:`limecraft_core.compose_regions`).
    samples : int, N in [10, 200000], including the original
    seed : int, seeds sampling and segmentation; the same seed gives identical results on CPU
    fill : mean, gray, black, blur, inpaint, ``#RRGGBB`` or callable
    kernel_width : float > 0 or ``"uniform"``
    ridge_alpha : float >= 0
    output_space : {"probability", "raw"}; probability is the softmax of the model's outputs
    target : int, optional; the class to explain (default: top-1)
    top_labels : int; with no target, explain this many top classes
    batch_size : int, optional; default from the device and image size
    device : {"auto", "cpu", "cuda"}
    segmentation, n_segments, segmentation_params : automatic superpixels (see ``segment``)
    sampling : {"bernoulli", "stratified", "antithetic"}, with ``p`` the keep probability
    kernel : callable, optional; overrides ``kernel_width`` (distances -> weights)
    labels : class names, or a text file with one per line
    input_size, normalize : the model's input size and normalisation (registry models know
        theirs). Perturbed images are composed at the input size, on the device.
    precision : {"auto", "fp32", "bf16", "fp16"}; autocast precision (auto: bf16 on a GPU).
        ``bf16`` on a CPU is about 2x faster for convolutional networks, at a small cost in
        the weights (see bench/README.md).
    channels_last : bool, optional; NHWC memory format for the model (default: on a GPU only)
    arch : str, optional; the torchvision architecture of a state_dict file given as ``model``
    working_size : int, "auto" or None; segmentation runs at most at this longer side
        (auto: 384 px for quickshift, 512 for the others)
    compute_deltas : bool; also run the 2K single-region passes (hide one, keep one)
    mask_expansion : int in [0, 64]; hidden regions grow by this many pixels (at the model's
        input size) so that an object's edges do not leak through the fill
    dedup : bool; score each distinct mask once (exact; a large saving when there are few
        regions: K regions have only 2**K distinct masks)
    early_stop : float in (0, 1], optional; stop sampling once two independent halves of the
        samples drawn so far agree: their Kendall's W is at least this, their top-5 regions
        overlap by at least 0.8 and no top-10 weight changes sign (0.9 is the "stable"
        verdict). Checked every ``early_stop_step`` samples (default max(100, samples/10))
        from max(200, 4K) samples on. ``trust["early_stop"]`` records the checks.
    repeats : int in [1, 50]; R > 1 also explains with seeds seed+1..seed+R-1, in the same
        batched model pass, and reports ``trust["stability"]`` (Kendall's W, top-5 Jaccard,
        sign flips, per-region mean, std and 95% interval, and a verdict)
    kernel_widths : widths (floats or "uniform") to refit the surrogate with, on the same model
        outputs (``trust["kernel_sweep"]``)
    convergence : sample sizes <= samples; each repeat is refitted on its first n samples
        (``trust["convergence"]``; needs repeats >= 2)
    faithfulness : bool; deletion and insertion curves in the explanation's order and in random
        orders, and the surrogate's R^2 on held-out perturbations (``trust["faithfulness"]``)
    compare_fills : other fills to explain with on the same masks (``trust["fills"]``: rank
        correlation and top-5 overlap with the main fill)
    progress : callable(done, total), optional, called after each model batch
    cancel : callable() -> bool, optional; raises ``Cancelled`` when it returns True

    Returns
    -------
    Explanation

    Raises
    ------
    LimecraftError
        For any invalid input; the message says how to fix it.
    ModelError
        If the model fails or returns unusable scores.
    """
    t0 = time.perf_counter()
    img = as_float_image(image)
    h, w = img.shape[:2]
    samples = check_int("samples", samples, 10, 200_000)
    seed = check_int("seed", seed, 0, 2**63 - 1)
    fill = check_fill(fill)
    ridge_alpha = check_float("ridge_alpha", ridge_alpha, 0.0, 1e6)
    check_choice("output_space", output_space, OUTPUT_SPACES)
    check_choice("segmentation", segmentation, METHODS)
    top_labels = check_int("top_labels", top_labels, 1, 100)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, 1, 65536)
    mask_expansion = check_int("mask_expansion", mask_expansion, 0, 64)
    repeats = check_int("repeats", repeats, 1, 50)
    if early_stop is not None:
        early_stop = check_float("early_stop", early_stop, 0.0, 1.0, lo_open=True)
    step = max(100, samples // 10)
    if early_stop_step is not None:
        step = check_int("early_stop_step", early_stop_step, 10, samples)
    widths = list(kernel_widths or [])
    for w_ in widths:
        make_kernel(w_)  # validates: raises for a width that is not > 0 or "uniform"
    sizes = sorted({check_int("convergence size", n, 10, samples) for n in (convergence or [])})
    if sizes and repeats < 2:
        raise LimecraftError(
            "convergence needs repeats >= 2 (stability is measured across repeats)"
        )
    other_fills = [check_fill(f) for f in (compare_fills or []) if f != fill]
    kern = kernel if kernel is not None else make_kernel(kernel_width)
    dev = resolve_device(device)
    clf = resolve_classifier(
        model,
        input_size=input_size,
        normalize=normalize,
        labels=labels,
        device=dev.type,
        precision=precision,
        arch=arch,
        channels_last=channels_last,
    )
    dev = clf.device

    t_seg = time.perf_counter()
    regions = _regions_for(
        img,
        segments,
        regions_mask,
        segments_file,
        segmentation=segmentation,
        n_segments=n_segments,
        segmentation_params=segmentation_params,
        inner_segments=inner_segments,
        inner_method=inner_method,
        outer_segments=outer_segments,
        region_names=region_names,
        working_size=working_size,
        seed=seed,
    )
    seg_labels = regions.labels
    k = regions.n_regions
    segmentation_s = time.perf_counter() - t_seg

    # Compose at the model's input size: the model would resize anyway, and it is far cheaper.
    t_sample = time.perf_counter()
    size = clf.input_size or (h, w)
    work_labels = seg_labels if size == (h, w) else resize_nearest(seg_labels, size)
    image_t = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))).to(dev)
    if size != (h, w):
        image_t = _resize(image_t, size)
    work_img = image_t.cpu().numpy().transpose(1, 2, 0)
    fill_np = make_fill(work_img, work_labels, fill, blur_sigma=blur_sigma)
    fill_t = torch.from_numpy(np.ascontiguousarray(fill_np.transpose(2, 0, 1))).to(dev)
    labels_t = torch.from_numpy(work_labels.astype(np.int64)).to(dev)

    ms = sample_masks(k, samples, scheme=sampling, p=p, rng=seed)
    bs = batch_size or default_batch_size(dev, size[0] * size[1])
    n_random = 3
    n_holdout = min(samples, 500) if faithfulness else 0

    def planned(n: int) -> int:
        rows = n * repeats + (2 * k if compute_deltas else 0) + n_holdout
        rows += 2 * (k + 1) * (1 + n_random) if faithfulness else 0
        return rows + len(other_fills) * n

    tracker = _Progress(progress, planned(samples))
    cache = MaskCache() if dedup else None
    scored = 0

    def run(masks: np.ndarray, fill_tensor: torch.Tensor, memo: MaskCache | None) -> torch.Tensor:
        nonlocal scored
        todo, keys, all_keys = (masks, None, None) if memo is None else memo.missing(masks)
        tracker.total -= len(masks) - len(todo)
        out = clf.run_masks(
            image_t,
            fill_tensor,
            labels_t,
            todo,
            bs,
            progress=tracker.part(len(todo)),
            cancel=cancel,
            expand=mask_expansion,
        )
        scored += len(todo)
        if len(todo) < len(masks) and progress is not None:
            progress(tracker.done, tracker.total)  # the skipped rows count as done
        if memo is not None:
            if len(todo):
                memo.add(keys, out)
            out = memo.gather(all_keys)
        # once over all rows: per-batch softmax calls cost more on CPU
        return torch.softmax(out, dim=1) if output_space == "probability" else out

    # The main sample, in steps when stopping early (else in one pass with all the rest).
    parts: list[torch.Tensor] = []
    checks: list[dict[str, Any]] = []
    done = 0
    while early_stop is not None and done < samples:
        stop = min(done + step, samples)
        parts.append(run(ms.masks[done:stop], fill_t, cache))
        done = stop
        if max(200, 4 * k) <= done < samples:
            n_cls = parts[0].shape[1]
            tgt_now = (
                check_int("target", target, 0, n_cls - 1)
                if target is not None
                else int(torch.argmax(parts[0][0]))
            )
            y_now = torch.cat(parts)[:, tgt_now].double().cpu().numpy()
            sw_now = kern(cosine_distance(ms.masks[:done])) * ms.weights[:done]
            check = _split_half(ms.masks[:done], y_now, sw_now, ridge_alpha)
            checks.append(check)
            if (
                check["kendall_w"] >= early_stop
                and check["jaccard_top5"] >= _trust.STABLE_JACCARD
                and check["sign_flips_top10"] == 0
            ):
                break
    requested = samples
    if early_stop is not None and done < samples:
        samples = done
        ms = MaskSample(ms.masks[:done], ms.weights[:done], ms.scheme, ms.p)
        tracker.total -= planned(requested) - planned(samples)
        sizes = [n for n in sizes if n <= samples]
    blocks = [] if early_stop is not None else [ms.masks]
    if compute_deltas:
        blocks += [~np.eye(k, dtype=bool), np.eye(k, dtype=bool)]
    reps = [
        sample_masks(k, requested, scheme=sampling, p=p, rng=seed + r) for r in range(1, repeats)
    ]
    reps = [MaskSample(r.masks[:samples], r.weights[:samples], r.scheme, r.p) for r in reps]
    blocks += [r.masks for r in reps]
    holdout = (
        sample_masks(k, n_holdout, scheme=sampling, p=p, rng=seed + 1_000_003)
        if faithfulness
        else None
    )
    if holdout is not None:
        blocks.append(holdout.masks)
    if blocks:
        parts.append(run(np.concatenate(blocks), fill_t, cache))
    outputs = torch.cat(parts)
    sampling_s = time.perf_counter() - t_sample

    original = outputs[0]
    n_classes = original.shape[0]
    if target is not None:
        target = check_int("target", target, 0, n_classes - 1)
        classes = [target]
    else:
        classes = torch.argsort(original, descending=True)[: min(top_labels, n_classes)].tolist()
    cls_t = torch.tensor(classes, device=outputs.device)

    t_fit = time.perf_counter()
    sample_out = outputs[:samples][:, cls_t]
    sw = kern(cosine_distance(ms.masks)) * ms.weights
    fit = fit_ridge(ms.masks, sample_out, sw, alpha=ridge_alpha)
    fit_s = time.perf_counter() - t_fit

    orig = original[cls_t].double().cpu().numpy()
    if compute_deltas:
        hid = outputs[samples : samples + k][:, cls_t].double().cpu().numpy().T
        kept = outputs[samples + k : samples + 2 * k][:, cls_t].double().cpu().numpy().T
        deltas = orig[:, None] - hid
    else:
        deltas = kept = np.full((len(classes), k), np.nan)
    top5 = torch.argsort(original, descending=True)[:5].tolist()

    t_trust = time.perf_counter()
    trust: dict[str, Any] = {}
    tgt = int(classes[0])
    y_main = outputs[:samples, tgt].double().cpu().numpy()
    sw_main = sw
    offset = samples + (2 * k if compute_deltas else 0)
    if repeats > 1:
        ys, sws, mlist = [y_main], [sw_main], [ms.masks]
        for r in reps:
            ys.append(outputs[offset : offset + samples, tgt].double().cpu().numpy())
            sws.append(kern(cosine_distance(r.masks)) * r.weights)
            mlist.append(r.masks)
            offset += samples
        rep_w = np.stack(
            [fit.coef[0]]
            + [
                fit_ridge(m, y[:, None], w_, alpha=ridge_alpha).coef[0]
                for m, y, w_ in zip(mlist[1:], ys[1:], sws[1:], strict=True)
            ]
        )
        trust["stability"] = _trust.stability(rep_w).to_dict()
        if sizes:
            trust["convergence"] = _trust.convergence(mlist, ys, sws, sizes, ridge_alpha).to_dict()
    if widths:
        trust["kernel_sweep"] = _trust.kernel_sweep(
            ms.masks, y_main, ms.weights, widths, ridge_alpha
        ).to_dict()
    if faithfulness:
        y_hold = outputs[offset : offset + len(holdout.masks), tgt].double().cpu().numpy()
        pred = fit.intercept[0] + holdout.masks @ fit.coef[0]
        heldout = _trust.weighted_r2(
            pred, y_hold, kern(cosine_distance(holdout.masks)) * holdout.weights
        )
        order = np.argsort(-fit.coef[0], kind="stable")
        rng = np.random.default_rng(seed + 2_000_003)
        orders = [order] + [rng.permutation(k) for _ in range(n_random)]
        curves = np.concatenate(
            [np.concatenate(_trust.deletion_insertion_masks(o, k)) for o in orders]
        )
        y = run(curves, fill_t, cache)[:, tgt].double().cpu().numpy().reshape(len(orders), 2, k + 1)
        trust["faithfulness"] = _trust.Faithfulness(
            deletion=y[0, 0].tolist(),
            insertion=y[0, 1].tolist(),
            deletion_auc=_trust.auc(y[0, 0]),
            insertion_auc=_trust.auc(y[0, 1]),
            random_deletion_auc=float(np.mean([_trust.auc(c) for c in y[1:, 0]])),
            random_insertion_auc=float(np.mean([_trust.auc(c) for c in y[1:, 1]])),
            heldout_r2=heldout,
        ).to_dict()
    if other_fills:
        fill_weights = [fit.coef[0]]
        for f in other_fills:
            other = make_fill(work_img, work_labels, f, blur_sigma=blur_sigma)
            other_t = torch.from_numpy(np.ascontiguousarray(other.transpose(2, 0, 1))).to(dev)
            y = (
                run(ms.masks, other_t, MaskCache() if dedup else None)[:, tgt]
                .double()
                .cpu()
                .numpy()
            )
            fill_weights.append(fit_ridge(ms.masks, y[:, None], sw, alpha=ridge_alpha).coef[0])
        fw = np.stack(fill_weights)
        names = [fill if isinstance(fill, str) else "custom"] + [str(f) for f in other_fills]
        top = [set(np.argsort(-row, kind="stable")[:5].tolist()) for row in fw]
        trust["fills"] = {
            "fills": names,
            "weights": fw.tolist(),
            "spearman": _trust.rank_agreement(fw),
            "top5_overlap_with_main": [len(top[0] & t) / 5 for t in top],
            "top1": [int(np.argmax(row)) for row in fw],
        }
    if early_stop is not None:
        trust["early_stop"] = {
            "threshold": early_stop,
            "step": step,
            "samples_requested": requested,
            "samples_used": samples,
            "stopped": samples < requested,
            "checks": checks,
        }
    trust_s = time.perf_counter() - t_trust

    settings = {
        "model": clf.name,
        "input_size": list(clf.input_size) if clf.input_size else None,
        "normalize": clf.normalize,
        "segmentation": segmentation,
        "n_segments": n_segments,
        "segmentation_params": segmentation_params,
        "segments_file": str(segments_file) if segments_file is not None else None,
        "regions_mask": str(regions_mask)
        if isinstance(regions_mask, (str, Path))
        else ("array" if regions_mask is not None else None),
        "inner_segments": inner_segments,
        "inner_method": inner_method,
        "outer_segments": outer_segments,
        "samples": requested,
        "samples_used": samples,
        "model_passes": scored,
        "sampling": sampling,
        "p": p,
        "seed": seed,
        "fill": fill if isinstance(fill, str) else getattr(fill, "__name__", "custom"),
        "blur_sigma": blur_sigma,
        "kernel_width": kernel_width if kernel is None else None,
        "kernel": getattr(kern, "__name__", "custom"),
        "ridge_alpha": ridge_alpha,
        "output_space": output_space,
        "target": target,
        "top_labels": top_labels,
        "batch_size": bs,
        "device": dev.type,
        "precision": clf.precision,
        "channels_last": clf.channels_last,
        "dedup": dedup,
        "early_stop": early_stop,
        "working_size": working_size,
        "compute_deltas": compute_deltas,
        "mask_expansion": mask_expansion,
        "repeats": repeats,
        "kernel_widths": list(kernel_widths) if kernel_widths else None,
        "convergence": sizes or None,
        "faithfulness": faithfulness,
        "compare_fills": [str(f) for f in other_fills] or None,
        "n_regions": k,
    }
    return Explanation(
        settings=_jsonable(settings),
        segments=seg_labels,
        region_keys=regions.keys,
        region_names=regions.names,
        region_pixels=regions.pixel_counts(),
        classes=tuple(int(c) for c in classes),
        class_labels=tuple(clf.label(int(c)) for c in classes),
        class_weights=fit.coef,
        intercepts=fit.intercept,
        scores=fit.score,
        local_predictions=fit.local_prediction,
        predictions=orig,
        deltas=deltas,
        kept_alone=kept,
        top_predictions=tuple((int(i), clf.label(int(i)), float(original[i])) for i in top5),
        timings={
            "segmentation_s": segmentation_s,
            "sampling_s": sampling_s,
            "fit_s": fit_s,
            "trust_s": trust_s,
            "total_s": time.perf_counter() - t0,
        },
        versions=_versions(),
        trust=_jsonable(trust),
    )


def _split_half(
    masks: np.ndarray, y: np.ndarray, sample_weights: np.ndarray, alpha: float
) -> dict[str, Any]:
    """Fit the two halves of a sample independently and measure their agreement.

    Rows go to halves in pairs (0-1, 4-5, ... and 2-3, 6-7, ...), so that antithetic pairs
    stay together; each half is a valid sample on its own.
    """
    half = (np.arange(len(masks)) // 2) % 2 == 0
    w = [
        fit_ridge(masks[h], y[h, None], sample_weights[h], alpha=alpha).coef[0]
        for h in (half, ~half)
    ]
    st = _trust.stability(np.stack(w))
    return {
        "n": len(masks),
        "kendall_w": st.kendall_w,
        "jaccard_top5": st.jaccard_top5,
        "sign_flips_top10": st.sign_flips_top10,
    }


class _Progress:
    """Turns several model passes into one progress count (done, total)."""

    def __init__(self, callback: Callable[[int, int], None] | None, total: int) -> None:
        self.callback, self.total, self.done = callback, total, 0

    def part(self, n: int) -> Callable[[int, int], None] | None:
        if self.callback is None:
            return None
        base = self.done
        self.done += n

        def report(done: int, _n: int) -> None:
            self.callback(base + done, self.total)

        return report
