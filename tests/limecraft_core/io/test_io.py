import io
import struct

import numpy as np
import pytest
from bad_files import BAD_IMAGES
from PIL import Image

from limecraft_core import LimecraftError
from limecraft_core.io import decode_image, read_image, read_label_map, read_labels, read_mask


def png_bytes(im: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt, **kw)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("mode", "fmt"),
    [
        ("RGB", "PNG"),
        ("L", "PNG"),
        ("P", "GIF"),
        ("CMYK", "JPEG"),
        ("RGBA", "WEBP"),
        ("RGB", "BMP"),
        ("RGB", "TIFF"),
        ("I;16", "PNG"),
    ],
)
def test_every_mode_becomes_rgb_uint8(mode, fmt):
    rng = np.random.default_rng(0)
    base = Image.fromarray(rng.integers(0, 255, (20, 30, 3), dtype=np.uint8))
    if mode == "I;16":
        im = Image.fromarray((rng.integers(0, 65535, (20, 30))).astype(np.uint16))
    else:
        im = base.convert(mode)
    arr = decode_image(png_bytes(im, fmt))
    assert arr.shape == (20, 30, 3) and arr.dtype == np.uint8


def test_transparency_is_composited_on_white():
    im = Image.new("RGBA", (10, 10), (255, 0, 0, 0))
    arr = decode_image(png_bytes(im))
    assert (arr == 255).all()


def test_exif_orientation_is_applied():
    im = Image.new("RGB", (40, 20), (10, 20, 30))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90
    arr = decode_image(png_bytes(im, "JPEG", exif=exif.tobytes()))
    assert arr.shape[:2] == (40, 20)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "empty"),
        (b"hello, not an image", "not an image"),
        (png_bytes(Image.new("RGB", (64, 64)))[:60], "truncated|not an image|decoded"),
        (png_bytes(Image.new("RGB", (4, 30))), "at least 8"),
    ],
)
def test_bad_images_are_refused(data, match):
    with pytest.raises(LimecraftError, match=match):
        decode_image(data)


def test_the_bad_images_are_what_they_claim():
    """The shared battery (``bad_files.BAD_IMAGES``) is honest: each bad file fails for the
    reason its row names."""
    data, _ = BAD_IMAGES["decompression-bomb"]
    assert len(data) < 100_000
    assert struct.unpack(">II", BAD_IMAGES["too-many-pixels"][0][16:24]) == (20_000, 20_000)
    for data, match in BAD_IMAGES.values():
        with pytest.raises(LimecraftError, match=match):
            decode_image(data)


def test_read_image_from_disk_and_missing_file(tmp_path):
    p = tmp_path / "x.png"
    p.write_bytes(png_bytes(Image.new("RGB", (12, 9), (1, 2, 3))))
    assert read_image(p)[0, 0].tolist() == [1, 2, 3]
    with pytest.raises(LimecraftError, match="does not exist"):
        read_image(tmp_path / "nope.png")
    with pytest.raises(LimecraftError, match="folder"):
        read_image(tmp_path)


def test_masks_and_label_maps(tmp_path):
    lab = np.zeros((10, 12), np.uint8)
    lab[2:5, 2:5] = 3
    lab[6:9, 6:9] = 200
    (tmp_path / "m.png").write_bytes(png_bytes(Image.fromarray(lab)))
    assert np.array_equal(read_mask(tmp_path / "m.png"), lab)
    rgb = np.zeros((10, 12, 3), np.uint8)
    rgb[2:5, 2:5] = (255, 0, 0)
    rgb[6:9, 6:9] = (0, 0, 255)
    (tmp_path / "c.png").write_bytes(png_bytes(Image.fromarray(rgb)))
    m = read_mask(tmp_path / "c.png")
    assert len(np.unique(m)) == 3 and m[0, 0] == 0
    np.save(tmp_path / "s.npy", lab.astype(np.int64))
    assert np.array_equal(read_label_map(tmp_path / "s.npy"), lab)
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(LimecraftError, match=r"plain \.npy"):
        read_label_map(tmp_path / "obj.npy")


def test_labels_file(tmp_path):
    p = tmp_path / "labels.txt"
    p.write_text("cat\ndog\n\n")
    assert read_labels(p) == ["cat", "dog"]
    p.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(LimecraftError, match="UTF-8"):
        read_labels(p)


def test_the_conversion_note_says_what_decoding_changed():
    """The "Loaded ..." line adds one clause when the picture is not the file as it is: a GIF's
    first frame, transparency flattened on white (issue 29, item 8). An opaque PNG: nothing."""
    import io as _io

    from PIL import Image as _Image

    from limecraft_core.io.images import conversion_note

    def saved(im, fmt, **kw) -> bytes:
        buf = _io.BytesIO()
        im.save(buf, format=fmt, **kw)
        return buf.getvalue()

    rgb = _Image.new("RGB", (20, 10), (10, 200, 30))
    assert conversion_note(saved(rgb, "PNG")) == ""
    rgba = _Image.new("RGBA", (20, 10), (10, 200, 30, 90))
    assert conversion_note(saved(rgba, "PNG")) == "its transparency flattened on white"
    frames = [_Image.new("RGB", (20, 10), (80 * i, 40, 200 - 60 * i)) for i in range(3)]
    gif = saved(frames[0], "GIF", save_all=True, append_images=frames[1:])
    assert conversion_note(gif) == "the first of its 3 frames"
    assert conversion_note(b"not an image") == ""
