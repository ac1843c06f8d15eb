"""An image's strongest regions as plain values: where they are, what they look like, their weight.

The audit keeps, in each image's row, a few :class:`RegionDescriptor` values: the regions with
the largest positive weight for the predicted class (the regions that push it). Each holds its
mask at a common size (``REGION_GRID`` x ``REGION_GRID`` cells in normalised image coordinates,
packed as hex), its box, its share of the image's area and of the total |weight|, its weight and
delta, and colour and texture statistics (mean and spread of its CIE Lab colour, the mean and
spread of the lightness gradient inside it). :mod:`.grouping` groups them across images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..result import Explanation

#: Cells on each side of a region's mask in normalised image coordinates.
REGION_GRID = 32

#: How many regions of each image are described (the strongest by weight).
TOP_REGIONS = 3

#: A region is described only if it holds at least this share of the total |weight|.
MIN_SHARE = 0.05

#: At most this many of an image's other regions (proposed, uploaded or drawn, not among its
#: strongest) are described in its row, the largest |weight| first (:func:`describe_proposed`).
MAX_PROPOSED = 12

#: A region's key colour: the mean Lab of this share of its pixels, the most chromatic ones, of
#: their dominant hue. A superpixel is often larger than a small marker, so its mean colour is
#: mostly background; and a marker of two colours (a fill in a frame of the complementary one)
#: averaged over both is a muddle that matches neither its twins nor anything else.
KEY_SHARE = 0.2
#: The dominant hue: the peak of the chromatic pixels' hue histogram (``HUE_BIN`` degrees a bin,
#: each summed with its two neighbours); the key colour is the mean of the pixels within
#: ``HUE_SPAN`` degrees of it.
HUE_BIN = 10
HUE_SPAN = 25
#: Pixels under this CIE Lab chroma are gray: their hue is noise, and they take no part in the
#: key colour of a region that has coloured pixels (a small marker in a large gray superpixel).
GRAY_CHROMA = 10.0


@dataclass(frozen=True)
class RegionDescriptor:
    """One strong region of one image, as plain values.

    Attributes
    ----------
    region : int, its id in the image's label map
    name : str, its name ("" for a superpixel)
    weight : float, its weight for the predicted class (positive: it pushes that class)
    share : float, its share of the total |weight|
    delta : float, the predicted class's score change when only it is hidden
    area : float, its share of the image's pixels
    box : (top, left, bottom, right) floats in [0, 1], normalised image coordinates
    mask : str, hex of ``np.packbits`` of its (REGION_GRID, REGION_GRID) bool mask
    lab_mean, lab_std : (L, a, b) floats, the mean and spread of its CIE Lab colour
    key_lab, key_lab_std : (L, a, b) floats, the mean and spread of its key pixels
        (:func:`key_pixels`: the most chromatic, of their dominant hue; what the grouping by
        look compares)
    grad_mean, grad_std : float, mean and spread of the lightness gradient (L/100 per pixel)
    """

    region: int
    name: str
    weight: float
    share: float
    delta: float
    area: float
    box: tuple[float, float, float, float]
    mask: str
    lab_mean: tuple[float, float, float]
    lab_std: tuple[float, float, float]
    key_lab: tuple[float, float, float]
    key_lab_std: tuple[float, float, float]
    grad_mean: float
    grad_std: float

    def grid_mask(self) -> np.ndarray:
        """(REGION_GRID, REGION_GRID) bool ndarray, the region in normalised coordinates."""
        return unpack_mask(self.mask)

    @property
    def colour(self) -> str:
        """Its key colour as ``#rrggbb``."""
        from skimage.color import lab2rgb

        rgb = lab2rgb(np.asarray(self.key_lab, np.float64).reshape(1, 1, 3)).ravel()
        return "#" + "".join(f"{round(255 * v):02x}" for v in np.clip(rgb, 0, 1))


def pack_mask(mask: np.ndarray) -> str:
    """A (REGION_GRID, REGION_GRID) bool mask as hex (256 characters at 32 x 32)."""
    return np.packbits(np.asarray(mask, bool).ravel()).tobytes().hex()


def unpack_mask(text: str, grid: int = REGION_GRID) -> np.ndarray:
    """:func:`pack_mask`'s inverse: a (grid, grid) bool ndarray.

    Raises
    ------
    ValueError
        If ``text`` is not the hex of grid * grid bits.
    """
    raw = bytes.fromhex(text)
    if len(raw) * 8 != grid * grid:
        raise ValueError(f"a region mask must be {grid * grid // 4} hex digits, got {len(text)}")
    return np.unpackbits(np.frombuffer(raw, np.uint8)).astype(bool).reshape(grid, grid)


def grid_mask(region: np.ndarray, grid: int = REGION_GRID) -> np.ndarray:
    """A (H, W) bool region at ``grid`` x ``grid`` cells: a cell is in when at least half of it
    is (and the cell holding most of the region, so that a small region is never empty)."""
    from skimage.transform import resize

    r = np.asarray(region, np.float64)
    frac = resize(r, (grid, grid), order=1, anti_aliasing=True, mode="edge")
    out = frac >= 0.5
    if not out.any() and r.any():
        out.flat[int(np.argmax(frac))] = True
    return out


def _box(region: np.ndarray) -> tuple[float, float, float, float]:
    h, w = region.shape
    ys, xs = np.nonzero(region)
    return (ys.min() / h, xs.min() / w, (ys.max() + 1) / h, (xs.max() + 1) / w)


def _r(x: float) -> float:
    return round(float(x), 5) if math.isfinite(x) else 0.0


def key_pixels(px: np.ndarray) -> np.ndarray:
    """(m, 3) float ndarray: of a region's (n, 3) CIE Lab pixels, the ``KEY_SHARE`` most
    chromatic ones that are not gray (``GRAY_CHROMA``) and of their dominant hue (``HUE_BIN``,
    ``HUE_SPAN``), whose mean is its key colour."""
    chroma = np.hypot(px[:, 1], px[:, 2])
    most = chroma >= np.quantile(chroma, 1 - KEY_SHARE)
    coloured = most & (chroma >= GRAY_CHROMA)
    if not coloured.any():  # a gray region: its most chromatic pixels as they are
        return px[most]
    top = px[coloured]
    hue = np.degrees(np.arctan2(top[:, 2], top[:, 1])) % 360
    bins = 360 // HUE_BIN
    hist = np.bincount((hue // HUE_BIN).astype(int) % bins, minlength=bins).astype(np.float64)
    peak = (int(np.argmax(hist + np.roll(hist, 1) + np.roll(hist, -1))) + 0.5) * HUE_BIN
    near = np.abs((hue - peak + 180) % 360 - 180) <= HUE_SPAN
    return top[near] if near.any() else top


def describe_regions(
    image: np.ndarray, ex: Explanation, k: int = TOP_REGIONS, *, proposals: bool = False
) -> tuple[RegionDescriptor, ...]:
    """The ``k`` regions with the largest positive weight for the predicted class, described.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, the image explained (the explanation's size)
    ex : Explanation of it
    k : int, at most this many regions (those under ``MIN_SHARE`` of the |weight| are left out)
    proposals : bool, also every region a proposer made (origin ``proposed:...``) that holds at
        least ``MIN_SHARE`` of the |weight|, whatever its rank and sign, after the others (off
        in the audit; ``bench/audit_regroup.py`` measures what it would change)

    Returns
    -------
    tuple of RegionDescriptor, strongest first; empty when no region pushes the class.
    """
    w = np.asarray(ex.weights, np.float64)
    total = float(np.abs(w).sum())
    if total <= 0 or image.shape[:2] != ex.segments.shape:
        return ()
    lab, grad = _pixels(image)
    chosen = []
    for r in np.argsort(-w, kind="stable")[:k]:
        if w[r] <= 0 or abs(w[r]) / total < MIN_SHARE:
            break
        chosen.append(int(r))
    if proposals:
        chosen += [
            r for r, o in enumerate(ex.region_origins)
            if o.startswith("proposed") and r not in chosen and abs(w[r]) / total >= MIN_SHARE
        ]  # fmt: skip
    return tuple(_describe(r, ex, w, total, lab, grad) for r in chosen)


def describe_proposed(
    image: np.ndarray, ex: Explanation, skip: tuple[RegionDescriptor, ...] = ()
) -> tuple[RegionDescriptor, ...]:
    """Every region that is not a superpixel (proposed, uploaded or drawn) and not in ``skip``,
    described whatever its weight and sign: up to ``MAX_PROPOSED``, the largest |weight| first.

    A finding is grouped from the regions that push each image's class (:func:`describe_regions`);
    these are where it then looks for the same region in the images where it is not among the
    strongest (a finding's *carriers*, :func:`~.grouping.find_carriers`). A watermark that
    changed a photo's top-1 by lowering its clean class has a negative weight for the new class,
    yet it is the same watermark.

    Returns
    -------
    tuple of RegionDescriptor; empty when the image has no such region or no weight at all.
    """
    w = np.asarray(ex.weights, np.float64)
    total = float(np.abs(w).sum())
    if total <= 0 or image.shape[:2] != ex.segments.shape:
        return ()
    taken = {d.region for d in skip}
    others = [
        r for r, o in enumerate(ex.region_origins) if o != "superpixel" and r not in taken
    ]  # fmt: skip
    if not others:
        return ()
    others = sorted(others, key=lambda r: -abs(w[r]))[:MAX_PROPOSED]
    lab, grad = _pixels(image)
    return tuple(_describe(r, ex, w, total, lab, grad) for r in others)


def _pixels(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The image's CIE Lab pixels and its lightness gradient's magnitude (L/100 per pixel)."""
    from skimage.color import rgb2lab

    lab = rgb2lab(np.asarray(image, np.uint8)[..., :3])
    gy, gx = np.gradient(lab[..., 0] / 100.0)
    return lab, np.hypot(gy, gx)


def _describe(
    r: int, ex: Explanation, w: np.ndarray, total: float, lab: np.ndarray, grad: np.ndarray
) -> RegionDescriptor:
    region = ex.segments == r
    px = lab[region]
    key = key_pixels(px)
    g = grad[region]
    return RegionDescriptor(
        region=r,
        name=str(ex.region_names[r]),
        weight=_r(w[r]),
        share=_r(abs(w[r]) / total),
        delta=_r(float(ex.deltas[0, r])),
        area=_r(region.mean()),
        box=tuple(_r(v) for v in _box(region)),  # type: ignore[arg-type]
        mask=pack_mask(grid_mask(region)),
        lab_mean=tuple(_r(v) for v in px.mean(axis=0)),  # type: ignore[arg-type]
        lab_std=tuple(_r(v) for v in px.std(axis=0)),  # type: ignore[arg-type]
        key_lab=tuple(_r(v) for v in key.mean(axis=0)),  # type: ignore[arg-type]
        key_lab_std=tuple(_r(v) for v in key.std(axis=0)),  # type: ignore[arg-type]
        grad_mean=_r(g.mean()),
        grad_std=_r(g.std()),
    )
