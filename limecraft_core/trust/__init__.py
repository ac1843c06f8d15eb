"""Can this explanation be trusted?

Stability over repeats, convergence in N, kernel-width sensitivity, faithfulness (deletion and
insertion), and agreement across fills.

Pure functions on weight matrices and masks; :func:`limecraft_core.explain` runs the model passes
(sharing them wherever the work allows) and calls these.

The stability verdict has two parts. **The conclusion** is what an analyst acts on: the
first region that matters, with its sign ("region 0 drives the class"), widened to the first
two or three when they are within half of its |weight| and those too come first together. It
is **stable** when its regions come first, with the same signs, in all the runs (5 of 5
repeats; 40 of 40 resamples) and each is distinguishable from zero, and, judged from one
sample, when it also leads the next region by at least 3.5 standard deviations of that gap over
the resamples (:func:`conclusion_lead`); **unstable** when it holds in under 60% of the runs;
**borderline** between. The verdict is the conclusion's. **The detail** is the order of the
other regions that matter, judged by the rule below; the sentence reports it ("the order of
the 9 other regions that matter is not settled"), and it does not veto a firm conclusion.
``bench/bench_calibration.py`` measures both against 5 independent repeats on real models,
and the thresholds come from it (``docs/limits.md``).

The detail judges **the regions that matter**, not noise among near-zero weights.
Over R runs, a region matters when

- it is among the fewest regions, by |mean weight|, that carry half of the total |mean weight|
  (so a heavy region is always judged, even when it is unstable), or
- its 95% interval of the mean excludes zero *and* its |mean| is at least 5% of the largest
  (distinguishable from zero, and not negligible).

Over those regions (thresholds in :data:`limecraft_core.limits.THRESHOLDS`):

- **stable**: Kendall's W >= 0.9 (1 for a single region), the top-k sets overlap with mean
  Jaccard >= 0.8 (k = min(5, regions that matter)), no sign flip, and at least one region is
  distinguishable from zero;
- **unstable**: W < 0.7, or Jaccard < 0.5, or more than 30% flip sign, or no region carries
  weight;
- **borderline**: anything between (including agreement among regions none of which is
  distinguishable from zero).

Kendall's W over the top-10 regions is kept for comparison with the literature (LILI reports it),
but it does not decide the verdict.

**One stream, one verdict** (:func:`stream_stability`, the default: ``repeats=1``). Independent
repeats multiply the model passes. Instead, the explanation's own sample is resampled: each
bootstrap resample (rows drawn with replacement, as many as the sample has) is refitted, which
costs no model pass, and a resample varies as an independent sample of the same size would.
The regions are ranked by the explanation's own weights and judged distinguishable from zero by
their bootstrap interval (weight ± 1.96 sd), since one sample's estimate is not a mean of 5 runs.
The conclusion is judged over all 40 resamples; the detail in groups of 5 resamples, as 5
repeats would be, and reported for the median of 8 groups (worst first, the 5th). Resamples
vary around the sample's own estimate, not around the truth: a near-tie that the sample happened
to break holds in every resample. So the one-sample conclusion also needs a firm lead (above). The early-stop
rule is the conclusion on the samples scored so far: sampling stops once it is "stable".
``bench/bench_calibration.py`` measures how often it agrees with 5 independent repeats.

The rooms:

- :mod:`.stability`: the stability verdict, over repeats or one stream's resamples;
- :mod:`.sampling`: convergence in N, the kernel-width sweep, the early-stop rule;
- :mod:`.faithfulness`: deletion and insertion, the surrogate's fidelity, agreement across fills;
- :mod:`.metrics` and :mod:`.road`: the literature's metrics at region level (faithfulness
  correlation, sparseness, localisation; IROF, ROAD);
- :mod:`.results`: ``TrustResults``, every result of one explanation together;
- :mod:`.words`: each check in words, once, for the CLI, the report and the app.
"""

from __future__ import annotations

from .conclusion import (
    CONCLUSION_LEAD,
    CONCLUSION_MAX,
    CONCLUSION_SHARE,
    STABLE_CONCLUSION,
    UNSTABLE_CONCLUSION,
    conclusion_agreement,
    conclusion_lead,
    conclusion_of,
    conclusion_regions,
    conclusion_verdict,
)
from .faithfulness import (
    GOOD_R2,
    LOW_R2,
    Faithfulness,
    FillComparison,
    auc,
    deletion_insertion_masks,
    fidelity,
    fill_comparison,
    r2_text,
    rank_agreement,
    weighted_r2,
)
from .metrics import (
    FaithfulnessCorrelation,
    Localisation,
    Sparseness,
    expected_regions,
    faithfulness_correlation,
    localisation,
    localise,
    random_subsets,
    sparseness,
)
from .results import VERDICTS, MetricRow, TrustResults, field_metric_rows
from .road import (
    ROAD_NOISE,
    ROAD_STEPS,
    Irof,
    Road,
    irof,
    noisy_linear_imputation,
    road,
    road_counts,
    road_images,
    road_order,
)
from .sampling import (
    LEAD_MARGIN,
    SCREEN_LEAD,
    Convergence,
    EarlyStop,
    EarlyStopCheck,
    KernelSweep,
    convergence,
    kernel_sweep,
    next_check,
    quick_lead,
)
from .stability import (
    MASS_SHARE,
    MIN_SHARE,
    STABLE_JACCARD,
    STABLE_W,
    STREAM_GROUPS,
    STREAM_REPEATS,
    TOP_K,
    UNSTABLE_FLIPS,
    UNSTABLE_JACCARD,
    UNSTABLE_W,
    Stability,
    explain_verdict,
    jaccard_top,
    kendall_w,
    regions_that_matter,
    ridge_coefs,
    sign_entropy,
    sign_flips,
    stability,
    stream_stability,
    verdict,
)
from .wording import name_regions, split_verdict
from .words import WORDS, CheckWords, check_words

__all__ = [
    "CONCLUSION_LEAD",
    "CONCLUSION_MAX",
    "CONCLUSION_SHARE",
    "GOOD_R2",
    "LEAD_MARGIN",
    "LOW_R2",
    "MASS_SHARE",
    "MIN_SHARE",
    "ROAD_NOISE",
    "ROAD_STEPS",
    "SCREEN_LEAD",
    "STABLE_CONCLUSION",
    "STABLE_JACCARD",
    "STABLE_W",
    "STREAM_GROUPS",
    "STREAM_REPEATS",
    "TOP_K",
    "UNSTABLE_CONCLUSION",
    "UNSTABLE_FLIPS",
    "UNSTABLE_JACCARD",
    "UNSTABLE_W",
    "VERDICTS",
    "WORDS",
    "CheckWords",
    "Convergence",
    "EarlyStop",
    "EarlyStopCheck",
    "Faithfulness",
    "FaithfulnessCorrelation",
    "FillComparison",
    "Irof",
    "KernelSweep",
    "Localisation",
    "MetricRow",
    "Road",
    "Sparseness",
    "Stability",
    "TrustResults",
    "annotations",
    "auc",
    "check_words",
    "conclusion_agreement",
    "conclusion_lead",
    "conclusion_of",
    "conclusion_regions",
    "conclusion_verdict",
    "convergence",
    "deletion_insertion_masks",
    "expected_regions",
    "explain_verdict",
    "faithfulness_correlation",
    "fidelity",
    "field_metric_rows",
    "fill_comparison",
    "irof",
    "jaccard_top",
    "kendall_w",
    "kernel_sweep",
    "localisation",
    "localise",
    "name_regions",
    "next_check",
    "noisy_linear_imputation",
    "quick_lead",
    "r2_text",
    "random_subsets",
    "rank_agreement",
    "regions_that_matter",
    "ridge_coefs",
    "road",
    "road_counts",
    "road_images",
    "road_order",
    "sign_entropy",
    "sign_flips",
    "sparseness",
    "split_verdict",
    "stability",
    "stream_stability",
    "verdict",
    "weighted_r2",
]
