"""The watermark's typeface: Source Han Serif SC, shipped by the ``imagenet-w`` package.

Beside :mod:`.watermark`, its one user: PIL loads the font by its path, so no file is opened here.
"""

from __future__ import annotations

import functools
import os

from PIL import ImageFont

from limecraft_core._validate import LimecraftError

__all__ = ["watermark_font"]

_FONT_FILE = "SourceHanSerifSC-ExtraLight.otf"


@functools.lru_cache(maxsize=16)
def watermark_font(size: int) -> ImageFont.FreeTypeFont:
    """The ImageNet-W watermark's font (Source Han Serif SC ExtraLight) at ``size`` pixels.

    Raises
    ------
    LimecraftError
        If the ``imagenet-w`` package (which ships the font) is not installed.
    """
    try:
        import imagenet_w.watermark_transform as w
    except ImportError as e:
        raise LimecraftError(
            "the ImageNet-W watermark needs the package imagenet-w: pip install imagenet-w "
            "(it is in requirements.txt)"
        ) from e
    path = os.path.join(w.FONT_DIR, _FONT_FILE)
    if not os.path.exists(path):
        raise LimecraftError(f"the watermark's font is missing from the imagenet-w package: {path}")
    return ImageFont.truetype(path, int(size))
