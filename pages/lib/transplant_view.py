"""Inspect's "paste this region into other images": the insertion test that proves a shortcut.

Removing a region shows that the prediction needs it; pasting it at the same place into other
images shows that it causes it. This is the test ImageNet-W and Reveal2Revise use.
"""

from __future__ import annotations

import hashlib

import numpy as np
import streamlit as st

import limecraft_core as lc
from limecraft_core.io import decode_image
from models.samples import PAGE, PAGE_WATERMARK, load_sample, sample_names
from pages.lib import display, state
from pages.lib.session import session

#: At most this many images at once: each is scored twice, and shown.
MAX_TARGETS = 8
#: The widgets' keys start with "edit_": they belong to one analysis (state._ANALYSIS_WIDGETS).
_KEY = "edit_tp"


def clean_photos(exclude: str) -> list[str]:
    """The gallery's photos that carry no planted shortcut (no demo image, no watermarked or
    text page), without ``exclude``."""
    skip = {exclude, PAGE, PAGE_WATERMARK}
    return [n for n in sample_names() if not n.startswith("demo-") and n not in skip]


@st.cache_data(max_entries=16, show_spinner=False)
def _gallery_image(name: str) -> np.ndarray:
    return load_sample(name).image


def _targets(names: list[str], uploads: list) -> list[tuple[str, np.ndarray]]:
    """The chosen images, by name; an upload that cannot be read is a sentence, and left out."""
    out = [(n, _gallery_image(n)) for n in names]
    for up in uploads or []:
        try:
            out.append((up.name, decode_image(up.getvalue(), f"'{up.name}'")))
        except lc.LimecraftError as e:
            display.error(f"{up.name} was not used: {e}")
    return out


def _probabilities(s: state.AppState):
    """The model's probabilities for one image; a failure is a LimecraftError (its message is
    on the page already)."""

    def run(image: np.ndarray) -> np.ndarray:
        p = state.predict(s, image)
        if p is None:
            raise lc.LimecraftError("the model failed on one of the images (see above)")
        return p

    return run


def _fingerprint(*parts: object) -> str:
    h = hashlib.sha1()
    for p in parts:
        h.update(p.tobytes() if isinstance(p, np.ndarray) else repr(p).encode())
    return h.hexdigest()


def section(
    s: state.AppState, image: np.ndarray, labels: np.ndarray, region: int, name: str
) -> None:
    """Paste region ``region`` of ``image`` (the Inspect page's image, its edits applied) into
    other images at the same place, and show the followed class's change per image and
    overall, and how many images flip to it."""
    st.subheader("Paste this region into other images")
    st.caption(
        "Removing a region shows that the prediction needs it; pasting it at the same place "
        "into other images shows that it *causes* it (the insertion test of ImageNet-W and "
        "Reveal2Revise). Each image is resized region and all, so the region lands at the same "
        "place and scale."
    )
    probs = state.predict(s, s.image)
    if probs is None:
        return
    photos = clean_photos(s.image_name)
    c1, c2 = st.columns(2)
    picked = c1.multiselect(
        "Gallery images",
        photos,
        default=photos[:4],
        key=f"{_KEY}_gallery",
        max_selections=MAX_TARGETS,
    )
    uploads = c2.file_uploader(
        "…or your own images",
        type=state.UPLOAD_TYPES,
        accept_multiple_files=True,
        key=f"{_KEY}_upload",
    )
    order = [int(i) for i in np.argsort(-probs)]
    ex = s.explanation
    first = ex.classes[0] if ex is not None and ex.classes else order[0]
    cls = c1.selectbox(
        "Class to follow",
        order,
        index=order.index(first),
        key=f"{_KEY}_class",
        format_func=lambda i: f"{state.class_label(s, i)} ({i})",
        help="The class the region is suspected of causing; default: the explained class",
    )
    targets = _targets(list(picked), list(uploads or []))[:MAX_TARGETS]
    mask = labels == region
    key = _fingerprint(image, mask, cls, [n for n, _ in targets], [t for _, t in targets])
    n = len(targets)
    if st.button(
        f"Paste into {n} image{'s' * (n != 1)}",
        key=f"{_KEY}_run",
        disabled=n == 0,
        help="Choose images above" if n == 0 else None,
    ):
        try:
            result, pasted = lc.insertion_test(
                image, mask, [t for _, t in targets], _probabilities(s), int(cls)
            )
        except lc.LimecraftError as e:
            display.error(f"The region was not pasted: {e}")
            return
        session().transplant = (key, name, result, [n for n, _ in targets], pasted)
    done = session().transplant
    if done is None or done[0] != key:
        return
    _show(s, *done[1:])


def _show(
    s: state.AppState, name: str, result: lc.Insertion, names: list[str], pasted: list
) -> None:
    label = state.class_label(s, result.target_class)
    st.markdown(f"**{display.md(result.sentence(label))}** (the region: {display.md(name)})")
    lines = []
    for i, n in enumerate(names):
        top_b = state.class_label(s, int(result.top_before[i]))
        top_a = state.class_label(s, int(result.top_after[i]))
        flip = " · **flipped**" if result.flipped[i] else ""
        cut = " · part of the region fell outside" if result.clipped[i] else ""
        lines.append(
            f"- {display.md(n)}: {display.md(label)} {result.before[i]:.3f} → "
            f"{result.after[i]:.3f} ({result.gain[i]:+.3f}); top class {display.md(top_b)} → "
            f"{display.md(top_a)}{flip}{cut}"
        )
    st.markdown("\n".join(lines))
    cols = st.columns(min(4, len(pasted)))
    for i, (n, p) in enumerate(zip(names, pasted, strict=True)):
        cols[i % len(cols)].image(display.to_display(p.image, 200), caption=f"{n} with the region")
