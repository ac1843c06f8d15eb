"""``python -m limecraft watermark``, in-process: a folder watermarked, with its masks beside it."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

from limecraft.cli import main
from limecraft_core.io.images import read_image, read_mask


def test_a_folder_is_watermarked_with_its_masks(tmp_path, capsys):
    src = tmp_path / "photos"
    (src / "sub").mkdir(parents=True)
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (224, 224, 3), dtype=np.uint8)).save(src / "a.jpg")
    Image.fromarray(rng.integers(0, 255, (300, 400, 3), dtype=np.uint8)).save(src / "sub" / "b.png")
    (src / "broken.png").write_bytes(b"not a png")
    out = tmp_path / "out"
    assert main(["watermark", str(src), "--out", str(out)]) == 0
    said = capsys.readouterr()
    assert "watermarked 2 images" in said.out and "skipped 1" in said.out
    assert "broken.png" in said.err
    marked = read_image(out / "images" / "a.png")
    mask = read_mask(out / "masks" / "a.png")
    assert marked.shape == (224, 224, 3) and mask.shape == (224, 224) and mask.any()
    assert (out / "images" / "sub" / "b.png").is_file() and (
        out / "masks" / "sub" / "b.png"
    ).is_file()
    summary = json.loads((out / "watermark.json").read_text())
    assert summary["opacity"] == 0.5 and set(summary["images"]) == {"a.jpg", "sub/b.png"}
    assert summary["images"]["a.jpg"]["text_size"] == 36 and "broken.png" in summary["skipped"]
    top, left, bottom, right = summary["images"]["a.jpg"]["box"]
    assert mask[top:bottom, left:right].any() and not mask[: top - 3].any()  # grown by 2 px


def test_crop_and_bad_opacity(tmp_path, capsys):
    src = tmp_path / "p"
    src.mkdir()
    Image.fromarray(np.zeros((300, 500, 3), np.uint8)).save(src / "x.png")
    assert (
        main(["watermark", str(src), "--out", str(tmp_path / "o"), "--crop", "224", "--box"]) == 0
    )
    assert read_image(tmp_path / "o" / "images" / "x.png").shape == (224, 224, 3)
    box = read_mask(tmp_path / "o" / "masks" / "x.png")
    rows, cols = np.nonzero(box.any(1))[0], np.nonzero(box.any(0))[0]
    assert box[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1].all()  # a filled box
    assert main(["watermark", str(src), "--out", str(tmp_path / "o2"), "--opacity", "2"]) == 2
    assert "--opacity must be between 0 and 1" in capsys.readouterr().err
