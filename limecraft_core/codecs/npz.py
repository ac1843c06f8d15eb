"""Arrays as ``.npz`` (or one array as ``.npy``) bytes, and back.

The one decoder for bytes that someone else wrote.

An ``.npz`` is a zip of ``.npy`` files. Three places read one from outside: the explanation
JSON's label map (:mod:`limecraft_core.result`), the app's saved analysis (its masks and region
atoms), and Ray Serve's wire (``serving/wire.py``). Each reads it here:

- :func:`npz_members` reads each array's header (name, shape, dtype) without inflating the
  data, so a caller can refuse a shape or a size first: a few KB of zeros can inflate to GBs;
- :func:`load_npz` then loads the arrays with ``allow_pickle=False``, so no object array (and
  no code) comes in.

Both raise ``ValueError`` on bytes that are not an ``.npz`` of plain arrays (the zip's own
errors included); the caller says what the bytes were meant to be. A Ray Serve replica answers
with one array, :func:`encode_npy` and :func:`load_npy` (the same rules).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._validate import MAX_PIXELS


@dataclass(frozen=True)
class Member:
    """One array of an ``.npz``, as its header states it."""

    name: str  # the array's key (its file name without ``.npy``)
    shape: tuple[int, ...]
    dtype: np.dtype
    #: the bytes it inflates to, as the zip's directory states (the most a read can inflate)
    size: int

    @property
    def pixels(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def is_map(m: Member, kinds: str) -> bool:
    """Whether ``m`` is a map as LIMEcraft saves one (a label map, a mask): the array ``a``,
    2-D, at most ``MAX_PIXELS``, of one of numpy's dtype ``kinds`` ("iu" for labels, "bui" for
    masks). Read it from the header (:func:`npz_members`) before the data is inflated."""
    return m.name == "a" and len(m.shape) == 2 and m.pixels <= MAX_PIXELS and m.dtype.kind in kinds


def encode_npz(arrays: Mapping[str, np.ndarray], *, compress: bool = True) -> bytes:
    """The arrays as ``.npz`` bytes (deflated unless ``compress`` is False)."""
    buf = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buf, **arrays)
    return buf.getvalue()


def npz_members(data: bytes) -> list[Member]:
    """Each array's name, shape, dtype and inflated size, read from the headers only.

    Raises
    ------
    ValueError
        If ``data`` is not a zip, or a member is not an ``.npy`` array.
    """
    fmt = np.lib.format
    out = []
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    raise ValueError(f"{info.filename!r} is not an .npy array")
                with zf.open(info) as f:
                    version = fmt.read_magic(f)
                    read = (
                        fmt.read_array_header_1_0
                        if version == (1, 0)
                        else fmt.read_array_header_2_0
                    )
                    shape, _, dtype = read(f)
                name = info.filename[: -len(".npy")]
                out.append(Member(name, tuple(shape), dtype, info.file_size))
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(str(e)) from e
    return out


def load_npz(data: bytes) -> dict[str, np.ndarray]:
    """Every array of ``data``, read with ``allow_pickle=False``.

    Raises
    ------
    ValueError
        If ``data`` is not an ``.npz`` of plain arrays (an object array included).
    """
    try:
        z = np.load(io.BytesIO(data), allow_pickle=False)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(str(e)) from e
    if not isinstance(z, np.lib.npyio.NpzFile):  # one bare .npy array
        raise ValueError("not an .npz archive")
    with z:
        try:
            return {k: z[k] for k in z.files}
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise ValueError(str(e)) from e


def encode_npy(array: np.ndarray) -> bytes:
    """One array as ``.npy`` bytes (no pickles)."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    return buf.getvalue()


def load_npy(data: bytes) -> np.ndarray:
    """The one plain array of ``.npy`` bytes, read with ``allow_pickle=False``.

    Raises
    ------
    ValueError
        If ``data`` is not one ``.npy`` array of plain values (an ``.npz`` archive included).
    """
    try:
        out = np.load(io.BytesIO(data), allow_pickle=False)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(str(e)) from e
    if not isinstance(out, np.ndarray):  # an archive rather than one array
        if isinstance(out, np.lib.npyio.NpzFile):
            out.close()
        raise ValueError("not one .npy array")
    return out
