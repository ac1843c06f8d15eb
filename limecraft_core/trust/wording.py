"""The stability verdict in one sentence that names both its parts.

The conclusion, then the detail (the order of the other regions that matter);
:func:`split_verdict` parts them for showing on two lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from ..limits import THRESHOLDS
from .conclusion import CONCLUSION_LEAD

STABLE_W = THRESHOLDS["stable_kendall_w"]
STABLE_JACCARD = THRESHOLDS["stable_jaccard_top5"]
MIN_SHARE = THRESHOLDS["matter_min_share"]
LEAD = CONCLUSION_LEAD
TOP_K = 5  # the verdict's top-k overlap: k = min(5, regions that matter)


def _say_regions(n: int) -> str:
    return f"the {n} region{'s' if n != 1 else ''} that matter{'s' if n == 1 else ''}"


def _say_list(ids: Sequence[int]) -> str:
    """ "region 3", "regions 3 and 5", "regions 3, 5 and 7"."""
    ids = [int(i) for i in ids]
    if len(ids) == 1:
        return f"region {ids[0]}"
    return "regions " + ", ".join(map(str, ids[:-1])) + f" and {ids[-1]}"


_IDS = re.compile(r"\bregions? (\d+(?:, \d+)*(?: and \d+)?)\b")


def name_regions(sentence: str, label: Callable[[int], str]) -> str:
    """``sentence`` (a verdict's reason) with each region it names by id ("region 3", "regions
    3, 5 and 7") called ``label(id)`` instead, e.g. ``label = lambda i: f"region {i} ({name})"``
    gives "region 0 (watermark) is first"; counts ("the 9 other regions") are left alone."""

    def one(m: re.Match[str]) -> str:
        ids = [int(i) for i in re.findall(r"\d+", m[1])]
        said = [label(i) for i in ids]
        return said[0] if len(said) == 1 else ", ".join(said[:-1]) + f" and {said[-1]}"

    return _IDS.sub(one, sentence)


# Where the detail starts: the order of the other regions that matter, then the regions that do
# not (the phrases explain_verdict writes after "; ").
_DETAIL = re.compile(
    r"; (?=the order of the |their order is |\d+ others? (?:is|are) indistinguishable from zero)"
)


def split_verdict(reason: str) -> tuple[str, str]:
    """A verdict's sentence (:func:`explain_verdict`) parted into its conclusion and its detail,
    e.g. ("stable: the conclusion holds: region 0 is first in all 40 resamples", "the order of
    the 9 other regions that matter is not settled (...); 13 others are indistinguishable from
    zero"); the detail is "" when the sentence has none.

    Parameters
    ----------
    reason : str, a verdict's sentence (also one saved by an earlier version)

    Returns
    -------
    conclusion, detail : str, str
    """
    parts = _DETAIL.split(reason, maxsplit=1)
    return (parts[0], parts[1]) if len(parts) == 2 else (reason, "")


def _why_detail(m: int, w: float, jaccard: float, flipped: Sequence[int]) -> list[str]:
    """Why the regions that matter do not keep their order, top set or signs."""
    why = []
    if flipped:
        more = len(flipped) - 1
        others_ = f" and {more} other{'s' if more > 1 else ''}" if more else ""
        why.append(f"region {flipped[0]}{others_} change{'s' if not more else ''} sign")
    if m > 1 and w < STABLE_W:
        why.append(f"{_say_regions(m)} change order (W {w:.2f})")
    if jaccard < STABLE_JACCARD:
        t = min(TOP_K, m)
        why.append(
            "the first region changes" if t == 1 else f"the top {t} changes (overlap {jaccard:.2f})"
        )
    return why


def explain_verdict(
    verdict_: str,
    repeats: int,
    matter: Sequence[int],
    distinguishable: np.ndarray,
    w: float,
    jaccard: float,
    flipped: Sequence[int],
    source: str = "repeats",
    *,
    conclusion: Sequence[int] | None = None,
    agreement: float = 1.0,
    detail: str | None = None,
    signs: Sequence[int] | None = None,
    lead: float | None = None,
) -> str:
    """The verdict in one sentence that names both parts, e.g. "stable: the conclusion holds:
    region 0 is first in all 40 resamples; the order of the 9 other regions that matter is not
    settled (the top 5 changes, overlap 0.38); 13 others are indistinguishable from zero".

    Parameters
    ----------
    verdict_ : the verdict (the conclusion's, when ``conclusion`` is given)
    repeats : R, the runs the conclusion is judged over (2 reads "both halves")
    matter : the regions that matter
    distinguishable : (K,) bool, the regions whose interval excludes zero
    w, jaccard : Kendall's W and the top-k overlap over the regions that matter (the detail)
    flipped : the regions that matter whose sign changes
    source : "repeats" (independent runs) or "stream" (resamples of one sample)
    conclusion : the conclusion's regions (:func:`conclusion_regions`); None: the sentence of
        the rule over the regions that matter alone
    agreement : the share of the runs in which the conclusion holds
    detail : the detail's verdict (the rule over the regions that matter)
    signs : the conclusion's signs (+1 for the class, -1 against it)
    lead : the conclusion's lead over the next region, in sd over the resamples (one sample's
        verdict; a firm lead is at least ``THRESHOLDS["conclusion_lead"]``), or None
    """
    m, k = len(matter), len(distinguishable)
    unit = "resamples" if source == "stream" else "repeats"
    runs = f"all {repeats} {unit}" if repeats > 2 else "both halves"
    others = k - m
    rest = ""
    if others:
        small = int(np.delete(distinguishable, np.asarray(matter, int)).sum())
        verb = "is" if others == 1 else "are"
        rest = f"; {others} other{'s' if others != 1 else ''} {verb} indistinguishable from zero"
        if small:
            rest += f" or under {MIN_SHARE:.0%} of the largest weight"
    if m == 0:
        return f"{verdict_}: no region carries any weight"
    if not distinguishable.any():
        over = f"{repeats} {unit}" if repeats > 2 else "two halves of the sample"
        return (
            f"{verdict_}: no region is distinguishable from zero over {over}: "
            "at this sample size the weights are mostly noise"
        )
    if conclusion is None:
        return _rule_sentence(verdict_, m, w, jaccard, flipped, runs, rest)
    return _conclusion_sentence(
        verdict_, repeats, unit, runs, rest, (m, w, jaccard, flipped),
        [int(i) for i in conclusion], agreement, detail, signs,
        None if lead is None or not distinguishable[np.asarray(conclusion, int)].all() else lead,
    )  # fmt: skip


def _rule_sentence(
    verdict_: str, m: int, w: float, jaccard: float, flipped: Sequence[int], runs: str, rest: str
) -> str:
    """The sentence of the rule over the regions that matter alone (no conclusion given)."""
    if verdict_ == "stable":
        if m == 1:
            return f"stable: {_say_regions(1)} is first in {runs}{rest}"
        return (
            f"stable: {_say_regions(m)} keep their order (W {w:.2f}) and their top set and "
            f"sign in {runs}{rest}"
        )
    why = _why_detail(m, w, jaccard, flipped)
    where = f" across {runs.replace('all ', '')}"
    return (
        f"{verdict_}: " + "; ".join(why or [f"{_say_regions(m)} agree only partly"]) + where + rest
    )


def _conclusion_sentence(
    verdict_: str,
    repeats: int,
    unit: str,
    runs: str,
    rest: str,
    figures: tuple[int, float, float, Sequence[int]],
    c: list[int],
    agreement: float,
    detail: str | None,
    signs: Sequence[int] | None,
    lead: float | None = None,
) -> str:
    """The two-part sentence: the conclusion, then the detail (``figures``: the number of
    regions that matter, their W and top-k overlap, and those whose sign changes; ``lead``:
    the conclusion's lead, given when its regions are distinguishable from zero)."""
    m, w, jaccard, flipped = figures
    n = len(c)
    held = round(agreement * repeats)
    where = runs if held >= repeats else f"{held} of {repeats} {unit}"
    if verdict_ == "stable" and m == 1:
        return f"stable: {_say_regions(1)} is first in {where}{rest}"
    who, claim = _say_list(c), ("is first" if n == 1 else f"are the first {n}")
    if signs is not None and len(signs) and all(x < 0 for x in signs):
        claim += " (against the class)"
    elif signs is not None and any(x < 0 for x in signs):
        against = [i for i, x in zip(c, signs, strict=True) if x < 0]
        claim += f" ({_say_list(against)} against the class)"
    # the detail: the order of the regions that matter beyond the conclusion
    why = _why_detail(m, w, jaccard, [i for i in flipped if i not in c])
    part = ""
    if m > n:
        rest_m = (
            f"the {m - n} other region{'s' if m - n != 1 else ''} "
            f"that matter{'' if m - n != 1 else 's'}"
        )
        settled = detail == "stable" or not why
        part = f"the order of {rest_m} is {'settled' if settled else 'not settled'}"
        if not settled:
            part += ": " + ", ".join(why)
    elif n > 1 and detail != "stable" and why:
        part = "their order is not settled: " + ", ".join(why)
    tail = (f"; {part}" if part else "") + rest
    if verdict_ == "stable":
        return f"stable: the conclusion holds: {who} {claim} in {where}{tail}"
    parts = []
    turned = [i for i in flipped if i in c]
    if turned:
        parts.append(f"{_say_list(turned)} change{'s' if len(turned) == 1 else ''} sign")
    if held < repeats:
        parts.append(f"{who} {claim} in {where}")
    elif lead is not None and lead < LEAD:
        they = "it leads" if n == 1 else "they lead"
        parts.append(
            f"{who} {claim} in {where}, but {they} the next region by only {max(lead, 0):.1f} sd "
            f"of the gap over the resamples (a firm lead: {LEAD:g} sd)"
        )
    else:
        parts.append(f"{who} {'is' if n == 1 else 'are'} not distinguishable from zero")
    return f"{verdict_}: the conclusion is not settled: " + "; ".join(parts) + tail
