"""Label maps: ids 0..K-1 with no gaps (``relabel``), resized, cut and cleaned.

They are resized by nearest neighbour, cut by a grid, and the smallest regions merged into their
neighbours.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
from skimage import measure

#: A region count within this factor of the one asked for, give or take one region, is met.
#: Outside it the segmentation is refitted (see ``superpixels._fit_count``), so results that met
#: it before are unchanged.
COUNT_TOLERANCE = 1.5


def relabel(labels: np.ndarray) -> np.ndarray:
    """Map any integer label map onto 0..K-1, keeping the order of the original values.

    Parameters
    ----------
    labels : (H, W) integer ndarray

    Returns
    -------
    (H, W) int32 ndarray with values 0..K-1, no gaps. A new array.
    """
    labels = np.asarray(labels)
    if labels.size == 0:
        return np.zeros(labels.shape, np.int32)
    lo, hi = int(labels.min()), int(labels.max())
    if hi - lo <= 4 * labels.size + 1024:  # a lookup table: O(pixels), no sort
        present = np.bincount((labels - lo).ravel().astype(np.intp), minlength=hi - lo + 1) > 0
        lut = (np.cumsum(present) - 1).astype(np.int32)
        return lut[labels - lo]
    _, inverse = np.unique(labels, return_inverse=True)
    return inverse.reshape(labels.shape).astype(np.int32)


def _grid_shape(h: int, w: int, n: int) -> tuple[int, int]:
    """Rows and columns of a grid of about ``n`` cells, as square as the count allows."""
    rows = min(max(1, round(math.sqrt(n * h / w))), h)
    cols = min(max(1, round(n / rows)), w)
    if abs(rows * cols - n) <= max(1, n // 10):
        return rows, cols

    # A very wide or tall image: the closest count, then the squarest cells.
    def cost(r: int) -> tuple[int, float]:
        c = min(max(1, round(n / r)), w)
        return abs(r * c - n), abs(math.log(h * c / (w * r)))

    rows = min(range(1, min(n, h) + 1), key=cost)
    return rows, min(max(1, round(n / rows)), w)


def _grid(shape: tuple[int, int], n_segments: int) -> np.ndarray:
    h, w = shape
    rows, cols = _grid_shape(h, w, n_segments)
    r = np.minimum(np.arange(h) * rows // h, rows - 1)
    c = np.minimum(np.arange(w) * cols // w, cols - 1)
    return (r[:, None] * cols + c[None, :]).astype(np.int32)


def _count(labels: np.ndarray) -> int:
    return int(labels.max()) + 1


def _split_by_grid(labels: np.ndarray, n: int) -> np.ndarray:
    """Cut each region by a grid of about ``n`` cells; slivers under half a cell join the piece
    of the same region they touch most. Where that still leaves too few (regions only a pixel
    or two wide, all slivers), the grid itself."""
    cells = _grid(labels.shape, n)
    pieces_of_cells = labels.astype(np.int64) * (int(cells.max()) + 1) + cells + 1
    cut = measure.label(pieces_of_cells, background=0, connectivity=1) - 1
    pieces = _merge_smallest(cut, min_size=labels.size // (2 * n), within=labels)
    return pieces if _count(pieces) >= n / COUNT_TOLERANCE - 1 else cells


def _merge_smallest(
    labels: np.ndarray,
    *,
    count: int = 1,
    min_size: int | None = None,
    within: np.ndarray | None = None,
) -> np.ndarray:
    """Merge the smallest region into the neighbour it shares the longest border with, again and
    again, while more than ``count`` remain and (with ``min_size``) the smallest is under
    ``min_size`` pixels. With ``within`` (a label map that each region lies inside), a region
    only joins a neighbour inside the same ``within`` region.

    The borders are counted once with array operations; each merge then only updates the
    merged region's few entries, so 10**5 regions merge in about a second.
    """
    k = _count(labels)
    sizes = np.bincount(labels.ravel(), minlength=k)
    # touching pairs (i < j) and the length of their shared border
    a = np.concatenate([labels[:, :-1].ravel(), labels[:-1, :].ravel()]).astype(np.int64)
    b = np.concatenate([labels[:, 1:].ravel(), labels[1:, :].ravel()]).astype(np.int64)
    touching = a != b
    lo, hi = np.minimum(a, b)[touching], np.maximum(a, b)[touching]
    if within is not None:
        home = np.zeros(k, np.int64)
        home[labels.ravel()] = within.ravel()
        lo, hi = lo[home[lo] == home[hi]], hi[home[lo] == home[hi]]
    pairs, lengths = np.unique(lo * k + hi, return_counts=True)
    border: list[dict[int, int]] = [{} for _ in range(k)]
    for pair, length in zip(pairs.tolist(), lengths.tolist(), strict=True):
        i, j = divmod(pair, k)
        border[i][j] = border[j][i] = length
    sizes_left = sizes.tolist()
    into = list(range(k))
    heap = [(size, label) for label, size in enumerate(sizes_left)]
    heapq.heapify(heap)
    left = k
    while left > count and heap:
        size, label = heapq.heappop(heap)
        if size != sizes_left[label]:
            continue  # merged away, or grown (queued again at its new size)
        if min_size is not None and size >= min_size:
            break
        if not border[label]:
            continue  # nothing it may join
        target = max(border[label], key=lambda j: (border[label][j], -j))
        for other, length in border[label].items():
            del border[other][label]
            if other != target:
                border[target][other] = border[other][target] = (
                    border[target].get(other, 0) + length
                )
        border[label] = {}
        into[label] = target
        sizes_left[target] += size
        sizes_left[label] = -1
        heapq.heappush(heap, (sizes_left[target], target))
        left -= 1
    lut = np.array(into)
    for _ in range(k):  # follow each chain of merges to its end
        nxt = lut[lut]
        if np.array_equal(nxt, lut):
            break
        lut = nxt
    return relabel(lut[labels])


def resize_nearest(labels: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour resize of a 2-D label map or mask to ``shape`` (rows, cols).

    Each output pixel takes the input pixel under its centre, so upscaling keeps every label.
    """
    h, w = labels.shape
    rows = np.minimum(((np.arange(shape[0]) + 0.5) * h / shape[0]).astype(np.intp), h - 1)
    cols = np.minimum(((np.arange(shape[1]) + 0.5) * w / shape[1]).astype(np.intp), w - 1)
    return labels[rows[:, None], cols[None, :]]
