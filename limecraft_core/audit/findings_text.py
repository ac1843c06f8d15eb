"""The findings' plain sentences: the headline with masks, the border, the location map.

Pure text from the rows and the location map; :mod:`.findings` puts them in order.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from .rows import DEPENDENCE, AuditRow

#: The border frame of the location map's summary: this share of each side.
FRAME = 0.1


_ZONES = (
    ("top-left corner", "top edge", "top-right corner"),
    ("left edge", "centre", "right edge"),
    ("bottom-left corner", "bottom edge", "bottom-right corner"),
)


def _peak(location: np.ndarray) -> str:
    g = location.shape[0]
    y, x = np.unravel_index(int(np.argmax(location)), location.shape)
    zone = lambda v: 0 if v < g / 4 else (2 if v >= g - g / 4 else 1)  # noqa: E731
    return _ZONES[zone(y)][zone(x)]


def _frame(location: np.ndarray) -> tuple[float, float]:
    g = location.shape[0]
    m = max(1, round(FRAME * g))
    inner = np.zeros_like(location, bool)
    inner[m : g - m, m : g - m] = True
    total = float(location.sum())
    share = float(location[~inner].sum() / total) if total > 0 else math.nan
    return share, float((~inner).mean())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _by_label(rows: Sequence[AuditRow]) -> str:
    """ "19 are predicted 'star', 8 'circle' and 3 'square'"."""
    counts = Counter(r.label for r in rows).most_common()
    if not counts:
        return ""
    (first, n0), rest = counts[0], counts[1:]
    parts = [f"{n0} {'is' if n0 == 1 else 'are'} predicted '{first}'"]
    parts += [f"{n} '{label}'" for label, n in rest]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _median(values: Sequence[float]) -> float:
    return float(np.median(values)) if len(values) else math.nan


def _mask_sentences(masked: list[AuditRow], n: int) -> list[str]:
    """The headline with expected masks, the pointing game, the relevance mass, the unjudged."""
    out = [r for r in masked if r.flagged]
    miss = [r for r in masked if not r.pointing_game]
    s = [
        f"In {len(out)} of {len(masked)} images the prediction rests outside the expected "
        f"region: the top region lies outside it and hiding that region alone removes at least "
        f"{DEPENDENCE:.0%} of the score" + (f"; {_by_label(out)}." if out else "."),
        f"The top region lies outside the expected region in {len(miss)} of {len(masked)} "
        f"images (pointing game: {_plural(len(masked) - len(miss), 'hit')})"
        + (
            f"; in {len(miss) - len(out)} of them the prediction survives hiding it, so the "
            "object holds it up as well."
            if len(miss) > len(out)
            else "."
        ),
    ]
    parts = [
        f"median {_median(ms):.2f} in {who}"
        for ms, who in (
            ([r.relevance_mass for r in out], "the flagged images"),
            ([r.relevance_mass for r in masked if not r.flagged], "the others"),
        )
        if ms
    ]
    s.append("Relevance mass inside the expected region: " + " and ".join(parts) + ".")
    if len(masked) < n:
        k = n - len(masked)
        s.append(
            f"{_plural(k, 'image')} had no expected mask and "
            f"{'was' if k == 1 else 'were'} not judged against one."
        )
    return s


def _border_sentences(ok: list[AuditRow], headline: bool) -> list[str]:
    """Without masks the headline (the border flag), with them one line."""
    border = [r for r in ok if r.top_touches_border]
    if not headline:
        return [f"The top region touches the image border in {len(border)} of {len(ok)} images."]
    s = [
        f"In {len(border)} of {len(ok)} images the top region touches the image border (flagged)"
        + (f"; {_by_label(border)}." if border else ".")
    ]
    if border:
        dep = sum(r.dependence >= DEPENDENCE for r in border)
        s.append(
            f"In {dep} of them hiding that region alone removes at least {DEPENDENCE:.0%} of the "
            "score."
        )
    return s


def _map_sentence(frame_share: float, frame_area: float, peak: str) -> str:
    ratio = frame_share / frame_area if frame_area else math.nan
    lean = (
        "the explanations lean on the border"
        if ratio >= 1.5
        else "the explanations lean on the centre"
        if ratio <= 0.67
        else "about as much as its area"
    )
    return (
        f"Location map: the outer {FRAME:.0%} of each side ({frame_area:.0%} of the area) holds "
        f"{frame_share:.0%} of the mean |weight| ({lean}); it is strongest at the {peak}."
    )
