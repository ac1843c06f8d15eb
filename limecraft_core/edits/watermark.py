"""The ImageNet-W watermark (Li et al., CVPR 2023) as an edit of an image.

The published transform (package ``imagenet-w``, ``AddWatermark``): the text 捷径捷径捷径 in Source
Han Serif SC ExtraLight, white at opacity 0.5, its top-left corner at (0.01·W, 0.4·H), the font
36 px at 224 px (62 at 384, 82 at 512, 84 at 518, else ``size / 6.22``), composited over the
image. Here ``size`` is the image's shorter side, so a square image gets exactly the package's
pixels and any other image the same text height relative to its shorter side.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from limecraft_core._validate import LimecraftError, check_float, check_int
from limecraft_core.edits.fonts import watermark_font

__all__ = [
    "WATERMARK_OPACITY",
    "WATERMARK_TEXT",
    "Watermark",
    "add_watermark",
    "watermark_font_size",
    "watermark_mask",
]

WATERMARK_TEXT = "捷径捷径捷径"
WATERMARK_OPACITY = 0.5
WATERMARK_XY = (0.01, 0.4)
#: The package's font sizes for its square input sizes; other sizes use ``size / 6.22``.
_PACKAGE_FONT_SIZES = {224: 36, 384: 62, 512: 82, 518: 84}
#: Below this font size the text is a smudge of a few pixels: refused with a sentence.
MIN_FONT_SIZE = 6


@dataclass(frozen=True)
class Watermark:
    """A watermarked image and where its text lies.

    Attributes
    ----------
    image : (H, W, 3) uint8 ndarray, the watermarked image
    alpha : (H, W) float32 ndarray in [0, 1], the text layer's opacity per pixel
    mask : (H, W) bool ndarray, the pixels the text covers (``alpha > 0``)
    box : (top, left, bottom, right), the text's bounding box (bottom and right exclusive)
    font_size : int, the font size used, in pixels
    """

    image: np.ndarray
    alpha: np.ndarray
    mask: np.ndarray
    box: tuple[int, int, int, int]
    font_size: int

    def box_mask(self) -> np.ndarray:
        """(H, W) bool, the text's bounding box."""
        out = np.zeros(self.mask.shape, bool)
        top, left, bottom, right = self.box
        out[top:bottom, left:right] = True
        return out

    def grown_mask(self, pixels: int = 2) -> np.ndarray:
        """(H, W) bool, the text's pixels grown by ``pixels`` in every direction."""
        from scipy.ndimage import binary_dilation

        pixels = check_int("grow (pixels)", pixels, 0, 64)
        if pixels == 0:
            return self.mask.copy()
        return binary_dilation(self.mask, np.ones((3, 3), bool), iterations=pixels)


def watermark_font_size(height: int, width: int) -> int:
    """The package's font size for an image of this size (by its shorter side)."""
    size = min(int(height), int(width))
    return _PACKAGE_FONT_SIZES.get(size, int(size / 6.22))


def add_watermark(
    image: np.ndarray,
    *,
    opacity: float = WATERMARK_OPACITY,
    font_size: int | None = None,
    text: str = WATERMARK_TEXT,
) -> Watermark:
    """The ImageNet-W watermark over ``image``, the package's exact pixels at its sizes.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray
    opacity : float in [0, 1], the text's opacity (published: 0.5)
    font_size : int, optional, the text height in pixels; default the package's for this size
        (36 px at 224)
    text : str, the text (published: 捷径捷径捷径)

    Returns
    -------
    Watermark

    Raises
    ------
    LimecraftError
        For a non-RGB image, an opacity outside [0, 1], an image too small for the text
        (its font would be under 6 px), or text that falls wholly outside the image.
    """
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise LimecraftError(
            f"the watermark needs an (H, W, 3) uint8 image; got {image.dtype} {image.shape}"
        )
    opacity = check_float("watermark opacity", opacity, 0.0, 1.0)
    h, w = image.shape[:2]
    size = (
        watermark_font_size(h, w)
        if font_size is None
        else check_int("text size", font_size, 1, 4096)
    )
    if size < MIN_FONT_SIZE:
        raise LimecraftError(
            f"this image ({w}×{h} px) is too small for the watermark: its text would be {size} px "
            f"high (36 px at 224×224). Use an image at least {int(np.ceil(MIN_FONT_SIZE * 6.22))} px "
            "on its shorter side, or set a larger text size"
        )
    layer = _text_layer((w, h), text, size, opacity)
    base = Image.fromarray(image).convert("RGBA")
    out = np.asarray(Image.alpha_composite(base, layer).convert("RGB"))
    alpha = np.asarray(layer)[..., 3].astype(np.float32) / 255.0
    coverage = _coverage((w, h), text, size)
    if not coverage.any():
        raise LimecraftError("the watermark's text falls outside this image; use a larger image")
    rows, cols = np.nonzero(coverage.any(1))[0], np.nonzero(coverage.any(0))[0]
    box = (int(rows[0]), int(cols[0]), int(rows[-1]) + 1, int(cols[-1]) + 1)
    return Watermark(image=out, alpha=alpha, mask=coverage, box=box, font_size=size)


def _text_layer(size: tuple[int, int], text: str, font_size: int, opacity: float) -> Image.Image:
    """The package's RGBA text layer: white text at ``opacity`` on a transparent white layer."""
    w, h = size
    layer = Image.new("RGBA", size, (255, 255, 255, 0))
    ImageDraw.Draw(layer).text(
        xy=(WATERMARK_XY[0] * w, WATERMARK_XY[1] * h),
        text=text,
        fill=(255, 255, 255, round(opacity * 255)),
        font=watermark_font(font_size),
    )
    return layer


def _coverage(size: tuple[int, int], text: str, font_size: int) -> np.ndarray:
    """(H, W) bool, the pixels the glyphs cover (the layer drawn fully opaque), so the mask is
    the same at every opacity, 0 included."""
    return np.asarray(_text_layer(size, text, font_size, 1.0))[..., 3] > 0


def watermark_mask(
    height: int,
    width: int,
    *,
    text_size: int | None = None,
    grow: int = 2,
    box: bool = False,
) -> np.ndarray:
    """(H, W) bool, where the watermark's text lies on an image of this size: its pixels grown
    by ``grow`` (default), or its bounding box (``box=True``). The same at every opacity: a
    handcrafted region for the watermark in one click."""
    h = check_int("height", height, 1, 1 << 15)
    w = check_int("width", width, 1, 1 << 15)
    mark = add_watermark(np.zeros((h, w, 3), np.uint8), opacity=0.0, font_size=text_size)
    return mark.box_mask() if box else mark.grown_mask(grow)
