"""Input checks shared by the engine: convert once at the door, never mutate the caller's arrays."""

from __future__ import annotations

import numbers
import re

import numpy as np

#: Largest image the engine accepts, in pixels (width x height). About 50 megapixels.
MAX_PIXELS = 50_000_000
#: Smallest side, in pixels, that an explanation makes sense on.
MIN_SIDE = 8


class LimecraftError(ValueError):
    """A problem with the caller's input; the message says what to do about it."""


class Cancelled(RuntimeError):
    """Raised when a long computation was cancelled through its ``cancel`` callback."""


class ModelError(RuntimeError):
    """The model failed or returned something unusable; the message says what and why."""


_HEX = re.compile(r"^#[0-9a-fA-F]{6}$")


def parse_colour(fill: str) -> np.ndarray | None:
    """The RGB colour in [0, 1] of a fill named ``gray`` or ``black`` or given as ``#RRGGBB``;
    None for any other string."""
    if fill == "gray":
        return np.array([0.5, 0.5, 0.5], np.float32)
    if fill == "black":
        return np.zeros(3, np.float32)
    if _HEX.match(fill):
        return np.array([int(fill[i : i + 2], 16) for i in (1, 3, 5)], np.float32) / 255.0
    return None


def as_float_image(image: np.ndarray) -> np.ndarray:
    """Return a float32 copy of an RGB image with values in [0, 1].

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, or (H, W, 3) float ndarray in [0, 1].
        A 2-D grayscale image is accepted and repeated on three channels.

    Returns
    -------
    (H, W, 3) float32 ndarray, a new array.

    Raises
    ------
    LimecraftError
        If the shape, dtype or value range is not one of the above.
    """
    if not isinstance(image, np.ndarray):
        raise LimecraftError(
            f"image must be a numpy array, got {type(image).__name__}; "
            "load files with limecraft_core.io.read_image"
        )
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] != 3:
        raise LimecraftError(
            f"image must have shape (H, W, 3), got {image.shape}; "
            "drop the alpha channel or convert the image to RGB first"
        )
    h, w = image.shape[:2]
    if min(h, w) < MIN_SIDE:
        raise LimecraftError(f"image is {w}x{h} pixels; both sides must be at least {MIN_SIDE}")
    if h * w > MAX_PIXELS:
        raise LimecraftError(
            f"image has {h * w:,} pixels, over the limit of {MAX_PIXELS:,}; downscale it first"
        )
    if image.dtype == np.uint8:
        return image.astype(np.float32) / 255.0
    if image.dtype == np.bool_ or not np.issubdtype(image.dtype, np.floating):
        raise LimecraftError(
            f"image dtype must be uint8, or float with values in [0, 1]; got {image.dtype}"
        )
    out = image.astype(np.float32)  # always a copy
    if not np.isfinite(out).all():
        raise LimecraftError("image contains NaN or infinite values")
    lo, hi = float(out.min()), float(out.max())
    if lo < -1e-6 or hi > 1 + 1e-6:
        raise LimecraftError(
            f"a float image must have values in [0, 1], got [{lo:.3g}, {hi:.3g}]; "
            "divide 0-255 images by 255 or pass them as uint8"
        )
    return np.clip(out, 0.0, 1.0)


def check_int(name: str, value: object, lo: int, hi: int | None = None) -> int:
    """Return ``value`` as an int, or raise LimecraftError naming the valid range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise LimecraftError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise LimecraftError(f"{name} must be in {rng}, got {value}")
    return value


def check_float(
    name: str, value: object, lo: float, hi: float | None = None, *, lo_open: bool = False
) -> float:
    """Return ``value`` as a float, or raise LimecraftError naming the valid range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LimecraftError(f"{name} must be a number, got {value!r}")
    value = float(value)
    bad_lo = value <= lo if lo_open else value < lo
    if not np.isfinite(value) or bad_lo or (hi is not None and value > hi):
        left = "(" if lo_open else "["
        rng = f"{left}{lo}, {hi}]" if hi is not None else f"{'>' if lo_open else '>='} {lo}"
        raise LimecraftError(f"{name} must be in {rng}, got {value}")
    return value


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise LimecraftError listing them."""
    if value not in choices:
        raise LimecraftError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return str(value)


def check_label_map(labels: np.ndarray, shape: tuple[int, int], what: str = "label map") -> None:
    """Raise LimecraftError unless ``labels`` is an integer (H, W) array of ``shape``."""
    if not isinstance(labels, np.ndarray) or labels.ndim != 2:
        got = getattr(labels, "shape", type(labels).__name__)
        raise LimecraftError(f"{what} must be a 2-D array, got {got}")
    if labels.shape != tuple(shape):
        raise LimecraftError(
            f"{what} is {labels.shape[1]}x{labels.shape[0]} but the image is "
            f"{shape[1]}x{shape[0]}; it must have the image's width and height"
        )
    if not (np.issubdtype(labels.dtype, np.integer) or labels.dtype == np.bool_):
        raise LimecraftError(f"{what} must hold integers, got dtype {labels.dtype}")
