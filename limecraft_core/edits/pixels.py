"""Edits of a region's own pixels: recoloured, blurred, or filled where it was removed or vacated.

The fills: inpaint, mean, grey, black or a colour.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage as ndi
from skimage.color import hsv2rgb, rgb2hsv

from .._validate import (
    MIN_SIDE,
)
from ..perturb import inpaint, make_fill
from .edit import _DIRECT_BLUR_SIGMA, Edit


def _filled(img: np.ndarray, hole: np.ndarray, fill: str) -> np.ndarray:
    """``img`` with the ``hole`` pixels replaced by ``fill``; a new (H, W, 3) float32 array.

    Images smaller than the engine's minimum side are padded for the fill (the padding is
    part of the hole for ``inpaint`` and a region of its own for ``mean``), then cropped.
    """
    out = img.copy()
    if not hole.any():
        return out
    h, w = hole.shape
    pad = [(0, max(0, MIN_SIDE - h)), (0, max(0, MIN_SIDE - w))]
    p_img = np.pad(img, [*pad, (0, 0)], mode="edge")
    if fill == "inpaint":
        if hole.all():  # nothing to draw from: the image's mean, as inpaint does
            values = np.broadcast_to(img.mean(axis=(0, 1)), img.shape)
        else:
            values = inpaint(p_img, np.pad(hole, pad, constant_values=True))[:h, :w]
    else:
        p_lab = np.pad(hole.astype(np.int32), pad, constant_values=2)
        values = make_fill(p_img, p_lab, fill)[:h, :w]
    out[hole] = values[hole]
    return out


def _recolour(img: np.ndarray, mask: np.ndarray, edit: Edit) -> np.ndarray:
    out = img.copy()
    px = img[mask]
    if edit.hue != 0.0 or edit.saturation != 1.0 or edit.brightness != 1.0:
        hsv = rgb2hsv(px[None])[0]
        hsv[:, 0] = (hsv[:, 0] + edit.hue / 360.0) % 1.0
        hsv[:, 1] = np.clip(hsv[:, 1] * edit.saturation, 0.0, 1.0)
        hsv[:, 2] = np.clip(hsv[:, 2] * edit.brightness, 0.0, 1.0)
        px = hsv2rgb(hsv[None])[0]
    if any(edit.rgb_shift):
        px = px + np.asarray(edit.rgb_shift, np.float32)
    out[mask] = np.clip(px, 0.0, 1.0)
    return out


def _blur_region(img: np.ndarray, mask: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur (border mode ``nearest``), written into the mask's pixels only.

    Only a window of the mask's bounding box plus the kernel radius is filtered, which gives
    the same values as filtering the whole image. Above ``_DIRECT_BLUR_SIGMA`` the window is
    block-averaged by f = sigma // 4, blurred with the matching smaller sigma and sampled back
    bilinearly (within about 1/255 of the exact filter, at a fraction of the cost).
    """
    out = img.copy()
    if sigma == 0.0:
        return out
    h, w = mask.shape
    rows, cols = np.nonzero(mask)
    radius = int(4.0 * sigma + 0.5) + 1
    r0, r1 = max(0, rows.min() - radius), min(h, rows.max() + radius + 1)
    c0, c1 = max(0, cols.min() - radius), min(w, cols.max() + radius + 1)
    win = img[r0:r1, c0:c1]
    if sigma <= _DIRECT_BLUR_SIGMA:
        blurred = ndi.gaussian_filter(win, (sigma, sigma, 0), mode="nearest")
        out[rows, cols] = blurred[rows - r0, cols - c0]
        return out
    f = int(sigma // 4)
    # Border mode "nearest" at full resolution: pad the window to its unclipped extent.
    top, left = rows.min() - radius, cols.min() - radius
    bottom, right = rows.max() + radius + 1, cols.max() + radius + 1
    wh, ww = bottom - top, right - left
    nh, nw = -(-wh // f), -(-ww // f)
    pad = [(r0 - top, top + nh * f - r1), (c0 - left, left + nw * f - c1), (0, 0)]
    padded = np.pad(win, pad, mode="edge")
    rr, cc = rows - top, cols - left
    small = padded.reshape(nh, f, nw, f, 3).mean(axis=(1, 3))
    # Block averaging and bilinear upsampling each add blur (variance f^2/12 and f^2/6).
    s = math.sqrt(max(sigma**2 - f**2 / 4.0, 0.0)) / f
    small = ndi.gaussian_filter(small, (s, s, 0), mode="nearest")
    coords = np.stack([(rr + 0.5) / f - 0.5, (cc + 0.5) / f - 0.5])
    kw = {"order": 1, "mode": "nearest", "prefilter": False}
    out[rows, cols] = np.stack(
        [ndi.map_coordinates(small[..., ch], coords, **kw) for ch in range(3)], axis=1
    )
    return out
