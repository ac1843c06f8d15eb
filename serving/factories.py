"""Which scorer a job gets: a Ray Serve deployment or the local model, and the work queue.

:func:`load_scorer` picks a :class:`~serving.client.RemoteScorer` when
``LIMECRAFT_RAY_ADDRESS`` is set (:mod:`serving.config`) and else loads the local classifier
from :mod:`models.registry`; :func:`queued` puts a local one behind the process's work queue
and leaves a remote one as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from limecraft_core import Classifier, LimecraftError
from models import registry
from models.source import RAY_ADDRESS_ENV

from .client import RemoteScorer
from .config import remote_config
from .workqueue import QueuedScorer, QueueStatus, WorkQueue

__all__ = ["load_scorer", "queued"]


def load_scorer(spec: str, **kwargs: Any) -> RemoteScorer | Classifier:
    """The scorer for a model: on Ray Serve when it is configured, else a local Classifier.

    This is where remote or local is chosen. With ``LIMECRAFT_RAY_ADDRESS`` set, a registry
    name gives a :class:`RemoteScorer` for the deployment of that name, whose local fallback
    (``LIMECRAFT_RAY_FALLBACK=local``) is :func:`models.registry.load_classifier`. Otherwise,
    and for model files, it is that local classifier.

    Parameters
    ----------
    spec : str, a registry name or a model file path
    **kwargs
        Those of :func:`models.registry.load_classifier` (``labels``, ``device``,
        ``precision``, ...). For a served model ``labels`` overrides the deployment's class
        names and the others configure the local fallback.

    Raises
    ------
    LimecraftError
        For an unknown name, a bad configuration, or ``input_size`` / ``normalize`` given for
        a model the cluster serves (those are the deployment's).
    ModelError
        If the cluster cannot serve the model and there is no fallback.
    """
    config = remote_config()
    if config is None or kwargs.get("arch") is not None or not registry.is_registered(spec):
        return registry.load_classifier(spec, **kwargs)
    if kwargs.get("input_size") is not None or kwargs.get("normalize") is not None:
        raise LimecraftError(
            "input_size and normalize are the deployment's for a model served by Ray; "
            f"unset {RAY_ADDRESS_ENV} to override them locally"
        )
    return RemoteScorer(
        spec,
        config,
        labels=kwargs.get("labels"),
        local=lambda: registry.load_classifier(spec, **kwargs),
    )


def queued(
    scorer: Any,
    queue: WorkQueue,
    *,
    alive: Callable[[], bool] | None = None,
    on_wait: Callable[[QueueStatus], None] | None = None,
) -> Any:
    """The scorer one job (an Explain, an audit) uses: a local model behind this process's
    ``queue``, whose forward passes it shares with the other jobs in flight; a Ray Serve
    deployment as it is (it batches across sessions itself, next to its model, and composes
    there). The one place that tells the two apart.

    Parameters
    ----------
    scorer : RemoteScorer, or a local BatchScorer such as a Classifier (see :func:`load_scorer`)
    queue : WorkQueue, the process's queue for local models
    alive, on_wait : see :class:`~serving.workqueue.QueuedScorer`

    Returns
    -------
    ``scorer`` itself when it is remote, else a :class:`~serving.workqueue.QueuedScorer`.
    """
    if isinstance(scorer, RemoteScorer):
        return scorer
    return QueuedScorer(scorer, queue, alive=alive, on_wait=on_wait)
