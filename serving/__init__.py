"""LIMEcraft's serving layer: where a model runs for many sessions, and how the app gets it.

It sits above the engine and the models: it may import ``limecraft_core`` and ``models``, and
nothing in ``limecraft_core`` or ``models`` imports it. Each scorer here implements the engine's
one plug point, :class:`limecraft_core.Scorer`, by composition (it holds what it wraps):

- ``workqueue``: :class:`QueuedScorer`, a session's view of a shared local scorer whose forward
  passes go through one bounded, round-robin, micro-batching :class:`WorkQueue` per process.
- ``remote``: :class:`RemoteScorer`, the HTTP client of a Ray Serve deployment (no Ray needed),
  and :func:`load_scorer`, which picks it when ``LIMECRAFT_RAY_ADDRESS`` is set and else loads
  the local classifier from :mod:`models.registry`; :func:`queued` puts a local one behind the
  work queue and leaves a remote one as it is.
- ``serve_app``: the deployments themselves (``python -m serving.serve_app``); it imports Ray,
  so it is not imported here.
"""

from .remote import RemoteConfig, RemoteScorer, RemoteStatus, load_scorer, queued, remote_config
from .workqueue import BatchScorer, QueuedScorer, QueueStatus, WorkQueue

__all__ = [
    "BatchScorer",
    "QueueStatus",
    "QueuedScorer",
    "RemoteConfig",
    "RemoteScorer",
    "RemoteStatus",
    "WorkQueue",
    "load_scorer",
    "queued",
    "remote_config",
]
