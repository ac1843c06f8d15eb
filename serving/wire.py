"""The wire between a front end and its Ray Serve replicas: ``.npz`` bodies and packed masks.

A front end sends a *scene* (the image, the fill and the label map) once, content-addressed by
its digest (:func:`scene_key`), then the (N, K) binary masks in chunks, packed to bits
(:func:`pack_masks`): a few hundred bytes per chunk instead of the perturbed images. Bodies are
plain ``.npz`` archives read with ``allow_pickle=False``, so nothing is unpickled on either side.
The deployments answer at ``ROUTE/<model>/{score,info,stats}`` (:data:`DEFAULT_ROUTE`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

from limecraft_core import LimecraftError
from limecraft_core.codecs.npz import encode_npz, load_npz, npz_members

__all__ = [
    "DEFAULT_ROUTE",
    "MAX_BODY_BYTES",
    "decode_arrays",
    "encode_arrays",
    "pack_masks",
    "scene_key",
    "small_labels",
    "unpack_masks",
]

#: Route prefix of the deployments; model ``m`` is served at ``ROUTE/m``.
DEFAULT_ROUTE = "/limecraft"
#: Largest request body a replica reads (decompressed), in bytes.
MAX_BODY_BYTES = 256 * 1024 * 1024


def pack_masks(masks: np.ndarray) -> np.ndarray:
    """(N, K) bool -> (N, ceil(K / 8)) uint8, 8 regions a byte."""
    return np.packbits(np.asarray(masks, dtype=bool), axis=1)


def unpack_masks(packed: np.ndarray, n_regions: int) -> np.ndarray:
    """Inverse of :func:`pack_masks`: (N, K) bool."""
    return np.unpackbits(packed, axis=1, count=n_regions).astype(bool)


def small_labels(labels: np.ndarray) -> np.ndarray:
    """A label map (ints 0..K-1) in the smallest unsigned dtype that holds it."""
    k = int(labels.max()) if labels.size else 0
    dtype = np.uint8 if k < 2**8 else np.uint16 if k < 2**16 else np.uint32
    return labels.astype(dtype)


def scene_key(image: np.ndarray, fill: np.ndarray, labels: np.ndarray) -> str:
    """Content digest of a scene (image, fill, label map), as the wire sends them (the fill
    is a float32 image, or the name of a per-mask fill as a 0-d string array)."""
    h = hashlib.blake2b(digest_size=16)
    for a in (image, fill, labels):
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).data)
    return h.hexdigest()


def encode_arrays(arrays: Mapping[str, np.ndarray], *, compress: bool = False) -> bytes:
    """An ``.npz`` body (no pickles)."""
    return encode_npz(arrays, compress=compress)


def decode_arrays(body: bytes, max_bytes: int = MAX_BODY_BYTES) -> dict[str, np.ndarray]:
    """Read an ``.npz`` body with ``allow_pickle=False``; refuse more than ``max_bytes`` unpacked.

    Raises
    ------
    LimecraftError
        If the body is not an ``.npz`` of plain arrays, or too large.
    """
    try:
        size = sum(m.size for m in npz_members(body))
        if size > max_bytes:
            raise LimecraftError(f"request of {size} bytes is larger than {max_bytes}")
        return load_npz(body)
    except LimecraftError:  # the size, said as it is (LimecraftError is a ValueError)
        raise
    except ValueError as e:
        raise LimecraftError(f"request body is not a valid .npz of plain arrays: {e}") from None
