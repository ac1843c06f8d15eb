"""Several explainers' results over the same regions, :class:`Comparison`, and its JSON block.

Torch-free, below the result, so that an :class:`~limecraft_core.Explanation` can carry one and
its file can write and read it back (``result_file``'s schema checks the block).
:func:`limecraft_core.compare_explainers` makes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validate import LimecraftError
from .agreement import Agreement
from .explainer_table import Attribution
from .merge_hint import MergeHint

__all__ = ["NORMALISATION", "Comparison"]

#: How every method is drawn on one colour scale, in words (the file and the report say it).
NORMALISATION = (
    "each method's values divided by its own largest |value|, so each lies in [-1, 1] with "
    "its strongest region at +-1"
)


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


@dataclass(frozen=True, eq=False)
class Comparison:
    """Several explainers' attributions over the same regions, and whether they agree.

    Attributes
    ----------
    target : int, the explained class
    label : str, its name
    attributions : tuple of Attribution, one per method, in the order asked
    agreement : Agreement over the methods' titles
    interactions : (K, K) float64 ndarray of pairwise Shapley interaction indices, from the
        exact table when ``shapley`` ran, else None
    passes : int, model passes spent (each distinct mask once)
    n_regions : int, K
    merge : MergeHint or None, whether to merge two adjacent regions where the methods
        disagree (:func:`~limecraft_core.merge_hint.merge_hint`); None when not tested (one
        method, or a file written before it)
    """

    target: int
    label: str
    attributions: tuple[Attribution, ...]
    agreement: Agreement
    interactions: np.ndarray | None
    passes: int
    n_regions: int
    merge: MergeHint | None = None

    def values(self, method: str) -> np.ndarray:
        """(K,) the attribution of ``method`` (its name in the table)."""
        for a in self.attributions:
            if a.method == method:
                return a.values
        raise LimecraftError(
            f"no {method!r} in this comparison: {[a.method for a in self.attributions]}"
        )

    def titles(self) -> tuple[str, ...]:
        """Each method's title, in order (the agreement's names for them)."""
        return self.agreement.methods

    def to_dict(self) -> dict[str, Any]:
        """The explanation file's ``explainers`` block (JSON-ready); see ``docs/json.md``."""
        ag = self.agreement
        return {
            "target": int(self.target),
            "label": self.label,
            "n_regions": int(self.n_regions),
            "passes": int(self.passes),
            "normalisation": NORMALISATION,
            "methods": {
                a.method: {"title": t, "values": a.values.tolist(), "note": a.note}
                for a, t in zip(self.attributions, ag.methods, strict=True)
            },
            "agreement": {
                "k": int(ag.k),
                "pairs": [
                    {
                        "a": p.a,
                        "b": p.b,
                        "feature": p.feature,
                        "rank": p.rank,
                        "sign": p.sign,
                        "signed_rank": p.signed_rank,
                        "spearman": _finite_or_none(p.spearman),
                    }
                    for p in ag.pairs
                ],
                "spread": ag.spread.tolist(),
                "disagreeing": list(ag.disagreeing),
                "sentence": ag.sentence,
            },
            "interactions": None if self.interactions is None else self.interactions.tolist(),
            **({} if self.merge is None else {"merge": self.merge.to_dict()}),
        }
