"""The verdict's first part, the conclusion: the first region that matters (widened to the first
two or three when they lead together), with its sign, and the share of the runs in which it
holds. See :mod:`limecraft_core.trust` for the rule."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..limits import THRESHOLDS

CONCLUSION_SHARE = THRESHOLDS["conclusion_share"]
STABLE_CONCLUSION = THRESHOLDS["stable_conclusion"]
UNSTABLE_CONCLUSION = THRESHOLDS["unstable_conclusion"]
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


def conclusion_of(
    mean: np.ndarray, matter: Sequence[int], weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """The conclusion of R runs: the longest leading set of :func:`conclusion_regions` (the
    first region, the first two, the first three) that holds in at least
    ``STABLE_CONCLUSION`` of the runs; the first region alone when none does. A near-tie at the
    edge of a longer set does not unsettle a firm first region, and two tied leaders make a
    firm pair.

    Returns
    -------
    regions : (n,) int; signs : (n,) +1 or -1; agreement : float (:func:`conclusion_agreement`)
    """
    head = conclusion_regions(mean, matter)
    if len(head) == 0:
        return head, head, 0.0
    m = np.asarray(mean, np.float64)
    found = None
    for j in range(1, len(head) + 1):  # a tied pair can hold where its first alone does not
        regions = head[:j]
        signs = np.where(m[regions] < 0, -1, 1)
        agree = conclusion_agreement(weights, regions, signs)
        if found is None or agree >= STABLE_CONCLUSION:
            found = (regions, signs, agree)
    assert found is not None
    return found


def conclusion_verdict(agreement: float, distinguishable: bool) -> str:
    """``stable`` when the conclusion holds in at least ``STABLE_CONCLUSION`` of the runs and
    each of its regions is distinguishable from zero; ``unstable`` under
    ``UNSTABLE_CONCLUSION``; ``borderline`` between."""
    if agreement < UNSTABLE_CONCLUSION:
        return "unstable"
    if agreement >= STABLE_CONCLUSION and distinguishable:
        return "stable"
    return "borderline"
