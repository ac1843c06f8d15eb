"""Explain: the regions, the settings, the Explain button, and the results."""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core.limits import LIMITS
from pages.lib import analysis as A
from pages.lib import caches, compare_view, config_form, display, explain_run, frame, runtime, state
from pages.lib.session import session, set_value
from pages.lib.views import explain_controls, localisation_panel, results

frame.start()  # the sidebar and the page's frame, inside this page's run (pages/lib/frame.py)

STEPS = (
    "**1. Pick the regions** on *Craft regions*: automatic superpixels, regions you draw, "
    "superpixels you merge.",
    "**2. Explain** here: LIME hides regions at random and fits how the prediction changes.",
    "**3. Inspect**: recolour, move or remove a region and watch the prediction move.",
)


def first_steps() -> Any:
    """Three short steps on a first visit, until dismissed or the session's first explanation
    (then they do not come back for a new image). Returns their place on the page, emptied at
    the end of the run that explains (they would stay above the first result)."""
    if state.get().explanation is not None:
        session().steps_seen = True
    place = st.empty()
    if session().steps_seen:
        return place
    with place.container(border=True):
        st.markdown("**How it works**  \n" + "  \n".join(STEPS))
        st.button(
            "Got it",
            key="steps_ok",
            on_click=set_value,
            args=("steps_seen", True),
        )
    return place


def image_header(s: A.Analysis) -> None:
    """Which image and model, what the image shows, and whether the model can mean anything."""
    ref = A.model_ref(s)
    st.markdown(
        f"**{display.md(s.image_name)}**"
        + (f": {display.md(s.note)}" if s.note else "")
        + f"  \nmodel: {display.md(ref.display_name)}"
    )
    warning = runtime.model_fit_warning(s)
    if warning:
        st.warning(warning, icon=":material/warning:")


def _offer_more_samples(
    s: A.Analysis, ex: lc.Explanation, reg: lc.Regions, config: lc.ExplainConfig
) -> None:
    """When sampling reached its cap before the conclusion settled: say so, and offer to go
    on from the samples already scored (they are kept, and not scored again)."""
    es, stb = ex.trust.early_stop, ex.trust.stability
    if es is None or es.stopped or stb is None or stb.verdict == "stable":
        return
    if not np.any(ex.weights):  # the score never moved: more samples cannot settle anything
        return
    asked = ex.config.sampling.samples
    more = int(min(2 * asked, LIMITS["samples"].app[1]))
    st.info(
        f"The conclusion was not settled by {asked} samples: more samples may settle it. "
        f"Continuing keeps the {asked} scored so far and scores only the new ones.",
        icon=":material/more_time:",
    )
    if more > asked and st.button(f"Continue to {more} samples", key="explain_more"):
        if runtime.ready_classifier(s) is not None:
            try:
                bigger = caches.run_key(s.image, reg, A.model_ref(s), config.replace(samples=more))
                done = explain_run.run_explain(s.image, reg, bigger, live=True)
                A.set_explanation(s, done, config)  # the settings stay as the analyst typed them
                s.stopped_from = None
            except (lc.LimecraftError, lc.ModelError) as e:
                display.error(f"Explain failed: {e}")
                return
            st.rerun()


def settings_note(s: A.Analysis, config: lc.ExplainConfig) -> None:
    """Beside Explain: the settings that are not the defaults, and whether they came with the
    previous image (a new image keeps them: see state.replace_image), with one click back."""
    changed = config.changed()
    if not changed:
        return
    carried = session().carried
    source = carried[1] if carried is not None and carried[0] == s.id else None
    head = (
        f"Settings carried over from {display.md(source)}"
        if source is not None
        else "Settings not the defaults"
    )
    st.caption(f":orange[{head}: {display.md(config_form.describe_changes(changed))}.]")
    st.button(
        "Back to the defaults",
        key="settings_defaults",
        on_click=state.defaults_again,
        icon=":material/settings_backup_restore:",
        help="The app's default Explain settings for this image",
    )


s = state.get()
st.title("LIMEcraft")
steps = first_steps()
image_header(s)

reg = caches.regions(s)
labels = reg.labels
left, right = display.columns([1, 1])
with left:
    n_hand = A.handcrafted_count(s)
    photo = st.segmented_control(
        "Show",
        ["Photo with outlines", "Region map"],
        default="Photo with outlines",
        key="explain_view",
        label_visibility="collapsed",
    )
    image, drawn = display.for_drawing(s.image, labels)
    if photo == "Region map":
        picture = display.label_ids(lc.region_map(image, drawn, alpha=0.25), drawn)
    else:
        picture = display.outlined(image, drawn)
    st.image(
        picture,
        caption=f"{reg.n_regions} regions ({n_hand} handcrafted, {s.seg.method} superpixels); "
        "change them on Craft regions",
    )
    if reg.note:  # the count asked for could not be met, and why
        st.info(reg.note, icon=":material/info:")
with right:
    config = explain_controls(s)
    if config != s.config:  # typed settings are part of the analysis: saved, and back after F5
        s.config = config
    clicked = st.button("Explain", type="primary", key="explain")
    settings_note(s, config)
    if st.session_state.get("cancel-Explaining"):
        st.info("Explain was cancelled. Your regions and earlier results are kept.")
    # "Stop here" in the live result: finish with the samples scored so far (none rescored)
    # one run, keyed once: the settings validated above, the image hashed here
    asked = explain_run.stop_here_asked()
    run = caches.run_key(s.image, reg, A.model_ref(s), config) if clicked or asked else None
    stop_at = explain_run.stop_here_samples(asked, run) if run is not None else None
    if run is not None and (clicked or stop_at):
        if runtime.ready_classifier(s) is not None:
            try:
                if stop_at:
                    run = caches.run_key(run.image, reg, run.model, config.replace(samples=stop_at))
                ex = explain_run.run_explain(s.image, reg, run, live=True)
                A.set_explanation(s, ex, config)
                s.stopped_from = config.sampling.samples if stop_at else None
            except (lc.LimecraftError, lc.ModelError) as e:
                display.error(f"Explain failed: {e}")
    if s.explanation is not None:
        ex, t = s.explanation, s.explanation.timings
        run = ex.run
        used, asked = run.samples_used or ex.config.sampling.samples, ex.config.sampling.samples
        samples = f"{used} samples" + (
            f" (stopped early, {asked} allowed: the conclusion was already settled)"
            if used < asked
            else f" (you stopped here; the settings allow {s.stopped_from})"
            if s.stopped_from is not None and asked < s.stopped_from
            else ""
        )
        hand = f" ({run.handcrafted} handcrafted)" if run.handcrafted else ""
        took = f" in {t['total_s']:.1f} s" if "total_s" in t else ""
        st.success(
            f"Explained {ex.n_regions} regions{hand} with {samples}{took}"
            + (f", {run.model_passes} model passes." if run.model_passes else ".")
        )
        _offer_more_samples(s, ex, reg, config)

ex = s.explanation
if ex is not None and np.array_equal(ex.segments, labels):
    st.divider()
    st.subheader("Results")
    results(s, ex)
    st.divider()
    localisation_panel(s, ex, "ex")
    compare_view.section(s, ex, reg)
elif ex is not None:
    st.info("The regions changed since the last explanation; press Explain again.")
if s.explanation is not None:  # the first result is shown: the first steps have done their job
    session().steps_seen = True
    steps.empty()
