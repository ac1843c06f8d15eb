"""Each trust check in words, once: the sentences the CLI, the report and the app all show.

A check's words (:class:`CheckWords`) are its name, a short verdict (the report's badge), a
tone, and the headline: a clause that reads the check, e.g. "the explanation's order beats
random orders both ways". A front end lays them out (a line of the terminal, a row of the
report, a line of markdown) and never words a check again; :func:`sentence` makes a clause a
sentence. Clauses have no comma, so that the CLI can print them as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .conclusion import CONCLUSION_LEAD
from .faithfulness import Faithfulness, FillComparison
from .metrics import Localisation
from .results import TrustResults
from .sampling import Convergence, KernelSweep
from .stability import Stability
from .wording import split_verdict

__all__ = [
    "LOW_COVERAGE",
    "WORDS",
    "CheckWords",
    "check_words",
    "conclusion_line",
    "convergence_words",
    "detail_line",
    "detail_state",
    "faithfulness_words",
    "fills_words",
    "kernel_words",
    "localisation_words",
    "sentence",
    "stability_words",
]


@dataclass(frozen=True)
class CheckWords:
    """One trust check in words.

    Attributes
    ----------
    name : str, the check's name, e.g. "Faithfulness"
    verdict : str, the short verdict, e.g. "beats random orders"
    tone : str, "good", "warn", "bad" or "info"
    headline : str, the clause that reads the check (no comma; "" when there is none)
    detail : str, a second clause (the stability verdict's detail), or ""
    """

    name: str
    verdict: str
    tone: str
    headline: str
    detail: str = ""


def sentence(clause: str) -> str:
    """``clause`` as a sentence: a capital first letter and a full stop ("" stays "")."""
    if not clause:
        return ""
    return clause[0].upper() + clause[1:] + ("" if clause.endswith(".") else ".")


def detail_line(detail: str) -> str:
    """The stability verdict's detail as a sentence of its own: "The detail: ...."."""
    return f"The detail: {detail}." if detail else ""


def stability_words(st: Stability) -> CheckWords:
    """The stability verdict: the conclusion is the headline, the order of the other regions
    that matter its detail (both from the verdict's sentence, ``st.reason``)."""
    conclusion, detail = split_verdict(st.reason) if st.reason else ("", "")
    return CheckWords(
        f"Stability over {st.runs}",
        st.verdict,
        {"stable": "good", "borderline": "warn"}.get(st.verdict, "bad"),
        conclusion,
        detail,
    )


def conclusion_line(st: Stability, label: Callable[[int], str] = lambda i: f"region {i}") -> str:
    """How often the conclusion held and by how much it leads, e.g. "the conclusion (region 0
    for the class) holds in 100% of the 40 resamples and leads the next region by 4.2 sd over
    them (firm: 3.5 sd or more)"; "" when the verdict has no conclusion. ``label(i)`` names
    region ``i``."""
    if not st.conclusion or st.conclusion_agreement is None:
        return ""
    signs = list(st.conclusion_signs or [])
    side = (
        "for"
        if all(x > 0 for x in signs)
        else "against"
        if all(x < 0 for x in signs)
        else "for and against"
    )
    who = " and ".join(label(int(i)) for i in st.conclusion)
    text = f"the conclusion ({who} {side} the class) holds in {st.conclusion_agreement:.0%} of the "
    text += st.runs
    if st.conclusion_lead is not None:
        firm = "firm" if st.conclusion_firm else "not firm"
        text += (
            f" and leads the next region by {st.conclusion_lead:.1f} sd over them "
            f"({firm}: {CONCLUSION_LEAD:g} sd or more)"
        )
    return text


def detail_state(st: Stability) -> str:
    """Whether the detail (the order of the other regions that matter) is settled, e.g. "the
    detail (the order of the other regions that matter) is settled"."""
    state = {True: "settled", False: "not settled", None: "not judged"}[st.detail_settled]
    return f"the detail (the order of the other regions that matter) is {state}"


def convergence_words(c: Convergence) -> CheckWords:
    """From how many samples on the verdict's rule holds, or that more are needed."""
    if c.needed:
        return CheckWords(
            "Convergence",
            f"stable from {c.needed} samples",
            "good",
            f"stable (the verdict's rule) from {c.needed} samples on",
        )
    last = c.sizes[-1]
    return CheckWords(
        "Convergence",
        f"not stable within {last} samples",
        "warn",
        f"not stable within {last} samples: use more",
    )


def kernel_words(k: KernelSweep) -> CheckWords:
    """Whether a region changes sign or rank much across the kernel widths."""
    n = len(k.sensitive)
    if not n:
        return CheckWords(
            "Kernel widths",
            "robust to the width",
            "good",
            "no region changes sign or rank much across these widths",
        )
    one = n == 1
    return CheckWords(
        "Kernel widths",
        "width-sensitive",
        "warn",
        f"{n} region{'' if one else 's'} change{'s' if one else ''} sign or move{'s' if one else ''}"
        " 3 or more places in rank across these widths",
    )


def faithfulness_words(f: Faithfulness) -> CheckWords:
    """Whether the explanation's order beats random orders, deleting and inserting."""
    if f.beats_random:
        return CheckWords(
            "Faithfulness",
            "beats random orders",
            "good",
            "the explanation's order beats random orders both ways",
        )
    return CheckWords(
        "Faithfulness",
        "does not beat random orders",
        "bad",
        "the explanation's order does not beat random orders both ways: treat it with care",
    )


def fills_words(fc: FillComparison) -> CheckWords:
    """Whether every fill puts the same region first."""
    if fc.agree:
        return CheckWords(
            "Fills", "the same top region", "good", "every fill puts the same region first"
        )
    return CheckWords(
        "Fills",
        "the top region depends on the fill",
        "warn",
        "the fills disagree on the top region: the conclusion depends on the fill",
    )


#: Under this share of the expected area inside the expected regions, the regions miss much of
#: the area, so every surface says so (a region counts when at least half of it is inside).
LOW_COVERAGE = 0.5


def _localisation_outcome(loc: Localisation) -> tuple[str, str, str]:
    """The verdict, tone and clause of one outcome: nothing measurable, no positive weight, the
    top region expected (with most or little of the weight) or not expected."""
    mass = f"relevance mass {loc.relevance_mass:.2f}"
    if loc.expected == 0:
        return (
            "nothing to measure",
            "warn",
            "no region lies at least half inside the expected area so nothing can be measured",
        )
    if loc.positive_mass <= 0:
        return (
            "no positive weight",
            "info",
            "no region has a positive weight so none of it falls inside the expected area",
        )
    if loc.pointing_game and loc.relevance_mass >= 0.5:
        return (
            "the top region is expected",
            "good",
            f"the top region is inside the expected area and carries most of the positive "
            f"weight: {mass}",
        )
    if loc.pointing_game:
        return (
            "the top region is expected but carries little weight",
            "warn",
            "the top region is inside the expected area and carries only a small part of the "
            f"positive weight: {mass}",
        )
    who = "" if loc.top is None else f" (region {loc.top})"
    part = f" ({loc.top_inside:.0%} of its pixels are inside)" if loc.top_inside else ""
    return (
        "the top region is not expected",
        "bad",
        f"the model's top region{who} is outside the area you expected{part}: {mass}",
    )


def localisation_words(loc: Localisation, advice: str = "") -> CheckWords:
    """Whether the model looks where the analyst looks: the outcome's clause, then how little of
    the expected area the expected regions cover when under :data:`LOW_COVERAGE`.

    Parameters
    ----------
    loc : Localisation
    advice : str, the surface's way to a closer measure (no comma), e.g. the CLI's "draw the
        area as a region with --regions-mask"; added last where the regions miss the area

    Returns
    -------
    CheckWords; its headline names the top region as "region k" (:func:`name_regions` renames).
    """
    verdict, tone, clause = _localisation_outcome(loc)
    low = loc.mask_coverage is not None and loc.mask_coverage < LOW_COVERAGE
    if low and loc.expected:
        clause += f"; the expected regions cover only {loc.mask_coverage:.0%} of the area"
    if advice and (low or not loc.expected):
        clause += f": {advice}"
    return CheckWords("Localisation", verdict, tone, clause)


#: The worded checks: a field of :class:`TrustResults` and the function that words it.
WORDS: dict[str, Callable[[Any], CheckWords]] = {
    "stability": stability_words,
    "convergence": convergence_words,
    "kernel_sweep": kernel_words,
    "faithfulness": faithfulness_words,
    "fills": fills_words,
    "localisation": localisation_words,
}


def check_words(trust: TrustResults) -> dict[str, CheckWords]:
    """The words of every check in ``trust`` that ran, by its field name (in :data:`WORDS`'
    order)."""
    return {
        name: say(getattr(trust, name))
        for name, say in WORDS.items()
        if getattr(trust, name) is not None
    }
