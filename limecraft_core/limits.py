"""One table of limits and thresholds, read by every part that needs these numbers.

The engine's checks, the CLI, the app's widget ranges and ``docs/limits.md`` all read these
numbers (``tests/limecraft_core/config/test_config.py`` keeps the doc in step).

Each :class:`Limit` is the range the engine accepts; ``app`` is the narrower range the app's
widgets offer, so that a page stays responsive on a CPU (the engine still accepts the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import MAX_PIXELS

__all__ = ["LIMITS", "PARAM_RANGES", "SCHEMES", "SEGMENTERS", "THRESHOLDS", "Limit"]

# The choices of the settings whose values are names. They live here, beside the ranges, so that
# the settings schema (``config``) needs neither torch nor scikit-image: ``perturbation`` and
# ``segmentation`` import them from here.
#: Perturbation sampling schemes (see :func:`limecraft_core.perturb.sample_masks`).
SCHEMES = ("bernoulli", "stratified", "antithetic", "glime")
#: The segmenters: the superpixel methods (see :func:`limecraft_core.regions.segment`).
SEGMENTERS = ("quickshift", "slic", "felzenszwalb", "watershed", "grid")
#: Valid range of every segmentation method parameter: (low, high, low is open, is an integer).
PARAM_RANGES: dict[str, tuple[float, float, bool, bool]] = {
    "n_segments": (1, 5000, False, True),
    "kernel_size": (1.0, 100.0, False, False),
    "max_dist": (0.0, 10_000.0, True, False),
    "ratio": (0.0, 1.0, False, False),
    "compactness": (0.0, 1000.0, False, False),
    "sigma": (0.0, 100.0, False, False),
    "scale": (0.0, 1e9, True, False),
    "min_size": (1, MAX_PIXELS, False, True),
}


@dataclass(frozen=True)
class Limit:
    """A closed (or left-open) range; ``hi=None`` is unbounded above."""

    lo: float
    hi: float | None
    lo_open: bool = False
    app: tuple[float, float] | None = None  # the app's widget range, when narrower
    unit: str = ""

    def check(self, name: str, value: object) -> int:
        """``value`` as an int within this range, else a LimecraftError naming the range."""
        from ._validate import check_int

        return check_int(name, value, int(self.lo), None if self.hi is None else int(self.hi))

    def describe(self) -> str:
        """The range as the docs write it, e.g. ``[10, 200000]`` or ``(0, 1]`` or ``> 0``."""
        if self.hi is None:
            return f"{'>' if self.lo_open else '>='} {_num(self.lo)}"
        return f"{'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}]"


def _num(v: float) -> str:
    return str(v) if isinstance(v, int) else f"{v:g}"


LIMITS: dict[str, Limit] = {
    # sampling
    "samples": Limit(10, 200_000, app=(50, 20_000)),
    "seed": Limit(0, 2**63 - 1, app=(0, 2**31 - 1)),
    "p": Limit(0, 1, lo_open=True, app=(0.05, 0.95)),
    "early_stop": Limit(0, 1, lo_open=True),
    "early_stop_step": Limit(10, 200_000),  # and at most `samples`
    # surrogate
    "kernel_width": Limit(0, None, lo_open=True, app=(0.01, 10.0)),
    "ridge_alpha": Limit(0, 1_000_000),
    # fill
    "blur_sigma": Limit(0, None, lo_open=True, app=(0.5, 100.0), unit="px"),
    "mask_expansion": Limit(0, 64, app=(0, 16), unit="px"),
    # targets
    "target": Limit(0, 2**31 - 1),  # and below the model's class count
    "top_labels": Limit(1, 100, app=(1, 10)),
    # trust checks
    "repeats": Limit(1, 50, app=(1, 20)),
    "convergence": Limit(10, 200_000),  # each size, and at most `samples`
    # speed
    "batch_size": Limit(1, 65536, app=(1, 1024)),
    # segmentation
    "n_segments": Limit(1, 5000, app=(2, 300)),
    "inner_segments": Limit(1, 1000, app=(1, 50)),
    "outer_segments": Limit(1, 5000, app=(1, 300)),
    "working_size": Limit(16, 100_000, app=(64, 2048), unit="px"),
}

# Verdict thresholds. Stability over repeats (and the early-stop rule, which applies the
# "stable" line to two halves of one sample): see limecraft_core.trust.
#: A score that varies by at most this many float32 steps of its largest |value| over the
#: samples is the same for every sample (float32 cannot tell those values apart): the ridge
#: surrogate gives it no weights (``surrogate.flat_columns``), not the rounding of its centring.
FLAT_SCORE_ULPS = 4


def flat_scores(spread: np.ndarray, largest: np.ndarray) -> np.ndarray:
    """Whether scores whose max - min over the samples is ``spread`` and whose largest |value|
    is ``largest`` are the same for every sample (:data:`FLAT_SCORE_ULPS`)."""
    return np.asarray(spread) <= FLAT_SCORE_ULPS * float(np.finfo(np.float32).eps) * np.asarray(
        largest
    )


def flat_series(y: np.ndarray) -> bool:
    """Whether one class's scores ``y`` over the samples, (N,), are the same for every sample
    (:func:`flat_scores`); False for no samples."""
    yy = np.asarray(y, np.float64)
    return bool(len(yy)) and bool(flat_scores(np.ptp(yy), np.abs(yy).max()))


THRESHOLDS: dict[str, float] = {
    # the regions that matter: the fewest carrying this share of the |mean weight| ...
    "matter_mass_share": 0.5,
    # ... and those distinguishable from zero with at least this share of the largest |weight|
    # (the same share below which the overlays leave a region untinted)
    "matter_min_share": 0.05,
    "stable_kendall_w": 0.9,  # Kendall's W over the regions that matter, at least
    "unstable_kendall_w": 0.7,  # below this: unstable
    "stable_jaccard_top5": 0.8,  # mean pairwise top-k Jaccard (k = min(5, matter)), at least
    "unstable_jaccard_top5": 0.5,  # below this: unstable
    "unstable_sign_flips_top10": 0.3,  # above this share of those flipping sign: unstable
    # the early stop: the conclusion holds in this share of resamples (all of them: at 0.9, the
    # calibration benchmark had one stable conclusion on real photos that 5 independent repeats
    # refute, a near-tie called first in 39 of 40 resamples; see bench/results/calibration.md)
    "early_stop_default": 1.0,
    # the conclusion: the first region that matters and those within this share of its |weight|
    # (at most 3) ...
    "conclusion_share": 0.5,
    # ... is stable when it holds (the same regions first, with the same signs) in at least this
    # share of the runs (all 5 repeats; all 40 resamples) and each is distinguishable from zero;
    # unstable when it holds in under this share (5 repeats: 2 or fewer)
    "stable_conclusion": 1.0,
    "unstable_conclusion": 0.6,
    # ... and, judged over resamples of one sample, when its lead over the next region is at
    # least this many standard deviations of that gap over the resamples (a z-score). The
    # resamples vary around the sample's own estimate, so a near-tie that one sample happened
    # to break held in all 40: on the calibration benchmark, 2.5 and 3 each left a stable claim
    # that 5 independent repeats refute at some sample cap; 3.5 left none at any cap from 800
    # to 2400 (bench/results/calibration.md)
    "conclusion_lead": 3.5,
    "low_r2": 0.5,  # surrogate fidelity below this gets a plain warning
    "good_r2": 0.8,  # and at least this a "good" badge
    # an audit flags an image whose top region lies outside the expected region when hiding
    # that region alone removes at least this share of the score
    "audit_dependence": 0.5,
}
