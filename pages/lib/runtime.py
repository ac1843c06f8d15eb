"""The app's model runtime: each model loaded once per process and shared by all sessions, the
work queue in front of the device, and the class probabilities the pages show.
"""

from __future__ import annotations

import os

import numpy as np
import streamlit as st

import limecraft_core as lc
import serving
from limecraft_core import render
from models import registry
from pages.lib import analysis as A
from pages.lib import identity
from pages.lib.analysis import Analysis
from pages.lib.display import error


def classifier(
    ref: identity.ModelRef | Analysis | str, precision: str = "auto"
) -> lc.Classifier | serving.RemoteScorer:
    """The analysis's model (its name, uploaded labels and architecture; or a registry name),
    loaded once per process and precision and shared by all sessions (inference is
    thread-safe)."""
    if isinstance(ref, str):
        ref = identity.ModelRef(ref)
    return _classifier(ref if isinstance(ref, identity.ModelRef) else A.model_ref(ref), precision)


@st.cache_resource(show_spinner="Loading the model…")
def _classifier(ref: identity.ModelRef, precision: str) -> lc.Classifier | serving.RemoteScorer:
    """On the Ray Serve cluster when ``LIMECRAFT_RAY_ADDRESS`` is set, else local.

    bf16 on a CPU also uses channels_last, the combination that is about 2x faster there."""
    cl = True if precision == "bf16" else None
    return serving.load_scorer(
        ref.name,
        labels=list(ref.labels) if ref.labels else None,
        arch=ref.arch,
        precision=precision,
        channels_last=cl,
        **identity.normalisation(ref.normalize),
    )


@st.cache_resource
def work_queue() -> serving.WorkQueue:
    """One bounded queue in front of the device for every session of this process: concurrent
    Explains are served in turn and combined into shared forward passes."""
    batch = os.environ.get("LIMECRAFT_QUEUE_MAX_BATCH")  # images per combined pass
    return serving.WorkQueue(
        max_jobs=int(os.environ.get("LIMECRAFT_MAX_QUEUED", "64")),
        max_batch=int(batch) if batch else None,
    )


def ready_classifier(s: Analysis) -> lc.Classifier | None:
    """The chosen model, or None with an explanation on the page of why it cannot run."""
    if s.model_name in registry.zoo.ZOO or s.model_name in registry.BUILT_IN:
        info = registry.model_info(s.model_name)
        if not info.ready:
            error(
                f"{s.model_name} cannot run here: {info.reason}. Choose the demo model, or "
                "upload your own model file."
            )
            return None
    try:
        return classifier(s)
    except (lc.LimecraftError, lc.ModelError) as e:
        error(f"{A.model_ref(s).display_name} cannot run: {e}")
        return None


@st.cache_data(max_entries=64, show_spinner=False)
def _predict(model: identity.ModelRef, image: np.ndarray) -> np.ndarray:
    return render.softmax(classifier(model).predict(image))


def predict(s: Analysis, image: np.ndarray) -> np.ndarray | None:
    """Class probabilities for an image, or None (with a message) when the model fails."""
    if ready_classifier(s) is None:
        return None
    try:
        return _predict(A.model_ref(s), image)
    except (lc.LimecraftError, lc.ModelError) as e:
        error(f"The model failed on this image: {e}")
        return None


def model_fit_warning(s: Analysis) -> str | None:
    """A plain warning when the model cannot mean anything for this image (see
    :func:`models.registry.fit_warning`)."""
    return registry.fit_warning(s.model_name, s.image.shape)


def class_label(s: Analysis, index: int) -> str:
    return classifier(s).label(index)
