"""The table of proposers: regions that a detector proposes from an image (:data:`PROPOSERS`).

A proposer looks at an image and proposes named masks, each a candidate that LIME then judges:
a proposal is never a finding. Automatic superpixels split thin text (the ImageNet-W watermark)
across regions that mix it with the scene, so a shortcut on text is missed; a text detector
proposes the text as one region instead.

Torch-free, like :mod:`limecraft_core.fill_table`: the command line's ``--help`` reads the
names without loading torch or scikit-image. The detector (the PyPI package
``rapidocr-onnxruntime``, PP-OCRv4 on onnxruntime) and the watermark edit are imported when a
proposer runs. Adding a proposer is one entry in :data:`PROPOSERS`; :func:`propose` runs any of
them by name, checks what they give and drops, with a sentence in ``notes``, a proposal that
covers almost the whole image (over :data:`MAX_COVER` of it) or only a few pixels (under
:data:`MIN_PIXELS`).

The proposers:

- ``text``: the detector's text lines, each box grown by :data:`TEXT_GROW` px and joined with
  those it then overlaps; named by what the recogniser reads inside (``text: 捷径捷径``), else
  ``text 1``, ``text 2``. Detection runs at a working size (:func:`working_size`) and once per
  image: results are cached by a digest of the image's pixels.
- ``watermark`` / ``watermark-box``: where LIMEcraft's own watermark edit puts the ImageNet-W
  text on an image of this size (its pixels grown by 2 px, or its bounding box); no detection.
- ``masks``: the analyst's own regions, one per non-zero value of a mask given as ``given=``
  (read at the edge: :func:`limecraft_core.io.masks_folder.read_regions_mask`; no file here).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ._validate import LimecraftError

__all__ = [
    "MAX_COVER",
    "MIN_PIXELS",
    "PROPOSERS",
    "TEXT_GROW",
    "Proposal",
    "Proposed",
    "Proposer",
    "ProposerFn",
    "check_proposer_names",
    "propose",
    "watermark_proposer",
    "working_size",
]

#: A proposal covering more than this share of the image is dropped: it explains nothing apart.
MAX_COVER = 0.9
#: A proposal of fewer pixels than this is dropped: too small to judge.
MIN_PIXELS = 16
#: Pixels each detected text box is grown by on every side before boxes are joined.
TEXT_GROW = 2
#: The detector's working size: the shorter side is brought up to this (small images) ...
WORK_MIN_SIDE = 576
#: ... and the longer side down to at most this (huge images), keeping the aspect ratio.
WORK_MAX_SIDE = 1024
#: The pip command that installs the detector (its wheel needs Python < 3.13).
TEXT_PIP = "pip install rapidocr-onnxruntime==1.4.4"
#: Text boxes read by the recogniser, at most, per image (the rest keep ``text i`` names).
_MAX_READ = 8


@dataclass(frozen=True, eq=False)
class Proposal:
    """One proposed region.

    Attributes
    ----------
    name : str, its display name (``text: 捷径捷径``, ``text 2``, ``watermark``, ``hand 1``)
    mask : (H, W) bool ndarray, its pixels
    score : float in [0, 1], how sure the proposer is (the recogniser's confidence for
        ``text``, 0 where it read nothing; 1 for a known place or the analyst's own mask)
    proposer : str, the name of the proposer that made it
    """

    name: str
    mask: np.ndarray
    score: float
    proposer: str

    @property
    def origin(self) -> str:
        """Its origin as a region: ``uploaded`` (``masks``), else ``proposed:<proposer>``."""
        return "uploaded" if self.proposer == "masks" else f"proposed:{self.proposer}"


@dataclass(frozen=True, eq=False)
class Proposed:
    """What proposing gave: the proposals, in order, and plain sentences for the user.

    Attributes
    ----------
    proposals : tuple of Proposal
    notes : tuple of str, e.g. "No text found.", "Dropped text 3: it covers 97% of the image."
    """

    proposals: tuple[Proposal, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """The proposals' names, in order (``region_names`` for :func:`limecraft_core.explain`)."""
        return [p.name for p in self.proposals]

    @property
    def origins(self) -> list[str]:
        """The proposals' origins, in order (``region_origins`` for ``explain``)."""
        return [p.origin for p in self.proposals]

    @property
    def masks(self) -> list[np.ndarray]:
        """The proposals' (H, W) bool masks, in order (``regions_mask`` for ``explain``)."""
        return [p.mask for p in self.proposals]


class ProposerFn(Protocol):
    """A proposer's function: ``image`` (H, W, 3) uint8 RGB in, a :class:`Proposed` out.
    ``given`` is the analyst's own (H, W) int mask for this image, for a proposer that needs
    one (:attr:`Proposer.needs_given`), else None."""

    def __call__(self, image: np.ndarray, given: np.ndarray | None = None) -> Proposed: ...


@dataclass(frozen=True)
class Proposer:
    """One proposer: its name, a line of help, its function, whether it needs the analyst's
    own mask for the image (``given``; the ``masks`` proposer), and the module it imports when
    it runs with the pip command that installs it (``requires``, ``pip``; none by default)."""

    name: str
    help: str
    fn: ProposerFn
    needs_given: bool = False
    requires: str = ""
    pip: str = ""


# ------------------------------------------------------------------------------------- text


_engine: Any = None
_make_lock = threading.Lock()  # the engine is made once
_run_lock = threading.Lock()  # RapidOCR keeps per-call state on itself: one call at a time
_cache_lock = threading.Lock()
_cache: OrderedDict[str, Proposed] = OrderedDict()
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


def _text(image: np.ndarray, given: np.ndarray | None = None) -> Proposed:
    """The detector's text lines, grown, joined where they overlap and named by what the
    recogniser reads. Cached by a digest of the image's pixels, so it runs once per image."""
    key = _digest(image)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    found = _text_uncached(image)
    with _cache_lock:
        _cache[key] = found
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return found


def _text_uncached(image: np.ndarray) -> Proposed:
    h, w = image.shape[:2]
    boxes = [_grow(b, TEXT_GROW, h, w) for b in _detect(image)]
    boxes = [b for b in boxes if b[2] > b[0] and b[3] > b[1]]
    if not boxes:
        return Proposed((), ("No text found.",))
    groups = _join(boxes)
    notes = []
    if len(groups) == 1 and len(boxes) > 1:
        notes.append(
            f"text: found {len(boxes)} text lines, none of them apart: they make one region."
        )
    proposals = []
    for i, group in enumerate(groups, 1):
        mask = np.zeros((h, w), bool)
        reads, scores = [], []
        for j in group:
            top, left, bottom, right = boxes[j]
            mask[top:bottom, left:right] = True
            if i <= _MAX_READ:
                text, score = _read(image, boxes[j])
                if text:
                    reads.append(text)
                    scores.append(score)
        name = f"text: {' '.join(reads)}" if reads else f"text {i}"
        proposals.append(Proposal(name, mask, float(np.mean(scores)) if scores else 0.0, "text"))
    return Proposed(tuple(_unique_names(proposals)), tuple(notes))


def _unique_names(proposals: list[Proposal]) -> list[Proposal]:
    """The same text read twice gets ``(2)``, ``(3)``: a region's name is its one name."""
    seen: dict[str, int] = {}
    out = []
    for p in proposals:
        seen[p.name] = seen.get(p.name, 0) + 1
        n = seen[p.name]
        out.append(p if n == 1 else Proposal(f"{p.name} ({n})", p.mask, p.score, p.proposer))
    return out


# ------------------------------------------------------------------------ watermark, masks


def watermark_proposer(
    *, text_size: int | None = None, grow: int = 2, box: bool = False
) -> ProposerFn:
    """The ``watermark`` proposer for a text size (None: the watermark edit's size for the
    image): where LIMEcraft's watermark edit puts the ImageNet-W text on an image of this size,
    its pixels grown by ``grow`` px, or its bounding box (``box=True``). Named ``watermark``."""

    def fn(image: np.ndarray, given: np.ndarray | None = None) -> Proposed:
        from .edits.watermark import watermark_mask

        h, w = image.shape[:2]
        try:
            mask = watermark_mask(h, w, text_size=text_size, grow=grow, box=box)
        except LimecraftError as e:
            return Proposed((), (f"No watermark region: {e}.",))
        return Proposed((Proposal("watermark", mask, 1.0, "watermark"),))

    return fn


def _masks(image: np.ndarray, given: np.ndarray | None = None) -> Proposed:
    """The analyst's own mask for this image: each distinct non-zero value one region, named
    ``hand 1``, ``hand 2``, ... in increasing order of value."""
    if given is None:
        return Proposed((), ("No mask of your own for this image.",))
    given = np.asarray(given)
    if given.shape != image.shape[:2]:
        raise LimecraftError(
            f"the regions mask is {given.shape[1]}×{given.shape[0]} px but the image is "
            f"{image.shape[1]}×{image.shape[0]}: give a mask of the image's size"
        )
    values = [v for v in np.unique(given) if v != 0]
    if not values:
        return Proposed((), ("Your mask for this image marks no region.",))
    return Proposed(
        tuple(Proposal(f"hand {i}", given == v, 1.0, "masks") for i, v in enumerate(values, 1))
    )


#: Every proposer, in the order the CLI, the app and the docs list them.
PROPOSERS: dict[str, Proposer] = {
    p.name: p
    for p in (
        Proposer(
            "text",
            "text found by a detector (PP-OCRv4), named by what it reads",
            _text,
            requires="rapidocr_onnxruntime",
            pip=TEXT_PIP,
        ),
        Proposer(
            "watermark",
            "where LIMEcraft's watermark edit puts the ImageNet-W text (its pixels, grown 2 px)",
            watermark_proposer(),
        ),
        Proposer(
            "watermark-box",
            "where LIMEcraft's watermark edit puts the ImageNet-W text (its bounding box)",
            watermark_proposer(box=True),
        ),
        Proposer("masks", "your own regions: one mask per image from a folder", _masks, True),
    )
}


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: blocked in sys.modules (None)
        return False


def check_proposer_names(names: Sequence[str], what: str = "proposer") -> list[str]:
    """``names`` if each is in :data:`PROPOSERS` and its package is installed, else a
    LimecraftError listing the proposers, or naming the pip command that installs the package
    (so a command line refuses before it loads a model)."""
    for n in names:
        if n not in PROPOSERS:
            raise LimecraftError(f"{what} must be one of {', '.join(PROPOSERS)}; got {n!r}")
        p = PROPOSERS[n]
        if p.requires and not _installed(p.requires):
            raise LimecraftError(
                f"the {n} proposer needs the package {p.requires}: run `{p.pip}`"
                " (it needs Python < 3.13)"
            )
    return list(names)


# --------------------------------------------------------------------------------- propose


def _as_rgb(image: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 RGB from a greyscale, RGB or RGBA image (uint8, or float in [0, 1])."""
    a = np.asarray(image)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[..., 0]
    if a.ndim == 2:
        a = np.stack([a] * 3, axis=-1)
    if a.ndim != 3 or a.shape[2] not in (3, 4):
        raise LimecraftError(
            f"propose needs an (H, W), (H, W, 3) or (H, W, 4) image; got shape {a.shape}"
        )
    a = a[..., :3]  # alpha: the colours as they are, as the engine reads an RGBA image
    if a.dtype == np.uint8:
        return np.ascontiguousarray(a)
    if np.issubdtype(a.dtype, np.floating):
        if not np.isfinite(a).all():
            raise LimecraftError("the image has NaN or infinite values")
        return np.round(np.clip(a, 0.0, 1.0) * 255).astype(np.uint8)
    raise LimecraftError(f"the image must be uint8, or float in [0, 1]; got {a.dtype}")


def _proposer(spec: str | Proposer) -> Proposer:
    if isinstance(spec, Proposer):
        return spec
    return PROPOSERS[check_proposer_names([spec])[0]]


def _kept(proposal: Proposal, pixels: int) -> str | None:
    """Why ``proposal`` is dropped, as a sentence, or None to keep it."""
    n = int(proposal.mask.sum())
    if n < MIN_PIXELS:
        return (
            f"Dropped {proposal.name}: it covers only {n} pixel{'s' * (n != 1)} "
            f"(fewer than {MIN_PIXELS})."
        )
    if n > MAX_COVER * pixels:
        return (
            f"Dropped {proposal.name}: it covers {100 * n / pixels:.0f}% of the image "
            f"(more than {100 * MAX_COVER:.0f}%)."
        )
    return None


def _checked(proposal: Proposal, shape: tuple[int, int], who: str) -> Proposal:
    mask = np.asarray(proposal.mask)
    if mask.shape != shape:
        raise LimecraftError(f"proposer {who!r} gave a mask of shape {mask.shape}, not {shape}")
    return Proposal(str(proposal.name), mask.astype(bool), float(proposal.score), proposal.proposer)


def propose(
    image: np.ndarray,
    names: Sequence[str | Proposer],
    *,
    given: np.ndarray | None = None,
) -> Proposed:
    """Regions proposed for ``image`` by the proposers ``names``, in that order.

    Parameters
    ----------
    image : (H, W) greyscale, (H, W, 3) RGB or (H, W, 4) RGBA ndarray, uint8 or float in
        [0, 1] (not modified)
    names : names of :data:`PROPOSERS` (``text``, ``watermark``, ``watermark-box``, ``masks``),
        or :class:`Proposer` objects of your own
    given : (H, W) int ndarray, optional; the analyst's own mask for this image (``masks``),
        read at the edge: :func:`limecraft_core.io.masks_folder.read_regions_mask` finds it in
        a folder by the image's name

    Returns
    -------
    Proposed: the proposals kept, and every note (nothing found, a proposal dropped for
    covering almost all of the image or only a few pixels, with the numbers).

    Raises
    ------
    LimecraftError
        For an unknown proposer name, an image that is no image, a mask of another size, or
        the ``text`` proposer without its package (the message names the pip command).
    """
    rgb = _as_rgb(image)
    proposers = [_proposer(n) for n in names]
    shape, pixels = rgb.shape[:2], rgb.shape[0] * rgb.shape[1]
    kept: list[Proposal] = []
    notes: list[str] = []
    for p in proposers:
        found = p.fn(rgb, given if p.needs_given else None)
        notes += list(found.notes)
        for proposal in found.proposals:
            proposal = _checked(proposal, shape, p.name)
            why = _kept(proposal, pixels)
            if why is None:
                kept.append(proposal)
            else:
                notes.append(why)
    return Proposed(tuple(_unique_names(kept)), tuple(notes))
