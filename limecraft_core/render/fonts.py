"""The font every label on a picture is written in: Pillow's own, at a given size."""

from __future__ import annotations

__all__ = ["label_font"]


def label_font(size: int):
    """Pillow's default font at ``size`` pixels (its small bitmap font before Pillow 10.1)."""
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only its small bitmap font
        return ImageFont.load_default()
