"""The report's inspection beyond the edits: LIME versus LIMEcraft, and the insertion test.

LIME versus LIMEcraft uses the same settings over automatic superpixels only; the insertion test
pastes a region into other images.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .. import render
from .._validate import LimecraftError
from ..edits.transplant import Insertion, Transplant
from ..result import Explanation
from ..trust import fidelity
from ._report_checks import _num, _r2
from ._report_figures import _long_side, _Picture, _picture, _region_name

#: Regions tinted on each side in the comparison's two pictures, as in the report's evidence.
_TOP_K = 5


@dataclass(frozen=True)
class ReportPasted:
    """One image the region was pasted into.

    Attributes
    ----------
    name : str, the image's name
    image : (H, W, 3) uint8 ndarray, the image with the region pasted in
    before, after : float, the followed class's probability, clean and with the region
    top_before, top_after : str, the image's top class, clean and with the region
    flipped : bool, the top class became the followed class (:attr:`Insertion.flipped`)
    clipped : bool, part of the region fell outside the image
    null_after : float or None, the followed class's probability with a same-size patch of the
        source at the same place instead (None: no null was run)
    """

    name: str
    image: np.ndarray
    before: float
    after: float
    top_before: str
    top_after: str
    flipped: bool = False
    clipped: bool = False
    null_after: float | None = None


@dataclass(frozen=True)
class ReportTransplant:
    """Inspect's "paste this region into other images", for the report.

    Attributes
    ----------
    region : str, the region's name
    class_label : str, the class followed
    sentence : str, the one-line summary (:meth:`Insertion.sentence`)
    images : sequence of ReportPasted, in the order they were given
    conclusion : str, what the numbers show (:meth:`Insertion.conclusion`)
    """

    region: str
    class_label: str
    sentence: str
    images: Sequence[ReportPasted]
    conclusion: str = ""

    @classmethod
    def of(
        cls,
        result: Insertion,
        names: Sequence[str],
        pasted: Sequence[Transplant | np.ndarray],
        *,
        region: str,
        label: Callable[[int], str],
    ) -> ReportTransplant:
        """From :func:`limecraft_core.insertion_test`'s result, the images' names and the
        pasted images (Transplants, or the pictures of them); ``label`` names a class index."""
        if not len(names) == len(pasted) == len(result.before):
            raise LimecraftError("a transplant needs one name and one pasted image per image")
        followed = label(result.target_class)
        return cls(
            region=region,
            class_label=followed,
            sentence=result.sentence(followed),
            conclusion=result.conclusion(followed),
            images=tuple(
                ReportPasted(
                    name=n,
                    image=p.image if isinstance(p, Transplant) else np.asarray(p),
                    before=float(result.before[i]),
                    after=float(result.after[i]),
                    top_before=label(int(result.top_before[i])),
                    top_after=label(int(result.top_after[i])),
                    flipped=bool(result.flipped[i]),
                    clipped=bool(result.clipped[i]),
                    null_after=None if result.null_after is None else float(result.null_after[i]),
                )
                for i, (n, p) in enumerate(zip(names, pasted, strict=True))
            ),
        )


@dataclass(frozen=True)
class _Pasted:
    name: str
    picture: _Picture
    before: str
    after: str
    change: float
    top_before: str
    top_after: str
    flipped: bool
    clipped: bool
    null_change: float | None


@dataclass(frozen=True)
class _Transplant:
    region: str
    class_label: str
    sentence: str
    conclusion: str
    images: tuple[_Pasted, ...]
    has_null: bool


def _transplant(t: ReportTransplant | None) -> _Transplant | None:
    if t is None:
        return None
    if not isinstance(t, ReportTransplant):
        raise LimecraftError(
            f"transplant must be a ReportTransplant (ReportTransplant.of), got {type(t).__name__}"
        )
    return _Transplant(
        region=t.region,
        class_label=t.class_label,
        sentence=t.sentence,
        conclusion=t.conclusion,
        has_null=any(p.null_after is not None for p in t.images),
        images=tuple(
            _Pasted(
                name=p.name,
                picture=_picture(np.asarray(p.image, np.uint8), f"{p.name} with the region"),
                before=_num(p.before, 4),
                after=_num(p.after, 4),
                change=p.after - p.before,
                top_before=p.top_before,
                top_after=p.top_after,
                flipped=p.flipped,
                clipped=p.clipped,
                null_change=None if p.null_after is None else p.null_after - p.before,
            )
            for p in t.images
        ),
    )


@dataclass(frozen=True)
class _Side:
    title: str
    picture: _Picture
    regions: int
    top: str
    fit: str
    r2: str
    stability: str


@dataclass(frozen=True)
class _Comparison:
    sides: tuple[_Side, _Side]
    same_top: bool


def _side(image: np.ndarray, ex: Explanation, title: str) -> _Side:
    w = np.asarray(ex.weights, np.float64)
    top = int(np.argmax(w))
    overlay = render.weight_overlay(
        image, ex.segments, w, k=_TOP_K, long_side=_long_side(image.shape)
    )
    st = ex.trust.stability
    return _Side(
        title=title,
        picture=_picture(overlay, f"{title}: the regions for and against the class"),
        regions=ex.n_regions,
        top=(f"region {top}" + (f" ({ex.region_names[top]})" if ex.region_names[top] else ""))
        if np.any(w)
        else "none (every region 0)",
        fit=fidelity(ex.score, w),
        r2=_r2(ex.score, w),
        stability=st.verdict if st is not None else "not judged",
    )


def _comparison(image: np.ndarray, ex: Explanation, auto: Explanation | None) -> _Comparison | None:
    """LIMEcraft's explanation beside the same settings over automatic superpixels only (the
    lime package's regions), when that ran on this image for the same class."""
    if auto is None:
        return None
    if auto.segments.shape != ex.segments.shape:
        raise LimecraftError("the comparison was explained on another image size")
    if auto.classes[:1] != ex.classes[:1]:
        return None  # another class: the two pictures would not answer the same question
    crafted, plain = _side(image, ex, "LIMEcraft"), _side(image, auto, "automatic superpixels")
    return _Comparison(
        sides=(crafted, plain),
        same_top=_region_name(ex, int(np.argmax(ex.weights)))
        == _region_name(auto, int(np.argmax(auto.weights))),
    )
