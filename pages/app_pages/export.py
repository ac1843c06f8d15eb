"""Export: overlays, the explanation JSON, the regions CSV, an HTML report; restore from JSON."""

from __future__ import annotations

import json
import re

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core.report import html_report, regions_csv
from pages.lib import state

MAX_JSON_BYTES = 100 * 2**20


def _clamp(value: object, lo: float, hi: float, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        return default
    return min(max(value, lo), hi)


def restored_settings(
    saved: dict, n_classes: int, current: state.ExplainSettings
) -> state.ExplainSettings:
    """The Explain settings of a restored explanation, within what the settings controls accept.

    A JSON file is untrusted: a value of the wrong type falls back to the current setting, and
    a number is clamped to the control's range (a widget given a value outside its range would
    stop the page).
    """
    fill = saved.get("fill")
    if not (isinstance(fill, str) and (fill in lc.FILLS or re.fullmatch(r"#[0-9a-fA-F]{6}", fill))):
        fill = current.fill
    sampling = saved.get("sampling")
    if sampling not in lc.SCHEMES:
        sampling = current.sampling
    width = saved.get("kernel_width")
    if width != "uniform":
        width = _clamp(width, 0.01, 10.0, 0.25)
    target = saved.get("target")
    if isinstance(target, bool) or not isinstance(target, int) or target < 0:
        target = None
    return state.ExplainSettings(
        samples=int(_clamp(saved.get("samples"), 50, 20000, current.samples)),
        sampling=sampling,
        fill=fill,
        kernel_width=width,
        seed=int(_clamp(saved.get("seed"), 0, 2**31 - 1, current.seed)),
        top_labels=int(_clamp(n_classes, 1, 10, 1)),
        target=target,
        ridge_alpha=float(_clamp(saved.get("ridge_alpha"), 0.0, 1e6, 1.0)),
        repeats=int(_clamp(saved.get("repeats"), 1, 20, 1)),
        early_stop=0.9 if saved.get("early_stop") is not None else None,
        precision=saved.get("precision") if saved.get("precision") in ("fp32", "bf16") else "auto",
    )


def _restore(s: state.AppState) -> None:
    up = st.session_state.get("restore_upload")
    if up is None:
        return
    data = up.getvalue()
    try:
        if len(data) > MAX_JSON_BYTES:
            raise lc.LimecraftError(f"the file is over {MAX_JSON_BYTES // 2**20} MB")
        ex = lc.Explanation.from_json(data)
    except (lc.LimecraftError, RecursionError, OverflowError, MemoryError) as e:
        # Nesting too deep, or a number too large for an index: refused, like any bad file.
        detail = str(e) or type(e).__name__
        if isinstance(e, RecursionError):
            detail = "the JSON is nested too deeply"
        s.message = f"That file was not restored: {detail}"
        return
    if ex.segments.shape != s.image.shape[:2]:
        s.message = (
            f"That explanation is for a {ex.segments.shape[1]}x{ex.segments.shape[0]} image; "
            f"load the same image first (it is {s.image.shape[1]}x{s.image.shape[0]})."
        )
        return
    s.explanation, s.explanation_auto = ex, None
    s.hand, s.merges, s.selected, s.edits = [], [], frozenset(), []
    s.restored = lc.Regions(ex.segments, ex.region_keys, ex.region_names)
    s.settings = restored_settings(ex.settings, len(ex.classes), s.settings)
    for key in (
        "set_samples",
        "set_sampling",
        "set_fill",
        "set_uniform",
        "set_kw",
        "set_seed",
        "set_top",
        "set_repeats",
    ):
        st.session_state.pop(key, None)  # the widgets re-read the restored settings
    s.message = None


def pictures(s: state.AppState, ex: lc.Explanation) -> dict[str, np.ndarray]:
    return {
        "top regions": lc.top_regions(s.image, ex.segments, ex.weights, k=5),
        "weight heatmap": lc.heatmap(s.image, ex.segments, ex.weights).image,
        "prediction change when hidden": lc.delta_map(s.image, ex.segments, ex.deltas[0]).image,
        "regions": lc.region_map(s.image, ex.segments),
    }


def report_rows(s: state.AppState) -> tuple[list[str], list[dict]]:
    """The inspection's edits and the prediction changes they caused (top 5 classes)."""
    if not s.edits:
        return [], []
    from limecraft_core.edits import apply_edits

    edited = apply_edits(s.image, state.regions(s).labels, s.edits).image
    before, after = state.predict(s, s.image), state.predict(s, edited)
    if before is None or after is None:
        return [e.describe() for e in s.edits], []
    order = np.argsort(-before)[:5]
    rows = [
        {
            "label": state.class_label(s, int(i)),
            "original": float(before[i]),
            "edited": float(after[i]),
        }
        for i in order
    ]
    return [e.describe() for e in s.edits], rows


s = state.get()
st.title("Export")
ex = s.explanation
if ex is None or ex.segments.shape != s.image.shape[:2]:
    st.info(
        "Nothing to export yet: press **Explain** on the Explain page first. "
        "You can also restore an explanation below."
    )
else:
    stem = s.image_name.rsplit(".", 1)[0].replace(" ", "_")[:60] or "image"
    pics = pictures(s, ex)
    st.subheader("Downloads")
    cols = st.columns(4)
    for col, (name, pic) in zip(cols, pics.items(), strict=False):
        with col:
            st.image(state.to_display(pic, 240), caption=name)
            st.download_button(
                "PNG",
                state.png_bytes(pic),
                f"{stem}_{name.replace(' ', '_')}.png",
                "image/png",
                key=f"dl-{name}",
            )
    c1, c2, c3 = st.columns(3)
    doc = ex.to_dict()
    doc["settings"]["image_name"] = s.image_name
    c1.download_button(
        "Explanation (JSON)",
        json.dumps(doc, indent=1),
        f"{stem}_explanation.json",
        "application/json",
        key="dl-json",
        help="Every setting, the versions, and the regions",
    )
    c2.download_button(
        "Regions table (CSV)", regions_csv(ex), f"{stem}_regions.csv", "text/csv", key="dl-csv"
    )
    edits, changes = report_rows(s)
    notes = []
    if ex.score < 0.5:
        notes.append(f"The surrogate's R² is {ex.score:.2f}: treat the weights as a rough guide.")
    page = html_report(
        image=s.image,
        explanation=ex,
        pictures=pics,
        edits=edits,
        prediction_changes=changes,
        source=s.image_name,
        notes=notes,
    )
    c3.download_button(
        "Report (HTML)",
        page,
        f"{stem}_report.html",
        "text/html",
        key="dl-report",
        type="primary",
        help="One self-contained page: image, regions, settings, results, edits",
    )

st.divider()
st.subheader("Restore")
st.file_uploader(
    "An explanation JSON saved from LIMEcraft (for the image that is loaded now)",
    type=["json"],
    key="restore_upload",
    on_change=_restore,
    args=(s,),
)
if s.message:
    state.error(s.message)
