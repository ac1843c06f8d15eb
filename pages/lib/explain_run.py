"""One Explain in the app: a progress bar with Cancel, the live result with "Stop here", the
explanation cache, and the run's mark in the store (a reload in the middle says so).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st

import limecraft_core as lc
import serving
from limecraft_core import render
from pages.lib import caches, identity, runtime, state
from pages.lib.display import VERDICT_TEXT, for_drawing, md, named_reason
from pages.lib.progress import ExplainProgress
from pages.lib.session import session, set_value
from pages.lib.session_liveness import session_alive

LIVE_TOP_K = 5  # regions tinted on each side in the live result


def live_result(
    slot: Any,
    image: np.ndarray,
    reg: lc.Regions,
    label: str,
    p: lc.Partial,
    stop_key: str | None,
) -> None:
    """The explanation so far, while it is computed: the top regions on the image, the verdict
    as it firms up, and (for Explain) a button that keeps this result."""
    over = render.weight_overlay(
        *for_drawing(image, reg.labels),
        p.weights,
        k=min(LIVE_TOP_K, reg.n_regions),
        min_share=render.MIN_SHARE,
        long_side=480,
    )
    stb = p.stability
    if stb is None:
        verdict = ":gray-badge[not judged yet] (from 200 samples on)"
    else:  # the conclusion, then its detail on a line of its own (as the result shows them)
        conclusion, detail = lc.trust.split_verdict(stb.reason)
        why = named_reason(conclusion, reg.names).split(": ", 1)[-1]
        when = "so far" if stb.samples in (None, p.samples) else f"at {stb.samples} samples"
        verdict = f"{VERDICT_TEXT[stb.verdict]} {when}: {md(why)}"
        if detail:
            verdict += "  \n" + lc.trust.words.detail_line(md(named_reason(detail, reg.names)))
    with slot.container(border=True):
        st.markdown(
            f"**Live result for {md(label)}** · {p.samples} of up to {p.allowed} samples  \n"
            + verdict
        )
        st.image(
            over,
            caption=f"top {LIVE_TOP_K} regions for (green) and against (red) the class, "
            "refined as samples come in",
            width="stretch",
        )
        if p.final:
            st.caption("Sampling is done: scoring each region hidden alone and kept alone…")
        elif stop_key is not None:
            st.button(
                f"Stop here and keep this result ({p.samples} samples)",
                key=f"stop_here_{p.samples}",
                on_click=set_value,
                args=("stop_here", {"key": stop_key, "samples": p.samples}),
                help="Finishes the explanation with the samples scored so far; nothing is "
                "scored twice",
            )


def stop_here_asked() -> dict[str, Any] | None:
    """What "Stop here" asked in the run before (its explanation's key and its sample count),
    read once: None when it was not pressed."""
    ses = session()
    asked, ses.stop_here = ses.stop_here, None
    return asked


def stop_here_samples(asked: dict[str, Any] | None, run: caches.RunKey) -> int | None:
    """The sample count the analyst chose with "Stop here" for this very Explain, or None."""
    if asked and asked["key"] == run.explanation:
        return int(asked["samples"])
    return None


def run_explain(
    image: np.ndarray,
    reg: lc.Regions,
    run: caches.RunKey,
    status_label: str = "Explaining",
    *,
    live: bool = False,
) -> lc.Explanation:
    """Explain with a progress bar (per batch, with time left), a Cancel button and, with
    ``live``, the result so far after each step, with a "Stop here" button. ``run`` holds the
    settings and the keys, made once per run (:func:`caches.run_key`)."""
    key, config = run.explanation, run.config
    cached = caches.explanation_cache().get(key)
    if cached is not None:
        return cached
    clf = runtime.classifier(run.model, config.speed.precision)
    bar = st.progress(0.0, text=f"{status_label}: starting…")
    cancel_slot = st.empty()
    cancel_slot.button("Cancel", key=f"cancel-{status_label}", help="Stops after the current batch")
    live_slot = st.empty() if live else None
    line = ExplainProgress(status_label)

    def progress(done: int, total: int) -> None:
        line.passes(done, total)
        # Each update is also where Streamlit stops this run when the user presses Cancel.
        bar.progress(line.fraction, text=line.text())

    def waiting(q: serving.QueueStatus) -> None:
        before = line.text()
        line.waiting(q.position)
        if line.text() != before:
            bar.progress(line.fraction, text=line.text())

    def partial(p: lc.Partial) -> None:
        live_result(live_slot, image, reg, clf.label(p.target), p, key)

    # only local models go through this process's work queue (a Ray Serve deployment batches
    # across sessions itself)
    alive = session_alive()
    runner = serving.queued(clf, runtime.work_queue(), alive=alive, on_wait=waiting)
    # Marked as running in the store until it ends, so that a reload (F5) in the middle of it
    # says so. A page that is closed or reloaded leaves the mark; Cancel or Stop here, which
    # rerun the script, leave it to the session's next run to clear (get()).
    app = session().app
    if app is not None:
        state.mark_running(app.id, status_label)
    try:
        ex = lc.explain(
            image,
            runner,
            segments=reg,
            config=config,
            progress=progress,
            partial=partial if live else None,
            memo=caches.score_memo(run.scene),
        )
    except (lc.LimecraftError, lc.ModelError):
        if app is not None and alive():  # it failed, and the page says so: not interrupted
            state.mark_running(app.id, None)
        raise
    if app is not None:
        state.mark_running(app.id, None)
    bar.empty()
    cancel_slot.empty()
    if live_slot is not None:
        live_slot.empty()
    caches.explanation_cache().put(key, ex)
    return ex


def run_compare(
    image: np.ndarray,
    reg: lc.Regions,
    ex: lc.Explanation,
    model: identity.ModelRef,
    methods: list[str],
    region_names: list[str],
) -> lc.Comparison:
    """The explainers ``methods`` over ``ex``'s regions ``reg``, its settings and its class,
    through the work queue, with a progress bar and a Cancel button (``lc.compare_explainers``)."""
    clf = runtime.classifier(model, ex.config.speed.precision)
    bar = st.progress(0.0, text="Comparing explainers: starting…")
    cancel_slot = st.empty()
    cancel_slot.button(
        "Cancel", key="cancel-Comparing explainers", help="Stops after the current batch"
    )
    line = ExplainProgress("Comparing explainers")

    def progress(done: int, total: int) -> None:
        line.passes(done, total)
        bar.progress(line.fraction, text=line.text())

    runner = serving.queued(clf, runtime.work_queue(), alive=session_alive())
    try:
        return lc.compare_explainers(
            image,
            runner,
            reg,
            methods,
            config=ex.config,
            target=ex.target,
            region_names=region_names,
            progress=progress,
        )
    finally:
        bar.empty()
        cancel_slot.empty()
