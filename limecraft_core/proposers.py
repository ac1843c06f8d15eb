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

- ``text``: the detector's text lines (:mod:`.text_detector`), each box grown by
  :data:`TEXT_GROW` px and joined with those it then overlaps; named by what the recogniser
  reads inside (``text: 捷径捷径``), else ``text 1``, ``text 2``. Detection runs at a working
  size (:func:`working_size`) and once per image.
- ``text-lines``: the same, only where the recogniser read at least :data:`LINE_CHARS`
  characters in one box: a word. A lone glyph is left out (with a note): on drawn shapes, tags
  and logos the detector finds "text" (a star read as ``★``, a square tag as ``口``). The
  audit's default (:data:`AUDIT_PROPOSERS`).
- ``watermark`` / ``watermark-box``: where LIMEcraft's own watermark edit puts the ImageNet-W
  text on an image of this size (its pixels grown by 2 px, or its bounding box); no detection.
- ``masks``: the analyst's own regions, one per non-zero value of a mask given as ``given=``
  (read at the edge: :func:`limecraft_core.io.masks_folder.read_regions_mask`; no file here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ._validate import LimecraftError
from .text_detector import MAX_READ, TEXT_GROW, TEXT_PIP, TextLine, find_text, working_size

__all__ = [
    "AUDIT_PROPOSERS",
    "LINE_CHARS",
    "MAX_COVER",
    "MIN_PIXELS",
    "PROPOSERS",
    "ROUTINE_NOTES",
    "TEXT_GROW",
    "Proposal",
    "Proposed",
    "Proposer",
    "ProposerFn",
    "audit_proposers",
    "check_proposer_names",
    "propose",
    "watermark_proposer",
    "working_size",
]

#: A proposal covering more than this share of the image is dropped: it explains nothing apart.
MAX_COVER = 0.9
#: A proposal of fewer pixels than this is dropped: too small to judge.
MIN_PIXELS = 16
#: The characters, at least, that ``text-lines`` needs read in one box: a word, not a glyph.
LINE_CHARS = 2
#: The proposers an audit uses unless told otherwise (``--propose``; the Audit page): a
#: thin artifact such as a watermark's text is then one region, not split by the superpixels.
AUDIT_PROPOSERS: tuple[str, ...] = ("text-lines",)
#: How the notes begin that a text proposer gives on almost every image (nothing found, a line
#: left out): routine, so the audit's progress counts them rather than printing each.
NO_TEXT = "No text found."
LEFT_OUT = "Left out "
ROUTINE_NOTES: tuple[str, ...] = (NO_TEXT, LEFT_OUT)


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


def _text(image: np.ndarray, given: np.ndarray | None = None) -> Proposed:
    """The detector's text lines, grown, joined where they overlap and named by what the
    recogniser reads (:func:`.text_detector.find_text`, once per image)."""
    return _text_proposed(find_text(image), "text", min_read=0)


def _text_lines(image: np.ndarray, given: np.ndarray | None = None) -> Proposed:
    """The ``text`` proposer's regions where the recogniser read :data:`LINE_CHARS` or more
    characters in one box: a word, not a lone glyph (a drawn star, a tag, a logo) or nothing."""
    return _text_proposed(find_text(image), "text-lines", min_read=LINE_CHARS)


def _text_proposed(lines: tuple[TextLine, ...], proposer: str, min_read: int) -> Proposed:
    """Proposals of ``proposer`` from the text lines, leaving out (with a note) each line whose
    longest read is under ``min_read`` characters."""
    if not lines:
        return Proposed((), (NO_TEXT,))
    notes = []
    boxes = sum(t.boxes for t in lines)
    if len(lines) == 1 and boxes > 1:
        notes.append(f"text: found {boxes} text lines, none of them apart: they make one region.")
    proposals = []
    for i, t in enumerate(lines, 1):
        name = f"text: {' '.join(t.reads)}" if t.reads else f"text {i}"
        if t.longest_read < min_read:
            why = (f"it reads as fewer than {min_read} characters" if t.read else
                   f"not read (the recogniser reads the first {MAX_READ} text regions of an image)")  # fmt: skip
            notes.append(f"{LEFT_OUT}{name}: {why}.")
            continue
        score = float(np.mean(t.scores)) if t.scores else 0.0
        proposals.append(Proposal(name, t.mask, score, proposer))
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
            "text-lines",
            f"the text proposer's regions that read as a word ({LINE_CHARS} characters or more)",
            _text_lines,
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


def _ready(p: Proposer) -> bool:
    """Whether ``p``'s package, if it needs one, is installed here."""
    return not p.requires or _installed(p.requires)


def audit_proposers() -> list[str]:
    """:data:`AUDIT_PROPOSERS` whose packages are installed here (the audit's default)."""
    return [n for n in AUDIT_PROPOSERS if _ready(PROPOSERS[n])]


def check_proposer_names(names: Sequence[str], what: str = "proposer") -> list[str]:
    """``names`` if each is in :data:`PROPOSERS` and its package is installed, else a
    LimecraftError listing the proposers, or naming the pip command that installs the package
    (so a command line refuses before it loads a model)."""
    for n in names:
        if n not in PROPOSERS:
            raise LimecraftError(f"{what} must be one of {', '.join(PROPOSERS)}; got {n!r}")
        p = PROPOSERS[n]
        if not _ready(p):
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
