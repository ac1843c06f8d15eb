"""Edits for the "Inspect" step: change one region, or watermark the whole image.

An edit recolours, moves, rotates, scales, blurs or removes one region, or adds the ImageNet-W
watermark to the whole image.

The analyst edits one object and watches the model's prediction move; that is how a shortcut
is caught. Every function here is pure: arrays in, new arrays out, inputs never modified.
Label maps hold ints 0..K-1 with no gaps, and every pixel is assigned; so do the label maps
returned. Images of any size from 1x1 up are accepted.

The rooms: :mod:`.edit` (``Edit``, ``EditResult`` and the checks), :mod:`.apply`
(``apply_edit``, ``apply_edits``), :mod:`.geometry` (move, rotate, scale;
``transform_mask``), :mod:`.pixels` (recolour, blur, fills), :mod:`.watermark` (the
ImageNet-W watermark: ``add_watermark``, ``watermark_mask``) with :mod:`.fonts` (its typeface),
and :mod:`.transplant` (a region pasted into other images, and the insertion test that proves
a shortcut).
"""

from __future__ import annotations

from .apply import apply_edit, apply_edits
from .edit import EDIT_FILLS, EDIT_KINDS, Edit, EditResult
from .geometry import transform_mask
from .transplant import (
    CAUSE_MARGIN,
    NULL_DRAWS,
    PLACES,
    Insertion,
    Transplant,
    insertion_test,
    transplant,
)
from .watermark import (
    WATERMARK_OPACITY,
    WATERMARK_TEXT,
    Watermark,
    add_watermark,
    watermark_font_size,
    watermark_mask,
)

__all__ = [
    "CAUSE_MARGIN",
    "EDIT_FILLS",
    "EDIT_KINDS",
    "NULL_DRAWS",
    "PLACES",
    "WATERMARK_OPACITY",
    "WATERMARK_TEXT",
    "Edit",
    "EditResult",
    "Insertion",
    "Transplant",
    "Watermark",
    "add_watermark",
    "apply_edit",
    "apply_edits",
    "insertion_test",
    "transform_mask",
    "transplant",
    "watermark_font_size",
    "watermark_mask",
]
