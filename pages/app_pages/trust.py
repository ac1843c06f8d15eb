"""Trust: is this explanation stable, converged, robust to the kernel and the fill, and faithful?"""

from __future__ import annotations

import dataclasses

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

import limecraft_core as lc
from limecraft_core import trust as T
from limecraft_core.config import spec
from limecraft_core.trust import words as W
from pages.lib import analysis as A
from pages.lib import caches, charts, config_form, display, explain_run, frame, runtime, state
from pages.lib.views import VERDICT_TEXT, localisation_panel

frame.start()  # the sidebar and the page's frame, inside this page's run (pages/lib/frame.py)

TRUST_FIELDS = (
    "repeats",
    "samples",
    "mask_expansion",
    "kernel_widths",
    "compare_fills",
    "faithfulness",
)
# The Trust page's starting point: checks worth running, on top of the session's settings.
CHECKS = {
    "repeats": 5,
    "kernel_widths": config_form.WIDTH_CHOICES,
    # inpaint fills each sample's hidden regions together; inpaint-each (the old inpaint) fills
    # each region alone, partly from its hidden neighbours: shown side by side
    "compare_fills": ("blur", "inpaint", "inpaint-each"),
    "faithfulness": True,
}


def trust_controls(s) -> lc.ExplainConfig:
    """The trust checks' settings (from the schema), on top of the session's Explain settings."""
    base = s.config
    checks = {k: v for k, v in CHECKS.items() if base.flat()[k] in ((), False, 1)}
    checks["compare_fills"] = tuple(f for f in CHECKS["compare_fills"] if f != base.fill.fill)
    start = base.replace(**checks, samples=max(base.sampling.samples, 100))
    values = config_form.settings_form(start, TRUST_FIELDS, columns=3)
    conv = st.checkbox("Convergence in N", True, key="tr_conv", help=spec("convergence").help)
    n = int(values["samples"])
    values["convergence"] = (
        (*(m for m in config_form.SIZE_CHOICES if m < n), n)
        if conv and values["repeats"] > 1
        else ()
    )
    values["compare_fills"] = tuple(f for f in values["compare_fills"] if f != base.fill.fill)
    try:
        return base.replace(**values)
    except lc.LimecraftError as e:
        display.error(f"These checks do not fit together: {e}")
        st.stop()


def _stability(s: A.Analysis, ex: lc.Explanation) -> None:
    stb = ex.trust.stability
    words = W.stability_words(stb)
    st.markdown(f"### {VERDICT_TEXT[stb.verdict]} over {stb.runs}")
    if words.headline:  # the conclusion, then the detail on a line of its own
        st.markdown(W.sentence(display.md(display.named_reason(words.headline, ex.region_names))))
        if words.detail:
            st.markdown(
                W.detail_line(display.md(display.named_reason(words.detail, ex.region_names)))
            )
    held = display.named_reason(W.conclusion_line(stb), ex.region_names)
    if held:
        st.markdown(f"{W.sentence(display.md(held))} {W.sentence(W.detail_state(stb))}")
    m = len(stb.matter)
    st.markdown(
        f"Regions that matter **{m}** · over them: Kendall's W **{stb.matter_kendall_w:.2f}**, "
        f"top-{min(T.TOP_K, max(1, m))} overlap **{stb.matter_topk:.2f}**, sign flips "
        f"**{stb.matter_sign_flips:.0%}** · for comparison with the literature: Kendall's W over "
        f"the top-10 **{stb.kendall_w:.3f}**; sign flips over all regions, those that do not "
        f"matter included, **{stb.sign_flips:.0%}**"
    )
    st.caption(
        "The verdict is the conclusion's: the first region that matters and those within "
        f"{T.CONCLUSION_SHARE:.0%} of its |weight| (at most {T.CONCLUSION_MAX}). It is stable "
        f"when those regions come first, with the same signs, in at least "
        f"{T.STABLE_CONCLUSION:.0%} of the runs and each is distinguishable from zero; "
        f"unstable under {T.UNSTABLE_CONCLUSION:.0%}. The detail is the order of the other "
        f"regions that matter: a region matters when it is among the fewest carrying "
        f"{T.MASS_SHARE:.0%} of the |mean weight|, or when its 95% interval excludes zero and "
        f"its |mean| is at least {T.MIN_SHARE:.0%} of the largest. It is settled when W ≥ "
        f"{T.STABLE_W}, top-k overlap ≥ {T.STABLE_JACCARD} and no sign flips; it is reported, "
        "and does not decide the verdict. With one run (Repeats 1), the runs are 40 bootstrap "
        "resamples of its sample: no extra model pass. Those vary around the sample's own "
        "weights, so the conclusion must also lead the next region by at least "
        f"{T.CONCLUSION_LEAD:g} standard deviations of that gap over the resamples. Stopping "
        "early stops once the conclusion is stable."
    )
    left, right = display.columns([1, 1], gap="large")
    with left:
        st.markdown(
            f"**Mean weight over the {stb.runs}, with its 95% interval** (top 15 by |mean|)"
        )
        st.altair_chart(
            charts.interval_chart(
                np.array(stb.mean),
                np.array(stb.ci_low),
                np.array(stb.ci_high),
                [n or None for n in ex.region_names],
            ),
            width="stretch",
        )
        st.caption(":green[■] for the class · :red[■] against it · black line: the 95% interval")
    with right:
        unsure = stb.inconsistent_sign
        st.markdown(f"**Sign consistency** (SLICE's sign entropy over the {stb.runs})")
        grey = st.checkbox(
            "Grey out regions whose sign is not consistent",
            True,
            key="tr_grey",
            help="A region whose weight is positive in some repeats and negative in others has "
            "sign entropy above 0: its direction cannot be read from this explanation.",
        )
        picture = lc.weight_overlay(
            *display.for_drawing(s.image, ex.segments),
            np.array(stb.mean),
            grey=unsure if grey else (),
            long_side=640,
        )
        st.image(picture, width="stretch")
        if unsure:
            worst = sorted(unsure, key=lambda i: -stb.sign_entropy[i])
            st.caption(
                f"{len(unsure)} of {ex.n_regions} regions change sign across the {stb.runs}"
                + (" (greyed out)" if grey else "")
                + ": "
                + ", ".join(
                    f"{charts.region_label(i, ex.region_names[i])} {stb.sign_entropy[i]:.2f} bits"
                    for i in worst[:8]
                )
                + (" …" if len(worst) > 8 else "")
                + ". 0 bits: one sign in every repeat; 1 bit: half for, half against."
            )
        else:
            st.caption(
                f"Every region keeps one sign in all {stb.runs} (sign entropy 0). "
                "The overlay shows the mean weights."
            )


def _convergence(ex: lc.Explanation) -> None:
    c = ex.trust.convergence
    st.markdown("#### Convergence")
    st.markdown(W.sentence(W.convergence_words(c).headline))
    if c.verdicts:
        st.caption(" · ".join(f"{n}: {v}" for n, v in zip(c.sizes, c.verdicts, strict=True)))
    if c.conclusion_agreement:  # the verdict's own figures: the conclusion's, then the detail's
        st.markdown("**The conclusion and the detail as N grows**")
        cols = {
            "conclusion holds (share of repeats)": c.conclusion_agreement,
            "detail: Kendall's W over the regions that matter": c.detail_kendall_w,
            "detail: top-k overlap": c.detail_topk,
        }
        st.caption(
            f"The conclusion is stable from {T.STABLE_CONCLUSION:.0%} of the repeats on (and "
            "its regions distinguishable from zero); the detail is settled when W ≥ "
            f"{T.STABLE_W} and the overlap ≥ {T.STABLE_JACCARD}."
        )
    else:  # an analysis saved before the verdict had two parts
        st.markdown("**Agreement of the repeats as N grows**")
        cols = {"Kendall's W (top-10)": c.kendall_w, "top-5 overlap": c.jaccard_top5}
    df = pd.DataFrame({"samples": c.sizes, **cols}).melt(
        "samples", var_name="measure", value_name="value"
    )
    st.altair_chart(
        alt.Chart(df)
        .mark_line(point=True)
        .encode(x="samples:Q", y="value:Q", color=_series("measure", order=list(cols)))
        .properties(height=240 + LEGEND_LINE * len(cols)),
        width="stretch",
    )


def _series(field: str, order: list[str] | None = None, *, below: bool = True) -> alt.Color:
    """A line chart's series by ``field``, named in full in its legend: under a half-width
    chart, one per line (at its side, Vega cut "deletion (most importan…", and side by side
    under it "detail: Kendall's W over t…"); at the side of a full-width one. A legend under
    the chart takes from the chart's height: :data:`LEGEND_LINE` px a series."""
    return alt.Color(
        f"{field}:N",
        sort=order,
        legend=alt.Legend(
            orient="bottom" if below else "right",
            direction="vertical",
            labelLimit=0,
            title=None,
        ),
    )


#: What a legend under a chart takes from its height, per series (px).
LEGEND_LINE = 40


def _kernels(ex: lc.Explanation) -> None:
    k = ex.trust.kernel_sweep
    st.markdown("#### Kernel width")
    w = np.array(k.weights)
    top = np.argsort(-np.abs(w).max(axis=0))[:8]
    rows = [
        {
            "width": str(width),
            "region": charts.region_label(int(j), ex.region_names[j]),
            "weight": float(w[i, j]),
        }
        for i, width in enumerate(k.widths)
        for j in top
    ]
    chart = (
        alt.Chart(pd.DataFrame(rows))
        .mark_line(point=True)
        .encode(x=alt.X("width:N", sort=[str(x) for x in k.widths]), y="weight:Q", color="region:N")
    )
    st.altair_chart(chart.properties(height=260), width="stretch")
    st.markdown(
        " · ".join(
            f"{width}: R² {r2:.3f}, top {t[:3]}"
            for width, r2, t in zip(k.widths, k.scores, k.top5, strict=True)
        )
    )
    said = W.sentence(W.kernel_words(k).headline)
    if k.sensitive:
        names = ", ".join(charts.region_label(i, ex.region_names[i]) for i in k.sensitive)
        st.warning(f"{said} Width-sensitive: {display.md(names)}.", icon=":material/warning:")
    else:
        st.success(said, icon=":material/check:")


def _faithfulness(ex: lc.Explanation) -> None:
    f = ex.trust.faithfulness
    st.markdown("#### Faithfulness")
    n = len(f.deletion)
    x = np.linspace(0, 1, n)
    df = pd.DataFrame(
        {
            "share of regions": np.concatenate([x, x]),
            "model output": f.deletion + f.insertion,
            "curve": ["deletion (most important first)"] * n + ["insertion"] * n,
        }
    )
    st.altair_chart(
        alt.Chart(df)
        .mark_line()
        .encode(x="share of regions:Q", y="model output:Q", color=_series("curve"))
        .properties(height=240 + LEGEND_LINE * 2),
        width="stretch",
    )
    good = f.beats_random
    st.markdown(
        f"Deletion AUC **{f.deletion_auc:.3f}** (random order {f.random_deletion_auc:.3f}; lower is "
        f"better) · insertion AUC **{f.insertion_auc:.3f}** (random {f.random_insertion_auc:.3f}; "
        f"higher is better) · surrogate R² on held-out perturbations **{f.heldout_r2:.3f}**"
    )
    (st.success if good else st.warning)(W.sentence(W.faithfulness_words(f).headline))


def _field_metrics(ex: lc.Explanation) -> None:
    rows = [dataclasses.asdict(r) for r in T.field_metric_rows(ex.trust)]
    if not rows:
        return
    st.markdown("#### The field's faithfulness metrics")
    st.caption(
        "Computed over the regions, as Quantus defines them (they agree with Quantus 0.6 within "
        "1e-5 on an equal-size grid). IROF reuses the deletion curve and faithfulness "
        "correlation reuses the held-out sample: no extra model pass; ROAD imputes and scores "
        "its own images."
    )
    st.table(pd.DataFrame(rows).rename(columns={"name": "metric"}).set_index("metric"))
    road = ex.trust.road
    if road is not None and road.fractions:
        df = pd.DataFrame(
            {
                "share of regions removed": road.fractions * 2,
                "model output": road.morf + road.lerf,
                "order": ["MoRF (most relevant first)"] * len(road.morf)
                + ["LeRF (least relevant first)"] * len(road.lerf),
            }
        )
        st.altair_chart(
            alt.Chart(df)
            .mark_line(point=True)
            .encode(
                x="share of regions removed:Q",
                y="model output:Q",
                color=_series("order", below=False),
            )
            .properties(height=220, title="ROAD: removal by noisy linear imputation"),
            width="stretch",
        )


def _fills(s: A.Analysis, ex: lc.Explanation) -> None:
    f = ex.trust.fills
    st.markdown("#### Does the conclusion depend on the fill?")
    cols = st.columns(len(f.fills))
    secs = f.seconds or [None] * len(f.fills)
    for col, name, w, overlap, rho, sec in zip(
        cols, f.fills, f.weights, f.top5_overlap_with_main, f.spearman[0], secs, strict=True
    ):
        with col:
            took = f", scored in {sec:.1f} s" if sec is not None else " (the explanation's fill)"
            st.image(
                display.to_display(
                    lc.top_regions(*display.for_drawing(s.image, ex.segments), np.array(w), k=3),
                    260,
                ),
                caption=f"{name}: top region {int(np.argmax(w))}, rank agreement {rho:.2f}, "
                f"top-5 overlap {overlap:.0%}{took}",
            )
    (st.success if f.agree else st.warning)(W.sentence(W.fills_words(f).headline))


s = state.get()
st.title("Trust")
st.caption(
    "A LIME explanation is a random, local approximation. Repeat it, vary the kernel and the "
    "fill, and check that hiding the regions it ranks first really changes the prediction."
)
if runtime.ready_classifier(s) is None:
    st.stop()
reg = caches.regions(s)
settings = trust_controls(s)
if st.button("Check the explanation", type="primary", key="trust_run"):
    try:
        s.trust_explanation = A.with_expected(
            s,
            explain_run.run_explain(
                s.image, reg, caches.run_key(s.image, reg, A.model_ref(s), settings), "Checking"
            ),
        )
    except (lc.LimecraftError, lc.ModelError) as e:
        display.error(f"The check failed: {e}")
if st.session_state.get("cancel-Checking"):
    st.info("The check was cancelled. Your regions and results are kept.")
ex = s.trust_explanation
if ex is None or not np.array_equal(ex.segments, reg.labels):
    st.info("Press **Check the explanation** to run the checks on the current regions.")
    st.stop()
st.caption(
    f"{display.md(ex.class_labels[0])} (class {ex.target}) · {ex.n_regions} regions · "
    f"{ex.run.samples_used} samples × {ex.config.trust.repeats} repeats · "
    f"{ex.timings['total_s']:.1f} s"
)
_stability(s, ex)
left, right = display.columns([1, 1], gap="large")
with left:
    if ex.trust.convergence is not None:
        _convergence(ex)
    if ex.trust.faithfulness is not None:
        _faithfulness(ex)
with right:
    if ex.trust.kernel_sweep is not None:
        _kernels(ex)
if ex.trust.irof is not None:
    _field_metrics(ex)
if ex.trust.fills is not None:
    _fills(s, ex)
st.divider()
localisation_panel(s, ex, "tr")
