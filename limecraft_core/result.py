"""The result of an explanation, :class:`Explanation`, and its JSON form.

JSON format ``limecraft-explanation`` version 2: ``settings`` is the
:class:`~limecraft_core.config.ExplainConfig` (groups of settings, exactly what ran), ``run`` is
what was resolved while running (:class:`RunInfo`: the model, the device, samples used, model
passes, the regions' origin), and the trust checks sit at the top level under their own keys.
Version 1 files (flat ``settings``) are still read.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import platform
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from . import __version__
from ._validate import MAX_PIXELS, LimecraftError
from .config import ExplainConfig
from .config import fields as setting_fields
from .io.npz import encode_npz, load_npz, npz_members
from .trust import TrustResults

__all__ = ["JSON_FORMAT", "JSON_VERSION", "Explanation", "RunInfo"]

JSON_FORMAT = "limecraft-explanation"
JSON_VERSION = 2


@dataclass(frozen=True)
class RunInfo:
    """What was resolved while an explanation ran (not settings: facts about the run).

    Attributes
    ----------
    model : str, the scorer's name
    input_size : [h, w] or None, the model's input size (None: the image's own)
    normalize, device, precision : str
    channels_last : bool
    batch_size : int, images per forward pass
    samples_used : int, N after early stopping (else the samples asked for)
    model_passes : int, images the model actually scored (after dedup)
    n_regions : int
    handcrafted : int, regions that are (pieces of) handcrafted regions
    merged : int, regions made by merging several pieces
    kernel : str, the kernel function's name
    precision_reason : str, why that precision ran (``precision="auto"`` decides on a CPU)
    """

    model: str = "custom"
    input_size: list[int] | None = None
    normalize: str = "none"
    device: str = "cpu"
    precision: str = "fp32"
    channels_last: bool = False
    batch_size: int = 0
    samples_used: int = 0
    model_passes: int = 0
    n_regions: int = 0
    handcrafted: int = 0
    merged: int = 0
    kernel: str = ""
    precision_reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> RunInfo:
        if not isinstance(d, dict):
            raise LimecraftError("explanation JSON: 'run' must be an object")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def _versions() -> dict[str, str]:
    return dict(_installed())


@functools.cache
def _installed() -> tuple[tuple[str, str], ...]:
    """The versions a result records, read once per process (5 ms of package metadata that
    every explanation paid)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"limecraft": __version__, "python": platform.python_version()}
    for pkg in ("numpy", "torch", "torchvision", "scikit-image", "pillow"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return tuple(out.items())


def _nullable(a: np.ndarray) -> list[float | None]:
    return [float(x) if np.isfinite(x) else None for x in a]


TRUST_KEYS = tuple(f.name for f in dataclasses.fields(TrustResults))  # one list: trust.py's


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
    return {"encoding": "npz-base64", "data": base64.b64encode(encode_npz({"a": a})).decode()}


def _decode_array(d: Any) -> np.ndarray:
    if (
        not isinstance(d, dict)
        or d.get("encoding") != "npz-base64"
        or not isinstance(d.get("data"), str)
    ):
        raise LimecraftError("explanation JSON: 'segments' must be {encoding: npz-base64, data}")
    try:
        raw = base64.b64decode(d["data"], validate=True)
        # Read the array's header before inflating it: a few KB of zeros can inflate to GBs.
        (a,) = npz_members(raw)
        if a.name != "a" or len(a.shape) != 2 or a.pixels > MAX_PIXELS or a.dtype.kind not in "iu":
            raise LimecraftError(
                f"explanation JSON: 'segments' must be a 2-D integer label map of at most "
                f"{MAX_PIXELS:,} pixels; it is {a.dtype} of shape {a.shape}"
            )
        return load_npz(raw)["a"]
    except LimecraftError:
        raise
    except Exception as e:
        raise LimecraftError(f"explanation JSON: 'segments' could not be decoded ({e})") from None


def _check_header(d: Any) -> None:
    """An explanation JSON's format, version and segments are there (before anything is read)."""
    if not isinstance(d, dict) or d.get("format") != JSON_FORMAT:
        raise LimecraftError("not a LIMEcraft explanation (missing format: limecraft-explanation)")
    if d.get("format_version") not in (1, JSON_VERSION):
        raise LimecraftError(f"unsupported explanation format_version {d.get('format_version')!r}")
    if "segments" not in d:
        raise LimecraftError(
            "this explanation JSON was saved without segments; it cannot be restored"
        )


def _vec(c: dict, key: str, k: int, nullable: bool = False) -> np.ndarray:
    """``c[key]``: a list of ``k`` numbers (``nullable``: null is NaN)."""
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


def _num(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"expected a number, got {v!r}")
    return float(v)


def _class_index(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**31:
        raise ValueError(f"a class index must be an integer in [0, 2**31), got {v!r}")
    return v


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {v!r}")
    return v


@dataclass(frozen=True, eq=False)
class Explanation:
    """The result of :func:`explain`. Arrays are per explained class (L) and per region (K).

    Attributes
    ----------
    config : ExplainConfig, every setting that ran (``segmentation`` says how the regions were made)
    run : RunInfo, what was resolved while running (model, device, samples used, model passes)
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
    trust : TrustResults, the trust checks that ran, each a typed result; see ``limecraft_core.trust``
    """

    config: ExplainConfig
    run: RunInfo
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
    trust: TrustResults = field(default_factory=TrustResults)

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
        return self.trust.stability.verdict if self.trust.stability is not None else None

    @property
    def n_regions(self) -> int:
        """Number of regions K."""
        return len(self.region_pixels)

    def with_localisation(self, expected_mask: np.ndarray | None) -> Explanation:
        """This explanation with ``trust.localisation`` measured against ``expected_mask`` (an
        (H, W) bool area, e.g. the union of handcrafted regions), or removed when None. No model
        pass: relevance mass, relevance rank accuracy and the pointing game read the weights."""
        loc = None
        if expected_mask is not None:
            from .trust import localise

            loc = localise(self.weights, self.segments, expected_mask)
        return dataclasses.replace(self, trust=dataclasses.replace(self.trust, localisation=loc))

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
            "settings": self.config.to_dict(),
            "run": self.run.to_dict(),
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
            **self.trust.to_dict(),
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
        _check_header(d)
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

            config, run = _settings(d)
            return cls(
                config=config,
                run=run,
                segments=seg.astype(np.int32),
                region_keys=tuple(_text(r["key"]) for r in regions),
                region_names=tuple(_text(r["name"]) for r in regions),
                region_pixels=np.bincount(seg.ravel(), minlength=k).astype(np.int64),
                classes=tuple(_class_index(c["index"]) for c in classes),
                class_labels=tuple(_text(c["label"]) for c in classes),
                class_weights=np.stack([_vec(c, "weights", k) for c in classes]),
                intercepts=np.array([_num(c["intercept"]) for c in classes]),
                scores=np.array([_num(c["score"]) for c in classes]),
                local_predictions=np.array([_num(c["local_prediction"]) for c in classes]),
                predictions=np.array([_num(c["prediction"]) for c in classes]),
                deltas=np.stack([_vec(c, "deltas", k, True) for c in classes]),
                kept_alone=np.stack([_vec(c, "kept_alone", k, True) for c in classes]),
                top_predictions=tuple(
                    (_class_index(t["index"]), _text(t["label"]), _num(t["score"]))
                    for t in d.get("top_predictions", [])
                ),
                timings={_text(a): _num(b) for a, b in d.get("timings", {}).items()},
                versions={_text(a): _text(b) for a, b in d.get("versions", {}).items()},
                trust=TrustResults.from_dict(
                    {key: _plain_json(d[key]) for key in TRUST_KEYS if key in d}
                ),
            )
        except LimecraftError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            raise LimecraftError(f"explanation JSON is malformed: {e}") from None


_V1_RUN_KEYS = (
    "model",
    "input_size",
    "normalize",
    "device",
    "precision",
    "channels_last",
    "batch_size",
    "samples_used",
    "model_passes",
    "n_regions",
    "kernel",
)


def _settings(d: dict) -> tuple[ExplainConfig, RunInfo]:
    """The config and run facts of a saved explanation (version 2, or version 1's flat dict)."""
    settings = d["settings"]
    if not isinstance(settings, dict):
        raise ValueError("'settings' must be an object")
    if d.get("format_version") == JSON_VERSION:
        return ExplainConfig.from_dict(_plain_json(settings)), RunInfo.from_dict(d.get("run", {}))
    # Version 1: one flat dict mixing settings and run facts; unknown keys are left out.
    names = {s.name for s in setting_fields()}
    flat = {
        k: (tuple(v) if isinstance(v, list) else v)
        for k, v in _plain_json(settings).items()
        if k in names and v is not None
    }
    if isinstance(flat.get("segmentation_params"), dict):
        flat["segmentation_params"] = tuple(flat["segmentation_params"].items())
    run = RunInfo.from_dict({k: settings[k] for k in _V1_RUN_KEYS if k in settings})
    return ExplainConfig.from_flat(flat), run
