"""Sample images for the app and the docs: demo images and photos that ship with scikit-image.

Nothing is downloaded: the photos are part of the scikit-image package (made at run time, the
text page's crop and its ImageNet-W watermark too), and the demo images are generated
deterministically.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from limecraft_core import LimecraftError

__all__ = ["PAGE_WATERMARK", "SAMPLES", "Sample", "load_sample", "model_for", "sample_names"]

# scikit-image's bundled photos (skimage.data), all RGB or made RGB here.
_PHOTOS = ("chelsea", "coffee", "astronaut", "rocket", "hubble_deep_field", "immunohistochemistry")
#: scikit-image's text page (``data.page()``), cropped to [0:177, 10:187], made RGB and resized
#: to 224×224 (bilinear), clean and with the ImageNet-W watermark added at 224.
PAGE, PAGE_WATERMARK = "page", "page-watermark"
_PAGE_NOTES = {
    PAGE: "A crop of scikit-image's text page at 224×224. efficientnet_lite0 reads it as a "
    "crossword puzzle (0.156; carton 0.071). Its watermarked twin is page-watermark",
    PAGE_WATERMARK: "The same text page with the ImageNet-W watermark (Li et al., CVPR 2023: "
    "opacity 0.5, 36 px at 224, the published transform). On this photo the shortcut is strong: "
    "efficientnet_lite0 says carton 0.661 (clean: crossword puzzle 0.156, carton 0.071). Add "
    "the watermark as a region (Craft), explain carton: the watermark comes first. Remove it on "
    "Inspect (fill mean) and carton falls back. The shortcut is selective: scikit-image's other "
    "photos, whole, do not flip to carton at opacity 0.5",
}


@dataclass(frozen=True)
class Sample:
    """A sample image and what is known about it.

    Attributes
    ----------
    name : str
    image : (H, W, 3) uint8 ndarray
    tag_mask : (H, W) bool ndarray or None; the demo tag's pixels
    note : str; one line for the gallery: for a demo image, the drawn shape and the tag
    shape, tag : str or None; a demo image's drawn shape and the class its tag names
        (names from ``models.demo.CLASS_NAMES``); None for a photo
    shape_mask : (H, W) bool ndarray or None; a demo image's drawn shape (without the tag)
    """

    name: str
    image: np.ndarray
    tag_mask: np.ndarray | None
    note: str
    shape: str | None = None
    tag: str | None = None
    shape_mask: np.ndarray | None = None


def _edge(mask: np.ndarray) -> str:
    """The image edge nearest to a (non-empty) mask: "top", "bottom", "left" or "right"."""
    rows, cols = np.nonzero(mask)
    h, w = mask.shape
    gaps = {
        "top": rows.min(),
        "bottom": h - 1 - rows.max(),
        "left": cols.min(),
        "right": w - 1 - cols.max(),
    }
    return min(gaps, key=gaps.__getitem__)


def _demo(index: int, mode: str) -> Sample:
    from . import demo

    s = demo.generate(index + 1, seed=2024 if mode == "conflict" else 2023, mode=mode)[index]
    shape, tag = demo.CLASS_NAMES[s.shape_class], demo.CLASS_NAMES[s.tag_class]
    where = f"a {demo.TAG_COLOUR_NAMES[s.tag_class]} '{tag}' tag at the {_edge(s.tag_mask)} edge"
    note = (
        f"A {shape} with {where}: the model follows the tag; remove the tag and it names "
        f"the {shape}"
        if mode == "conflict"
        else f"A {shape} with {where}: tag and shape agree"
    )
    return Sample(f"demo-{mode}-{index + 1}", s.image, s.tag_mask, note, shape, tag, s.shape_mask)


def sample_names() -> list[str]:
    """Every sample's name, those for the app's default model first: photos first (chelsea,
    the watermarked text page, the clean one, the others) for a real model, the demo images
    first (conflict, then aligned: the demo story) when the default model is ``demo``."""
    from .registry import DEFAULT_MODEL

    demos = [f"demo-conflict-{i}" for i in range(1, 5)] + [f"demo-aligned-{i}" for i in range(1, 3)]
    photos = [_PHOTOS[0], PAGE_WATERMARK, PAGE, *_PHOTOS[1:]]
    return demos + photos if DEFAULT_MODEL == "demo" else photos + demos


def model_for(name: str) -> str:
    """The built-in model a sample is for: ``demo`` for a demo image, the real ImageNet model
    (``efficientnet_lite0``) for a photo."""
    from .efficientnet_lite import NAME

    return "demo" if name.startswith("demo-") else NAME


def _page(watermark: bool) -> np.ndarray:
    from PIL import Image
    from skimage import color, data

    from limecraft_core import add_watermark

    crop = color.gray2rgb(data.page()[0:177, 10:187])
    img = np.asarray(Image.fromarray(crop).resize((224, 224), Image.Resampling.BILINEAR))
    return add_watermark(img).image if watermark else img


SAMPLES = tuple(sample_names())


def load_sample(name: str) -> Sample:
    """Load a sample by name; see :func:`sample_names`."""
    if name.startswith("demo-"):
        _, mode, idx = name.split("-")
        if mode in ("conflict", "aligned") and idx.isdigit() and int(idx) >= 1:
            return _demo(int(idx) - 1, mode)
    if name in _PAGE_NOTES:
        return Sample(name, _page(name == PAGE_WATERMARK), None, _PAGE_NOTES[name])
    if name in _PHOTOS:
        from skimage import color, data

        img = getattr(data, name)()
        if img.ndim == 2:
            img = color.gray2rgb(img)
        return Sample(
            name,
            np.ascontiguousarray(img[..., :3]).astype(np.uint8),
            None,
            f"scikit-image's '{name}' photo",
        )
    raise LimecraftError(f"unknown sample {name!r}; choose one of {', '.join(SAMPLES)}")
