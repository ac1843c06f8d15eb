"""Explain's Compare section: LIME versus LIMEcraft, and several explainers side by side.

One section, two comparisons of the explanation on the page: the same settings over automatic
superpixels only (when the analyst drew regions), and other explainers over these very regions
(``lc.compare_explainers``): one overlay per method on one colour scale, their agreement, and
where they disagree, whether merging two adjacent regions would help. The comparison is kept
with the explanation (``Explanation.explainers``), so a reload and the analysis file keep it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core import render
from limecraft_core.agreement import normalise, top_k
from limecraft_core.comparison import NORMALISATION
from limecraft_core.explainer_table import EXPLAINERS
from limecraft_core.shapley import SHAPLEY_MAX_K
from pages.lib import analysis as A
from pages.lib import caches, display, explain_run, runtime
from pages.lib.session import session

#: The explainers a comparison starts with; exact Shapley joins them when K is small enough.
DEFAULT_METHODS = ("lime", "kernelshap", "occlusion", "rise")
#: Regions tinted each way on each method's picture, and the pictures' long side (px).
TINTED = 5
SIDE = 360
CRAFT = "pages/app_pages/craft.py"


def default_methods(n_regions: int) -> list[str]:
    """The explainers offered first: :data:`DEFAULT_METHODS`, with exact Shapley when its 2^K
    table is affordable (K <= SHAPLEY_MAX_K), in the table's order."""
    small = n_regions <= SHAPLEY_MAX_K
    return [m for m in EXPLAINERS if m in DEFAULT_METHODS or (small and m == "shapley")]


def region_names(ex: lc.Explanation) -> list[str]:
    """How the page names each region in a sentence: ``region 3`` or ``region 3 (tag)``."""
    return [f"region {i} ({n})" if n else f"region {i}" for i, n in enumerate(ex.region_names)]


def mean_feature_agreement(cmp: lc.Comparison) -> float:
    """The mean over pairs of methods of their top-k feature agreement (1: same top regions)."""
    return float(np.mean([p.feature for p in cmp.agreement.pairs]))


def section(s: A.Analysis, ex: lc.Explanation, reg: lc.Regions) -> None:
    """The Compare section under the results of ``ex`` (whose regions are ``reg``)."""
    st.divider()
    st.subheader("Compare")
    if s.hand:
        superpixels_only(s, ex)
    explainers(s, ex, reg)


def superpixels_only(s: A.Analysis, ex: lc.Explanation) -> None:
    """LIME versus LIMEcraft: the same settings over automatic superpixels only."""
    st.markdown("**LIME versus LIMEcraft**")
    st.caption(
        "The same settings over automatic superpixels only, beside your handcrafted regions."
    )
    if st.button("Compare with automatic superpixels only", key="compare"):
        try:
            auto = caches.regions(s, handcrafted=False)
            s.explanation_auto = explain_run.run_explain(
                s.image,
                auto,
                caches.run_key(s.image, auto, A.model_ref(s), s.config),
                "Comparing",
            )
        except (lc.LimecraftError, lc.ModelError) as e:
            display.error(f"Compare failed: {e}")
    if s.explanation_auto is None:
        return
    a, b = display.columns([1, 1])
    for col, e, title in (
        (a, s.explanation_auto, "Automatic superpixels (LIME)"),
        (b, ex, "With your regions (LIMEcraft)"),
    ):
        with col:
            i = e.class_index(ex.target) if ex.target in e.classes else 0
            r2 = lc.trust.r2_text(e.scores[i], e.class_weights[i])
            st.markdown(f"**{title}** · R² {r2}{' (nothing to fit)' if r2 == 'n/a' else ''}")
            st.image(
                display.to_display(
                    lc.top_regions(
                        *display.for_drawing(s.image, e.segments), e.class_weights[i], k=3
                    )
                )
            )
            top = np.argsort(-e.class_weights[i])[:3]
            st.caption(
                "top: "
                + ", ".join(
                    f"{j}{' ' + display.md(e.region_names[j]) if e.region_names[j] else ''} "
                    f"({e.class_weights[i, j]:+.3f})"
                    for j in top
                )
            )


def _use_kernelshap(key: str) -> None:
    """The multiselect ``key`` with KernelSHAP in place of exact Shapley (a callback: it runs
    before the widget is made)."""
    chosen = [m for m in st.session_state.get(key, []) if m != "shapley"]
    st.session_state[key] = chosen if "kernelshap" in chosen else [*chosen, "kernelshap"]


def explainers(s: A.Analysis, ex: lc.Explanation, reg: lc.Regions) -> None:
    """Several explainers over these regions: the choice, the run, and the result."""
    st.markdown("**Explainers side by side**")
    st.caption(
        "Other explainers over these same regions and settings, for the explained class: an "
        "explanation that several methods share is a property of the model, not of LIME."
    )
    small = ex.n_regions <= SHAPLEY_MAX_K
    key = f"cmp_methods_{'small' if small else 'large'}"  # its default depends on K
    methods = st.multiselect(
        "Explainers",
        list(EXPLAINERS),
        # given once: afterwards the widget's state holds the choice (set by a callback too)
        default=None if key in st.session_state else default_methods(ex.n_regions),
        format_func=lambda n: EXPLAINERS[n].title,
        key=key,
        help="; ".join(
            f"{e.title}: {e.help} (model passes: {e.cost})" for e in EXPLAINERS.values()
        ),
    )
    if st.button("Compare explainers", key="compare_explainers", disabled=len(methods) < 2):
        if runtime.ready_classifier(s) is not None:
            try:
                names = region_names(ex)
                cmp = explain_run.run_compare(s.image, reg, ex, A.model_ref(s), methods, names)
                A.set_comparison(s, cmp)
            except (lc.LimecraftError, lc.ModelError) as e:
                display.error(f"Compare failed: {display.md_sentence(e)}")
                if "shapley" in methods and not small:
                    st.button(
                        "Use KernelSHAP instead of exact Shapley",
                        key="cmp_use_kernelshap",
                        on_click=_use_kernelshap,
                        args=(key,),
                    )
    done = s.explanation.explainers if s.explanation is not None else None
    if done is not None:
        comparison(s, done, reg)


def comparison(s: A.Analysis, cmp: lc.Comparison, reg: lc.Regions) -> None:
    """A comparison: the agreement, one overlay per method, the table, the merge test."""
    ag = cmp.agreement
    st.markdown(f"**Agreement on the top {ag.k}:** {display.md_sentence(ag.sentence)}")
    before = session().agreement_before
    now = mean_feature_agreement(cmp)
    if before is not None and before[0] == s.id and before[2] != cmp.n_regions:
        st.markdown(
            f"Mean feature agreement before the merge {before[1]:.2f}, now {now:.2f}: the "
            + ("agreement improved." if now > before[1] else "agreement did not improve.")
        )
    image, drawn = display.for_drawing(s.image, reg.labels)
    for col, a, title in zip(
        display.columns([1] * len(cmp.attributions)), cmp.attributions, ag.methods, strict=True
    ):
        first = int(top_k(a.values, 1)[0])
        with col:
            st.markdown(f"**{display.md(title)}**")
            over = render.weight_overlay(
                image, drawn, normalise(a.values), k=TINTED, vmax=1.0, long_side=SIDE
            )
            said = f"first: region {first} ({a.values[first]:+.3g})"
            st.image(over, caption=said if np.any(a.values) else "every region 0")
    st.caption(
        f"One colour scale for every method: {NORMALISATION}. Green speaks for "
        f"{display.md(cmp.label)}, red against; the {TINTED} strongest regions each way are "
        f"tinted. {cmp.n_regions} regions, {cmp.passes} model passes."
    )
    st.dataframe(_pairs_table(cmp), hide_index=True)
    st.caption(
        f"Each pair of methods over their top {ag.k} regions: the share in both (feature), in "
        "the same place (rank), with the same sign (sign), both (signed rank); Spearman over "
        "all regions."
    )
    if ag.disagreeing:
        shown = ", ".join(str(r) for r in ag.disagreeing[:5])
        st.caption(f"Most disputed regions, most first: {shown}.")
    merge_suggestion(s, cmp, reg)


def _pairs_table(cmp: lc.Comparison) -> list[dict[str, Any]]:
    return [
        {
            "methods": f"{p.a} · {p.b}",
            "feature": round(p.feature, 2),
            "rank": round(p.rank, 2),
            "sign": round(p.sign, 2),
            "signed rank": round(p.signed_rank, 2),
            "Spearman": None if not np.isfinite(p.spearman) else round(p.spearman, 2),
        }
        for p in cmp.agreement.pairs
    ]


def merge_suggestion(s: A.Analysis, cmp: lc.Comparison, reg: lc.Regions) -> None:
    """The merge test's outcome; a suggested pair is one click from Craft's "Merge selected"."""
    hint = cmp.merge
    if hint is None:
        return
    how = (
        "the exact Shapley interaction index"
        if hint.estimator == "exact"
        else "the interaction estimated from the shared sample"
    )
    if hint.pair is None:
        st.caption(f"Merge test, by {how}: {display.md_sentence(hint.sentence)}")
        return
    a, b = hint.pair
    st.info(
        f"**Merge suggestion:** {display.md_sentence(hint.sentence)}  \nBy {how}; a merge is "
        f"suggested from |index| {hint.threshold:.2g} on (a fifth of the methods' scale).",
        icon=":material/merge:",
    )
    if st.button(f"Select regions {a} and {b} for merging", key="merge_hint", type="primary"):
        A.preselect(s, (reg.keys[a], reg.keys[b]))
        session().agreement_before = (s.id, mean_feature_agreement(cmp), cmp.n_regions)
        st.switch_page(CRAFT)
