"""Stage 3: the masks to score, as named blocks, each drawn from its own reproducible stream.

The blocks: the main sample, repeats, held-out masks and the other fills' samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import trust as _trust
from ..config import ExplainConfig
from ..perturb import MaskSample, sample_masks

# Repeat r (1..R-1) draws its masks with seed + r: independent, reproducible streams.
REPEAT_SEED_STEP = 1


# Held-out masks use a seed a large prime away, so they never coincide with a repeat's stream.
HOLDOUT_SEED_OFFSET = 1_000_003


# Likewise for the random deletion/insertion orders of the faithfulness baseline.
RANDOM_ORDER_SEED_OFFSET = 2_000_003


# ROAD's imputation noise draws its own stream too.
ROAD_SEED_OFFSET = 3_000_017


# Random orders averaged as the faithfulness baseline: smooths one unlucky order; each costs
# 2(K+1) model passes.
N_RANDOM_ORDERS = 3


# Held-out samples for the surrogate's R^2: a steady estimate without doubling N.
MAX_HOLDOUT = 500


# The first verdict on a partial sample (the early-stop check) waits for max(200, 4K) samples.
EARLY_STOP_MIN_SAMPLES, EARLY_STOP_SAMPLES_PER_REGION = 200, 4


# The one-stream verdict's resamples draw their own stream.
STREAM_SEED_OFFSET = 4_000_037


@dataclass(frozen=True)
class Plan:
    """The masks to score, as named blocks (repeats and the hold-out are drawn up front).

    Attributes
    ----------
    main : MaskSample, the explanation's own N samples (row 0 is the original)
    repeats : R-1 MaskSamples, seeds seed+1.. (cut to the samples used after early stopping)
    holdout : MaskSample or None, fresh masks for the held-out R^2
    deltas : bool, score each region hidden alone and kept alone
    n_fills : int, other fills to score the main sample with
    """

    main: MaskSample
    repeats: tuple[MaskSample, ...]
    holdout: MaskSample | None
    deltas: bool
    faithfulness: bool
    n_fills: int

    def rows(self, n: int) -> int:
        """Model passes planned (before dedup) when the main sample has ``n`` rows."""
        k = self.main.masks.shape[1]
        rows = n * (1 + len(self.repeats)) + (2 * k if self.deltas else 0)
        rows += len(self.holdout.masks) if self.holdout is not None else 0
        rows += (
            2 * (k + 1) * (1 + N_RANDOM_ORDERS) + 2 * len(_trust.road_counts(k))
            if self.faithfulness
            else 0
        )
        return rows + self.n_fills * n


def plan_samples(k: int, cfg: ExplainConfig) -> Plan:
    """Draw every sample the configuration asks for."""
    s = cfg.sampling

    def draw(n: int, seed: int) -> MaskSample:
        return sample_masks(
            k, n, scheme=s.scheme, p=s.p, rng=seed, kernel_width=cfg.surrogate.kernel_width
        )

    faith = cfg.trust.faithfulness
    return Plan(
        main=draw(s.samples, s.seed),
        repeats=tuple(
            draw(s.samples, s.seed + r * REPEAT_SEED_STEP) for r in range(1, cfg.trust.repeats)
        ),
        holdout=draw(min(s.samples, MAX_HOLDOUT), s.seed + HOLDOUT_SEED_OFFSET) if faith else None,
        deltas=cfg.targets.compute_deltas,
        faithfulness=faith,
        n_fills=len(_other_fills(cfg)),
    )


def _other_fills(cfg: ExplainConfig) -> list[Any]:
    return [f for f in cfg.trust.compare_fills if f != cfg.fill.fill]


def _cut(m: MaskSample, n: int) -> MaskSample:
    return MaskSample(m.masks[:n], m.weights[:n], m.scheme, m.p)
