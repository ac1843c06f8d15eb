"""The one .npz decoder (limecraft_core/codecs/npz.py): headers before data, no pickles, and a
ValueError for anything that is not an .npz of plain arrays."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from limecraft_core.codecs.npz import encode_npy, encode_npz, load_npy, load_npz, npz_members


@pytest.mark.parametrize("compress", [True, False])
def test_arrays_come_back_as_they_went(compress):
    arrays = {"a": np.arange(12, dtype=np.int32).reshape(3, 4), "m": np.eye(2, dtype=bool)}
    data = encode_npz(arrays, compress=compress)
    back = load_npz(data)
    assert back.keys() == arrays.keys()
    for k, v in arrays.items():
        assert back[k].dtype == v.dtype and np.array_equal(back[k], v)


def test_one_array_comes_back_as_it_went():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    back = load_npy(encode_npy(a))
    assert back.dtype == a.dtype and np.array_equal(back, a)


def test_the_headers_say_what_is_inside_before_it_is_inflated():
    big = np.zeros((4000, 3000), np.uint8)  # 12 MB of zeros: a few KB deflated
    data = encode_npz({"a": big, "b": np.ones(5, np.float32)})
    assert len(data) < 100_000
    a, b = npz_members(data)
    assert (a.name, a.shape, a.dtype, a.pixels) == ("a", (4000, 3000), np.dtype(np.uint8), 12e6)
    assert a.size >= big.nbytes  # the directory's inflated size, header included
    assert (b.name, b.shape, b.dtype) == ("b", (5,), np.dtype(np.float32))


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=True)
    return buf.getvalue()


def zipped(**files: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, body in files.items():
            zf.writestr(name, body)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("data", "read"),
    [
        (b"not a zip", npz_members),
        (b"not a zip", load_npz),
        (npy(np.zeros(3)), load_npz),  # one bare .npy, not an archive
        (npy(np.zeros(3)), npz_members),
        (zipped(**{"a.npy": npy(np.array([{}], dtype=object))}), load_npz),  # a pickle
        (zipped(**{"run.py": b"print('hi')"}), npz_members),  # not an array
        (zipped(**{"a.npy": b"\x93NUMPY garbage"}), npz_members),  # a broken header
        (encode_npz({"a": np.zeros(3)})[:40], npz_members),  # cut short
        (b"not an array", load_npy),
        (npy(np.array([{}], dtype=object)), load_npy),  # a pickle
        (encode_npz({"a": np.zeros(3)}), load_npy),  # an archive, not one array
        (encode_npy(np.zeros(3))[:20], load_npy),  # cut short
    ],
)
def test_anything_else_is_a_value_error(data, read):
    with pytest.raises(ValueError):
        read(data)
