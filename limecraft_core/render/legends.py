"""Legends under a picture, and pictures stacked one above the other.

A legend says what green, red and grey mean and the weight each shade stands for, wrapped to the
picture's width.
"""

from __future__ import annotations

import numpy as np

from .._validate import LimecraftError, check_float, check_int
from .colours import MAX_ALPHA, MIN_SHARE, NEGATIVE, POSITIVE, _u8
from .fonts import label_font


def overlay_legend(
    width: int,
    *,
    class_label: str | None = None,
    k: int | None = None,
    min_share: float = MIN_SHARE,
    show_weak: bool = False,
    vmax: float | None = None,
    max_alpha: float = MAX_ALPHA,
) -> np.ndarray:
    """A key to :func:`weight_overlay`, to put under it (see :func:`stack_vertically`).

    Shows green = for the class and red = against it, a ramp from a light to the strongest tint
    with the |weight| values at its ends (the part under the threshold left blank), and which
    regions are not tinted.

    Parameters
    ----------
    width : int in [120, 20000], the picture's width in pixels (the overlay's width)
    class_label : str, optional; the explained class (default "the class")
    k : int >= 1, optional; the overlay's ``k``, to say that only the top k of each side are
        tinted
    min_share, show_weak : the overlay's threshold (default 0.05, False)
    vmax : float > 0, optional; the overlay's full-strength |weight| (e.g.
        ``tinted_regions(...).vmax``), written at the ramp's end; default "largest |weight|"
    max_alpha : float in [0, 1], the overlay's ``max_alpha``

    Returns
    -------
    (h, width, 3) uint8 ndarray on white; h grows with the width (about 0.3 * width at 512).
    """
    from PIL import Image, ImageDraw

    width = check_int("width", width, 120, 20000)
    min_share = check_float("min_share", min_share, 0.0, 1.0)
    max_alpha = check_float("max_alpha", max_alpha, 0.0, 1.0)
    if k is not None:
        k = check_int("k", k, 1)
    if vmax is not None:
        vmax = check_float("vmax", vmax, 0.0, lo_open=True)
    threshold = 0.0 if show_weak else min_share
    who = "the class" if class_label is None else str(class_label)
    size = int(np.clip(round(width / 36), 10, 28))
    font, pad = label_font(size), max(4, size // 2)
    canvas = Image.new("RGB", (width, 8 * width), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    y = pad
    y = _legend_keys(canvas, draw, font, size, pad, y, who, max_alpha)
    y = _legend_ramp(canvas, draw, font, size, pad, y, threshold, vmax, max_alpha)
    notes = []
    if k is not None:
        notes.append(f"Only the top {k} for and the top {k} against are tinted.")
    if threshold > 0:
        at = f" ({threshold * vmax:.3g})" if vmax is not None else ""
        notes.append(f"Regions under {threshold:.0%} of the largest |weight|{at} are not tinted.")
    else:
        notes.append("Every region with a non-zero weight may be tinted (no threshold).")
    for line in _wrap(draw, " ".join(notes), font, width - 2 * pad):
        draw.text((pad, y), line, fill=(40, 40, 40), font=font)
        y += round(size * 1.3)
    return np.asarray(canvas.crop((0, 0, width, y + pad)))


def _legend_keys(canvas, draw, font, size: int, pad: int, y: int, who: str, alpha: float) -> int:
    """The two swatches, side by side when both fit, else one under the other; returns new y."""
    width = canvas.width
    side = round(size * 1.3)
    entries = [(POSITIVE, f"for {who}"), (NEGATIVE, f"against {who}")]
    lengths = [side + pad + draw.textlength(t, font=font) for _, t in entries]
    same_row = lengths[0] <= width / 2 - 2 * pad and lengths[1] <= width / 2 - 2 * pad
    for i, (colour, text) in enumerate(entries):
        x = pad + (i * width // 2 if same_row else 0)
        fill = tuple(int(c) for c in _u8((1 - alpha) * _NEUTRAL + alpha * colour))
        edge = tuple(int(c) for c in _u8(colour))
        line = max(2, size // 6)
        draw.rectangle([x, y, x + side, y + side], fill=fill, outline=edge, width=line)
        room = width - x - side - 2 * pad
        draw.text(
            (x + side + pad, y + side / 2),
            _fit(draw, text, font, room),
            fill=(20, 20, 20),
            font=font,
            anchor="lm",
        )
        if not same_row and i == 0:
            y += side + pad // 2
    return y + side + pad


def _legend_ramp(
    canvas, draw, font, size: int, pad: int, y: int, threshold: float, vmax, alpha: float
) -> int:
    """'tint grows with |weight|' and a two-row ramp (green over red); returns the new y."""
    from PIL import Image

    draw.text((pad, y), "tint strength grows with |weight|:", fill=(20, 20, 20), font=font)
    y += round(size * 1.4)
    length, height = canvas.width - 2 * pad, max(8, size)
    share = np.linspace(0.0, 1.0, length)
    a = np.where(share >= threshold, alpha * share, 0.0)[:, None]
    rows = [(1 - a) * _NEUTRAL + a * colour for colour in (POSITIVE, NEGATIVE)]
    ramp = np.concatenate([np.repeat(r[None], height // 2 + 1, axis=0) for r in rows])
    canvas.paste(Image.fromarray(_u8(ramp)), (pad, y))
    bottom = y + ramp.shape[0]
    draw.rectangle([pad - 1, y - 1, pad + length, bottom], outline=(120, 120, 120), width=1)
    if threshold > 0:
        x = pad + round(threshold * (length - 1))
        draw.line([x, y - 2, x, bottom + 2], fill=(40, 40, 40), width=max(1, size // 8))
    y = bottom + pad // 2
    right = "largest |weight|" if vmax is None else f"|weight| {vmax:.3g}"
    draw.text((pad, y), "0", fill=(40, 40, 40), font=font)
    draw.text((pad + length, y), right, fill=(40, 40, 40), font=font, anchor="ra")
    return y + round(size * 1.3) + pad // 2


_NEUTRAL = np.array([0.8, 0.8, 0.8])  # the grey the legend's swatches are tinted over


def _wrap(draw, text: str, font, room: float) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and draw.textlength(f"{lines[-1]} {word}", font=font) <= room:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return lines


def _fit(draw, text: str, font, room: float) -> str:
    """``text`` cut with an ellipsis to fit ``room`` pixels."""
    if draw.textlength(text, font=font) <= room:
        return text
    while text and draw.textlength(text + "…", font=font) > room:
        text = text[:-1]
    return text + "…"


def stack_vertically(*pictures: np.ndarray, gap: int = 0, background: int = 255) -> np.ndarray:
    """Pictures one under the other, left-aligned, e.g. an overlay and its legend.

    Parameters
    ----------
    *pictures : (H_i, W_i, 3) uint8 ndarrays, at least one
    gap : int in [0, 1000], pixels of background between them
    background : int in [0, 255], the grey level of the padding

    Returns
    -------
    (sum H_i + gaps, max W_i, 3) uint8 ndarray.
    """
    if not pictures:
        raise LimecraftError("stack_vertically needs at least one picture")
    for i, p in enumerate(pictures):
        if not isinstance(p, np.ndarray) or p.ndim != 3 or p.shape[2] != 3 or p.dtype != np.uint8:
            got = p.shape if isinstance(p, np.ndarray) else type(p).__name__
            raise LimecraftError(f"picture {i + 1} must be an (H, W, 3) uint8 array, got {got}")
    gap = check_int("gap", gap, 0, 1000)
    background = check_int("background", background, 0, 255)
    width = max(p.shape[1] for p in pictures)
    height = sum(p.shape[0] for p in pictures) + gap * (len(pictures) - 1)
    out = np.full((height, width, 3), background, np.uint8)
    y = 0
    for p in pictures:
        out[y : y + p.shape[0], : p.shape[1]] = p
        y += p.shape[0] + gap
    return out
