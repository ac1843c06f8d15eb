"""The result of an explanation, :class:`Explanation`, and its JSON form.

JSON format ``limecraft-explanation`` version 2: ``settings`` is the
:class:`~limecraft_core.config.ExplainConfig` (groups of settings, exactly what ran), ``run`` is
what was resolved while running (:class:`RunInfo`: the model, the device, samples used, model
passes, the regions' origin), and the trust checks sit at the top level under their own keys.
Version 1 files (flat ``settings``) are still read.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import platform
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import __version__
from ._validate import LimecraftError
from .codecs.schema import check, read_json
from .comparison import Comparison
from .config import ExplainConfig
from .regions.types import check_origin, origin_of_key
from .result_file import (
    JSON_FORMAT,
    JSON_VERSION,
    ExplanationDoc,
    RunInfo,
    encode_array,
)
from .trust import TrustResults

__all__ = ["JSON_FORMAT", "JSON_VERSION", "Explanation", "RunInfo"]


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


@dataclass(frozen=True, eq=False)
class Explanation:
    """The result of :func:`explain`. Arrays are per explained class (L) and per region (K).

    Attributes
    ----------
    config : ExplainConfig, every setting that ran (``segmentation`` says how the regions were made)
    run : RunInfo, what was resolved while running (model, device, samples used, model passes)
    segments : (H, W) int32 ndarray, region ids 0..K-1 at the image's own resolution
    region_keys, region_names : tuple of str, per region (stable identity, display name)
    region_origins : tuple of str, per region, where it comes from: ``superpixel``, ``drawn``,
        ``uploaded``, ``merged`` or ``proposed:<proposer>`` (default: derived from the keys,
        ``hand:`` being ``drawn``)
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
    explainers : Comparison or None, several explainers over these regions for the target
        (:func:`~limecraft_core.compare_explainers`), when they were asked for
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
    region_origins: tuple[str, ...] = ()
    explainers: Comparison | None = None

    def __post_init__(self) -> None:
        origins = self.region_origins or tuple(map(origin_of_key, self.region_keys))
        if len(origins) != len(self.region_keys):
            raise LimecraftError("one origin per region is needed")
        object.__setattr__(self, "region_origins", tuple(map(check_origin, origins)))

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
                "origin": self.region_origins[k],
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
        if self.explainers is not None:
            d["explainers"] = self.explainers.to_dict()
        if include_segments:
            d["segments"] = encode_array(self.segments.astype(np.int32))
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
        return cls.from_dict(read_json(text))

    @classmethod
    def from_dict(cls, d: Any) -> Explanation:
        """Restore from :meth:`to_dict`'s output, checking every part (its schema:
        ``ExplanationDoc``)."""
        if not isinstance(d, dict):
            raise LimecraftError(
                "not a LIMEcraft explanation (missing format: limecraft-explanation)"
            )
        doc = check(
            ExplanationDoc,
            d,
            context={},
            prefix="explanation JSON is malformed: ",
        )
        seg, k = doc.segments, int(doc.segments.max()) + 1
        config, v1_run = doc.settings
        classes = doc.classes
        return cls(
            config=config,
            run=v1_run if v1_run is not None else doc.run,
            segments=seg,
            region_keys=tuple(r.key for r in doc.regions),
            region_names=tuple(r.name for r in doc.regions),
            region_origins=tuple(r.origin or origin_of_key(r.key) for r in doc.regions),
            region_pixels=np.bincount(seg.ravel(), minlength=k).astype(np.int64),
            classes=tuple(c.index for c in classes),
            class_labels=tuple(c.label for c in classes),
            class_weights=np.stack([c.weights for c in classes]),
            intercepts=np.array([c.intercept for c in classes]),
            scores=np.array([c.score for c in classes]),
            local_predictions=np.array([c.local_prediction for c in classes]),
            predictions=np.array([c.prediction for c in classes]),
            deltas=np.stack([c.deltas for c in classes]),
            kept_alone=np.stack([c.kept_alone for c in classes]),
            top_predictions=tuple((t.index, t.label, t.score) for t in doc.top_predictions),
            timings=dict(doc.timings),
            versions=dict(doc.versions),
            trust=doc.trust,
            explainers=None if doc.explainers is None else doc.explainers.comparison(k),
        )
