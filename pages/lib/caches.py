"""The app's caches shared by all sessions, and their keys: the regions of an image, the
explanations, and this session's model scores of one scene (kept across an interrupted Explain).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import streamlit as st

import limecraft_core as lc
from pages.lib import analysis as A
from pages.lib import identity
from pages.lib.analysis import Analysis
from pages.lib.session import session


class _LRU:
    """A small, thread-safe, bounded cache shared by all sessions (least recently used out)."""

    def __init__(self, size: int) -> None:
        self.size, self.lock, self.items = size, threading.Lock(), OrderedDict()

    def get(self, key: str):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        return None

    def put(self, key: str, value) -> None:
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)


@st.cache_resource
def _regions_cache() -> _LRU:
    return _LRU(32)


def _prepare(
    image: np.ndarray,
    seg: lc.config.SegmentationConfig,
    masks: tuple[np.ndarray, ...],
    names: tuple[str, ...],
    origins: tuple[str, ...],
    progress: Callable[[float, str], None] | None = None,
) -> lc.Regions:
    """The engine's region stage, cached on its inputs. Not ``st.cache_data``: that would
    replay the progress bar's updates, which belong to the run that made the regions."""
    key = "|".join([*(identity.digest(a) for a in (image, *masks)), repr((seg, names, origins))])
    hit = _regions_cache().get(key)
    if hit is not None:
        return hit
    regions, _ = lc.prepare_regions(
        lc._validate.as_float_image(image),
        seg,
        regions_mask=list(masks) if masks else None,
        names=list(names) if masks else None,
        progress=progress,
        origins=list(origins) if masks else None,
    )
    _regions_cache().put(key, regions)
    return regions


def regions(
    s: Analysis,
    *,
    handcrafted: bool = True,
    progress: Callable[[float, str], None] | None = None,
) -> lc.Regions:
    """The current regions: automatic superpixels, handcrafted regions, and the merges.

    They are made by the engine's own region stage, so an explanation records the segmentation
    that really made them (``config.segmentation``). ``progress(fraction, message)`` hears how
    a segmentation that is not cached yet advances."""
    if handcrafted and s.restored is not None:
        return s.restored
    hand = s.hand if handcrafted else []
    r = _prepare(
        s.image,
        A.segmentation_config(s, handcrafted=handcrafted),
        tuple(h.mask for h in hand),
        tuple(h.name for h in hand),
        tuple(h.origin for h in hand),
        progress,
    )
    if handcrafted:
        for keys, name, _ in s.merges:
            r = lc.merge_by_keys(r, keys, name)
    return r


@st.cache_resource
def explanation_cache() -> _LRU:
    """Explanations keyed on every input, shared by all sessions."""
    return _LRU(32)


def image_digest(image: np.ndarray) -> str:
    """The image's digest: the one hash of its pixels an Explain makes (:func:`run_key`)."""
    return identity.digest(image)


def _digest(image: str, reg: lc.Regions, model: identity.ModelRef, *parts: object) -> str:
    """A hash of the image's digest, the regions' atoms, the model and any JSON-able parts."""
    h = hashlib.sha256(image.encode())
    h.update(str(reg.atoms.shape).encode())
    h.update(np.ascontiguousarray(reg.atoms).tobytes())
    h.update(repr(model).encode())
    for part in parts:
        h.update(json.dumps(part, sort_keys=True, default=str).encode())
    return h.hexdigest()


@dataclass(frozen=True)
class RunKey:
    """One Explain, keyed once: its settings (validated when built), the model, the image's
    digest, and the keys of the explanation cache and of the scene's model scores."""

    config: lc.ExplainConfig
    model: identity.ModelRef
    image: str
    explanation: str
    scene: str


def run_key(
    image: np.ndarray | str, reg: lc.Regions, model: identity.ModelRef, config: lc.ExplainConfig
) -> RunKey:
    """The keys of one Explain of ``image`` (its pixels, or the digest of an earlier
    :class:`RunKey` of the same image, which is then not hashed again) over ``reg``."""
    img = image if isinstance(image, str) else image_digest(image)
    return RunKey(
        config=config,
        model=model,
        image=img,
        explanation=_digest(img, reg, model, config.to_dict(), [reg.keys, reg.names, reg.source]),
        scene=_scene(img, reg, model, config),
    )


def _scene(image: str, reg: lc.Regions, model: identity.ModelRef, config: lc.ExplainConfig) -> str:
    """What the model's score of a mask depends on: the image, the regions, the model, the fill
    and the speed settings (not the sampling, surrogate or trust settings)."""
    d = config.to_dict()
    return _digest(image, reg, model, [d["fill"], d["speed"]], [reg.keys, reg.source])


def score_memo(key: str) -> lc.MaskCache:
    """This session's model scores for the scene ``key``, kept across runs, so that an Explain
    stopped half-way (Stop here, Cancel, a reload of the page) does not score its masks again.
    One scene is kept: a new one replaces it."""
    ses = session()
    held = ses.score_memo
    if held is None or held[0] != key:
        held = ses.score_memo = (key, lc.MaskCache())
    return held[1]
