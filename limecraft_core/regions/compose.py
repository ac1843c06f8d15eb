"""Handcrafted regions composed with automatic superpixels (``compose_regions``).

Each drawn region is one feature (or split into its own superpixels), and the rest is segmented
around them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import ndimage as ndi
from skimage import measure

from .._validate import (
    MAX_PIXELS,
    LimecraftError,
    as_float_image,
    check_choice,
    check_int,
    check_label_map,
)
from ..limits import LIMITS, SEGMENTERS
from .merge import _Atoms
from .superpixels import (
    Progress,
    _between,
    _check_count,
    _check_working_size,
    _segment_scaled,
    _silent,
)
from .types import HAND_ORIGINS, Regions, check_origin, masks_from_label_image


def _as_masks(regions_mask: Any, shape: tuple[int, int]) -> list[np.ndarray]:
    if isinstance(regions_mask, np.ndarray):
        check_label_map(regions_mask, shape, "regions mask")
        if regions_mask.dtype == np.bool_:
            return [regions_mask.copy()]
        return masks_from_label_image(regions_mask)
    masks = []
    for i, m in enumerate(regions_mask):
        m = np.asarray(m)
        check_label_map(m, shape, f"regions mask {i + 1}")
        masks.append(m.astype(bool))
    return masks


def _components(labels: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Connected components of ``labels`` restricted to ``where``; 0 outside, 1.. inside."""
    comp = measure.label(np.where(where, labels + 1, 0), background=0, connectivity=1)
    return comp.astype(np.int64)


def _merge_small(
    pieces: np.ndarray, movable: np.ndarray, min_size: int, parent: np.ndarray | None = None
) -> np.ndarray:
    """Merge movable pieces under ``min_size`` pixels into the movable neighbour they touch most.

    ``pieces`` is a label map (0 = not part of this group); ``movable`` marks pixels of the
    group; ``parent`` (optional, (H, W) int) is the segmentation the pieces were cut from. A
    small piece that touches no other piece of the group (a hole that a handcrafted region
    encloses, such as the inside of a letter) joins the largest other piece of the superpixel
    it was cut from instead. Pieces with neither are kept.
    """
    pieces = pieces.copy()
    sizes = np.bincount(pieces.ravel())
    boxes = ndi.find_objects(pieces)  # boxes[label - 1], kept up to date as pieces merge
    struct = ndi.generate_binary_structure(2, 1)
    parent_of = _parent_of(pieces, parent, len(sizes))
    for label in np.argsort(sizes, kind="stable"):
        if label == 0 or sizes[label] == 0 or sizes[label] >= min_size:
            continue
        box = boxes[label - 1]
        sl = tuple(slice(max(s.start - 1, 0), s.stop + 1) for s in box)
        local = pieces[sl]
        mine = local == label
        ring = ndi.binary_dilation(mine, struct) & ~mine & movable[sl] & (local > 0)
        if ring.any():
            neighbours, counts = np.unique(local[ring], return_counts=True)
            target = int(neighbours[np.argmax(counts)])
        else:
            target = _same_parent(label, parent_of, sizes)
            if target == 0:
                continue
        pieces[sl][mine] = target
        tb = boxes[target - 1]
        boxes[target - 1] = tuple(
            slice(min(a.start, b.start), max(a.stop, b.stop)) for a, b in zip(tb, box, strict=False)
        )
        sizes[target] += sizes[label]
        sizes[label] = 0
    return pieces


def _parent_of(pieces: np.ndarray, parent: np.ndarray | None, n: int) -> np.ndarray:
    """(n,) int64: the superpixel of ``parent`` each piece was cut from (-1: none given)."""
    out = np.full(n, -1, np.int64)
    if parent is not None:
        inside = pieces > 0
        out[pieces[inside]] = parent[inside]
    out[0] = -1
    return out


def _same_parent(label: int, parent_of: np.ndarray, sizes: np.ndarray) -> int:
    """The largest other piece, still present, cut from the same superpixel as ``label`` (0:
    none)."""
    if parent_of[label] < 0:
        return 0
    same = np.flatnonzero((parent_of == parent_of[label]) & (sizes > 0))
    same = same[same != label]
    return int(same[np.argmax(sizes[same])]) if same.size else 0


def _outer_min_fragment(whole: np.ndarray) -> int:
    """The default smallest automatic piece: a quarter of the mean superpixel's area in the
    segmentation ``whole`` (image pixels over its superpixels), at least 4 pixels."""
    return max(4, whole.size // (4 * (int(whole.max()) + 1)))


def _inner_min_fragment(shape: tuple[int, int], given: int | None) -> int:
    """The smallest piece inside a handcrafted region: ``given``, else 0.1% of the image, at
    least 4 pixels."""
    return max(4, shape[0] * shape[1] // 1000) if given is None else given


def _checked(
    shape: tuple[int, int],
    outer_segments: int | None,
    inner_method: str,
    outer_method: str,
    working_size: int | str | None,
    seed: int,
    min_fragment: int | None,
) -> tuple[int | None, int | None, int | None, int, int | None]:
    """:func:`compose_regions`'s settings checked, in the order its errors are reported:
    ``outer_segments``, the methods, the working sizes, the seed and ``min_fragment`` (None
    stays None: its default depends on the segmentation)."""
    if outer_segments is not None:
        outer_segments = LIMITS["outer_segments"].check("outer_segments", outer_segments)
    _check_count("outer_segments", outer_segments, shape)
    check_choice("inner method", inner_method, SEGMENTERS)
    check_choice("outer method", outer_method, SEGMENTERS)
    inner_size = _check_working_size(working_size, inner_method)
    outer_size = _check_working_size(working_size, outer_method)
    seed = LIMITS["seed"].check("seed", seed)
    if min_fragment is not None:
        min_fragment = check_int("min_fragment", min_fragment, 0, MAX_PIXELS)
    return outer_segments, inner_size, outer_size, seed, min_fragment


def _add_rest(
    atoms: _Atoms,
    img: np.ndarray,
    rest: np.ndarray,
    outer: tuple[str, int | None, Mapping[str, Any], int | None, int],
    min_fragment: int | None,
    progress: Progress,
) -> str:
    """The rest of the image as atoms: one background feature, or segmented with the outer
    method (``outer``: method, count, parameters, working size, seed) and its small pieces
    merged. Returns the segmentation's note."""
    method, count, params, size, seed = outer
    if count == 1:
        atoms.add(None, rest, "background", "background", split=False)
        return ""
    whole, note = _segment_scaled(
        img, method, count, params, size, seed, _between(progress, 0.3, 0.9)
    )
    progress(0.9, "merging the rest's small pieces")
    if min_fragment is None:
        min_fragment = _outer_min_fragment(whole)
    atoms.add_auto(_merge_small(_components(whole, rest), rest, min_fragment, whole), rest)
    return note


def _hand_atoms(
    img: np.ndarray,
    masks: Sequence[np.ndarray],
    names: Sequence[str],
    origins: Sequence[str],
    inner: Sequence[int | None],
    inside: tuple[str, int | None, int, int],
    progress: Progress,
) -> tuple[_Atoms, np.ndarray]:
    """The handcrafted regions as atoms (each whole, or cut into pieces with ``inside``:
    method, working size, smallest fragment, seed), later masks winning where they overlap;
    and the rest of the image, which no mask covers."""
    inner_method, inner_size, min_fragment, seed = inside
    shape = img.shape[:2]
    owner = np.zeros(shape, dtype=np.int32)  # 0 = rest of the image, i + 1 = handcrafted region i
    for i, m in enumerate(masks):
        owner[m] = i + 1
    atoms = _Atoms(shape)
    for i in range(len(masks)):
        where = owner == i + 1
        if not where.any():
            continue  # fully covered by later masks
        if inner[i] is not None and inner[i] > 1:
            progress(0.1 + 0.2 * i / len(masks), f"cutting {names[i]} into pieces")
        pieces = _inner_pieces(img, where, inner[i], inner_method, inner_size, min_fragment, seed)
        atoms.add(pieces, where, f"hand:{i}", names[i], pieces is not None, origins[i])
    return atoms, owner == 0


def compose_regions(
    image: np.ndarray,
    regions_mask: Any,
    *,
    names: Sequence[str] | None = None,
    origins: Sequence[str] | None = None,
    inner_segments: int | Sequence[int | None] | None = None,
    inner_method: str = "slic",
    outer_segments: int | None = None,
    outer_method: str = "quickshift",
    outer_params: Mapping[str, Any] | None = None,
    min_fragment: int | None = None,
    working_size: int | str | None = "auto",
    seed: int = 0,
    progress: Progress | None = None,
) -> Regions:
    """Compose the final regions from handcrafted masks and automatic superpixels.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float in [0, 1]
    regions_mask : (H, W) bool or integer ndarray, or sequence of (H, W) bool ndarrays
        Handcrafted regions. In an integer image each distinct non-zero value is one region.
        Where masks overlap, the later one wins.
    names : sequence of str, optional
        One display name per handcrafted region (default ``"region 1"``, ...).
    origins : sequence of str, optional
        Each handcrafted region's origin (``Regions.atom_origins``): ``"drawn"`` (default),
        ``"uploaded"`` or ``"proposed:<proposer>"``; automatic regions are ``"superpixel"``.
    inner_segments : int or sequence of (int or None), optional
        Per region (or one value for all): ``None`` or 1 keeps the region as one feature;
        N > 1 segments inside it with ``inner_method`` into about N pieces.
    outer_segments : int, optional
        The rest of the image: 1 keeps it as one background feature; ``None`` segments it with
        ``outer_method`` and its defaults; N > 1 targets N regions over the whole image (at most
        its pixels), refitted as in :func:`segment`.
    min_fragment : int, optional
        Automatic pieces under this many pixels (the slivers a handcrafted region's strokes cut)
        join the automatic piece they share the longest border with, never a handcrafted region;
        one that a handcrafted region encloses joins the largest other piece of the superpixel it
        was cut from; one with neither stays. Default: a quarter of the mean automatic
        superpixel, at least 4 (inside a region cut with ``inner_segments``: 0.1% of the image).
        In [0, MAX_PIXELS].
    working_size : int in [16, 100000], "auto" or None, see :func:`segment`
    seed : int in [0, 2**63 - 1]
    progress : callable(fraction, message), optional
        Told each stage (each handcrafted region cut into pieces, then the rest as in
        :func:`segment`), with fractions in [0, 1] that increase. Changes nothing else.

    Returns
    -------
    Regions
        Handcrafted regions first (in mask order), then the outer regions. A region kept as one
        feature is exactly its mask minus later masks. ``note`` says why the outer count differs
        from ``outer_segments`` where it cannot be met (a flat image).

    Raises
    ------
    LimecraftError
        If a mask does not have the image's height and width, an origin is not one of those
        above, or a value is out of its range (``inner_segments`` in [1, 1000],
        ``outer_segments`` in [1, 5000] and at most the image's pixels).
    """
    progress = progress or _silent
    progress(0.0, "reading the image")
    img = as_float_image(image)
    shape = img.shape[:2]
    masks = _as_masks(regions_mask, shape)
    names, inner, origins = _hand_settings(len(masks), names, inner_segments, origins)
    outer_segments, inner_size, outer_size, seed, min_fragment = _checked(
        shape, outer_segments, inner_method, outer_method, working_size, seed, min_fragment
    )
    inside = (inner_method, inner_size, _inner_min_fragment(shape, min_fragment), seed)
    atoms, rest = _hand_atoms(img, masks, names, origins, inner, inside, progress)
    note = ""
    if rest.any():
        outer = (outer_method, outer_segments, outer_params or {}, outer_size, seed)
        note = _add_rest(atoms, img, rest, outer, min_fragment, progress)
    progress(1.0, "done")
    return atoms.regions(note)


def _hand_origins(n_masks: int, origins: Sequence[str] | None) -> list[str]:
    """One origin per handcrafted region, checked (default ``drawn``)."""
    if origins is None:
        return ["drawn"] * n_masks
    if isinstance(origins, str) or len(origins) != n_masks:
        n = 1 if isinstance(origins, str) else len(origins)
        raise LimecraftError(f"{n} origins given for {n_masks} handcrafted regions")
    return [check_origin(o, HAND_ORIGINS) for o in origins]


def _hand_settings(
    n_masks: int, names: Sequence[str] | None, inner_segments: Any, origins: Sequence[str] | None
) -> tuple[list[str], list[int | None], list[str]]:
    """One name, one inner count and one origin per handcrafted region, checked."""
    if names is None:
        names = [f"region {i + 1}" for i in range(n_masks)]
    if len(names) != n_masks:
        raise LimecraftError(f"{len(names)} names given for {n_masks} handcrafted regions")
    if inner_segments is None or isinstance(inner_segments, (int, np.integer)):
        inner = [inner_segments] * n_masks
    else:
        inner = list(inner_segments)
        if len(inner) != n_masks:
            raise LimecraftError(
                f"{len(inner)} inner_segments values for {n_masks} handcrafted regions"
            )
    return (
        list(names),
        [None if v is None else LIMITS["inner_segments"].check("inner_segments", v) for v in inner],
        _hand_origins(n_masks, origins),
    )


def _inner_pieces(
    img: np.ndarray,
    where: np.ndarray,
    n: int | None,
    method: str,
    size: int | None,
    min_fragment: int,
    seed: int,
) -> np.ndarray | None:
    """A handcrafted region segmented into about ``n`` connected pieces, or None (one feature)."""
    if n is None or n <= 1:
        return None
    rows, cols = np.nonzero(where)
    r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
    crop = img[r0:r1, c0:c1]
    if min(crop.shape[:2]) < 2:
        return None
    n = min(n, crop.shape[0] * crop.shape[1])
    local, _ = _segment_scaled(crop, method, n, {}, size, seed)
    pieces = np.zeros(where.shape, np.int64)
    pieces[r0:r1, c0:c1] = local + 1
    return _merge_small(_components(pieces, where), where, min_fragment, pieces)
