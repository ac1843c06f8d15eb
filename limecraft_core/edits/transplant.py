"""Transplant: a region of one image pasted into other images, at the same place.

Removing a region shows that a prediction needs it; pasting it into images of other classes
shows that it causes it (the insertion test of ImageNet-W, Reveal2Revise and SLANT).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from PIL import Image

from limecraft_core._validate import LimecraftError, check_choice

__all__ = ["PLACES", "Insertion", "Transplant", "insertion_test", "transplant"]

#: ``relative``: the source (image and mask) is resized to the target's size first, so the region
#: lands at the same place and scale relative to the image (the watermark's case: it scales with
#: the image). ``absolute``: the same pixel offsets, unscaled, clipped to the target.
PLACES = ("relative", "absolute")


@dataclass(frozen=True)
class Transplant:
    """A target image with a region pasted in.

    Attributes
    ----------
    image : (H, W, 3) uint8 ndarray, the target with the region's pixels pasted in
    mask : (H, W) bool ndarray, the target pixels that were replaced
    clipped : bool, True when part of the region fell outside the target and was cut off
    """

    image: np.ndarray
    mask: np.ndarray
    clipped: bool


def _rgb(name: str, image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise LimecraftError(
            f"{name} must be an (H, W, 3) uint8 image; got {image.dtype} {image.shape}"
        )
    return image


def transplant(
    source: np.ndarray,
    mask: np.ndarray,
    target: np.ndarray,
    *,
    place: Literal["relative", "absolute"] = "relative",
) -> Transplant:
    """Paste ``source``'s pixels under ``mask`` into ``target``.

    Parameters
    ----------
    source : (H, W, 3) uint8 ndarray, the image the region comes from (not changed)
    mask : (H, W) bool ndarray, the region in ``source``
    target : (H2, W2, 3) uint8 ndarray, the image it goes into (not changed)
    place : {"relative", "absolute"}, see :data:`PLACES`

    Returns
    -------
    Transplant

    Raises
    ------
    LimecraftError
        For images that are not RGB uint8, a mask of another size than ``source`` or with no
        pixel, or (``absolute``) a region that falls wholly outside ``target``.
    """
    source, target = _rgb("the source image", source), _rgb("the target image", target)
    mask = np.asarray(mask)
    if mask.shape != source.shape[:2]:
        raise LimecraftError(
            f"the region's mask is {mask.shape[1]}×{mask.shape[0]} but its image is "
            f"{source.shape[1]}×{source.shape[0]}; they must be the same size"
        )
    mask = mask.astype(bool)
    if not mask.any():
        raise LimecraftError("the region to paste is empty: select a region with pixels in it")
    check_choice("place", place, PLACES)
    h, w = target.shape[:2]
    if place == "relative":
        # nearest for both: every pasted pixel is one of the region's own, never a blend with
        # what lay outside the mask
        pixels = np.asarray(Image.fromarray(source).resize((w, h), Image.Resampling.NEAREST))
        where = np.asarray(Image.fromarray(mask).resize((w, h), Image.Resampling.NEAREST))
        clipped = False
    else:
        pixels, where, clipped = _clip(source, mask, (h, w))
    if not where.any():
        raise LimecraftError(
            "the region falls outside the target image: it is "
            f"{source.shape[1]}×{source.shape[0]} px and the target {w}×{h}; paste with "
            "place='relative' to scale it to the target"
        )
    out = target.copy()
    out[where] = pixels[where]
    return Transplant(image=out, mask=where, clipped=clipped)


def _clip(source: np.ndarray, mask: np.ndarray, size: tuple[int, int]):
    """The source and mask at the same pixel offsets, cut (or padded) to the target's size."""
    h, w = size
    sh, sw = mask.shape
    pixels = np.zeros((h, w, 3), np.uint8)
    where = np.zeros((h, w), bool)
    ch, cw = min(h, sh), min(w, sw)
    pixels[:ch, :cw] = source[:ch, :cw]
    where[:ch, :cw] = mask[:ch, :cw]
    return pixels, where, bool(mask.sum() > where.sum())


@dataclass(frozen=True)
class Insertion:
    """The insertion test: one region pasted into K images, and what the model said.

    Attributes
    ----------
    target_class : int, the class whose probability is followed (the suspect class)
    before, after : (K,) float ndarrays, its probability on each image, clean and with the region
    top_before, top_after : (K,) int ndarrays, each image's top class, clean and with the region
    clipped : (K,) bool ndarray, whether part of the region fell outside that image
    """

    target_class: int
    before: np.ndarray
    after: np.ndarray
    top_before: np.ndarray
    top_after: np.ndarray
    clipped: np.ndarray

    @property
    def gain(self) -> np.ndarray:
        """(K,) the probability's change on each image (after − before)."""
        return self.after - self.before

    @property
    def mean_gain(self) -> float:
        return float(self.gain.mean())

    @property
    def flipped(self) -> np.ndarray:
        """(K,) bool: the image's top class became the target class."""
        return (self.top_after == self.target_class) & (self.top_before != self.target_class)

    @property
    def flips(self) -> int:
        return int(self.flipped.sum())

    @property
    def flip_rate(self) -> float:
        """Flips over the images that were not the target class already."""
        eligible = int((self.top_before != self.target_class).sum())
        return self.flips / eligible if eligible else 0.0

    def sentence(self, class_name: str) -> str:
        """One line, e.g. "Pasted into 4 images, the region raised carton by 0.21 on average
        and turned 3 of 4 into carton"."""
        k = len(self.before)
        eligible = int((self.top_before != self.target_class).sum())
        return (
            f"Pasted into {k} image{'s' * (k != 1)}, the region "
            f"{'raised' if self.mean_gain >= 0 else 'lowered'} {class_name} by "
            f"{abs(self.mean_gain):.3f} on average and turned {self.flips} of {eligible} into "
            f"{class_name}"
        )


def insertion_test(
    source: np.ndarray,
    mask: np.ndarray,
    targets: list[np.ndarray],
    predict,
    target_class: int,
    *,
    place: Literal["relative", "absolute"] = "relative",
) -> tuple[Insertion, list[Transplant]]:
    """Paste a region into each of ``targets`` and score each before and after.

    Parameters
    ----------
    source, mask : the image and the region, as for :func:`transplant`
    targets : list of (H, W, 3) uint8 ndarrays, the clean images (any sizes)
    predict : callable((H, W, 3) uint8 ndarray) -> (C,) probabilities
    target_class : int, the class to follow
    place : see :data:`PLACES`

    Returns
    -------
    (Insertion, list of Transplant), the scores and the pasted images, in ``targets``' order

    Raises
    ------
    LimecraftError
        For no target, a bad image or mask (see :func:`transplant`), or a class the model does
        not have.
    """
    if not targets:
        raise LimecraftError("the insertion test needs at least one image to paste the region into")
    pasted = [transplant(source, mask, t, place=place) for t in targets]
    rows = []
    for clean, p in zip(targets, pasted, strict=True):
        a, b = np.asarray(predict(clean), float), np.asarray(predict(p.image), float)
        if not 0 <= target_class < len(a):
            raise LimecraftError(f"class {target_class} is not one of the model's {len(a)} classes")
        rows.append((a[target_class], b[target_class], int(a.argmax()), int(b.argmax()), p.clipped))
    cols = list(zip(*rows, strict=True))
    result = Insertion(
        target_class=int(target_class),
        before=np.asarray(cols[0], float),
        after=np.asarray(cols[1], float),
        top_before=np.asarray(cols[2], int),
        top_after=np.asarray(cols[3], int),
        clipped=np.asarray(cols[4], bool),
    )
    return result, pasted
