"""The table of fills: what a hidden region shows, by name (:data:`FILLS`).

Torch-free, so that the settings schema (``config``) and ``python -m limecraft --help`` read it
without loading torch; the fills that need torch or SciPy import them when they run.

Every named fill is one :class:`Fill`: a *static* fill, an image made once per image from the
image and its label map (mean, gray, black, blur, inpaint-each), or a *per-mask* fill that
composes each perturbation from that perturbation's own kept pixels (inpaint). A ``#RRGGBB``
colour and a callable are static fills too (:func:`fill_of`). Adding a fill is one entry in
:data:`FILLS`: the engine (:func:`limecraft_core.perturb.scene_fill`), the settings' checks, the
CLI, the app and the fill comparison read the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from ._validate import LimecraftError, check_float, parse_colour

if TYPE_CHECKING:
    import torch

#: A static fill's function: ``(image (H, W, 3) float32 in [0, 1], labels (H, W) int,
#: blur_sigma or None) -> (H, W, 3)``, what every hidden pixel shows.
StaticFn = Callable[[np.ndarray, np.ndarray, Any], np.ndarray]
#: A per-mask fill's function: ``(image (3, H, W) float tensor, keep (B, 1, H, W) float tensor in
#: {0, 1}, out (B, 3, H, W) or None) -> (B, 3, H, W)``, the perturbed images themselves.
PerMaskFn = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class Fill:
    """One fill: its name, a line of help, and exactly one of ``static`` (made once per image)
    or ``per_mask`` (composed for each perturbation); ``edits``: offered for Inspect's remove
    and move (:data:`~limecraft_core.edits.EDIT_FILLS`)."""

    name: str
    help: str
    static: StaticFn | None = None
    per_mask: PerMaskFn | None = None
    edits: bool = False

    def __post_init__(self) -> None:
        if (self.static is None) == (self.per_mask is None):
            raise ValueError(f"fill {self.name!r}: give exactly one of static= or per_mask=")

    @property
    def is_per_mask(self) -> bool:
        return self.per_mask is not None


#: A fill as a caller gives it: a name from :data:`FILLS`, a ``#RRGGBB`` colour, a
#: :class:`Fill`, or a callable ``(image (H, W, 3) float32, labels (H, W) int) -> (H, W, 3)``.
FillSpec = Union[str, Fill, Callable[[np.ndarray, np.ndarray], np.ndarray]]  # noqa: UP007 (runtime)


def region_means(img: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(K, 3) float32: each region's mean colour."""
    k = int(labels.max()) + 1
    flat = labels.ravel()
    counts = np.maximum(np.bincount(flat, minlength=k), 1)
    return np.stack(
        [np.bincount(flat, weights=img[..., c].ravel(), minlength=k) / counts for c in range(3)],
        axis=1,
    ).astype(np.float32)


def _constant(colour: np.ndarray) -> StaticFn:
    return lambda img, labels, sigma: np.broadcast_to(colour, img.shape).copy()


def _mean(img: np.ndarray, labels: np.ndarray, sigma: float | None) -> np.ndarray:
    return region_means(img, labels)[labels]


def _blur(img: np.ndarray, labels: np.ndarray, sigma: float | None) -> np.ndarray:
    from scipy import ndimage as ndi

    sigma = sigma if sigma is not None else max(1.0, min(img.shape[:2]) / 20)
    sigma = check_float("blur_sigma", sigma, 0.0, lo_open=True)
    return ndi.gaussian_filter(img, sigma=(sigma, sigma, 0), mode="nearest")


def _inpaint_each(img: np.ndarray, labels: np.ndarray, sigma: float | None) -> np.ndarray:
    from .perturb.inpaint import inpaint_regions

    return np.clip(inpaint_regions(img, labels), 0.0, 1.0)


def _inpaint_together(
    image: torch.Tensor, keep: torch.Tensor, out: torch.Tensor | None
) -> torch.Tensor:
    from .perturb.inpaint import _inpaint_union

    return _inpaint_union(image, keep, out=out)


def _own_function(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> StaticFn:
    """A caller's fill function, checked: the image's shape, finite values, clipped to [0, 1]."""

    def run(img: np.ndarray, labels: np.ndarray, sigma: float | None) -> np.ndarray:
        out = np.asarray(fn(img.copy(), labels.copy()), dtype=np.float32)
        if out.shape != img.shape:
            raise LimecraftError(f"a fill function must return shape {img.shape}, got {out.shape}")
        if not np.isfinite(out).all():
            raise LimecraftError("a fill function must return finite values in [0, 1]")
        return np.clip(out, 0.0, 1.0)

    return run


#: Every named fill, in the order the CLI, the app and the docs list them.
FILLS: dict[str, Fill] = {
    f.name: f
    for f in (
        Fill("mean", "each region's mean colour (the lime package's default)", _mean, edits=True),
        Fill("gray", "mid-grey", _constant(parse_colour("gray")), edits=True),
        Fill("black", "black", _constant(parse_colour("black")), edits=True),
        Fill("blur", "a Gaussian blur of the image (sigma blur_sigma)", _blur),
        Fill(
            "inpaint",
            "the hidden regions of each perturbation filled together from the pixels it keeps",
            per_mask=_inpaint_together,
            edits=True,
        ),
        Fill("inpaint-each", "each region filled alone from everything around it", _inpaint_each),
    )
}


def fill_error(what: str, value: object, names: Iterable[str] | None = None) -> LimecraftError:
    """The one message for a fill that is not one: ``what`` must be one of ``names`` (the
    fills of :data:`FILLS` by default) or a colour."""
    listed = ", ".join(FILLS if names is None else names)
    return LimecraftError(f"{what} must be one of {listed} or a colour like #808080; got {value!r}")


def check_fill_name(value: object, what: str = "fill", names: Iterable[str] | None = None) -> str:
    """``value`` if it is a fill's name (of ``names``, every fill by default) or a colour,
    else :func:`fill_error`."""
    allowed = tuple(FILLS if names is None else names)
    if isinstance(value, str) and (value in allowed or parse_colour(value) is not None):
        return value
    raise fill_error(what, value, allowed)


def fill_of(fill: FillSpec) -> Fill:
    """The :class:`Fill` that ``fill`` names: a name of :data:`FILLS`, a ``#RRGGBB`` colour, a
    callable (a static fill, checked when it runs) or a :class:`Fill`; else a LimecraftError
    listing the choices (never a fall-through)."""
    if isinstance(fill, Fill):
        return fill
    if callable(fill):
        return Fill(getattr(fill, "__name__", "custom"), "a fill function", _own_function(fill))
    if isinstance(fill, str):
        if fill in FILLS:
            return FILLS[fill]
        colour = parse_colour(fill)
        if colour is not None:
            return Fill(fill, "a constant colour", _constant(colour))
    raise fill_error("fill", fill)
