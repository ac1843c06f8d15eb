"""Colour ramps, the colours of for and against, and distinct colours for regions.

The diverging ramp for signed weights (PiYG: readable by most colour-blind viewers), the
sequential one for shares (inferno), the green and red of for and against, and distinct colours
for regions.
"""

from __future__ import annotations

import numpy as np

from ..limits import THRESHOLDS

# PiYG (ColorBrewer): magenta for negative, green for positive; readable by most colour-blind
# viewers, unlike a plain red-green ramp.
_PIYG = (
    np.array(
        [
            [142, 1, 82],
            [197, 27, 125],
            [222, 119, 174],
            [241, 182, 218],
            [253, 224, 239],
            [247, 247, 247],
            [230, 245, 208],
            [184, 225, 134],
            [127, 188, 65],
            [77, 146, 33],
            [39, 100, 25],
        ],
        dtype=np.float64,
    )
    / 255.0
)


# A sequential ramp (matplotlib's "inferno", sampled): black for nothing, pale yellow for the
# most, readable in greyscale and by colour-blind viewers. For unsigned maps (an audit's
# location map).
_INFERNO = (
    np.array(
        [
            [0, 0, 4],
            [31, 12, 72],
            [85, 15, 109],
            [136, 34, 106],
            [186, 54, 85],
            [227, 89, 51],
            [249, 140, 10],
            [249, 201, 50],
            [252, 255, 164],
        ],
        dtype=np.float64,
    )
    / 255.0
)


POSITIVE = np.array([0.0, 0.75, 0.2])  # green: supports the class


NEGATIVE = np.array([0.9, 0.1, 0.1])  # red: speaks against it


def _u8(a: np.ndarray) -> np.ndarray:
    return (np.clip(a, 0, 1) * 255 + 0.5).astype(np.uint8)


def diverging_colors(values: np.ndarray, vmax: float) -> np.ndarray:
    """Map values in [-vmax, vmax] to RGB floats on the PiYG scale; (...,) -> (..., 3)."""
    v = np.asarray(values, np.float64)
    v = np.where(np.isfinite(v), v, 0.0)  # a value that was not computed is drawn as neutral
    return _ramp(_PIYG, (v / max(vmax, 1e-12) + 1) / 2)


def _ramp(table: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Colours of ``t`` in [0, 1] (clipped) on a ramp of RGB stops, interpolated; (...,) -> (..., 3)."""
    pos = np.clip(t, 0, 1) * (len(table) - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, len(table) - 1)
    frac = (pos - lo)[..., None]
    return table[lo] * (1 - frac) + table[hi] * frac


def sequential_colors(values: np.ndarray, vmax: float) -> np.ndarray:
    """Map values in [0, vmax] to RGB floats on the inferno scale; (...,) -> (..., 3)."""
    v = np.asarray(values, np.float64)
    return _ramp(_INFERNO, np.where(np.isfinite(v), v, 0.0) / max(vmax, 1e-12))


def region_colors(n: int, seed: int = 7) -> np.ndarray:
    """(n, 3) float ndarray of distinct, fairly bright colours (golden-ratio hues)."""
    from skimage.color import hsv2rgb

    h = (np.arange(n) * 0.61803398875 + (seed % 100) / 100) % 1.0
    hsv = np.stack([h, np.full(n, 0.65), np.full(n, 0.95)], axis=1)
    return hsv2rgb(hsv[None])[0]


#: Regions whose |weight| is under this share of the largest |weight| are not tinted (the same
#: share under which the stability verdict calls a region negligible).
MIN_SHARE = THRESHOLDS["matter_min_share"]


#: Fill opacity of the strongest region: light, so that the region's own colours stay legible.
MAX_ALPHA = 0.25
