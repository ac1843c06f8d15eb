"""Pieces of page that more than one page shows: the Explain settings and the results."""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core import render
from limecraft_core import trust as T
from limecraft_core.config import spec
from limecraft_core.trust import words as W
from pages.lib import charts, config_form, display, runtime

WEAK_SHARE = render.MIN_SHARE  # regions under this share of the largest |weight| are untinted

BASIC = (
    "samples",
    "sampling",
    "fill",
    "kernel_width",
    "seed",
    "repeats",
    "early_stop",
    "precision",
)


def explain_controls(s: Any) -> lc.ExplainConfig:
    """The Explain settings, generated from the engine's schema: the common ones, then the
    rest under "Advanced". Returns the session's config when the values do not fit together
    (with the reason in the page)."""
    cur: lc.ExplainConfig = s.config
    # The closed box says when its settings are not the defaults (a new image keeps the
    # settings of the one before); a fixed key keeps it open while its label changes.
    label = "Settings · not the defaults" if cur.changed() else "Settings"
    with st.expander(label, expanded=False, key="settings_box"):
        values = config_form.settings_form(cur, BASIC)
        c1, c2 = st.columns(2)
        mode = c1.radio(
            "Classes",
            ["top classes", "one class"],
            index=0 if cur.targets.target is None else 1,
            key="set_class_mode",
            horizontal=True,
        )
        if mode == "top classes":
            values["top_labels"] = config_form.setting_widget(
                spec("top_labels"), cur.targets.top_labels, c2
            )
            values["target"] = None
        else:
            probs = runtime.predict(s, s.image)
            order = [int(i) for i in np.argsort(-probs)] if probs is not None else [0]
            values["target"] = c2.selectbox(
                "Class",
                order[:1000],
                index=order.index(cur.targets.target) if cur.targets.target in order else 0,
                key="set_target",
                format_func=lambda i: f"{runtime.class_label(s, i)} ({i})",
            )
        with st.expander("Advanced"):
            shown = [*BASIC, "top_labels", "target"]
            values |= config_form.settings_form(cur, config_form.advanced_names("explain", shown))
    try:
        return cur.replace(**values)
    except lc.LimecraftError as e:
        display.error(f"These settings do not fit together: {e}")
        return cur


VERDICT_TEXT = display.VERDICT_TEXT


FIDELITY_TEXT = {
    "good": ":green-badge[good]",
    "fair": ":orange-badge[fair]",
    "low": ":red-badge[low]",
    "none": ":gray-badge[nothing to fit]",  # the score never moves: R² is 0/0
}


def low_fit_warning(r2: float) -> str:
    """The warning under a low surrogate fit (R² under 0.5), with R² to as many decimals as
    "less than half" needs to be true of the number shown (0.4952 is "0.495", never "0.50")."""
    digits = 3
    while round(r2, digits) >= 0.5 and digits < 8:
        digits += 1
    return (
        f"R² is {r2:.{digits}f}: the linear surrogate explains less than half of how the model's "
        "output varies over the samples, so the weights are only a rough guide. Try fewer or "
        "larger regions, more samples, or a wider kernel."
    )


def verdict_badge(ex: lc.Explanation) -> str:
    """Markdown for the stability verdict of an explanation, its conclusion only (the detail is
    :func:`verdict_detail`'s line), or why there is none."""
    st_ = ex.trust.stability
    if st_ is None:
        return ":gray-badge[stability not checked]"
    if st_.reason:  # "stable: the conclusion holds: region 0 is first in all 40 resamples"
        conclusion = T.split_verdict(st_.reason)[0]
        why = display.named_reason(conclusion, ex.region_names).split(": ", 1)[-1]
        return f"{VERDICT_TEXT[st_.verdict]} over {st_.runs}: {display.md(why)}"
    return (  # an explanation saved before the verdict judged the regions that matter
        f"{VERDICT_TEXT[st_.verdict]} over {st_.runs} "
        f"(Kendall's W {st_.kendall_w:.2f}, top-5 overlap {st_.jaccard_top5:.2f})"
    )


def verdict_detail(ex: lc.Explanation) -> str:
    """The verdict's detail as a line of its own, e.g. "The detail: the order of the 9 other
    regions that matter is not settled (...)", or "" when it has none."""
    st_ = ex.trust.stability
    detail = T.split_verdict(st_.reason)[1] if st_ is not None and st_.reason else ""
    if not detail:
        return ""
    return T.words.detail_line(display.md(display.named_reason(detail, ex.region_names)))


def results(s: Any, ex: lc.Explanation, key: str = "res", image: np.ndarray | None = None) -> None:
    """Overlays, table, chart and fidelity for one explanation (of ``image``, default the loaded one)."""
    c1, c2, c3 = display.columns([2, 1, 1])
    cls = c1.selectbox(
        "Class",
        list(ex.classes),
        key=f"{key}_class",
        format_func=lambda c: f"{ex.class_labels[ex.classes.index(c)]} ({c})",
    )
    i = ex.class_index(cls)
    most = max(1, min(20, ex.n_regions))
    if most > 1:
        k = c2.slider(
            "Top k for and k against",
            1,
            most,
            min(5, most),
            key=f"{key}_k",
            help="How many regions are tinted and charted on each side: the k with the largest "
            "weights for the class, and the k with the largest weights against it",
        )
    else:  # a slider from 1 to 1 cannot be drawn
        k = 1
        c2.markdown("**1 region**: the whole image is one feature")
    weak = c3.toggle(
        "Tint weak regions",
        False,
        key=f"{key}_weak",
        help=f"Also tint regions under {WEAK_SHARE:.0%} of the largest |weight|",
    )
    weights, deltas = ex.class_weights[i], ex.deltas[i]
    img = image if image is not None else s.image
    # the pictures are drawn from display-sized copies: a 24 Mpx photo's would take seconds
    if img.shape[:2] == ex.segments.shape:
        img, seg = display.for_drawing(img, ex.segments)
    else:  # a restored explanation without its image
        seg = display.labels_for_drawing(ex.segments)
        img = _restored_image(seg)
    r2, fit = ex.scores[i], T.fidelity(ex.scores[i], weights)
    badge = FIDELITY_TEXT[fit]
    warning = runtime.model_fit_warning(s)
    if warning:  # the badges would lend a meaningless prediction credibility
        badge = ":gray-badge[not meaningful]"
    st.markdown(
        f"**{display.md(ex.class_labels[i])}** · model output {ex.predictions[i]:.3f} · surrogate fidelity "
        f"R² = **{T.r2_text(r2, weights)}** {badge}"
        + ("" if warning else f" · {verdict_badge(ex)}")
    )
    detail = "" if warning else verdict_detail(ex)
    if detail:
        st.caption(detail)
    top, weighted = int(np.argmax(weights)), bool(np.any(weights))
    if not weighted:
        st.markdown(
            f"No region carries any weight for {display.md(ex.class_labels[i])}: its score is "
            "the same for every sample, so hiding regions does not change it."
        )
    else:
        st.markdown(
            f"Strongest region for {display.md(ex.class_labels[i])}: "
            f"**{display.md(ex.region_names[top] or f'region {top}')}** (id {top}, weight "
            f"{weights[top]:+.3f})"
        )
    if warning:
        st.warning(warning, icon=":material/warning:")
    elif fit == "low":  # no weight at all is said above: nothing to fit, not a bad fit
        st.warning(low_fit_warning(r2), icon=":material/info:")
    names = [n or None for n in ex.region_names]
    pic, chart = display.columns([3, 2])
    with pic:
        t1, t2, t3 = st.tabs(["Top regions", "Heatmap", "Prediction change"])
        with t1:
            over = render.weight_overlay(
                img,
                seg,
                weights,
                k=k,
                min_share=WEAK_SHARE,
                show_weak=weak,
                long_side=display.DISPLAY_WIDTH,
            )
            legend = render.overlay_legend(
                over.shape[1],
                class_label=ex.class_labels[i],
                k=k,
                min_share=WEAK_SHARE,
                show_weak=weak,
            )
            st.image(render.stack_vertically(over, legend, gap=6), width="stretch")
        with t2:
            hm = lc.heatmap(img, seg, weights)
            st.image(display.to_display(hm.image), caption="region weights", width="stretch")
            _colorbar(hm)
        with t3:
            dm = lc.delta_map(img, seg, deltas)
            st.image(
                display.to_display(dm.image),
                caption="output drop when only this region is hidden (green: the output falls)",
                width="stretch",
            )
            _colorbar(dm)
    with chart:
        st.markdown(f"**Weights** for {display.md(ex.class_labels[i])}")
        st.altair_chart(charts.weights_chart(weights, names, k), width="stretch")
        st.caption(charts.CAPTION)
        others = charts.others_line(weights, k)
        if others:  # in words, not a bar: their sum can outgrow every bar drawn
            st.caption(others)
    rows = ex.regions_table(cls)
    order = np.argsort(-np.abs(weights))
    table = {
        "id": [rows[j]["id"] for j in order],
        "name": [rows[j]["name"] for j in order],
        "origin": [rows[j]["origin"] for j in order],
        "pixels": [rows[j]["pixels"] for j in order],
        "weight": [rows[j]["weight"] for j in order],
        "Δ when hidden": [rows[j]["delta"] for j in order],
        "score kept alone": [rows[j]["kept_alone"] for j in order],
    }
    with st.expander(f"All {ex.n_regions} regions (sorted by |weight|)"):
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


def _colorbar(hm: lc.Heatmap) -> None:
    st.image(hm.colorbar, width=256)
    st.caption(f"{charts.value(hm.vmin)} ← 0 → {charts.value(hm.vmax)}")


def _restored_image(labels: np.ndarray) -> np.ndarray:
    """A restored explanation without its image: show its regions on gray."""
    return lc.region_map(np.full((*labels.shape, 3), 200, np.uint8), labels)


PICTURES = {  # name -> picture of (image, labels, explanation)
    "top regions": lambda im, lab, ex: lc.top_regions(im, lab, ex.weights, k=5),
    "weight heatmap": lambda im, lab, ex: lc.heatmap(im, lab, ex.weights).image,
    "prediction change when hidden": lambda im, lab, ex: lc.delta_map(im, lab, ex.deltas[0]).image,
    "regions": lambda im, lab, ex: lc.region_map(im, lab),
}


def full_size_png(name: str, image: np.ndarray, ex: lc.Explanation) -> bytes:
    """The download: the picture at the image's own size, drawn when the button is pressed."""
    return display.png_bytes(PICTURES[name](image, ex.segments, ex))


# ----------------------------------------------------------------------------- localisation


#: The app's way to a closer measure, where the expected regions miss the expected area.
LOCALISATION_ADVICE = "draw the area as a region on the Craft page"


def _region_called(ex: lc.Explanation, i: int) -> str:
    """Region ``i`` as the app calls it in a sentence: "0 tag" (its id and name), or "region 3"."""
    return charts.region_label(i, ex.region_names[i]) if ex.region_names[i] else f"region {i}"


def localisation_panel(s: Any, ex: lc.Explanation, key: str) -> None:
    """ "Does the model look where you look?": mark handcrafted regions as expected and read
    relevance mass, relevance rank accuracy and the pointing game (no model pass)."""
    from pages.lib import analysis as A

    st.markdown("#### Does the model look where you look?")
    area = s.expected_area is not None
    if not s.hand and not area:
        st.caption(
            "Draw the region you expect the model to rely on (for example the object) on the "
            "Craft page, then mark it here as expected: LIMEcraft says how much of the "
            "explanation falls inside it."
        )
        return
    names = {h.uid: f"{h.name} ({i})" for i, h in enumerate(s.hand)}
    if area:
        names[A.AREA] = "the audit's expected mask"
    marked = A.expected_ids(s)
    chosen = st.multiselect(
        "Expected regions",
        list(names),
        default=[u for u in names if u in marked],
        format_func=names.get,
        key=f"{key}_expected_{'-'.join(sorted(marked))}",
        help="The handcrafted regions (and the expected mask an audit came with) you expect "
        "the model to rely on. Relevance mass, rank accuracy and the pointing game read the "
        "weights: no model pass.",
    )
    if set(chosen) != marked:
        A.set_expected(s, set(chosen))
        st.rerun()
    loc = ex.trust.localisation
    if not chosen or loc is None:
        st.caption("Mark one or more regions as expected to measure this.")
        return
    a, b, c = display.columns([1, 1, 1])
    a.metric(
        "Relevance mass",
        f"{loc.relevance_mass:.0%}",
        help="Share of the positive weight on the expected regions (Arras et al.). Higher is "
        "better.",
    )
    b.metric(
        "Rank accuracy",
        f"{loc.relevance_rank_accuracy:.0%}",
        help=f"Of the top {loc.expected} regions by weight, the share that is expected. Higher is "
        "better.",
    )
    c.metric(
        "Pointing game",
        "hit" if loc.pointing_game else "miss",
        help="Is the region with the largest weight expected? (Zhang et al.)",
    )
    words = W.localisation_words(loc, LOCALISATION_ADVICE)
    said = T.name_regions(words.headline, lambda i: _region_called(ex, i))
    show = {"good": st.success, "warn": st.warning, "bad": st.warning}.get(words.tone, st.info)
    icon = ":material/my_location:" if words.tone == "good" else ":material/warning:"
    show(W.sentence(display.md(said)), icon=icon)
