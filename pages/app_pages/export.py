"""Export: overlays, the explanation JSON, the regions CSV, an HTML report; restore from JSON."""

from __future__ import annotations

import functools

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core import trust as T
from limecraft_core.io.report import (
    PredictionChange,
    ReportEdit,
    ReportTransplant,
    html_report,
    regions_csv,
)
from pages.lib import analysis as A
from pages.lib import analysis_file as AF
from pages.lib import caches, config_form, display, frame, runtime, state, views
from pages.lib.analysis_doc import MAX_JSON_BYTES
from pages.lib.session import session

frame.start()  # the sidebar and the page's frame, inside this page's run (pages/lib/frame.py)


def _restore(s: A.Analysis) -> None:
    """Restore an analysis file (everything comes back, its image too) or, as before, a plain
    explanation JSON of the loaded image."""
    up = st.session_state.get("restore_upload")
    if up is None:
        return
    data = up.getvalue()
    try:
        if len(data) > MAX_JSON_BYTES:
            raise lc.LimecraftError(f"the file is over {MAX_JSON_BYTES // 2**20} MB")
        if b'"limecraft-analysis"' in data[:4096]:
            restored = AF.from_json(data)
            state.adopt(restored)
            held = ", ".join(A.contents(restored)) or "its image, with no regions or results yet"
        else:
            ex = lc.Explanation.from_json(data)
            A.restore_explanation(s, ex)
            config_form.forget_widgets()  # the settings widgets show the restored settings
            held = f"the explanation of this image over {ex.n_regions} regions"
    except (lc.LimecraftError, RecursionError, OverflowError, MemoryError) as e:
        # Nesting too deep, or a number too large for an index: refused, like any bad file.
        detail = str(e) or type(e).__name__
        if isinstance(e, RecursionError):
            detail = "the JSON is nested too deeply"
        session().restore_note = f"That file was not restored: {display.md(detail)}"
        return
    session().restore_note = None
    session().restored_note = f"Restored **{display.md(up.name)}**: {held}."


def report_edits(s: A.Analysis) -> list[ReportEdit]:
    """The inspection for the report: each edit with the image before and after it and how the
    top 5 classes moved; after two or more, all of them together (original -> edited)."""
    if not s.edits:
        return []
    from limecraft_core.edits import apply_edits

    reg = caches.regions(s)
    described = A.edit_names(s, reg.names)
    # The app applies the edits cumulatively, from the original each time: so does the report.
    images = [s.image] + [
        apply_edits(s.image, reg.labels, s.edits[: i + 1]).image for i in range(len(s.edits))
    ]
    scores = [runtime.predict(s, im) for im in images]
    order = [] if scores[0] is None else np.argsort(-scores[0])[:5]

    def step(text: str, i: int, j: int) -> ReportEdit:
        a, b = scores[i], scores[j]
        changes = (
            []
            if a is None or b is None
            else [
                PredictionChange(runtime.class_label(s, int(c)), float(a[c]), float(b[c]))
                for c in order
            ]
        )
        return ReportEdit(text, images[i], images[j], changes)

    steps = [step(text, i, i + 1) for i, text in enumerate(described)]
    if len(steps) > 1:
        steps.append(step(f"all {len(steps)} edits together", 0, len(steps)))
    return steps


s = state.get()
st.title("Export")
stem = s.image_name.rsplit(".", 1)[0].replace(" ", "_")[:60] or "image"
st.download_button(
    "Analysis (JSON)",
    AF.to_json(s),
    f"{stem}_analysis.json",
    "application/json",
    key="dl-analysis",
    type="primary",
    icon=":material/save:",
    help="Everything: the image, regions, names, merges, settings, edits and results. "
    "Restore it below, here or in another browser.",
)
ex = s.explanation
if ex is None or ex.segments.shape != s.image.shape[:2]:
    st.info(
        "No explanation to export yet: press **Explain** on the Explain page first. "
        "You can also restore an analysis or an explanation below."
    )
else:
    st.subheader("Downloads")
    cols = st.columns(4)
    # the previews from display-sized copies; each download at full size, built when pressed
    image, labels = display.for_drawing(s.image, ex.segments)
    for col, (name, draw) in zip(cols, views.PICTURES.items(), strict=True):
        with col:
            st.image(display.to_display(draw(image, labels, ex), 240), caption=name)
            st.download_button(
                "PNG",
                functools.partial(views.full_size_png, name, s.image, ex),
                f"{stem}_{name.replace(' ', '_')}.png",
                "image/png",
                key=f"dl-{name}",
            )
    c1, c2, c3 = st.columns(3)
    c1.download_button(
        "Explanation (JSON)",
        ex.to_json(indent=1),
        f"{stem}_explanation.json",
        "application/json",
        key="dl-json",
        help="Every setting, the versions, and the regions",
    )
    c2.download_button(
        "Regions table (CSV)", regions_csv(ex), f"{stem}_regions.csv", "text/csv", key="dl-csv"
    )
    notes = []
    if T.fidelity(ex.score, ex.weights) == "low":
        notes.append(f"The surrogate's R² is {ex.score:.2f}: treat the weights as a rough guide.")
    # The Trust page's checks go in the report when they ran on the explanation's regions.
    trust = s.trust_explanation
    if trust is not None and (
        trust.region_keys != ex.region_keys or not np.array_equal(trust.segments, ex.segments)
    ):
        trust = None
    # LIME versus LIMEcraft, when it ran on this image; Inspect's last paste, kept with the analysis
    auto = s.explanation_auto
    if auto is not None and auto.segments.shape != ex.segments.shape:
        auto = None
    paste = s.paste
    transplant = None
    if paste is not None:
        transplant = ReportTransplant.of(
            paste.result,
            paste.names,
            paste.pictures,
            region=paste.region,
            label=lambda i: runtime.class_label(s, i),
        )
    # The report draws its own large pictures, with legends, from the explanation. It is a few
    # MB: built when the button is pressed (html_report is pure), not on every rerun.
    page = functools.partial(
        html_report,
        image=s.image,
        explanation=ex,
        edits=report_edits(s),
        source=s.image_name,
        notes=tuple(notes),
        trust=trust,
        comparison=auto,
        transplant=transplant,
        defaults=A.default_config(s),  # the app's, not the engine's (SLIC, not quickshift)
    )
    c3.download_button(
        "Report (HTML)",
        page,
        f"{stem}_report.html",
        "text/html",
        key="dl-report",
        help="One self-contained page to read or print: the conclusion, pictures, trust "
        "checks (the Trust page's too, when they ran on these regions), LIME versus LIMEcraft, "
        "the region pasted into other images, edits, regions and settings",
    )

st.divider()
st.subheader("Restore")
st.file_uploader(
    "An analysis saved from LIMEcraft (it brings its image), or an explanation JSON of the "
    "image that is loaded now",
    type=["json"],
    key="restore_upload",
    on_change=_restore,
    args=(s,),
)
if session().restore_note:
    display.error(session().restore_note)
restored_note, session().restored_note = session().restored_note, None  # said once
if restored_note:
    st.success(restored_note, icon=":material/restore:")
