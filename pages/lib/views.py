"""Pieces of page that more than one page shows: the Explain settings and the results."""

from __future__ import annotations

import numpy as np
import streamlit as st

import limecraft_core as lc
from pages.lib import state

LOW_R2 = 0.5


def explain_controls(s: state.AppState) -> state.ExplainSettings:
    """The Explain settings; defaults are the engine's."""
    cur = s.settings
    with st.expander("Settings", expanded=False):
        c1, c2 = st.columns(2)
        samples = c1.number_input(
            "Samples (N)",
            50,
            20000,
            cur.samples,
            50,
            key="set_samples",
            help="Perturbed images the model sees; more is steadier and slower",
        )
        sampling = c2.selectbox(
            "Sampling",
            lc.SCHEMES,
            index=lc.SCHEMES.index(cur.sampling),
            key="set_sampling",
            help="bernoulli is lime's scheme",
        )
        fills = [*lc.FILLS, "custom colour"]
        fill_now = cur.fill if cur.fill in lc.FILLS else "custom colour"
        fill = c1.selectbox(
            "Fill for hidden regions", fills, index=fills.index(fill_now), key="set_fill"
        )
        if fill == "custom colour":
            fill = c2.color_picker(
                "Fill colour",
                cur.fill if cur.fill.startswith("#") else "#808080",
                key="set_fill_colour",
            )
        uniform = c2.checkbox("Uniform kernel", cur.kernel_width == "uniform", key="set_uniform")
        width = c1.number_input(
            "Kernel width",
            0.01,
            10.0,
            0.25 if cur.kernel_width == "uniform" else float(cur.kernel_width),
            0.05,
            key="set_kw",
            disabled=uniform,
        )
        seed = c2.number_input("Seed", 0, 2**31 - 1, cur.seed, key="set_seed")
        repeats = c1.number_input(
            "Repeats (stability check)",
            1,
            20,
            cur.repeats,
            key="set_repeats",
            help="Explain with this many seeds, in one batched pass, and show a stability verdict",
        )
        early = c1.checkbox(
            "Stop early when stable",
            cur.early_stop is not None,
            key="set_early",
            help="Stop sampling once two independent halves of the samples agree on the ranking "
            "(Kendall's W at least 0.9); fewer model passes for the same confidence",
        )
        precisions = ["auto", "fp32", "bf16"]
        precision = c2.selectbox(
            "Precision",
            precisions,
            index=precisions.index(cur.precision) if cur.precision in precisions else 0,
            key="set_precision",
            help="auto: bf16 on a GPU, fp32 on a CPU. bf16 on a CPU is about 2x faster for "
            "convolutional networks, with slightly different weights",
        )
        mode = c1.radio(
            "Classes", ["top classes", "one class"], key="set_class_mode", horizontal=True
        )
        target, top = None, 1
        if mode == "top classes":
            top = c2.number_input("How many top classes", 1, 10, cur.top_labels, key="set_top")
        else:
            probs = state.predict(s, s.image)
            n = len(probs) if probs is not None else 1
            order = [int(i) for i in np.argsort(-probs)] if probs is not None else [0]
            target = c2.selectbox(
                "Class",
                order[: min(n, 1000)],
                key="set_target",
                format_func=lambda i: f"{state.class_label(s, i)} ({i})",
            )
    return state.ExplainSettings(
        samples=int(samples),
        sampling=sampling,
        fill=fill,
        kernel_width="uniform" if uniform else float(width),
        seed=int(seed),
        top_labels=int(top),
        target=target,
        repeats=int(repeats),
        early_stop=0.9 if early else None,
        precision=precision,
    )


VERDICT_TEXT = {
    "stable": ":green-badge[stable]",
    "borderline": ":orange-badge[borderline]",
    "unstable": ":red-badge[unstable]",
}


def verdict_badge(ex: lc.Explanation) -> str:
    """Markdown for the stability verdict of an explanation (or why there is none)."""
    st_ = ex.trust.get("stability")
    if not st_:
        return ":gray-badge[stability not checked] (set Repeats to 2 or more)"
    return (
        f"{VERDICT_TEXT[st_['verdict']]} over {st_['repeats']} repeats "
        f"(Kendall's W {st_['kendall_w']:.2f}, top-5 overlap {st_['jaccard_top5']:.2f})"
    )


def results(
    s: state.AppState, ex: lc.Explanation, key: str = "res", image: np.ndarray | None = None
) -> None:
    """Overlays, table, chart and fidelity for one explanation (of ``image``, default the loaded one)."""
    c1, c2, c3 = st.columns([2, 1, 1])
    cls = c1.selectbox(
        "Class",
        list(ex.classes),
        key=f"{key}_class",
        format_func=lambda c: f"{ex.class_labels[ex.classes.index(c)]} ({c})",
    )
    i = ex.class_index(cls)
    k = c2.slider(
        "Top k regions", 1, max(1, min(20, ex.n_regions)), min(5, ex.n_regions), key=f"{key}_k"
    )
    show_b = c3.toggle("Boundaries", True, key=f"{key}_bounds")
    weights, deltas = ex.class_weights[i], ex.deltas[i]
    img = image if image is not None else s.image
    if img.shape[:2] != ex.segments.shape:
        img = _restored_image(ex)
    base = lc.boundaries(img, ex.segments, color=(1, 1, 0)) if show_b else img
    r2 = ex.scores[i]
    badge = (
        ":green-badge[good]"
        if r2 >= 0.8
        else ":orange-badge[fair]"
        if r2 >= LOW_R2
        else ":red-badge[low]"
    )
    st.markdown(
        f"**{state.md(ex.class_labels[i])}** · model output {ex.predictions[i]:.3f} · surrogate fidelity "
        f"R² = **{r2:.3f}** {badge} · {verdict_badge(ex)}"
    )
    if r2 < LOW_R2:
        st.warning(
            f"R² is {r2:.2f}: the linear surrogate explains less than half of how the model's output "
            "varies over the samples, so the weights are only a rough guide. Try fewer or larger "
            "regions, more samples, or a wider kernel.",
            icon=":material/info:",
        )
    t1, t2, t3 = st.tabs(["Top regions", "Heatmap", "Prediction change"])
    with t1:
        over = lc.top_regions(base, ex.segments, weights, k=k, show_boundaries=True)
        st.image(state.to_display(over), caption=f"top {k} regions for (green) and against (red)")
    with t2:
        hm = lc.heatmap(base, ex.segments, weights)
        st.image(state.to_display(hm.image), caption="region weights")
        _colorbar(hm)
    with t3:
        dm = lc.delta_map(base, ex.segments, deltas)
        st.image(
            state.to_display(dm.image),
            caption="output drop when only this region is hidden (green: the output falls)",
        )
        _colorbar(dm)
    rows = ex.regions_table(cls)
    order = np.argsort(-np.abs(weights))
    table = {
        "id": [rows[j]["id"] for j in order],
        "name": [rows[j]["name"] for j in order],
        "pixels": [rows[j]["pixels"] for j in order],
        "weight": [rows[j]["weight"] for j in order],
        "Δ when hidden": [rows[j]["delta"] for j in order],
        "score kept alone": [rows[j]["kept_alone"] for j in order],
    }
    a, b = st.columns([3, 2])
    with a:
        st.markdown("**Regions** (sorted by |weight|)")
        st.dataframe(
            table,
            hide_index=True,
            width="stretch",
            height=320,
            column_config={
                "weight": st.column_config.NumberColumn(format="%+.4f"),
                "Δ when hidden": st.column_config.NumberColumn(format="%+.4f"),
                "score kept alone": st.column_config.NumberColumn(format="%.4f"),
            },
        )
    with b:
        st.markdown("**Weights**")
        top = order[: min(20, len(order))]
        st.bar_chart(
            {
                "region": [f"{j} {rows[j]['name']}".strip() for j in top],
                "weight": [float(weights[j]) for j in top],
                "effect": ["for the class" if weights[j] > 0 else "against" for j in top],
            },
            x="region",
            y="weight",
            color="effect",
            horizontal=True,
            height=320,
            sort=False,
        )


def _colorbar(hm: lc.Heatmap) -> None:
    st.image(hm.colorbar, width=256)
    st.caption(f"{hm.vmin:+.3g} ← 0 → {hm.vmax:+.3g}")


def _restored_image(ex: lc.Explanation) -> np.ndarray:
    """A restored explanation without its image: show its regions on gray."""
    return lc.region_map(np.full((*ex.segments.shape, 3), 200, np.uint8), ex.segments)
