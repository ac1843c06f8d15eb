"""The ImageNet-W watermark in the app: the watermark as a handcrafted region in one click
(Craft and Inspect), and the watermark edit's controls (Inspect)."""

from __future__ import annotations

from typing import Any

import streamlit as st

import limecraft_core as lc
from limecraft_core.edits import watermark_font_size
from limecraft_core.proposers import watermark_proposer
from pages.lib import analysis as A
from pages.lib import display
from pages.lib.session import session

#: The name of the watermark's region, everywhere it is shown.
WATERMARK_REGION = "watermark"


def _text_size(s: A.Analysis) -> int | None:
    """The text size of the last watermark edit applied (None: the package's size)."""
    marks = [e for e in s.edits if e.kind == "watermark"]
    return (marks[-1].text_size or None) if marks else None


def _add_region(s: A.Analysis, box: bool) -> None:
    """The ``watermark`` proposer's region (its pixels or its box, at the text size of the last
    watermark edit) added as the handcrafted region *watermark*."""
    fn = watermark_proposer(text_size=_text_size(s), box=box)
    try:
        found = lc.propose(s.image, [lc.Proposer("watermark", "the watermark's place", fn)])
        if not found.proposals:
            raise lc.LimecraftError(" ".join(found.notes) or "the proposer found nothing")
        A.add_region(s, found.proposals[0].mask, WATERMARK_REGION, "proposed:watermark")
    except lc.LimecraftError as e:
        session().watermark_note = f"The watermark was not added as a region: {e}"
        return
    session().watermark_note = None


def region_buttons(s: A.Analysis, where: str) -> None:
    """Where the ImageNet-W watermark's text lies on this image, as a handcrafted region named
    *watermark*: its pixels grown by 2 px, or its bounding box. Edits other than the watermark
    refer to the regions as they are, so the region waits until they are reset."""
    have = any(h.name == WATERMARK_REGION for h in s.hand)
    blocked = any(e.kind != "watermark" for e in s.edits)
    with st.container(border=True):
        st.markdown(
            "**The ImageNet-W watermark as a region.** ImageNet models lean on a faint Chinese "
            "text watermark (Li et al., CVPR 2023): it pulls them towards *carton*. One click "
            f"makes a handcrafted region named *{WATERMARK_REGION}* where the watermark's text "
            "lies on this image (for a watermarked photo, or after the watermark edit on Inspect)."
        )
        row = st.container(horizontal=True)
        why = (
            "It is a region already"
            if have
            else "Reset the edits first: they refer to the regions as they are"
            if blocked
            else None
        )
        row.button(
            "Add the watermark as a region",
            key=f"wm_region_{where}",
            on_click=_add_region,
            args=(s, False),
            disabled=have or blocked,
            help=why or "The text's pixels, grown by 2 px",
        )
        row.button(
            "Add its box as a region",
            key=f"wm_box_{where}",
            on_click=_add_region,
            args=(s, True),
            disabled=have or blocked,
            help=why or "The text's bounding box",
        )
        if session().watermark_note:
            display.error(session().watermark_note)


def edit_controls(c1: Any, c2: Any, h: int, w: int, v: int) -> dict:
    """The watermark edit's opacity and text size, the published values by default."""
    size = watermark_font_size(h, w)
    p: dict = {
        "opacity": c1.slider(
            "Opacity", 0.0, 1.0, 0.5, 0.05, key=f"e_wm_opacity-{v}", help="Published: 0.5"
        )
    }
    text = c2.number_input(
        "Text size (px)",
        1,
        4096,
        max(size, 1),
        key=f"e_wm_size-{v}",
        help=f"The package's size for this image: {size} px (36 at 224×224; the shorter side "
        "/ 6.22 elsewhere)",
    )
    p["text_size"] = 0 if int(text) == size else int(text)
    c1.caption(
        "The ImageNet-W transform: 捷径捷径捷径 in white at (0.01·W, 0.4·H) over the whole "
        "image, whatever region is chosen."
    )
    return p
