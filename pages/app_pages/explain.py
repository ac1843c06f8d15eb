"""Explain: the regions, the settings, the Explain button, and the results."""

from __future__ import annotations

import numpy as np
import streamlit as st

import limecraft_core as lc
from pages.lib import analysis as A
from pages.lib import display, state
from pages.lib.views import explain_controls, results

s = state.get()
st.title("LIMEcraft")
st.caption(
    f"Image: {display.md(s.image_name)} · model: {display.md(s.model_name.rsplit('/', 1)[-1])}"
)

reg = state.regions(s)
labels = reg.labels
left, right = st.columns([1, 1])
with left:
    n_hand = A.handcrafted_count(s)
    st.image(
        display.label_ids(lc.region_map(s.image, labels, alpha=0.25), labels),
        caption=f"{reg.n_regions} regions ({n_hand} handcrafted, {s.seg.method} superpixels); "
        "change them on Craft regions",
    )
with right:
    config = explain_controls(s)
    clicked = st.button("Explain", type="primary", key="explain")
    if st.session_state.get("cancel-Explaining"):
        st.info("Explain was cancelled. Your regions and earlier results are kept.")
    if clicked:
        if state.ready_classifier(s) is not None:
            try:
                ex = state.run_explain(s.image, reg, s.model_name, config)
                A.set_explanation(s, ex, config)
            except (lc.LimecraftError, lc.ModelError) as e:
                display.error(f"Explain failed: {e}")
    if s.explanation is not None:
        ex, t = s.explanation, s.explanation.timings
        run = ex.run
        used, asked = run.samples_used or ex.config.sampling.samples, ex.config.sampling.samples
        samples = f"{used} samples" + (
            f" (stopped early: stable; {asked} allowed)" if used < asked else ""
        )
        hand = f" ({run.handcrafted} handcrafted)" if run.handcrafted else ""
        took = f" in {t['total_s']:.1f} s" if "total_s" in t else ""
        st.success(
            f"Explained {ex.n_regions} regions{hand} with {samples}{took}"
            + (f", {run.model_passes} model passes." if run.model_passes else ".")
        )

ex = s.explanation
if ex is not None and np.array_equal(ex.segments, labels):
    st.divider()
    st.subheader("Results")
    results(s, ex)
    if s.hand:
        st.divider()
        st.subheader("LIME versus LIMEcraft")
        st.caption(
            "The same settings over automatic superpixels only, beside your handcrafted regions."
        )
        if st.button("Compare with automatic superpixels only", key="compare"):
            try:
                s.explanation_auto = state.run_explain(
                    s.image,
                    state.regions(s, handcrafted=False),
                    s.model_name,
                    s.config,
                    "Comparing",
                )
            except (lc.LimecraftError, lc.ModelError) as e:
                display.error(f"Compare failed: {e}")
        if s.explanation_auto is not None:
            a, b = st.columns(2)
            for col, e, title in (
                (a, s.explanation_auto, "Automatic superpixels (LIME)"),
                (b, ex, "With your regions (LIMEcraft)"),
            ):
                with col:
                    i = e.class_index(ex.target) if ex.target in e.classes else 0
                    st.markdown(f"**{title}** · R² {e.scores[i]:.3f}")
                    st.image(
                        display.to_display(
                            lc.top_regions(s.image, e.segments, e.class_weights[i], k=3)
                        )
                    )
                    top = np.argsort(-e.class_weights[i])[:3]
                    st.caption(
                        "top: "
                        + ", ".join(
                            f"{j}{' ' + display.md(e.region_names[j]) if e.region_names[j] else ''} ({e.class_weights[i, j]:+.3f})"
                            for j in top
                        )
                    )
elif ex is not None:
    st.info("The regions changed since the last explanation; press Explain again.")
