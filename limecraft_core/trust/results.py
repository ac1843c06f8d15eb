"""Every trust result of one explanation together (``TrustResults``).

And the rows the report and the app show for its literature metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._validate import LimecraftError
from .faithfulness import Faithfulness, FillComparison
from .metrics import FaithfulnessCorrelation, Localisation, Sparseness
from .road import Irof, Road
from .sampling import Convergence, EarlyStop, EarlyStopCheck, KernelSweep
from .stability import Stability

_RESULTS = {
    "stability": Stability,
    "convergence": Convergence,
    "kernel_sweep": KernelSweep,
    "faithfulness": Faithfulness,
    "fills": FillComparison,
    "early_stop": EarlyStop,
    "irof": Irof,
    "road": Road,
    "faithfulness_correlation": FaithfulnessCorrelation,
    "sparseness": Sparseness,
    "localisation": Localisation,
}


VERDICTS = ("stable", "borderline", "unstable")


@dataclass(frozen=True)
class TrustResults:
    """The trust checks that ran (None: not asked for); each a typed result."""

    stability: Stability | None = None
    convergence: Convergence | None = None
    kernel_sweep: KernelSweep | None = None
    faithfulness: Faithfulness | None = None
    fills: FillComparison | None = None
    early_stop: EarlyStop | None = None
    irof: Irof | None = None
    road: Road | None = None
    faithfulness_correlation: FaithfulnessCorrelation | None = None
    sparseness: Sparseness | None = None
    localisation: Localisation | None = None

    def to_dict(self) -> dict:
        """JSON-ready, one key per check that ran."""
        return {k: getattr(self, k).to_dict() for k in _RESULTS if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, d: dict) -> TrustResults:
        """Rebuild from :meth:`to_dict`'s output (keys other than the checks' are ignored).

        Raises
        ------
        LimecraftError
            If a check's fields are missing, extra or of the wrong kind.
        """
        out = {}
        for key, kind in _RESULTS.items():
            if key not in d:
                continue
            v = d[key]
            try:
                if not isinstance(v, dict):
                    raise TypeError("not an object")
                if key == "early_stop":
                    v = {**v, "checks": [EarlyStopCheck(**c) for c in v["checks"]]}
                obj = kind(**v)
            except (TypeError, KeyError) as e:
                raise LimecraftError(f"the {key} check is malformed: {e}") from None
            if key == "stability" and obj.verdict not in VERDICTS:
                raise LimecraftError(f"unknown stability verdict {obj.verdict!r}")
            out[key] = obj
        return cls(**out)


@dataclass(frozen=True)
class MetricRow:
    """One of the field's metrics as a reader sees it (the Trust page's table, the report)."""

    name: str
    value: str
    reading: str
    definition: str
    baseline: str
    steps: int


def field_metric_rows(t: TrustResults) -> list[MetricRow]:
    """The field's metrics that ran, each with its value in words, how to read it, its
    definition, baseline and steps (model passes or samples it rests on)."""
    shown = (
        ("IROF", t.irof, lambda m: f"{m.value:.2f} ({m.per_region:.2f} per region)"),
        (
            "ROAD",
            t.road,
            lambda m: f"gap {m.value:.3f} (MoRF area {m.morf_area:.3f}, LeRF {m.lerf_area:.3f})",
        ),
        ("Faithfulness correlation", t.faithfulness_correlation, lambda m: f"{m.value:.3f}"),
        ("Sparseness (Gini)", t.sparseness, lambda m: f"{m.value:.3f}"),
    )
    return [
        MetricRow(name, value(m), m.reading, m.definition, m.baseline, m.steps)
        for name, m, value in shown
        if m is not None
    ]
