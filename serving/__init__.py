"""LIMEcraft's serving layer: where a model runs for many sessions, and how the app gets it.

It sits above the engine and the models: it may import ``limecraft_core`` and ``models``, and
nothing in ``limecraft_core`` or ``models`` imports it. Each scorer here implements the engine's
one plug point, :class:`limecraft_core.Scorer`, by composition (it holds what it wraps):

- ``workqueue``: :class:`QueuedScorer`, a session's view of a shared local scorer whose forward
  passes go through one bounded, round-robin, micro-batching :class:`WorkQueue` per process.
- ``client``: :class:`RemoteScorer`, the HTTP client of a Ray Serve deployment (no Ray
  needed), over ``wire`` (the ``.npz`` bodies and packed masks it shares with the deployments)
  and ``config`` (:class:`RemoteConfig`, read from the environment by :func:`remote_config`).
- ``factories``: :func:`load_scorer`, which picks a :class:`RemoteScorer` when
  ``LIMECRAFT_RAY_ADDRESS`` is set and else loads the local classifier from
  :mod:`models.registry`; :func:`queued` puts a local one behind the work queue and leaves a
  remote one as it is.
- ``ports``: :func:`~.ports.free_port`, a loopback port for a server started later (the local
  cluster's proxy, a test's app), clear of the ports Ray and the kernel hand out meanwhile.
- ``serve_app``: the deployments themselves (``python -m serving.serve_app``); it imports Ray,
  so it is not imported here.
"""

from .client import RemoteScorer, RemoteStatus
from .config import RemoteConfig, remote_config
from .factories import load_scorer, queued
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
