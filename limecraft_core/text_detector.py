"""The text detector behind the ``text`` and ``text-lines`` proposers (:mod:`.proposers`).

PP-OCRv4's detector and recogniser, from the PyPI package ``rapidocr-onnxruntime`` on
onnxruntime, imported when it first runs. :func:`find_text` gives the text lines of an image:
each detected box grown by :data:`TEXT_GROW` px, the boxes joined where they then overlap, and
what the recogniser reads in each. Detection runs at a working size (:func:`working_size`) and
once per image: results are cached by a digest of the image's pixels.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validate import LimecraftError

__all__ = ["MAX_READ", "TEXT_GROW", "TEXT_PIP", "TextLine", "find_text", "working_size"]

#: Pixels each detected text box is grown by on every side before boxes are joined.
TEXT_GROW = 2
#: The detector's working size: the shorter side is brought up to this (small images) ...
WORK_MIN_SIDE = 576
#: ... and the longer side down to at most this (huge images), keeping the aspect ratio.
WORK_MAX_SIDE = 1024
#: The pip command that installs the detector (its wheel needs Python < 3.13).
TEXT_PIP = "pip install rapidocr-onnxruntime==1.4.4"
#: Text regions whose boxes the recogniser reads, at most, per image (the rest are not read).
MAX_READ = 8


@dataclass(frozen=True, eq=False)
class TextLine:
    """One region of text: the detected boxes that overlap, joined.

    Attributes
    ----------
    mask : (H, W) bool ndarray, the union of its grown boxes
    reads : tuple of str, what the recogniser read in each box, in order ('' left out; empty
        where it read nothing, or where it did not run)
    scores : tuple of float, the recogniser's confidence for each read
    boxes : int, how many detected boxes it joins
    read : bool, whether the recogniser ran on it (on the first :data:`MAX_READ` regions)
    """

    mask: np.ndarray
    reads: tuple[str, ...]
    scores: tuple[float, ...]
    boxes: int
    read: bool = True

    @property
    def longest_read(self) -> int:
        """The most characters, spaces left out, that the recogniser read in one box."""
        return max((len("".join(r.split())) for r in self.reads), default=0)


_engine: Any = None
_make_lock = threading.Lock()  # the engine is made once
_run_lock = threading.Lock()  # RapidOCR keeps per-call state on itself: one call at a time
_cache_lock = threading.Lock()
_cache: OrderedDict[str, tuple[TextLine, ...]] = OrderedDict()
_CACHE_SIZE = 64


def _text_engine() -> Any:
    """The one detector of this process (made on first use; its models load in about 1 s)."""
    global _engine
    with _make_lock:
        if _engine is None:
            try:
                from rapidocr_onnxruntime import RapidOCR
            except ImportError:
                raise LimecraftError(
                    "the text proposer needs the detector package: run "
                    f"`{TEXT_PIP}` (it needs Python < 3.13)"
                ) from None
            # "max": the engine keeps the working size we give it (see working_size)
            _engine = RapidOCR(det_limit_side_len=2000, det_limit_type="max")
        return _engine


def working_size(height: int, width: int) -> tuple[int, int]:
    """(height, width) at which text is detected: the shorter side brought up to
    :data:`WORK_MIN_SIDE` px (the detector misses the text of a 224 px photo at its own size),
    then the longer side brought down to :data:`WORK_MAX_SIDE` px (a 4000×3000 photo is
    searched at 1024×768, so its smallest text may be missed, but it takes about a second)."""
    scale = max(1.0, WORK_MIN_SIDE / max(1, min(height, width)))
    scale = min(scale, WORK_MAX_SIDE / max(height, width))
    return max(1, round(height * scale)), max(1, round(width * scale))


def _digest(image: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(repr(image.shape).encode())
    h.update(np.ascontiguousarray(image).tobytes())
    return h.hexdigest()


def _detect(image: np.ndarray) -> list[tuple[int, int, int, int]]:
    """The detected text boxes as (top, left, bottom, right) in the image's pixels."""
    from PIL import Image

    h, w = image.shape[:2]
    wh, ww = working_size(h, w)
    work = image if (wh, ww) == (h, w) else np.asarray(Image.fromarray(image).resize((ww, wh)))
    bgr = np.ascontiguousarray(work[..., ::-1])
    engine = _text_engine()
    with _run_lock:
        quads, _ = engine(bgr, use_cls=False, use_rec=False)
    boxes = []
    for quad in quads or ():
        q = np.asarray(quad, dtype=np.float64)
        top, bottom = q[:, 1].min() * h / wh, q[:, 1].max() * h / wh
        left, right = q[:, 0].min() * w / ww, q[:, 0].max() * w / ww
        boxes.append((int(np.floor(top)), int(np.floor(left)), int(np.ceil(bottom)),
                      int(np.ceil(right))))  # fmt: skip
    return boxes


def _grow(box: tuple[int, int, int, int], px: int, h: int, w: int) -> tuple[int, int, int, int]:
    top, left, bottom, right = box
    return max(0, top - px), max(0, left - px), min(h, bottom + px), min(w, right + px)


def _join(boxes: list[tuple[int, int, int, int]]) -> list[list[int]]:
    """Groups of box indices, each group the boxes that overlap (transitively)."""
    parent = list(range(len(boxes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, (t1, l1, b1, r1) in enumerate(boxes):
        for j in range(i):
            t2, l2, b2, r2 = boxes[j]
            if t1 < b2 and t2 < b1 and l1 < r2 and l2 < r1:
                parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(boxes)):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values(), key=lambda g: (min(boxes[i][0] for i in g), g[0]))


def _read(image: np.ndarray, box: tuple[int, int, int, int]) -> tuple[str, float]:
    """What the recogniser reads inside ``box`` ('' where nothing), with its confidence."""
    top, left, bottom, right = box
    crop = np.ascontiguousarray(image[top:bottom, left:right][..., ::-1])
    if crop.shape[0] < 4 or crop.shape[1] < 4:
        return "", 0.0
    engine = _text_engine()
    with _run_lock:
        found, _ = engine(crop, use_det=False, use_cls=False, use_rec=True)
    if not found:
        return "", 0.0
    text, score = found[0][0], found[0][1]
    return str(text).strip(), float(score)


def find_text(image: np.ndarray) -> tuple[TextLine, ...]:
    """The text lines of ``image`` ((H, W, 3) uint8 RGB), top to bottom. Cached by a digest of
    the image's pixels, so the detector runs once per image."""
    key = _digest(image)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    found = _find_uncached(image)
    with _cache_lock:
        _cache[key] = found
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return found


def _find_uncached(image: np.ndarray) -> tuple[TextLine, ...]:
    h, w = image.shape[:2]
    boxes = [_grow(b, TEXT_GROW, h, w) for b in _detect(image)]
    boxes = [b for b in boxes if b[2] > b[0] and b[3] > b[1]]
    lines = []
    for i, group in enumerate(_join(boxes), 1):
        mask = np.zeros((h, w), bool)
        reads, scores = [], []
        for j in group:
            top, left, bottom, right = boxes[j]
            mask[top:bottom, left:right] = True
            if i <= MAX_READ:
                text, score = _read(image, boxes[j])
                if text:
                    reads.append(text)
                    scores.append(score)
        lines.append(TextLine(mask, tuple(reads), tuple(scores), len(group), i <= MAX_READ))
    return tuple(lines)
