"""Region ids drawn on a picture, readable over any colour.

Where each region's label goes (inside the region, away from its border) and the label itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._validate import LimecraftError
from .colours import NEGATIVE, POSITIVE
from .fonts import label_font


def _draw_ids(
    picture: np.ndarray,
    segments: np.ndarray,
    ids: Sequence[int],
    texts: list[str],
    w: np.ndarray,
) -> np.ndarray:
    """Each tinted region's text on a light box at its centre: ``ids`` largest |weight| first, so
    the strongest is drawn last (on top)."""
    from PIL import Image, ImageDraw

    h2, w2 = picture.shape[:2]
    sy, sx = h2 / segments.shape[0], w2 / segments.shape[1]
    size = int(np.clip(round(max(h2, w2) / 30), 10, 40))
    font, pad = label_font(size), max(2, size // 5)
    layer = Image.new("RGBA", (w2, h2), (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    where = {r: (x * sx, y * sy) for r, x, y in _positions(segments, ids)}
    for region in reversed(ids):
        x, y = where[region]
        left, top, right, bottom = draw.textbbox((x, y), texts[region], font=font, anchor="mm")
        box = [left - pad, top - pad, right + pad, bottom + pad]
        dx = max(0, -box[0]) - max(0, box[2] - (w2 - 1))  # keep the box inside the picture
        dy = max(0, -box[1]) - max(0, box[3] - (h2 - 1))
        box = [box[0] + dx, box[1] + dy, box[2] + dx, box[3] + dy]
        sign = tuple(int(c * 255 + 0.5) for c in (POSITIVE if w[region] > 0 else NEGATIVE))
        draw.rounded_rectangle(
            box, radius=pad, fill=(255, 255, 255, 225), outline=(*sign, 255), width=1
        )
        draw.text((x + dx, y + dy), texts[region], fill=(20, 20, 20, 255), font=font, anchor="mm")
    base = Image.fromarray(picture).convert("RGBA")
    return np.asarray(Image.alpha_composite(base, layer).convert("RGB"))


def id_positions(labels: np.ndarray) -> list[tuple[int, float, float]]:
    """A point well inside each region, where its id can be written.

    Parameters
    ----------
    labels : (H, W) int ndarray, ids 0..K-1 (a missing id is skipped)

    Returns
    -------
    list of (id, x, y), in pixel units of ``labels``: the point farthest from the region's
    border (a centroid can fall outside a ring or a crescent).
    """
    labels = np.asarray(labels)
    if labels.ndim != 2 or not np.issubdtype(labels.dtype, np.integer):
        raise LimecraftError("labels must be a 2-D integer label map")
    return _positions(labels)


def _positions(
    labels: np.ndarray, wanted: Sequence[int] | None = None
) -> list[tuple[int, float, float]]:
    """:func:`id_positions` for the ids in ``wanted`` only (default all)."""
    from scipy import ndimage as ndi

    wanted_set = None if wanted is None else {int(i) for i in wanted}
    out = []
    for region, box in enumerate(ndi.find_objects(labels + 1)):
        if box is None or (wanted_set is not None and region not in wanted_set):
            continue
        m = np.pad(labels[box] == region, 1)
        dist = ndi.distance_transform_edt(m)[1:-1, 1:-1]
        y, x = np.unravel_index(np.argmax(dist), dist.shape)
        out.append((region, box[1].start + x + 0.5, box[0].start + y + 0.5))
    return out
