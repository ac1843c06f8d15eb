"""What ``explain`` prints: the result, then each trust check, in lines of ``name=value``
entries separated by '; ', and one plain sentence reading the localisation."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

__all__ = [
    "localisation_sentence",
    "print_explainers",
    "print_summary",
    "print_trust",
    "region_label",
]


def region_label(result: Any, k: int) -> str:
    """How the summary names region ``k``: its name if it has one, else 'region k'.

    overlay.png writes the same region as its name, or as the bare id ``k``.
    """
    return result.region_names[k] or f"region {k}"


def _num(x: float | None, fmt: str) -> str:
    """A number, or 'n/a' where it was not computed."""
    return "n/a" if x is None or not np.isfinite(x) else format(x, fmt)


def print_summary(result: Any, output_space: str, k: int) -> None:
    """The result in lines of ``name=value`` entries separated by '; ', one list item a line."""
    from limecraft_core import render
    from limecraft_core.trust import r2_text

    label = json.dumps(result.class_labels[0], ensure_ascii=False)
    # a score that never moves leaves nothing to fit: its R^2 (0/0) says nothing
    r2 = r2_text(result.score, result.weights)
    print(
        f"target={label}; class={result.target}; {output_space}={result.predictions[0]:.3f}; "
        f"regions={result.n_regions}; R^2={r2}; time={result.timings['total_s']:.2f} s"
    )
    run, asked = result.run, result.config.sampling.samples
    print(
        f"run: samples={run.samples_used}; allowed={asked}; "
        f"stopped early={'yes' if run.samples_used < asked else 'no'}; "
        f"model passes={run.model_passes}; precision={run.precision}"
    )
    if run.precision_reason:
        print(f"precision: {run.precision_reason}")
    chosen = render.tinted_regions(result.weights, k=k)
    if chosen.ids:
        print(
            f"regions tinted in overlay.png with the largest |weight| first (green: for {label}; "
            f"red: against; delta: the drop in {output_space} when only that region is hidden):"
        )
    else:
        print("no region has a non-zero weight; overlay.png tints none")
    for r in chosen.ids:
        print(
            f"  {region_label(result, r)}: weight={result.weights[r]:+.4f}; "
            f"delta={_num(result.deltas[0, r], '+.4f')}"
        )
    rest = result.n_regions - len(chosen.ids)
    if rest and chosen.ids:
        print(
            f"{rest} other regions are not tinted (under {render.MIN_SHARE:.0%} of the largest "
            f"|weight| or beyond the top {k} of their side); explanation.json lists every region"
        )
    print_trust(result)


def print_trust(result: Any) -> None:
    from limecraft_core.trust import name_regions
    from limecraft_core.trust import words as W

    t = result.trust
    said = W.check_words(t)  # each check's words, as the report and the app say them
    if t.stability is not None:
        st = t.stability
        two_parts = ""
        if st.conclusion:  # the verdict in two parts: the conclusion, then the detail
            who = " + ".join(
                f"{region_label(result, i)} ({'for' if sign > 0 else 'against'})"
                for i, sign in zip(st.conclusion, st.conclusion_signs, strict=True)
            )
            detail = {True: "settled", False: "not settled", None: "not judged"}
            lead = "" if st.conclusion_lead is None else f"lead={st.conclusion_lead:.1f} sd; "
            two_parts = (
                f"conclusion={who}; held in={st.conclusion_agreement:.0%} of the runs; {lead}"
                f"detail={detail[st.detail_settled]}; "
            )
        print(
            f"stability: {'resamples' if st.source == 'stream' else 'repeats'}="
            f"{st.runs.split()[0]}; verdict={st.verdict}; {two_parts}"
            f"regions that matter={len(st.matter)}; "
            f"Kendall's W over them={st.matter_kendall_w:.3f}; "
            f"top-{min(5, max(1, len(st.matter)))} overlap={st.matter_topk:.2f}; "
            f"sign flips among them={st.matter_sign_flips:.0%}; "
            f"Kendall's W top-10={st.kendall_w:.3f}"
        )
        print(f"verdict: {name_regions(st.reason, lambda i: region_label(result, i))}")
        unsure = st.inconsistent_sign
        if unsure:
            print(
                f"sign entropy (bits) of the {len(unsure)} regions that change sign across "
                f"the {st.runs}: "
                + "; ".join(
                    f"{region_label(result, i)}={st.sign_entropy[i]:.2f}" for i in unsure[:10]
                )
                + (" …" if len(unsure) > 10 else "")
            )
    if t.convergence is not None:
        print(f"convergence: {said['convergence'].headline}")
    if t.kernel_sweep is not None:
        ks = t.kernel_sweep
        print(
            "kernel sweep R^2: "
            + "; ".join(
                f"{'uniform' if w == 'uniform' else f'width {w:g}'}={r2:.3f}"
                for w, r2 in zip(ks.widths, ks.scores, strict=True)
            )
        )
        sensitive = "; ".join(region_label(result, r) for r in ks.sensitive) or "none"
        print(f"width-sensitive regions: {sensitive}")
        print(f"kernel sweep verdict: {said['kernel_sweep'].headline}")
    if t.faithfulness is not None:
        f = t.faithfulness
        print(
            f"faithfulness: deletion AUC={f.deletion_auc:.3f}; "
            f"random deletion AUC={f.random_deletion_auc:.3f}; insertion AUC={f.insertion_auc:.3f}; "
            f"random insertion AUC={f.random_insertion_auc:.3f}; "
            f"held-out R^2={_num(f.heldout_r2, '.3f')}"
        )
        print(f"faithfulness verdict: {said['faithfulness'].headline}")
    if t.irof is not None:  # the field's metrics (definitions in explanation.json)
        print(
            f"field metrics: IROF={t.irof.value:.2f}; IROF per region={t.irof.per_region:.3f}; "
            f"ROAD gap={t.road.value:.3f}; ROAD MoRF area={t.road.morf_area:.3f}; "
            f"ROAD LeRF area={t.road.lerf_area:.3f}; "
            f"faithfulness correlation={t.faithfulness_correlation.value:.3f}; "
            f"sparseness={t.sparseness.value:.3f}"
        )
        print(
            "reading: higher is better for IROF and the ROAD gap and LeRF area and the "
            "faithfulness correlation; lower is better for the ROAD MoRF area; higher sparseness "
            "means fewer regions carry the weight"
        )
    if t.localisation is not None:
        _print_localisation(result, t.localisation)
    if t.fills is not None:
        fc = t.fills
        print("fills (the top region; Spearman = rank agreement with the main fill):")
        for i, (name, top, rho) in enumerate(zip(fc.fills, fc.top1, fc.spearman[0], strict=True)):
            main = " (main)" if i == 0 else ""
            print(f"  {name}{main}: top={region_label(result, top)}; Spearman={rho:.2f}")
        print(f"fills verdict: {said['fills'].headline}")


def _print_localisation(result: Any, loc: Any) -> None:
    """The localisation line in ``name=value`` entries, then one sentence reading it."""
    names = [str(r) if not result.region_names[r] else result.region_names[r] for r in loc.regions]
    shown = " / ".join(names[:8]) + (" / …" if len(names) > 8 else "")
    print(
        f"localisation: expected regions={loc.expected}"
        + (f" ({shown})" if names else "")
        + f"; relevance mass={loc.relevance_mass:.2f}"
        f"; relevance rank accuracy={loc.relevance_rank_accuracy:.2f}"
        f"; pointing game={'hit' if loc.pointing_game else 'miss'}"
        f"; mask coverage={_num(loc.mask_coverage, '.2f')}"
    )
    print(localisation_sentence(result, loc))


#: The CLI's way to a closer measure, where the expected regions miss the expected area.
ADVICE = "draw the area as a region with --regions-mask"


def localisation_sentence(result: Any, loc: Any) -> str:
    """One plain sentence (no commas) reading a Localisation of ``result``: its words
    (limecraft_core.trust.words) with the regions named as the summary names them, and the
    CLI's advice where the expected regions miss the area."""
    from limecraft_core.trust import name_regions
    from limecraft_core.trust import words as W

    headline = W.localisation_words(loc, ADVICE).headline
    return name_regions(headline, lambda i: region_label(result, i))


def print_explainers(result: Any) -> None:
    """The explainers over the same regions: a line per method (its top regions, largest
    |value| first, with their values on the method's own scale), then the agreement and, with
    two methods or more, the merge suggestion (limecraft_core.merge_hint)."""
    from limecraft_core.agreement import top_k

    c = result.explainers
    ag = c.agreement
    label = json.dumps(c.label, ensure_ascii=False)
    print(
        f"explainers over the same {c.n_regions} regions for {label}: methods={len(ag.methods)}; "
        f"model passes={c.passes}; top {ag.k} regions by |value| (each on its own scale):"
    )
    for a, title in zip(c.attributions, ag.methods, strict=True):
        top = top_k(a.values, ag.k)
        print(
            f"  {title}: "
            + "; ".join(f"{region_label(result, int(r))}={a.values[r]:+.4f}" for r in top)
        )
    print(f"agreement: {ag.sentence}")
    m = c.merge
    if m is not None:
        how = "exact Shapley" if m.estimator == "exact" else "sample estimate of the"
        print(f"merge ({how} interaction index; a merge needs |index| >= {m.threshold:.2g}): "
              f"{m.sentence}")  # fmt: skip
