"""Stage 1: the regions, and the segmentation settings that really made them.

The regions are given, handcrafted and composed, or segmented.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._validate import LimecraftError, check_label_map
from ..config import SegmentationConfig
from ..regions import (
    Regions,
    compose_regions,
    regions_from_labels,
    segment_regions,
)


def prepare_regions(
    image: np.ndarray,
    seg: SegmentationConfig,
    segments: np.ndarray | Regions | None = None,
    regions_mask: Any = None,
    names: Sequence[str] | None = None,
    seed: int = 0,
    progress: Callable[[float, str], None] | None = None,
    origins: Sequence[str] | None = None,
) -> tuple[Regions, SegmentationConfig]:
    """The regions to explain, and the segmentation settings that really made them.

    Parameters
    ----------
    image : (H, W, 3) float ndarray in [0, 1]
    seg : the segmentation settings asked for
    segments : (H, W) int ndarray or Regions, optional; a finished label map. Regions made by
        this function carry their ``source`` and keep it through merges; a bare label map is
        recorded as ``segmentation="given"``.
    regions_mask : (H, W) bool/int ndarray or list of bool masks, optional; handcrafted regions
    names : names of the handcrafted regions
    origins : where each handcrafted region comes from (``drawn``, the default; ``uploaded``;
        ``proposed:<proposer>``), see :func:`compose_regions`; only with ``regions_mask``
    progress : callable(fraction, message), optional; called as the segmentation advances

    Returns
    -------
    (Regions with ``source`` set, and ``note`` when the count asked for could not be met;
    the SegmentationConfig to record)
    """
    shape = image.shape[:2]
    if segments is not None and regions_mask is not None:
        raise LimecraftError(
            "give either segments (a finished label map) or regions_mask, not both"
        )
    if origins is not None and regions_mask is None:
        raise LimecraftError("region origins describe handcrafted regions: give regions_mask")
    if isinstance(segments, Regions):
        check_label_map(segments.atoms, shape, "segments")
        if segments.source is not None:
            return segments, SegmentationConfig(**segments.source)
        return segments, SegmentationConfig(method="given")
    if segments is not None:
        segments = np.asarray(segments)
        check_label_map(segments, shape, "segments")
        seg = SegmentationConfig(method="given")
        return dataclasses.replace(regions_from_labels(segments), source=_source(seg)), seg
    if seg.method == "given":
        raise LimecraftError(
            "segmentation 'given' needs a label map (segments, or a segments file)"
        )
    if regions_mask is not None:
        regions = compose_regions(
            image,
            regions_mask,
            names=names,
            origins=origins,
            inner_segments=list(seg.inner_segments)
            if isinstance(seg.inner_segments, tuple)
            else seg.inner_segments,
            inner_method=seg.inner_method,
            outer_segments=seg.outer_segments,
            outer_method=seg.method,
            outer_params=dict(seg.params) or None,
            working_size=seg.working_size,
            seed=seed,
            progress=progress,
        )
    else:
        regions = segment_regions(
            image,
            seg.method,
            seg.n_segments,
            params=dict(seg.params) or None,
            working_size=seg.working_size,
            seed=seed,
            progress=progress,
        )
    return dataclasses.replace(regions, source=_source(seg)), seg


def _source(seg: SegmentationConfig) -> dict[str, Any]:
    return {f.name: getattr(seg, f.name) for f in dataclasses.fields(seg)}
