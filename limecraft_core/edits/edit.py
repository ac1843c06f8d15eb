"""One edit of one region (``Edit``), its result (``EditResult``), and the checks of its inputs.

An ``Edit`` holds its kind, region, parameters and the sentence that says it. Every edit's
inputs go through the checks here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import (
    MAX_PIXELS,
    MIN_SIDE,
    LimecraftError,
    as_float_image,
    check_choice,
    check_float,
    check_int,
    check_label_map,
)
from ..fill_table import FILLS, check_fill_name

EDIT_KINDS = ("color", "move", "rotate", "scale", "blur", "remove", "watermark")


#: Named fills for a vacated or removed area (the fills of FILLS marked ``edits``, the per-mask
#: inpaint first: it is an edit's default); a ``#RRGGBB`` colour is accepted too.
EDIT_FILLS = tuple(
    sorted((n for n, f in FILLS.items() if f.edits), key=lambda n: not FILLS[n].is_per_mask)
)


#: Above this sigma the blur runs on a coarser grid (see ``_blur_region``).
_DIRECT_BLUR_SIGMA = 8.0


def _check_edit_fill(fill: object) -> str:
    return check_fill_name(fill, "fill", EDIT_FILLS)


def _signed(value: float, digits: int = 0) -> str:
    return f"{value:+.{digits}f}"


def _num(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class Edit:
    """One edit of one region. Only the parameters of ``kind`` matter; the defaults change nothing.

    Parameters are checked (and normalised to plain Python types, so an Edit is hashable) when
    the Edit is made; the region id is checked against the label map when it is applied.

    Attributes
    ----------
    kind : {"color", "move", "rotate", "scale", "blur", "remove", "watermark"}
    region : int, the region's id in the label map the edit is applied to (``watermark``
        covers the whole image, whatever the region: 0 by convention)
    rgb_shift : (float, float, float), each in [-1, 1]; added to R, G, B (in [0, 1] units)
        after the HSV changes (``color``)
    hue : float in [-180, 180], degrees added to the hue (``color``)
    saturation : float in [0, 4], factor on the saturation (``color``)
    brightness : float in [0, 4], factor on the HSV value (``color``)
    dx, dy : int, pixels; right and down are positive (``move``)
    angle : float in [-360, 360], degrees counter-clockwise about the region's centroid
        (``rotate``)
    factor : float in [0.1, 5], scale about the region's centroid (``scale``)
    sigma : float in [0, 100], Gaussian blur in pixels (``blur``)
    fill : str
        What a vacated (``move``, ``rotate``, ``scale``) or removed (``remove``) area shows:
        ``inpaint`` (filled from its surroundings), ``mean`` (the region's mean colour, as in
        LIME), ``gray``, ``black`` or a ``#RRGGBB`` colour.
    opacity : float in [0, 1], the ImageNet-W watermark's opacity (``watermark``; published 0.5)
    text_size : int, the watermark's text height in pixels; 0 (default) is the package's size
        for the image (36 px at 224×224, see :func:`~limecraft_core.edits.watermark_font_size`)

    Raises
    ------
    LimecraftError
        If ``kind`` is unknown or a parameter is out of its range; the message names the range.
    """

    kind: str
    region: int
    rgb_shift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    hue: float = 0.0
    saturation: float = 1.0
    brightness: float = 1.0
    dx: int = 0
    dy: int = 0
    angle: float = 0.0
    factor: float = 1.0
    sigma: float = 0.0
    fill: str = "inpaint"
    opacity: float = 0.5
    text_size: int = 0

    def __post_init__(self) -> None:
        put = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        put("kind", check_choice("edit kind", self.kind, EDIT_KINDS))
        put("region", check_int("region", self.region, 0))
        shift = self.rgb_shift
        if isinstance(shift, (str, bytes)) or np.ndim(shift) != 1 or len(shift) != 3:
            raise LimecraftError(
                f"rgb_shift must be three numbers (R, G, B), each in [-1, 1]; got {shift!r}"
            )
        put(
            "rgb_shift",
            tuple(check_float(f"rgb_shift[{i}]", v, -1.0, 1.0) for i, v in enumerate(shift)),
        )
        put("hue", check_float("hue (degrees)", self.hue, -180.0, 180.0))
        put("saturation", check_float("saturation factor", self.saturation, 0.0, 4.0))
        put("brightness", check_float("brightness factor", self.brightness, 0.0, 4.0))
        put("dx", check_int("dx (pixels)", self.dx, -MAX_PIXELS, MAX_PIXELS))
        put("dy", check_int("dy (pixels)", self.dy, -MAX_PIXELS, MAX_PIXELS))
        put("angle", check_float("angle (degrees)", self.angle, -360.0, 360.0))
        put("factor", check_float("scale factor", self.factor, 0.1, 5.0))
        put("sigma", check_float("blur sigma (pixels)", self.sigma, 0.0, 100.0))
        put("fill", _check_edit_fill(self.fill))
        put("opacity", check_float("watermark opacity", self.opacity, 0.0, 1.0))
        put(
            "text_size",
            check_int("watermark text size (pixels, 0 = the package's)", self.text_size, 0, 4096),
        )

    def describe(self) -> str:
        """One human-readable line, e.g. ``"move region 3 by (+12, -4) px"``."""
        r = self.region
        fill = "" if self.fill == "inpaint" else f", fill {self.fill}"
        if self.kind == "color":
            parts = []
            if self.hue:
                parts.append(f"hue {_signed(self.hue, 0)}°")
            if self.saturation != 1.0:
                parts.append(f"saturation x{_num(self.saturation)}")
            if self.brightness != 1.0:
                parts.append(f"brightness x{_num(self.brightness)}")
            if any(self.rgb_shift):
                parts.append("RGB " + " ".join(_signed(v, 2) for v in self.rgb_shift))
            return f"recolour region {r} ({', '.join(parts) or 'no change'})"
        if self.kind == "move":
            return f"move region {r} by ({self.dx:+d}, {self.dy:+d}) px{fill}"
        if self.kind == "rotate":
            way = "counter-clockwise" if self.angle >= 0 else "clockwise"
            return f"rotate region {r} by {_num(abs(self.angle))}° {way}{fill}"
        if self.kind == "scale":
            return f"scale region {r} by x{_num(self.factor)}{fill}"
        if self.kind == "blur":
            return f"blur region {r} (sigma {_num(self.sigma)} px)"
        if self.kind == "watermark":
            size = f"text {self.text_size} px" if self.text_size else "text at the package's size"
            return f"add the ImageNet-W watermark (opacity {_num(self.opacity)}, {size})"
        return f"remove region {r} (fill {self.fill})"


@dataclass(frozen=True)
class EditResult:
    """The image and label map after one or more edits.

    Attributes
    ----------
    image : (H, W, 3) uint8 ndarray, the edited image
    labels : (H, W) int32 ndarray, ids 0..K'-1 with no gaps; a moved, rotated or scaled
        region's id covers exactly its transformed mask
    region : int, the (last) edited region's id in ``labels``; -1 if it vanished (moved out
        of the image, scaled to nothing) or if no edit was applied
    changed : (H, W) bool ndarray, pixels whose uint8 value differs from the input's
    """

    image: np.ndarray
    labels: np.ndarray
    region: int
    changed: np.ndarray


def _as_float(image: object) -> np.ndarray:
    """as_float_image for any size from 1x1: a small image is padded for the check, then cropped."""
    if isinstance(image, np.ndarray) and image.ndim in (2, 3):
        if image.ndim == 3 and image.shape[2] != 3:
            raise LimecraftError(
                f"image must have shape (H, W, 3), got {image.shape}; "
                "drop the alpha channel or convert the image to RGB first"
            )
        h, w = image.shape[:2]
        if h == 0 or w == 0:
            raise LimecraftError(f"image is {w}x{h} pixels; it must be at least 1x1")
        if min(h, w) < MIN_SIDE:
            pad = [(0, max(0, MIN_SIDE - h)), (0, max(0, MIN_SIDE - w))]
            padded = np.pad(image, pad + [(0, 0)] * (image.ndim - 2), mode="edge")
            return as_float_image(padded)[:h, :w].copy()
    return as_float_image(image)  # type: ignore[arg-type]


def _as_labels(labels: object, shape: tuple[int, int]) -> np.ndarray:
    check_label_map(labels, shape)  # type: ignore[arg-type]
    lab = np.asarray(labels).astype(np.int64)
    if lab.min() < 0:
        raise LimecraftError(
            f"label map has negative ids (min {lab.min()}); ids must be 0..K-1 "
            "(limecraft_core.relabel makes such a map)"
        )
    if lab.max() >= lab.size or not np.bincount(lab.ravel()).all():
        raise LimecraftError(
            "label map has gaps in its ids; ids must be 0..K-1 with every id present "
            "(limecraft_core.relabel makes such a map)"
        )
    return lab


def _check_region(edit: Edit, n_regions: int, where: str = "") -> None:
    if edit.region >= n_regions:
        raise LimecraftError(
            f"{where}region {edit.region} does not exist; the label map has regions "
            f"0..{n_regions - 1}"
        )


def _to_uint8(img: np.ndarray) -> np.ndarray:
    return np.round(np.clip(img, 0.0, 1.0) * 255.0).astype(np.uint8)


def _check_edit_type(edit: object, where: str = "") -> Edit:
    if not isinstance(edit, Edit):
        raise LimecraftError(
            f"{where}expected an Edit, got {type(edit).__name__}; build one with "
            "Edit(kind, region, ...)"
        )
    return edit
