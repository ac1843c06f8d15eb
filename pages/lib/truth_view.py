"""The Audit page's truth, given after the audit: a CSV of which images carry the suspected
artifact scores each finding (AUROC and AP), as ``--truth`` does before it
(:func:`pages.lib.audits.score_truth`)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

import limecraft_core as lc
from limecraft_core.io.audit_folder import LoadedAudit
from pages.lib import audits, display


def show(aid: str, folder: Path, audit: LoadedAudit) -> None:
    """Score the findings against the analyst's truth, afterwards (as ``--truth`` does)."""
    found = audit.findings.discovered
    if not found:
        return
    scored = found[0].truth
    title = "Score the findings against your truth"
    with st.expander(title + (" · scored" if scored else "")):
        st.caption(
            "A CSV with the columns file and artifact: 1 for each image that carries the "
            "artifact you suspect, 0 for each that does not (as --truth on the command line). "
            "Each finding then gets its AUROC and AP: how well its membership scores rank the "
            "images you marked, with no threshold. Nothing is explained again."
        )
        if scored:
            st.markdown(
                f"Scored against your truth: {scored.images} images, {scored.positives} with "
                "the artifact (kept with the audit as truth.csv; upload another to replace it)."
            )
        st.download_button(
            "A template: every image, artifact 0", audits.truth_template(audit),
            file_name="truth.csv", mime="text/csv", key="audit_truth_template",
        )  # fmt: skip
        up = st.file_uploader("Your truth (CSV)", type=["csv"], key=f"audit_truth-{aid}")
        if st.button("Score the findings", key="audit_truth_score", disabled=up is None):
            try:
                audits.score_truth(folder, up.getvalue())
            except lc.LimecraftError as e:
                display.error(f"That truth cannot be used: {e}. The audit is as it was.")
            else:
                st.rerun()
