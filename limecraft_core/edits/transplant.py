"""Transplant: a region of one image pasted into other images, at the same place.

Removing a region shows that a prediction needs it; pasting it into images of other classes
tests whether it causes it (the insertion test of ImageNet-W, Reveal2Revise and SLANT). A rise
is judged against a null: a patch of the same shape and area, cut from elsewhere in the same
image, pasted at the same place in the same image (any paste changes a photo; the question is
whether *this* region's content moves the class more).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from PIL import Image

from limecraft_core._validate import LimecraftError, check_choice, check_int

__all__ = [
    "CAUSE_MARGIN",
    "NULL_DRAWS",
    "PLACES",
    "Insertion",
    "Transplant",
    "insertion_test",
    "null_source",
    "transplant",
]

#: The region "causes" the class when, over the images, it raises the class's probability this
#: much more than the null patch does on average (or turns an image into the class), and beats
#: the null in most images. Below it, a positive margin is a weak, selective effect.
CAUSE_MARGIN = 0.05
#: Null patches per image (their mean is the null); each is one more model call per image.
NULL_DRAWS = 3

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
    null_after : (K,) float ndarray or None, the class's probability with a null patch (same
        shape, area and place, cut from elsewhere in the source; the mean over ``null_draws``
        patches) instead of the region; None when no null was run
    null_draws : int, the null patches per image (0: no null)
    """

    target_class: int
    before: np.ndarray
    after: np.ndarray
    top_before: np.ndarray
    top_after: np.ndarray
    clipped: np.ndarray
    null_after: np.ndarray | None = None
    null_draws: int = 0

    @property
    def gain(self) -> np.ndarray:
        """(K,) the probability's change on each image (after − before)."""
        return self.after - self.before

    @property
    def mean_gain(self) -> float:
        return float(self.gain.mean())

    @property
    def null_gain(self) -> np.ndarray:
        """(K,) the null patch's change on each image (zeros when no null was run)."""
        if self.null_after is None:
            return np.zeros_like(self.before)
        return self.null_after - self.before

    @property
    def margin(self) -> np.ndarray:
        """(K,) how much more the region raised the class than the null patch did."""
        return self.gain - self.null_gain

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

    @property
    def finding(self) -> str:
        """``causes``: the region beats the null in most images, and by :data:`CAUSE_MARGIN`
        on average or by turning an image into the class; ``weak``: it beats the null in most
        images, by less; ``none``: it does not."""
        k = len(self.before)
        most = int((self.margin > 0).sum()) * 2 > k
        if most and (float(self.margin.mean()) >= CAUSE_MARGIN or self.flips > 0):
            return "causes"
        return "weak" if most and float(self.margin.mean()) > 0 else "none"

    def sentence(self, class_name: str) -> str:
        """The numbers in one line, e.g. "Pasted into 4 images, the region raised carton by
        0.003 on average (a same-size patch of this image: +0.001) and turned 0 of 4 into
        carton"."""
        k = len(self.before)
        eligible = int((self.top_before != self.target_class).sum())
        null = (
            f" (a same-size patch of the same image at the same place: "
            f"{float(self.null_gain.mean()):+.3f})"
            if self.null_after is not None
            else ""
        )
        return (
            f"Pasted into {k} image{'s' * (k != 1)}, the region "
            f"{'raised' if self.mean_gain >= 0 else 'lowered'} {class_name} by "
            f"{abs(self.mean_gain):.3f} on average{null} and turned {self.flips} of {eligible} "
            f"into {class_name}"
        )

    def conclusion(self, class_name: str) -> str:
        """What the numbers show, and no more: the judgment of :attr:`finding` in words."""
        k = len(self.before)
        beat = int((self.margin > 0).sum())
        than = "than a same-size patch does" if self.null_after is not None else "than nothing"
        if self.finding == "causes":
            return (
                f"It causes {class_name} in these images: it raised {class_name} more {than} "
                f"in {beat} of {k}"
                + (f", and turned {self.flips} into {class_name}" if self.flips else "")
                + "."
            )
        if self.finding == "weak":
            return (
                f"A weak, selective effect: it raised {class_name} more {than} in {beat} of "
                f"{k} images, by {float(self.margin.mean()):.3f} on average, and turned none "
                f"into {class_name}."
            )
        return (
            f"It did not raise {class_name} in these images beyond {than.removeprefix('than ')}"
            f" ({beat} of {k} above it): no sign here that it causes {class_name}; "
            "the shortcut, if there is one, is selective."
        )


def null_source(source: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``source`` shifted (wrapping round) so that the pixels under ``mask`` come from another
    place in the same image: the null patch has the region's shape, area and place, not its
    content. The shift clears the region's bounding box on one axis where the image allows."""
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    bh, bw = int(ys.max() - ys.min() + 1), int(xs.max() - xs.min() + 1)
    clear = [(axis, size, box) for axis, size, box in ((0, h, bh), (1, w, bw)) if size - box >= box]
    if clear:
        axis, size, box = clear[int(rng.integers(len(clear)))]
        step = int(rng.integers(box, size - box + 1))
        shift = (step, int(rng.integers(w))) if axis == 0 else (int(rng.integers(h)), step)
    else:  # the region spans most of the image both ways: any shift but none
        shift = (int(rng.integers(1, max(h, 2))), int(rng.integers(w)))
    return np.roll(source, shift, axis=(0, 1))


def insertion_test(
    source: np.ndarray,
    mask: np.ndarray,
    targets: list[np.ndarray],
    predict,
    target_class: int,
    *,
    place: Literal["relative", "absolute"] = "relative",
    null_draws: int = NULL_DRAWS,
    seed: int = 0,
) -> tuple[Insertion, list[Transplant]]:
    """Paste a region into each of ``targets`` and score each before and after; paste
    ``null_draws`` null patches (:func:`null_source`) at the same place and score those too.

    Parameters
    ----------
    source, mask : the image and the region, as for :func:`transplant`
    targets : list of (H, W, 3) uint8 ndarrays, the clean images (any sizes)
    predict : callable((H, W, 3) uint8 ndarray) -> (C,) probabilities
    target_class : int, the class to follow
    place : see :data:`PLACES`
    null_draws : int >= 0, null patches per image (0: no null; the verdict then compares the
        rise with nothing)
    seed : int, the null patches' random shifts

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
    null_draws = check_int("null_draws", null_draws, 0, 100)
    pasted = [transplant(source, mask, t, place=place) for t in targets]
    rng = np.random.default_rng(seed)
    nulls = (
        [
            null_source(_rgb("the source image", source), np.asarray(mask, bool), rng)
            for _ in range(null_draws)
        ]
        if null_draws
        else []
    )
    rows = []
    for clean, p in zip(targets, pasted, strict=True):
        a, b = np.asarray(predict(clean), float), np.asarray(predict(p.image), float)
        if not 0 <= target_class < len(a):
            raise LimecraftError(f"class {target_class} is not one of the model's {len(a)} classes")
        null = [
            float(np.asarray(predict(transplant(n, mask, clean, place=place).image))[target_class])
            for n in nulls
        ]
        rows.append(
            (
                a[target_class],
                b[target_class],
                int(a.argmax()),
                int(b.argmax()),
                p.clipped,
                float(np.mean(null)) if null else np.nan,
            )
        )
    cols = list(zip(*rows, strict=True))
    result = Insertion(
        target_class=int(target_class),
        before=np.asarray(cols[0], float),
        after=np.asarray(cols[1], float),
        top_before=np.asarray(cols[2], int),
        top_after=np.asarray(cols[3], int),
        clipped=np.asarray(cols[4], bool),
        null_after=np.asarray(cols[5], float) if null_draws else None,
        null_draws=null_draws,
    )
    return result, pasted
