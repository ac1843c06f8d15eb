"""The HTML report's words and tables.

The summary, every trust check with its verdict and what it means, the regions, the settings and
the run's facts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import render
from ..config import ExplainConfig
from ..result import Explanation
from ..trust import Stability, fidelity, name_regions
from ..trust import words as W
from ._report_figures import _region_name

#: Regions in the report's short table; the full table is folded below it.
TOP_REGIONS = 10


@dataclass(frozen=True)
class _Summary:
    label: str
    score: str
    region: str | None  # the region that drives the class (None: no region supports it)
    region_id: int | None
    named: bool  # the region has a name of its own (its id is then added)
    effect: str  # what hiding it does, e.g. "lowers the star score by 0.79"
    fit: str  # good, fair, low, or none: the score never moves (trust.fidelity)
    r2: str
    stability: str  # e.g. "stable across 5 repeats", or ""


@dataclass(frozen=True)
class _Check:
    name: str
    result: str
    verdict: str
    tone: str  # good, warn, bad or info
    detail: str = ""  # a second line under the result (the stability verdict's detail)


@dataclass(frozen=True)
class _Region:
    id: int
    name: str
    origin: str
    pixels: int
    weight: float
    delta: float
    kept_alone: float


@dataclass(frozen=True)
class _Setting:
    group: str
    name: str
    value: str
    default: str
    help: str
    changed: bool


def _num(v: float, digits: int = 2) -> str:
    return f"{v:.{digits}f}" if v is not None and np.isfinite(v) else "—"


def _r2(r2: float, weights: np.ndarray) -> str:
    """R², or "n/a" where the score never moved (nothing was fitted: R² is 0/0)."""
    return "n/a" if fidelity(r2, weights) == "none" else _num(r2)


def _summary(ex: Explanation) -> _Summary:
    """The one-sentence conclusion: class, the region that drives it, its effect, the verdicts."""
    label = ex.class_labels[0]
    w = np.asarray(ex.weights, np.float64)
    top = int(np.argmax(w))
    region, effect = None, ""
    # A weight too small to be tinted in the evidence picture does not drive anything.
    if w[top] > 0 and w[top] >= render.MIN_SHARE * np.abs(w).max():
        region = _region_name(ex, top)
        d = float(ex.deltas[0, top])
        if not np.isfinite(d):
            effect = f"its weight is {w[top]:+.2f} (hiding it alone was not measured)"
        elif d >= 0:
            effect = f"hiding it lowers the {label} score by {d:.2f}"
        else:
            effect = f"yet hiding it alone raises the {label} score by {-d:.2f}"
    st = ex.trust.stability
    return _Summary(
        label=label,
        score=_num(float(ex.predictions[0])),
        region=region,
        region_id=top if region is not None else None,
        named=bool(ex.region_names[top]),
        effect=effect,
        fit=fidelity(ex.score, w),
        r2=_r2(ex.score, w),
        stability=f"{st.verdict} across {st.runs}" if st is not None else "",
    )


def _ids(ex: Explanation, ids: Sequence[int]) -> str:
    return ", ".join(
        f"{ex.region_names[i]} ({i})" if ex.region_names[i] else f"region {i}" for i in ids
    )


def _checks(ex: Explanation) -> list[_Check]:
    """Every trust check that ran, with its verdict (computed in limecraft_core.trust)."""
    fit = fidelity(ex.score, ex.weights)
    out = [
        _Check(
            "Surrogate fit",
            f"the {ex.class_labels[0]} score is the same for every one of the "
            f"{ex.run.samples_used} samples, so hiding regions does not change it"
            if fit == "none"
            else f"weighted R² {ex.score:.3f} over {ex.n_regions} regions and "
            f"{ex.run.samples_used} samples",
            "nothing to fit" if fit == "none" else fit,
            {"good": "good", "fair": "warn", "none": "info"}.get(fit, "bad"),
        )
    ]
    t = ex.trust
    if t.stability is not None:
        out.append(_stability_check(t.stability))
    if t.early_stop is not None:
        e = t.early_stop
        out.append(
            _Check(
                "Early stop",
                f"{e.samples_used} of {e.samples_requested} samples"
                + (
                    ": two halves of the sample were stable by the stability verdict's rule"
                    if e.stopped
                    else ""
                ),
                "stopped early" if e.stopped else "ran to the end",
                "info",
            )
        )
    if t.convergence is not None:
        c = t.convergence
        out.append(
            _worded(
                W.convergence_words(c),
                f"the verdict at {', '.join(map(str, c.sizes))} samples: "
                + ", ".join(c.verdicts or [f"W {v:.2f}" for v in c.kendall_w]),
            )
        )
    out += _more_checks(ex)
    out += _localisation_check(ex)
    return out


def _worded(words: W.CheckWords, figures: str) -> _Check:
    """A check's row: its words (limecraft_core.trust.words) on the first line, the figures
    they rest on on the second."""
    return _Check(words.name, W.sentence(words.headline), words.verdict, words.tone, detail=figures)


def _stability_check(s: Stability) -> _Check:
    """The stability verdict, with the numbers it rests on: the conclusion on the first line,
    the detail (the other regions that matter, and the field's figures) on the second."""
    words = W.stability_words(s)
    first = f"{W.sentence(words.headline)} " if words.headline else ""
    first += W.sentence(W.conclusion_line(s))
    second = f"{W.detail_line(words.detail)} " if words.detail else ""
    if s.conclusion and s.conclusion_agreement is not None:
        second = second or f"{W.sentence(W.detail_state(s))} "
    if s.reason:
        second += (
            f"{len(s.matter)} regions matter: Kendall's W over them "
            f"{s.matter_kendall_w:.2f}, top-k overlap {s.matter_topk:.2f}, sign flips "
            f"{s.matter_sign_flips:.0%}; "
        )
    second += f"Kendall's W over the top-10 {s.kendall_w:.3f}, top-5 overlap {s.jaccard_top5:.2f}"
    if s.inconsistent_sign:
        second += f"; {len(s.inconsistent_sign)} regions change sign (sign entropy > 0)"
    return _Check(
        words.name,
        first.strip() or second,
        words.verdict,
        words.tone,
        detail=second if first.strip() else "",
    )


def _more_checks(ex: Explanation) -> list[_Check]:
    """The kernel-width sweep, faithfulness and the fills, where they ran."""
    t = ex.trust
    out: list[_Check] = []
    if t.kernel_sweep is not None:
        k = t.kernel_sweep
        out.append(
            _worded(
                W.kernel_words(k),
                f"widths {', '.join(map(str, k.widths))}; R² "
                + ", ".join(f"{v:.2f}" for v in k.scores)
                + (f"; width-sensitive: {_ids(ex, k.sensitive)}" if k.sensitive else ""),
            )
        )
    if t.faithfulness is not None:
        f = t.faithfulness
        held = f"; held-out R² {f.heldout_r2:.2f}" if f.heldout_r2 is not None else ""
        out.append(
            _worded(
                W.faithfulness_words(f),
                f"deletion AUC {f.deletion_auc:.3f} (random {f.random_deletion_auc:.3f}), "
                f"insertion AUC {f.insertion_auc:.3f} (random {f.random_insertion_auc:.3f}){held}",
            )
        )
    if t.fills is not None:
        fc = t.fills
        out.append(
            _worded(
                W.fills_words(fc),
                "top region per fill: "
                + ", ".join(
                    f"{n}: {_ids(ex, [i])}" for n, i in zip(fc.fills, fc.top1, strict=True)
                ),
            )
        )
    return out


def _localisation_check(ex: Explanation) -> list[_Check]:
    """The localisation against the expected regions, when they were marked: its words
    (limecraft_core.trust.words) with the regions named as the report names them."""
    loc = ex.trust.localisation
    if loc is None:
        return []
    words = W.localisation_words(loc)
    headline = name_regions(words.headline, lambda i: _ids(ex, [i]))
    return [
        _Check(
            words.name,
            W.sentence(headline),
            words.verdict,
            words.tone,
            detail=f"against the expected regions {_ids(ex, loc.regions)}: relevance mass "
            f"{loc.relevance_mass:.0%}, relevance rank accuracy "
            f"{loc.relevance_rank_accuracy:.0%}, pointing game "
            f"{'hit' if loc.pointing_game else 'miss'}",
        )
    ]


def _regions(ex: Explanation) -> list[_Region]:
    """Every region, largest |weight| first."""
    order = np.argsort(-np.abs(ex.weights), kind="stable")
    return [
        _Region(
            id=int(k),
            name=ex.region_names[k],
            origin=ex.region_origins[k],
            pixels=int(ex.region_pixels[k]),
            weight=float(ex.weights[k]),
            delta=float(ex.deltas[0, k]),
            kept_alone=float(ex.kept_alone[0, k]),
        )
        for k in order
    ]


def _value(v: Any) -> str:
    """A setting's value as a reader wants it: None is the default behaviour, lists are lists."""
    if v is None:
        return "default"
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, (list, tuple)):
        if not v:
            return "—"
        if all(isinstance(x, (list, tuple)) and len(x) == 2 for x in v):
            return ", ".join(f"{a}={b}" for a, b in v)
        return ", ".join("default" if x is None else str(x) for x in v)
    if isinstance(v, Mapping):
        return ", ".join(f"{a}={b}" for a, b in v.items()) or "—"
    if callable(v):
        return f"custom: {getattr(v, '__name__', 'function')}"
    return str(v)


def _settings(ex: Explanation, defaults: ExplainConfig | None = None) -> list[_Setting]:
    """Every setting in schema order, with its default (``defaults``'s, else the engine's),
    marked where it differs from that default."""
    base = defaults or ExplainConfig()
    changed = ex.config.changed(base)
    return [
        _Setting(s.group, s.name, _value(v), _value(d), s.help, s.name in changed)
        for (s, v), (_, d) in zip(ex.config.items(), base.items(), strict=True)
    ]


def _run_facts(ex: Explanation) -> list[tuple[str, str]]:
    return [(k, _value(v)) for k, v in ex.run.to_dict().items()]


def _segmentation(ex: Explanation) -> str:
    seg = ex.config.segmentation
    what = "a given label map" if seg.method == "given" else f"{seg.method} superpixels"
    return f"{what}, {ex.run.handcrafted} handcrafted, {ex.run.merged} merged"
