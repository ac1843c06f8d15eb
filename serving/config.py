"""Where the Ray Serve deployments are, read from the environment (no Ray needed).

Configuration (environment)
---------------------------
``LIMECRAFT_RAY_ADDRESS``
    Serve's HTTP address, e.g. ``http://ray-head:8000``. Unset: models run locally (the default).
``LIMECRAFT_RAY_FALLBACK``
    ``local``: when the cluster is unreachable, or a replica dies and the retry fails, run on
    the local model and say so in the log and in :attr:`serving.RemoteScorer.status`. Default
    ``none``: raise :class:`~limecraft_core.ModelError` with what to do.
``LIMECRAFT_RAY_ROUTE``
    Route prefix of the deployments (``/limecraft``); model ``m`` is served at ``ROUTE/m``.
``LIMECRAFT_RAY_TIMEOUT``
    Seconds to connect before the cluster counts as unreachable (3).
``LIMECRAFT_RAY_READ_TIMEOUT``
    Seconds to wait for one chunk's scores (300).
``LIMECRAFT_RAY_INFLIGHT``
    Chunks in flight per explanation (2), so a replica never waits for the network.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from limecraft_core import LimecraftError
from models.source import RAY_ADDRESS_ENV, served_by_ray

from .wire import DEFAULT_ROUTE

__all__ = [
    "ENV_FALLBACK",
    "ENV_INFLIGHT",
    "ENV_READ_TIMEOUT",
    "ENV_ROUTE",
    "ENV_TIMEOUT",
    "FALLBACKS",
    "RemoteConfig",
    "remote_config",
    "remote_configured",
]

ENV_FALLBACK = "LIMECRAFT_RAY_FALLBACK"
ENV_ROUTE = "LIMECRAFT_RAY_ROUTE"
ENV_TIMEOUT = "LIMECRAFT_RAY_TIMEOUT"
ENV_READ_TIMEOUT = "LIMECRAFT_RAY_READ_TIMEOUT"
ENV_INFLIGHT = "LIMECRAFT_RAY_INFLIGHT"
FALLBACKS = ("none", "local")


@dataclass(frozen=True)
class RemoteConfig:
    """Where the Serve deployments are and what to do when they cannot be reached.

    Attributes
    ----------
    address : str, ``http://host:port`` of Serve's HTTP proxy
    route : str, route prefix of the deployments, e.g. ``/limecraft``
    fallback : {"none", "local"}
    connect_timeout : float, seconds
    read_timeout : float, seconds
    inflight : int, chunks in flight per explanation
    """

    address: str
    route: str = DEFAULT_ROUTE
    fallback: str = "none"
    connect_timeout: float = 3.0
    read_timeout: float = 300.0
    inflight: int = 2

    def __post_init__(self) -> None:
        parts = urlsplit(self.address if "://" in self.address else f"http://{self.address}")
        if parts.scheme != "http" or not parts.hostname:
            raise LimecraftError(
                f"{RAY_ADDRESS_ENV} must be Serve's HTTP address, like http://ray-head:8000; got "
                f"{self.address!r} (a ray:// or GCS address is for Ray drivers, not front ends)"
            )
        if self.fallback not in FALLBACKS:
            raise LimecraftError(
                f"{ENV_FALLBACK} must be one of {', '.join(FALLBACKS)}; got {self.fallback!r}"
            )
        if not (self.connect_timeout > 0 and self.read_timeout > 0 and self.inflight >= 1):
            raise LimecraftError("the Ray timeouts must be > 0 and the in-flight count >= 1")
        object.__setattr__(self, "address", f"http://{parts.hostname}:{parts.port or 80}")
        object.__setattr__(self, "route", "/" + self.route.strip("/"))

    @property
    def host(self) -> str:
        return urlsplit(self.address).hostname or ""

    @property
    def port(self) -> int:
        return urlsplit(self.address).port or 80

    def url(self, model: str, endpoint: str = "") -> str:
        return f"{self.address}{self.path(model, endpoint)}"

    def path(self, model: str, endpoint: str = "") -> str:
        return f"{self.route}/{model}" + (f"/{endpoint}" if endpoint else "")


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        return float(env.get(name, default))
    except ValueError:
        raise LimecraftError(f"{name} must be a number; got {env[name]!r}") from None


def remote_configured() -> bool:
    """Whether ``LIMECRAFT_RAY_ADDRESS`` is set (models then run on Ray Serve)."""
    return served_by_ray()


def remote_config(env: Mapping[str, str] | None = None) -> RemoteConfig | None:
    """The configuration from the environment, or None when ``LIMECRAFT_RAY_ADDRESS`` is unset."""
    env = os.environ if env is None else env
    address = env.get(RAY_ADDRESS_ENV, "").strip()
    if not address:
        return None
    return RemoteConfig(
        address=address,
        route=env.get(ENV_ROUTE, DEFAULT_ROUTE),
        fallback=env.get(ENV_FALLBACK, "none").strip().lower() or "none",
        connect_timeout=_env_float(env, ENV_TIMEOUT, 3.0),
        read_timeout=_env_float(env, ENV_READ_TIMEOUT, 300.0),
        inflight=int(_env_float(env, ENV_INFLIGHT, 2)),
    )
