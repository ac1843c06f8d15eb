"""File reading and writing at the engine's edge (used by the CLI and the app, never by the core).

Images come in as (H, W, 3) uint8 RGB arrays, whatever the file's mode, with the EXIF orientation
applied. Every failure is a ``LimecraftError`` that says what was wrong.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .._validate import MAX_PIXELS, MIN_SIDE, LimecraftError

__all__ = [
    "IMAGE_BACKGROUND",
    "decode_image",
    "decode_mask",
    "encode_png",
    "expected_area",
    "read_image",
    "read_label_map",
    "read_labels",
    "read_mask",
]

#: Transparent pixels are composited onto this colour (white).
IMAGE_BACKGROUND = (255, 255, 255)
MAX_LABELS_BYTES = 10_000_000


def _read_bytes(path: str | Path, what: str) -> bytes:
    p = Path(path)
    if not p.exists():
        raise LimecraftError(f"{what} {str(p)!r} does not exist")
    if p.is_dir():
        raise LimecraftError(f"{what} {str(p)!r} is a folder, not a file")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise LimecraftError(f"cannot read {what} {str(p)!r}: {e.strerror or e}") from None
    if not data:
        raise LimecraftError(f"{what} {str(p)!r} is empty")
    return data


def _open(data: bytes, name: str) -> Image.Image:
    if not data:
        raise LimecraftError(f"{name} is empty")
    old = Image.MAX_IMAGE_PIXELS
    try:
        Image.MAX_IMAGE_PIXELS = MAX_PIXELS
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(data))
            im.seek(0)  # first frame of an animation
            if im.width * im.height > MAX_PIXELS:
                raise LimecraftError(
                    f"{name} is {im.width}x{im.height} = {im.width * im.height:,} pixels, over the "
                    f"limit of {MAX_PIXELS:,}; downscale it first"
                )
            im.load()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise LimecraftError(
            f"{name} is too large (over {MAX_PIXELS:,} pixels, or a decompression bomb); "
            "downscale it first"
        ) from None
    except UnidentifiedImageError:
        raise LimecraftError(
            f"{name} is not an image that can be read (PNG, JPEG, WebP, BMP, TIFF or GIF)"
        ) from None
    except (OSError, SyntaxError, ValueError) as e:
        raise LimecraftError(
            f"{name} could not be decoded ({e}); the file may be truncated"
        ) from None
    finally:
        Image.MAX_IMAGE_PIXELS = old
    return im


def _to_rgb(im: Image.Image) -> np.ndarray:
    im = ImageOps.exif_transpose(im)
    if im.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        a = np.asarray(im, dtype=np.float64)
        lo, hi = float(a.min()), float(a.max())
        a = np.zeros_like(a) if hi <= lo else (a - lo) / (hi - lo)
        g = (a * 255 + 0.5).astype(np.uint8)
        return np.repeat(g[..., None], 3, axis=2)
    if im.mode == "P" and "transparency" in im.info:
        im = im.convert("RGBA")
    if im.mode in _TRANSPARENT_MODES:
        im = im.convert("RGBA")
        bg = Image.new("RGBA", im.size, (*IMAGE_BACKGROUND, 255))
        im = Image.alpha_composite(bg, im)
    return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()


_TRANSPARENT_MODES = ("RGBA", "LA", "PA", "RGBa", "La")


def conversion_note(data: bytes) -> str:
    """What :func:`decode_image` does to these bytes that a person would not expect, in words
    for the page ("" when nothing, or when they cannot be read): an animation gives its first
    frame, and transparency is flattened on white. Reads the header (and a GIF's frame count)."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            notes = []
            frames = int(getattr(im, "n_frames", 1))
            if frames > 1:
                notes.append(f"the first of its {frames} frames")
            if im.mode in _TRANSPARENT_MODES or (im.mode == "P" and "transparency" in im.info):
                notes.append("its transparency flattened on white")
            return ", ".join(notes)
    except Exception:  # decode_image says what is wrong with the file
        return ""


def decode_image(data: bytes, name: str = "the image") -> np.ndarray:
    """Decode image bytes into an RGB array.

    Grayscale, 16-bit (rescaled to its own range), palette, CMYK and RGBA files are normalised to
    RGB; transparency is composited on white; the EXIF orientation is applied; a GIF or TIFF gives
    its first frame.

    Returns
    -------
    (H, W, 3) uint8 ndarray.

    Raises
    ------
    LimecraftError
        For an empty, unreadable, truncated, too large or too small image.
    """
    arr = _to_rgb(_open(data, name))
    h, w = arr.shape[:2]
    if min(h, w) < MIN_SIDE:
        raise LimecraftError(f"{name} is {w}x{h} pixels; both sides must be at least {MIN_SIDE}")
    return arr


def read_image(path: str | Path) -> np.ndarray:
    """Read an image file; see :func:`decode_image`."""
    return decode_image(_read_bytes(path, "image"), f"image {str(path)!r}")


def read_image_noted(path: str | Path) -> tuple[np.ndarray, str]:
    """Read an image file once: the image (:func:`decode_image`) and what decoding changed
    that a person would not expect (:func:`conversion_note`, "" when nothing)."""
    data = _read_bytes(path, "image")
    return decode_image(data, f"image {str(path)!r}"), conversion_note(data)


def _mask_array(im: Image.Image) -> np.ndarray:
    if im.mode in ("RGB", "RGBA", "CMYK", "YCbCr", "LAB", "HSV"):
        rgba = np.asarray(im.convert("RGBA"), dtype=np.uint32)
        key = (rgba[..., 0] << 16) | (rgba[..., 1] << 8) | rgba[..., 2]
        key[rgba[..., 3] == 0] = 0
        _, inv = np.unique(key, return_inverse=True)
        ids = inv.reshape(key.shape).astype(np.int32)
        if (key == 0).any():
            return ids  # black or transparent is 0
        return ids + 1
    if im.mode in ("LA", "PA"):
        im = im.convert("L")
    return np.asarray(im, dtype=np.int64).astype(np.int32)


def decode_mask(data: bytes, name: str = "the mask") -> np.ndarray:
    """Decode mask image bytes; see :func:`read_mask`."""
    return _mask_array(ImageOps.exif_transpose(_open(data, name)))


def read_mask(path: str | Path) -> np.ndarray:
    """Read a handcrafted-regions mask.

    Each distinct non-zero value is one region. In a colour PNG each distinct colour other than
    black (or fully transparent) is one region.

    Returns
    -------
    (H, W) int32 ndarray, 0 for "no region".
    """
    return decode_mask(_read_bytes(path, "mask"), f"mask {str(path)!r}")


def read_label_map(path: str | Path) -> np.ndarray:
    """Read a label map from ``.npy`` (integer, 2-D, no pickles) or ``.png`` (8 or 16 bit).

    Returns
    -------
    (H, W) int64 ndarray, used as is (relabelled to 0..K-1 by the engine).
    """
    p = Path(path)
    data = _read_bytes(p, "label map")
    if p.suffix.lower() == ".npy":
        try:
            a = np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, OSError) as e:
            raise LimecraftError(f"label map {str(p)!r} is not a plain .npy array ({e})") from None
        if a.ndim != 2 or not (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
            raise LimecraftError(
                f"label map {str(p)!r} must be a 2-D integer array, got {a.dtype} {a.shape}"
            )
        return a.astype(np.int64)
    im = _open(data, f"label map {str(p)!r}")
    if im.mode not in ("L", "I", "I;16", "I;16B", "I;16L", "P"):
        raise LimecraftError(
            f"label map {str(p)!r} must be a one-channel PNG (8 or 16 bit), got mode {im.mode}"
        )
    return np.asarray(im, dtype=np.int64)


def read_labels(path: str | Path) -> list[str]:
    """Read class names, one per line (blank lines at the end are ignored)."""
    data = _read_bytes(path, "labels file")
    if len(data) > MAX_LABELS_BYTES:
        raise LimecraftError(f"labels file {str(path)!r} is over {MAX_LABELS_BYTES:,} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LimecraftError(f"labels file {str(path)!r} is not UTF-8 text") from None
    names = [line.strip() for line in text.splitlines()]
    while names and not names[-1]:
        names.pop()
    if not names:
        raise LimecraftError(f"labels file {str(path)!r} has no class names")
    return names


def encode_png(image: np.ndarray, compress_level: int = 6) -> bytes:
    """PNG bytes of an (H, W, 3|4) uint8 image, or an (H, W) uint8/uint16 map.

    ``compress_level`` 1 is about 4 times faster than the default 6 for a 10% larger file (an
    audit writes thousands)."""
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", compress_level=compress_level)
    return buf.getvalue()


def expected_area(mask: np.ndarray, shape: tuple[int, int], name: str) -> np.ndarray:
    """A mask read with :func:`read_mask` as the bool area the analyst expects the model to rely
    on, checked against the image's ``(H, W)`` before any model pass.

    Raises
    ------
    LimecraftError
        If its size is not the image's, or it marks nothing (all black or transparent).
    """
    if mask.shape != tuple(shape):
        raise LimecraftError(
            f"{name} is {mask.shape[1]}x{mask.shape[0]} but the image is "
            f"{shape[1]}x{shape[0]}; draw the expected area on an image of the same size"
        )
    area = mask != 0
    if not area.any():
        raise LimecraftError(
            f"{name} is empty (all black or transparent); paint the area you "
            "expect the model to rely on in any non-black colour"
        )
    return area
