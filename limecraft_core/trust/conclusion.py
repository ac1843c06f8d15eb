"""The verdict's first part, the conclusion: the first region that matters, and how often it holds.

The first region widens to the first two or three when they lead together; the conclusion gives
its sign and the share of the runs in which it holds. See :mod:`limecraft_core.trust` for the
rule.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..limits import THRESHOLDS

CONCLUSION_SHARE = THRESHOLDS["conclusion_share"]
STABLE_CONCLUSION = THRESHOLDS["stable_conclusion"]
UNSTABLE_CONCLUSION = THRESHOLDS["unstable_conclusion"]
CONCLUSION_LEAD = THRESHOLDS["conclusion_lead"]
CONCLUSION_MAX = 3  # the conclusion names at most this many regions


def conclusion_regions(mean: np.ndarray, matter: Sequence[int]) -> np.ndarray:
    """The conclusion's regions: the first region that matters and those within
    ``CONCLUSION_SHARE`` of its |mean weight| (at most ``CONCLUSION_MAX``), by decreasing
    |mean weight|. Empty when no region matters.

    Parameters
    ----------
    mean : (K,) the weights the regions are ranked by
    matter : the regions that matter, by decreasing |mean weight|
    """
    m = np.asarray(matter, int)
    if len(m) == 0:
        return m
    a = np.abs(np.asarray(mean, np.float64))
    head = m[:CONCLUSION_MAX]
    return head[a[head] >= CONCLUSION_SHARE * a[m[0]]]


def conclusion_agreement(weights: np.ndarray, regions: np.ndarray, signs: np.ndarray) -> float:
    """The share of runs in which the conclusion holds: their first ``len(regions)`` regions by
    |weight| are exactly ``regions`` (in any order), each with the sign in ``signs``.

    Parameters
    ----------
    weights : (R, K) one explanation per row
    regions : (n,) int, the conclusion's regions
    signs : (n,) the conclusion's signs (+1 or -1)
    """
    w = np.asarray(weights, np.float64)
    n = len(regions)
    if n == 0 or w.shape[0] == 0:
        return 0.0
    top = np.sort(np.argsort(-np.abs(w), axis=1, kind="stable")[:, :n], axis=1)
    same_set = np.all(top == np.sort(np.asarray(regions, int))[None], axis=1)
    same_sign = np.all(np.sign(w[:, regions]) == np.asarray(signs)[None], axis=1)
    return float(np.mean(same_set & same_sign))


def conclusion_lead(own: np.ndarray, resampled: np.ndarray, regions: np.ndarray) -> float:
    """How firmly ``regions`` lead the rest in one sample: the gap between the smallest |weight|
    among them and the largest outside them, in the sample's own weights ``own``, divided by the
    standard deviation of the same gap over the ``resampled`` fits (a z-score of the lead). Inf
    when no region is outside them; 0 when the gap does not vary.

    Parameters
    ----------
    own : (K,) the sample's own weights
    resampled : (B, K) the weights of B >= 2 bootstrap resamples of that sample
    regions : (n,) int, the leading regions
    """
    a, ab = np.abs(np.asarray(own, np.float64)), np.abs(np.asarray(resampled, np.float64))
    regions = np.asarray(regions, int)
    rest = np.setdiff1d(np.arange(len(a)), regions)
    if len(rest) == 0:
        return float("inf")
    gap = a[regions].min() - a[rest].max()
    spread = float((ab[:, regions].min(axis=1) - ab[:, rest].max(axis=1)).std(ddof=1))
    return float(gap / spread) if spread > 0 else (float("inf") if gap > 0 else 0.0)


def lead_is_firm(lead: float | None) -> bool:
    """A conclusion's lead (:func:`conclusion_lead`, in sd) is firm: at least
    :data:`CONCLUSION_LEAD`, or not judged (None: over repeats, or recorded before the lead
    was judged)."""
    return lead is None or lead >= CONCLUSION_LEAD


def conclusion_of(
    mean: np.ndarray,
    matter: Sequence[int],
    weights: np.ndarray,
    lead: float | None = None,
) -> tuple[np.ndarray, np.ndarray, float, float | None]:
    """The conclusion of R runs.

    Over R independent repeats (``lead`` None): the longest leading set of
    :func:`conclusion_regions` (the first region, the first two, the first three) that holds in
    at least ``STABLE_CONCLUSION`` of the runs; the first region alone when none does. A
    near-tie at the edge of a longer set does not unsettle a firm first region, and two tied
    leaders make a firm pair.

    Over R resamples of one sample (``lead``, the z-score a firm lead needs,
    :data:`CONCLUSION_LEAD`): the shortest leading set that holds in at least
    ``STABLE_CONCLUSION`` of the resamples *and* leads the rest by at least ``lead``
    (:func:`conclusion_lead`). Resamples of one sample vary around that sample's own estimate,
    so a near-tie that the sample happened to break holds in every resample; the lead's
    z-score asks how far ahead the sample puts it. When no set is firm, the set the repeats'
    rule would pick, with its lead (the verdict is then not stable).

    Returns
    -------
    regions : (n,) int; signs : (n,) +1 or -1; agreement : float (:func:`conclusion_agreement`);
    lead : float or None, the regions' :func:`conclusion_lead` (None over repeats)
    """
    head = conclusion_regions(mean, matter)
    if len(head) == 0:
        return head, head, 0.0, None
    m = np.asarray(mean, np.float64)
    found = firm = None
    for j in range(1, len(head) + 1):  # a tied pair can hold where its first alone does not
        regions = head[:j]
        signs = np.where(m[regions] < 0, -1, 1)
        agree = conclusion_agreement(weights, regions, signs)
        z = None if lead is None else conclusion_lead(m, weights, regions)
        if found is None or agree >= STABLE_CONCLUSION:
            found = (regions, signs, agree, z)
        if firm is None and z is not None and agree >= STABLE_CONCLUSION and z >= lead:
            firm = (regions, signs, agree, z)
    assert found is not None
    return firm or found


def conclusion_verdict(agreement: float, distinguishable: bool, firm: bool = True) -> str:
    """``stable`` when the conclusion holds in at least ``STABLE_CONCLUSION`` of the runs, each
    of its regions is distinguishable from zero and (one sample's resamples) its lead is
    ``firm`` (:func:`conclusion_of`); ``unstable`` under ``UNSTABLE_CONCLUSION``;
    ``borderline`` between."""
    if agreement < UNSTABLE_CONCLUSION:
        return "unstable"
    if agreement >= STABLE_CONCLUSION and distinguishable and firm:
        return "stable"
    return "borderline"
