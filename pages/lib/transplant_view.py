"""Inspect's "paste this region into other images": the insertion test, judged against a null.

Removing a region shows that the prediction needs it; pasting it at the same place into other
images tests whether it causes it (the test ImageNet-W and Reveal2Revise use). The rise is
compared with a null patch of the same shape, area and place, and the sentence says only what
the numbers show. The last paste is part of the analysis (``Analysis.paste``): a reload, a
switch and back, a restore and the report all show it.
"""

from __future__ import annotations

import numpy as np
import streamlit as st
from PIL import Image

import limecraft_core as lc
from limecraft_core.io import decode_image
from models.samples import PAGE, PAGE_WATERMARK, load_sample, sample_names
from pages.lib import analysis as A
from pages.lib import display, identity, runtime, state

#: At most this many images at once: each is scored 2 + NULL_DRAWS times, and shown.
MAX_TARGETS = A.MAX_PASTE_TARGETS
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


def _probabilities(s: A.Analysis):
    """The model's probabilities for one image; a failure is a LimecraftError (its message is
    on the page already)."""

    def run(image: np.ndarray) -> np.ndarray:
        p = runtime.predict(s, image)
        if p is None:
            raise lc.LimecraftError("the model failed on one of the images (see above)")
        return p

    return run


def _picture(image: np.ndarray) -> np.ndarray:
    """A pasted image at most ``A.PASTE_PICTURE_PX`` on its long side: it is kept to be shown."""
    h, w = image.shape[:2]
    scale = A.PASTE_PICTURE_PX / max(h, w)
    if scale >= 1:
        return image.copy()
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.LANCZOS))


def section(
    s: A.Analysis, image: np.ndarray, labels: np.ndarray, region: int, name: str, cls: int
) -> None:
    """Paste region ``region`` of ``image`` (the Inspect page's image, its edits applied) into
    other images at the same place, and show class ``cls``'s change per image and overall,
    against a same-size patch, and how many images flip to it. The last paste is kept with the
    analysis and shown whatever the choices above it."""
    st.subheader("Paste this region into other images")
    st.caption(
        "Removing a region shows that the prediction needs it; pasting it at the same place "
        "into other images tests whether it *causes* it (the insertion test of ImageNet-W and "
        f"Reveal2Revise). Each image is also given {lc.edits.NULL_DRAWS} patches of the same "
        "shape and size cut from elsewhere in this image, at the same place: the region counts "
        "only by what it adds over them. Each image is resized region and all, so the region "
        "lands at the same place and scale."
    )
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
    targets = _targets(list(picked), list(uploads or []))[:MAX_TARGETS]
    mask = labels == region
    n = len(targets)
    if st.button(
        f"Paste into {n} image{'s' * (n != 1)}",
        key=f"{_KEY}_run",
        disabled=n == 0,
        help="Choose images above" if n == 0 else None,
    ):
        try:
            with st.spinner(f"Pasting into {n} image{'s' * (n != 1)} and scoring…"):
                result, pasted = lc.insertion_test(
                    image, mask, [t for _, t in targets], _probabilities(s), int(cls)
                )
        except lc.LimecraftError as e:
            display.error(f"The region was not pasted: {e}")
            return
        A.set_paste(
            s,
            A.Paste(
                region=name,
                mask=mask,
                names=tuple(n for n, _ in targets),
                result=result,
                pictures=tuple(_picture(p.image) for p in pasted),
                source=identity.digest(image),
            ),
        )
    paste = s.paste
    if paste is None:
        return
    same = (
        paste.result.target_class == int(cls)
        and paste.mask.shape == mask.shape
        and np.array_equal(paste.mask, mask)
        and paste.names == tuple(n for n, _ in targets)
    )
    if paste.source and paste.source != identity.digest(image):
        st.info(
            "The result below was pasted from the image as it was before the edits since "
            "(listed above): press **Paste** to paste the region as it is now.",
            icon=":material/history:",
        )
    elif not same:
        st.info(
            f"The result below is of the last paste: {display.md(paste.region)}, following "
            f"{display.md(runtime.class_label(s, paste.result.target_class))}, into "
            f"{len(paste.names)} image{'s' * (len(paste.names) != 1)}. Press **Paste** to paste "
            "with the choices above.",
            icon=":material/history:",
        )
    show(s, paste)


def show(s: A.Analysis, paste: A.Paste) -> None:
    """The paste's numbers, its conclusion (which follows them) and the pasted pictures."""
    result = paste.result
    label = runtime.class_label(s, result.target_class)
    st.markdown(
        f"**{display.md(result.sentence(label))}** (the region: {display.md(paste.region)})"
    )
    st.markdown(display.md(result.conclusion(label)))
    lines = []
    null = result.null_gain if result.null_after is not None else None
    for i, n in enumerate(paste.names):
        top_b = runtime.class_label(s, int(result.top_before[i]))
        top_a = runtime.class_label(s, int(result.top_after[i]))
        flip = " · **flipped**" if result.flipped[i] else ""
        cut = " · part of the region fell outside" if result.clipped[i] else ""
        patch = f"; a same-size patch {null[i]:+.3f}" if null is not None else ""
        lines.append(
            f"- {display.md(n)}: {display.md(label)} {result.before[i]:.3f} → "
            f"{result.after[i]:.3f} ({result.gain[i]:+.3f}{patch}); top class "
            f"{display.md(top_b)} → {display.md(top_a)}{flip}{cut}"
        )
    st.markdown("\n".join(lines))
    cols = st.columns(min(4, len(paste.pictures)))
    for i, (n, p) in enumerate(zip(paste.names, paste.pictures, strict=True)):
        cols[i % len(cols)].image(display.to_display(p, 200), caption=f"{n} with the region")
