"""A finding proved both ways, removal and insertion, each against a same-area null.

- **Removal**: in each of the finding's images, its region is hidden and the suspect class's
  score is read; the null hides a region of the same shape and area at another place of the
  same image (the region's mask shifted, as :func:`~limecraft_core.edits.transplant.null_source`
  shifts a patch).
- **Insertion**: the medoid's region is pasted, at its place, into clean images of other classes
  (:func:`~limecraft_core.edits.transplant.insertion_test`, whose null is a patch of the same
  shape, area and place cut from elsewhere in the medoid's image).

A finding is **confirmed** when hiding its region lowers the suspect class by at least
``REMOVAL_MARGIN`` more than hiding the null region does (the mean over its images), *and* the
insertion test says ``causes`` (it beats its null by ``CAUSE_MARGIN`` or turns an image into the
class).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .._validate import LimecraftError
from ..edits.transplant import CAUSE_MARGIN, Insertion, insertion_test, null_source

#: Hiding the finding's region must lower the suspect class this much more than the null does.
REMOVAL_MARGIN = 0.05

__all__ = ["CAUSE_MARGIN", "REMOVAL_MARGIN", "Intervention", "Proof", "hide_mean", "prove"]


def hide_mean(image: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The default hide: the region's pixels set to the mean colour of the rest of the image."""
    out = np.array(image, copy=True)
    rest = image[~mask] if (~mask).any() else image.reshape(-1, 3)
    out[mask] = rest.mean(axis=0).round().astype(np.uint8)
    return out


@dataclass(frozen=True, eq=False)
class Proof:
    """A finding's interventions.

    Attributes
    ----------
    target_class : int, the suspect class
    removal : (N,) float ndarray, the class's score drop when the region is hidden, per image
    removal_null : (N,) float ndarray, the drop when a same-area region elsewhere is hidden
    insertion : Insertion, the medoid's region pasted into clean images (with its null)
    """

    target_class: int
    removal: np.ndarray
    removal_null: np.ndarray
    insertion: Insertion

    @property
    def removal_margin(self) -> float:
        """How much more hiding the region lowers the class than hiding the null does (mean)."""
        return float(np.mean(self.removal - self.removal_null))

    @property
    def confirmed(self) -> bool:
        return self.removal_margin >= REMOVAL_MARGIN and self.insertion.finding == "causes"

    def sentence(self, class_name: str) -> str:
        """Both tests in one line, with their nulls and the verdict."""
        verdict = "confirmed" if self.confirmed else "not confirmed"
        return (
            f"Hiding it lowers {class_name} by {float(self.removal.mean()):.3f} on average (a "
            f"same-area region elsewhere: {float(self.removal_null.mean()):.3f}). "
            f"{self.insertion.sentence(class_name)}. Against the null: {verdict} (removal "
            f"margin {self.removal_margin:+.3f}, needed {REMOVAL_MARGIN}; insertion "
            f"{self.insertion.finding})."
        )


@dataclass(frozen=True)
class Intervention:
    """A :class:`Proof` as plain numbers, as ``audit.json`` stores them with their finding.

    Attributes
    ----------
    target_class : int, the suspect class
    images : int, the finding's images whose region was hidden (removal)
    removal_mean : float, the class's mean probability drop with the region hidden
    removal_null_mean : float, the same with a same-area region elsewhere hidden (the null)
    removal_margin : float, ``removal_mean - removal_null_mean``; must reach ``REMOVAL_MARGIN``
    clean_images : int, the clean images of other classes the medoid's region was pasted into
    flip_rate : float, the share of them turned into the class
    mean_gain : float, the class's mean probability gain with the region pasted
    null_gain : float, the same with a same-shape patch of elsewhere pasted (the null)
    insertion : str, the insertion test's verdict, ``causes``, ``weak`` or ``none``
    confirmed : bool, removal and insertion both beat their nulls (the module docstring)
    """

    target_class: int
    images: int
    removal_mean: float
    removal_null_mean: float
    removal_margin: float
    clean_images: int
    flip_rate: float
    mean_gain: float
    null_gain: float
    insertion: str
    confirmed: bool

    @classmethod
    def of(cls, proof: Proof) -> Intervention:
        ins = proof.insertion
        return cls(
            target_class=proof.target_class, images=len(proof.removal),
            removal_mean=float(proof.removal.mean()),
            removal_null_mean=float(proof.removal_null.mean()),
            removal_margin=proof.removal_margin, clean_images=len(ins.before),
            flip_rate=ins.flip_rate, mean_gain=ins.mean_gain,
            null_gain=float(ins.null_gain.mean()), insertion=ins.finding,
            confirmed=proof.confirmed,
        )  # fmt: skip

    @property
    def verdict(self) -> str:
        return "confirmed" if self.confirmed else "not confirmed"

    def sentence(self, class_name: str) -> str:
        """The verdict and its numbers in one line."""
        return (
            f"{self.verdict.capitalize()} against the null: hiding it lowers '{class_name}' by "
            f"{self.removal_mean:.3f} on average in {self.images} images (a same-area region "
            f"elsewhere: {self.removal_null_mean:.3f}; margin {self.removal_margin:+.3f}, "
            f"needed {REMOVAL_MARGIN}); pasted into {self.clean_images} clean images it turns "
            f"{self.flip_rate:.0%} into '{class_name}' and changes it by {self.mean_gain:+.3f} "
            f"(a same-shape patch from elsewhere: {self.null_gain:+.3f}; insertion "
            f"{self.insertion})."
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 5) if isinstance(v, float) else v for k, v in asdict(self).items()}


def _shifted(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The mask at another place of the image: the same shape and area."""
    as_image = np.repeat(mask[..., None].astype(np.uint8) * 255, 3, axis=2)
    return null_source(as_image, mask, rng)[..., 0] > 0


def prove(
    images: Sequence[np.ndarray],
    masks: Sequence[np.ndarray],
    medoid: int,
    clean: Sequence[np.ndarray],
    predict: Callable[[np.ndarray], np.ndarray],
    target_class: int,
    *,
    hide: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    seed: int = 0,
) -> Proof:
    """Removal over the finding's images and insertion of its medoid's region into clean images.

    Parameters
    ----------
    images : (H, W, 3) uint8 ndarrays, the finding's images
    masks : (H, W) bool ndarrays, its region in each (the same order)
    medoid : int, the index of its medoid in ``images``
    clean : (H, W, 3) uint8 ndarrays, images of other classes to paste the region into
    predict : callable((H, W, 3) uint8 ndarray) -> (C,) scores or probabilities
    target_class : int, the suspect class
    hide : callable(image, mask) -> image, optional; how a region is hidden (default
        :func:`hide_mean`)
    seed : int, the nulls' random places

    Raises
    ------
    LimecraftError
        For no image, masks that do not match the images, or no clean image.
    """
    if not images or len(images) != len(masks):
        raise LimecraftError("a proof needs the finding's images and one region mask for each")
    if not clean:
        raise LimecraftError("a proof needs clean images of other classes to paste the region into")
    hide = hide_mean if hide is None else hide
    rng = np.random.default_rng(seed)
    drop, null = [], []
    for image, mask in zip(images, masks, strict=True):
        mask = np.asarray(mask, bool)
        score = float(np.asarray(predict(image))[target_class])
        drop.append(score - float(np.asarray(predict(hide(image, mask)))[target_class]))
        other = hide(image, _shifted(mask, rng))
        null.append(score - float(np.asarray(predict(other))[target_class]))
    ins, _ = insertion_test(
        images[medoid], masks[medoid], list(clean), predict, target_class, seed=seed
    )
    return Proof(target_class, np.asarray(drop), np.asarray(null), ins)
