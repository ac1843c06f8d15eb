"""Edits applied to an image and its label map, one or in order; inputs are never modified.

One edit with ``apply_edit``, several in order with ``apply_edits``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._validate import (
    LimecraftError,
)
from .edit import (
    Edit,
    EditResult,
    _as_float,
    _as_labels,
    _check_edit_type,
    _check_region,
    _to_uint8,
)
from .geometry import _geometric
from .pixels import _blur_region, _filled, _recolour
from .watermark import add_watermark


def _apply(img: np.ndarray, labels: np.ndarray, edit: Edit) -> tuple[np.ndarray, np.ndarray, int]:
    """One edit on a float image and a checked label map; returns new arrays."""
    if edit.kind in ("move", "rotate", "scale"):
        return _geometric(img, labels, edit)
    if edit.kind == "watermark":
        marked = add_watermark(
            _to_uint8(img), opacity=edit.opacity, font_size=edit.text_size or None
        ).image
        return marked.astype(np.float64) / 255.0, labels.astype(np.int32), edit.region
    mask = labels == edit.region
    if edit.kind == "color":
        out = _recolour(img, mask, edit)
    elif edit.kind == "blur":
        out = _blur_region(img, mask, edit.sigma)
    else:
        out = _filled(img, mask, edit.fill)
    return out, labels.astype(np.int32), edit.region


def _result(base: np.ndarray, img: np.ndarray, labels: np.ndarray, region: int) -> EditResult:
    out = _to_uint8(img)
    changed = (out != _to_uint8(base)).any(axis=2)
    return EditResult(image=out, labels=labels.astype(np.int32), region=region, changed=changed)


def apply_edit(image: np.ndarray, labels: np.ndarray, edit: Edit) -> EditResult:
    """Apply one edit to one region.

    - ``color``: the region's pixels only: hue, saturation and brightness in HSV, then
      ``rgb_shift`` added, clipped to [0, 1]. Labels unchanged.
    - ``move``, ``rotate``, ``scale``: the object is transformed about its centroid
      (bilinear for the image, nearest for the mask; pixels pushed outside are dropped).
      Its old area is filled per ``fill``, then the object is pasted on top. In the new
      label map the region covers exactly the transformed mask; old pixels it no longer
      covers take the label of the nearest other region (a new region of their own if
      there is none); other regions lose the pixels it now covers; ids are then made
      contiguous again, in the same order (a region covered entirely disappears).
    - ``blur``: a Gaussian blur of the image, written into the region's pixels only.
      Labels unchanged.
    - ``remove``: the region's pixels get ``fill``. Labels unchanged; the region still
      exists, with its content gone.
    - ``watermark``: the ImageNet-W watermark over the whole image (``opacity``,
      ``text_size``; :func:`~limecraft_core.edits.add_watermark`). Labels unchanged.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float in [0, 1]; any size from 1x1
    labels : (H, W) int ndarray, ids 0..K-1 with no gaps
    edit : Edit

    Returns
    -------
    EditResult
        ``image`` is uint8. For a float input, ``changed`` compares with the input rounded
        to uint8.

    Raises
    ------
    LimecraftError
        If the image or label map is malformed, or ``edit.region`` is not in 0..K-1.
    """
    return apply_edits(image, labels, [_check_edit_type(edit)])


def apply_edits(image: np.ndarray, labels: np.ndarray, edits: Sequence[Edit]) -> EditResult:
    """Apply edits in order; each edit's ``region`` refers to the label map left by the ones
    before it.

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or float in [0, 1]; any size from 1x1
    labels : (H, W) int ndarray, ids 0..K-1 with no gaps
    edits : sequence of Edit
        An empty sequence returns copies of the inputs, with ``region`` -1.

    Returns
    -------
    EditResult
        ``region`` is the last edited region's id; ``changed`` is relative to the input.

    Raises
    ------
    LimecraftError
        If the image or label map is malformed, an item is not an Edit, or an edit's region
        does not exist in the label map it is applied to.
    """
    img = _as_float(image)
    lab = _as_labels(labels, img.shape[:2])
    if isinstance(edits, (Edit, str, bytes)) or not isinstance(edits, Sequence):
        raise LimecraftError(
            f"edits must be a list of Edit, got {type(edits).__name__}; "
            "use apply_edit for a single edit"
        )
    many = len(edits) > 1
    for i, edit in enumerate(edits):
        _check_edit_type(edit, f"edit {i}: " if many else "")
    base = img
    region = -1
    for i, edit in enumerate(edits):
        _check_region(edit, int(lab.max()) + 1, f"edit {i} ({edit.describe()}): " if many else "")
        img, lab, region = _apply(img, lab, edit)
    return _result(base, img, lab, region)
