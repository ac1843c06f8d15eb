"""The stages of an explanation, in order; :func:`limecraft_core.explain` calls them.

Private: the engine's public face (``limecraft_core``) names what a caller needs (``Partial``,
``prepare_regions``).

1. :func:`prepare_regions` (:mod:`.regions`): the regions (given, handcrafted and composed, or
   segmented), and the segmentation settings that really made them.
2. :func:`prepare_scene` (:mod:`.scene`): the image, fill and label map at the model's input
   size, on its device.
3. :func:`plan_samples` (:mod:`.plan`): the masks to score, as named blocks.
4. :func:`score` (:mod:`.score`): the model's outputs per block (early stopping included).
5. :func:`fit` (:mod:`.fit`): the weighted ridge surrogate per explained class.
6. :func:`run_trust_checks` (:mod:`.checks`): stability, convergence, kernel sweep,
   faithfulness, fills.
7. :func:`summarise` (:mod:`.summary`): the :class:`~limecraft_core.result.Explanation`.
"""

from __future__ import annotations

from .checks import run_trust_checks
from .fit import fit, sample_weights
from .plan import MAX_HOLDOUT, Plan, plan_samples
from .regions import prepare_regions
from .scene import Scene, prepare_scene
from .score import Partial, Runner, Scores, choose_classes, score, stream_verdict
from .summary import Timer, summarise

__all__ = [
    "MAX_HOLDOUT",
    "Partial",
    "Plan",
    "Runner",
    "Scene",
    "Scores",
    "Timer",
    "choose_classes",
    "fit",
    "plan_samples",
    "prepare_regions",
    "prepare_scene",
    "run_trust_checks",
    "sample_weights",
    "score",
    "stream_verdict",
    "summarise",
]
