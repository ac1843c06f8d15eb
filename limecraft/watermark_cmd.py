"""``watermark``: the ImageNet-W watermark over a folder of photos, with its masks beside them,
so that an analyst can rebuild the watermark test set for their own model.

For each image (a folder, searched recursively, or a list file, as ``audit`` reads them) it
writes ``OUT/images/NAME.png`` (watermarked), ``OUT/masks/NAME.png`` (the watermark's pixels,
grown by ``--grow``, white on black: ``audit --regions-masks OUT/masks`` reads them by name and
makes each a region of its own; they mark the artifact, not where a sound model should look, so
they are no ``--expected-masks``) and ``OUT/watermark.json`` (the settings and each image's text box). With
``--crop 224`` each photo is first resized to 256/224 of that on its shorter side and
centre-cropped, ImageNet's evaluation view, as the paper watermarks it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

__all__ = ["cmd_watermark", "watermark_args"]


def watermark_args(w: argparse.ArgumentParser) -> None:
    from limecraft.args import positive_int

    w.add_argument("images", metavar="IMAGES", help="a folder of images or a list file")
    w.add_argument("--out", required=True, help="folder for images/, masks/ and watermark.json")
    w.add_argument(
        "--opacity",
        type=float,
        default=0.5,
        help="the text's opacity, 0 to 1 (default: 0.5, as published)",
    )
    w.add_argument(
        "--text-size",
        type=positive_int("--text-size"),
        help="the text height in pixels (default: the package's for each image's size: 36 at 224)",
    )
    w.add_argument(
        "--crop",
        type=positive_int("--crop"),
        help="first resize to 256/224 of this on the shorter side and centre-crop to it (e.g. 224)",
    )
    w.add_argument(
        "--grow", type=int, default=2, help="pixels the masks grow around the text (default: 2)"
    )
    w.add_argument("--box", action="store_true", help="write the text's bounding box as the mask")
    w.add_argument("--quiet", action="store_true", help="print nothing but errors")


def eval_crop(image: np.ndarray, size: int) -> np.ndarray:
    """ImageNet's evaluation view: the shorter side to size·256/224 (bilinear), the centre crop."""
    from PIL import Image

    h, w = image.shape[:2]
    s = size * 256 / 224 / min(h, w)
    im = Image.fromarray(image).resize(
        (max(size, round(w * s)), max(size, round(h * s))), Image.Resampling.BILINEAR
    )
    left, top = (im.width - size) // 2, (im.height - size) // 2
    return np.asarray(im.crop((left, top, left + size, top + size)))


def cmd_watermark(a: argparse.Namespace) -> int:
    from limecraft.args import out_dir
    from limecraft_core._validate import LimecraftError
    from limecraft_core.edits.watermark import add_watermark
    from limecraft_core.io.dataset import list_images
    from limecraft_core.io.images import encode_png, read_image

    if not 0.0 <= a.opacity <= 1.0:  # also refuses nan
        raise LimecraftError(f"--opacity must be between 0 and 1; got {a.opacity}")
    items = list_images(a.images)
    out = out_dir(a.out)
    boxes, failed = {}, {}
    for name, path in items:
        try:
            image = read_image(path)
            if a.crop:
                image = eval_crop(image, a.crop)
            mark = add_watermark(image, opacity=a.opacity, font_size=a.text_size)
        except LimecraftError as e:
            failed[name] = str(e)
            print(f"skipped {name}: {e}", file=sys.stderr)
            continue
        stem = str(Path(name).with_suffix(".png"))
        mask = mark.box_mask() if a.box else mark.grown_mask(a.grow)
        for folder, data in (
            ("images", encode_png(mark.image)),
            ("masks", encode_png(mask.astype(np.uint8) * 255)),
        ):
            dst = out / folder / stem
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(data)
        boxes[name] = {"file": stem, "box": list(mark.box), "text_size": mark.font_size}
    summary = {
        "transform": "ImageNet-W (Li et al., CVPR 2023): 捷径捷径捷径, white, at (0.01·W, 0.4·H)",
        "opacity": a.opacity,
        "crop": a.crop,
        "mask": "box" if a.box else f"text pixels grown by {a.grow} px",
        "images": boxes,
        "skipped": failed,
    }
    (out / "watermark.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    if not a.quiet:
        print(
            f"watermarked {len(boxes)} images into {out / 'images'}, their masks in {out / 'masks'}"
            + (f"; skipped {len(failed)} (see watermark.json)" if failed else "")
        )
    return 0 if boxes else 2
