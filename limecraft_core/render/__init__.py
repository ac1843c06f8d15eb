"""Pictures of an explanation, as arrays.

Nothing here displays anything; the caller decides how.

- :mod:`.overlays`: the weight overlay (the top regions for and against a class, tinted over
  the image, the rest greyed out), ``top_regions``, ``outline_masks``, and the picture
  ``explain`` writes;
- :mod:`.maps`: the signed heatmap and its colour bar, boundaries, the delta map, the region map
  and the audit's location map;
- :mod:`.legends`: the legend under an overlay, and pictures stacked;
- :mod:`.region_ids`: where each region's id goes, and the ids drawn;
- :mod:`.fonts`: the font the ids and the legends are written in;
- :mod:`.colours`: the colour ramps, the green and red of for and against, the tint's limits;
- :mod:`.scores`: class probabilities from raw scores.
"""

from __future__ import annotations

from .colours import (
    MAX_ALPHA,
    MIN_SHARE,
    NEGATIVE,
    POSITIVE,
    diverging_colors,
    region_colors,
    sequential_colors,
)
from .legends import overlay_legend, stack_vertically
from .maps import Heatmap, boundaries, colorbar, delta_map, heatmap, location_map, region_map
from .overlays import (
    OVERLAY_LONG_SIDE,
    TintedRegions,
    explanation_overlay,
    outline_masks,
    tinted_regions,
    top_regions,
    weight_overlay,
)
from .region_ids import id_positions
from .scores import softmax

__all__ = [
    "MAX_ALPHA",
    "MIN_SHARE",
    "NEGATIVE",
    "OVERLAY_LONG_SIDE",
    "POSITIVE",
    "Heatmap",
    "TintedRegions",
    "boundaries",
    "colorbar",
    "delta_map",
    "diverging_colors",
    "explanation_overlay",
    "heatmap",
    "id_positions",
    "location_map",
    "outline_masks",
    "overlay_legend",
    "region_colors",
    "region_map",
    "sequential_colors",
    "softmax",
    "stack_vertically",
    "tinted_regions",
    "top_regions",
    "weight_overlay",
]
