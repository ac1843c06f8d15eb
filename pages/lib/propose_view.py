"""Regions proposed by a detector on Craft regions: propose, look, accept or reject each one.

A proposer of the engine's table (:data:`limecraft_core.PROPOSERS`: text found by a detector,
the watermark's known place) proposes named regions; each is outlined with its number, and the
analyst accepts or rejects each (or all) in one click. An accepted proposal becomes a
handcrafted region whose origin says which proposer made it, so the explanation, the report and
the analysis file record it; it is undone as any region is, with its delete button. Proposals
waiting for a decision are kept per analysis in the session; detection itself is cached by the
image's digest in the engine, so proposing again is quick.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core import render
from pages.lib import analysis as A
from pages.lib import display
from pages.lib.session import Pending, session

PROPOSE_WIDTH = 480


def offered() -> list[str]:
    """The proposers offered here: every table entry that works from the image alone (one that
    needs the analyst's own mask, ``masks``, is served by the mask upload below)."""
    return [n for n, p in lc.PROPOSERS.items() if not p.needs_given]


def _pending(s: A.Analysis) -> Pending | None:
    p = session().proposals
    return p if p is not None and p.analysis == s.id else None


def _run(s: A.Analysis, name: str) -> None:
    try:
        with st.spinner(f"Proposing {name} regions…"):
            found = lc.propose(s.image, [name])
    except lc.LimecraftError as e:
        session().proposals = None
        session().propose_error = f"No regions were proposed: {e}"
        return
    session().propose_error = None
    there = [h.mask for h in s.hand]
    fresh = [p for p in found.proposals if not any(np.array_equal(p.mask, m) for m in there)]
    notes = list(found.notes)
    if len(fresh) < len(found.proposals):
        n = len(found.proposals) - len(fresh)
        notes.append(f"{n} of them {'are' if n > 1 else 'is'} a region already.")
    session().proposals = Pending(s.id, name, fresh, tuple(notes))


def _accept(s: A.Analysis, keep: list[int]) -> None:
    p = _pending(s)
    if p is None:
        return
    for i in keep:
        prop = p.proposals[i]
        try:
            A.add_region(s, prop.mask, prop.name, origin=prop.origin)
        except lc.LimecraftError as e:
            session().propose_error = f"{prop.name} was not added: {e}"
            break
    p.proposals = [q for i, q in enumerate(p.proposals) if i not in keep]


def _reject(s: A.Analysis, drop: list[int]) -> None:
    p = _pending(s)
    if p is not None:
        p.proposals = [q for i, q in enumerate(p.proposals) if i not in drop]


def _picture(s: A.Analysis, proposals: list) -> np.ndarray:
    colours = [A.colour_rgb(A.next_colour(len(s.hand) + i)) for i in range(len(proposals))]
    return render.outline_masks(s.image, [p.mask for p in proposals], colours, 0.3)


def section(s: A.Analysis) -> None:
    """The proposer's choice, its button, and the proposals waiting, each with accept/reject."""
    names = offered()
    with st.container(border=True):
        st.markdown(
            "**Propose regions.** A detector proposes regions that may mean something to the "
            "model, such as text or a watermark that superpixels would split. Accept the ones "
            "to explain; LIME then judges whether the model relies on them."
        )
        row = st.container(horizontal=True, vertical_alignment="bottom")
        name = row.selectbox(
            "Proposer",
            names,
            key="propose_with",
            format_func=lambda n: n,
            help="; ".join(f"{n}: {lc.PROPOSERS[n].help}" for n in names),
        )
        if row.button("Propose regions", key="propose"):
            _run(s, name)
        if session().propose_error:
            display.error(session().propose_error)
        p = _pending(s)
        if p is None:
            return
        for note in p.notes:
            st.caption(note)
        if not p.proposals:
            st.caption(f"No {p.proposer} proposals are waiting.")
            return
        st.image(display.to_display(_picture(s, p.proposals), PROPOSE_WIDTH))
        h, w = s.image.shape[:2]
        for i, prop in enumerate(p.proposals):
            colour = A.next_colour(len(s.hand) + i)
            share = float(prop.mask.sum()) / (h * w)
            row = st.container(horizontal=True, vertical_alignment="center")
            row.markdown(
                f":{colour}[■] **{display.md(prop.name)}** · {share:.1%} of the image · "
                f"score {prop.score:.2f}",
                width="stretch",
            )
            row.button("Accept", key=f"prop_ok_{i}", on_click=_accept, args=(s, [i]))
            row.button("Reject", key=f"prop_no_{i}", on_click=_reject, args=(s, [i]))
        every = list(range(len(p.proposals)))
        row = st.container(horizontal=True)
        row.button("Accept all", key="prop_ok_all", on_click=_accept, args=(s, every))
        row.button("Reject all", key="prop_no_all", on_click=_reject, args=(s, every))
