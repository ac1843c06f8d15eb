"""The regions an explanation is made of.

Automatic superpixels, handcrafted masks, merges and splits. Every label map made here holds
ints 0..K-1 with no gaps, and every pixel is assigned.

- :mod:`.superpixels`: ``segment`` and ``segment_regions`` (quickshift, SLIC, Felzenszwalb,
  watershed, grid), on a working copy, with the region count asked for met;
- :mod:`.types`: ``Regions`` (stable keys, names, reversible merges) and the ways to make one
  from a label map or a mask image;
- :mod:`.compose`: ``compose_regions``, handcrafted masks with superpixels around them;
- :mod:`.merge`: ``merge_regions``, ``merge_by_keys``, ``split_region``;
- :mod:`.labels`: label-map primitives (``relabel``, ``resize_nearest``);
- :mod:`.canvas`: the logic behind the app's drawing and clicking (strokes to a mask, a click
  to a region).
"""

from __future__ import annotations

from ..limits import SEGMENTERS
from .canvas import mask_from_canvas, region_at, toggle
from .compose import compose_regions
from .labels import COUNT_TOLERANCE, relabel, resize_nearest
from .merge import merge_by_keys, merge_regions, split_region
from .superpixels import DEFAULT_PARAMS, segment, segment_regions
from .types import Regions, masks_from_label_image, regions_from_labels

__all__ = [
    "COUNT_TOLERANCE",
    "DEFAULT_PARAMS",
    "SEGMENTERS",
    "Regions",
    "compose_regions",
    "mask_from_canvas",
    "masks_from_label_image",
    "merge_by_keys",
    "merge_regions",
    "region_at",
    "regions_from_labels",
    "relabel",
    "resize_nearest",
    "segment",
    "segment_regions",
    "split_region",
    "toggle",
]
