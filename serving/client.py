"""A scorer whose forward passes run on a Ray Serve deployment (``serving/serve_app.py``).

The front end (a Streamlit replica) keeps the engine; only
:meth:`~limecraft_core.Scorer.run_masks` goes over the network. It sends the image, the fill
and the label map once (a *scene*, content-addressed by its digest), then the (N, K) binary masks
in chunks, packed to bits: a few hundred bytes per chunk instead of the perturbed images (1000
images of 224x224 are 150 MB). A replica composes the perturbations next to the model with the
engine's own :func:`~limecraft_core.perturb.compose_batch` and returns the (n, C) scores.

The wire (:mod:`serving.wire`) is plain HTTP to Serve's proxy, with ``.npz`` bodies read with
``allow_pickle=False``: front ends need no Ray, join no cluster, and unpickle nothing. This
module imports no Ray. Its configuration comes from the environment: :mod:`serving.config`.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from limecraft_core import Cancelled, Classifier, LimecraftError, ModelError
from limecraft_core._validate import check_choice, check_int
from limecraft_core.classifier import NORMALIZATIONS, class_label, predict_arrays
from limecraft_core.codecs.npz import load_npy
from limecraft_core.perturb import Fill
from limecraft_core.tensors import resize_chw
from models.source import RAY_ADDRESS_ENV

from .config import ENV_FALLBACK, ENV_READ_TIMEOUT, ENV_TIMEOUT, RemoteConfig
from .wire import encode_arrays, pack_masks, scene_key, small_labels

__all__ = ["RemoteScorer", "RemoteStatus"]

log = logging.getLogger(__name__)

#: After a failure with fallback on, the cluster is tried again after this many seconds.
RETRY_AFTER_S = 30.0
#: More images than this in one ``__call__`` (rather than masks in ``run_masks``) is logged.
_CALL_WARN = 8


class _Unavailable(Exception):
    """The cluster, the route or a replica could not serve the request.

    ``retry`` is True where a second try may succeed (a broken connection, a 5xx while Serve
    replaces a replica), False where it cannot (nothing listens, no such route).
    """

    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


class _UnknownScene(Exception):
    """The replica that got the chunk has not seen its scene."""


@dataclass(frozen=True)
class RemoteStatus:
    """Where a remote scorer's work runs now.

    Attributes
    ----------
    address : str
    model : str
    mode : {"remote", "local fallback"}
    message : str, the last failure ("" when none)
    """

    address: str
    model: str
    mode: str
    message: str


class RemoteScorer:
    """A :class:`~limecraft_core.Scorer` that runs on a Ray Serve deployment.

    Input size, normalisation, class names and precision are the deployment's, read from it
    once. Tensors in and out are on the CPU (``device``). Thread-safe: one instance serves
    every session of a process.

    Parameters
    ----------
    name : str, a registry name served by the cluster
    config : RemoteConfig
    labels : sequence of str, optional; overrides the deployment's class names
    local : callable() -> Classifier, optional
        Builds the local model for ``fallback="local"`` (loaded at most once, when needed).

    Raises
    ------
    ModelError
        If the cluster cannot be reached and there is no fallback, or it does not serve ``name``.
    LimecraftError
        If the deployment describes itself with values that are out of range.
    """

    #: Where the engine puts the scene tensors: they are sent to the replica from here.
    device = torch.device("cpu")
    #: Nothing runs here in a memory format; recorded in the settings like a local model's.
    channels_last = False

    def __init__(
        self,
        name: str,
        config: RemoteConfig,
        *,
        labels: list[str] | tuple[str, ...] | None = None,
        local: Callable[[], Classifier] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self._local_factory = local
        self._local: Classifier | None = None
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._message = ""
        self._warned_call = False
        try:
            info = self._info(name)
        except _Unavailable as e:
            if config.fallback != "local" or local is None:
                raise ModelError(self._explain_failure(name, e)) from None
            self._fall_back(name, e)
            clf = self._local_classifier()
            clf.settle_precision()
            info = {
                "precision_reason": clf.precision_reason,
                "input_size": clf.input_size,
                "normalize": clf.normalize,
                "labels": list(clf.labels) if clf.labels else None,
                "precision": clf.precision,
                "device": clf.device.type,
                "chunk": 64,
                "max_batch_images": 128,
            }
        size = info["input_size"]
        self.input_size: tuple[int, int] | None = (
            (check_int("input_size", size[0], 8, 4096), check_int("input_size", size[1], 8, 4096))
            if size
            else None
        )
        self.normalize = check_choice("normalize", info["normalize"], tuple(NORMALIZATIONS))
        names = labels if labels is not None else info["labels"]
        self._labels = tuple(names) if names is not None else None
        self.precision = str(info["precision"])  # what the replicas run in
        self.precision_reason = str(info.get("precision_reason", ""))
        self.remote_device = str(info["device"])
        self.chunk = int(min(info["chunk"], info["max_batch_images"]))

    def __repr__(self) -> str:
        return (
            f"RemoteScorer(name={self.name!r}, address={self.config.address!r}, "
            f"input_size={self.input_size}, remote_device={self.remote_device!r})"
        )

    def label(self, index: int) -> str:
        """Name of class ``index``."""
        return class_label(self._labels, index)

    @property
    def labels(self) -> tuple[str, ...] | None:
        """Class names, if known."""
        return self._labels

    # ------------------------------------------------------------------ status and fallback

    @property
    def status(self) -> RemoteStatus:
        """Whether work runs on the cluster now, and the last failure."""
        local = self._down_until > time.monotonic()
        return RemoteStatus(
            self.config.address, self.name, "local fallback" if local else "remote", self._message
        )

    def _explain_failure(self, name: str, e: Exception) -> str:
        return (
            f"the Ray Serve cluster at {self.config.address} could not run model {name!r}: {e}. "
            f"Check that the cluster is up and serves it (python -m serving.serve_app --models "
            f"{name}), unset {RAY_ADDRESS_ENV} to run locally, or set {ENV_FALLBACK}=local"
        )

    def _fall_back(self, name: str, e: Exception) -> None:
        self._message = f"{e}; running {name!r} locally"
        self._down_until = time.monotonic() + RETRY_AFTER_S
        log.warning("Ray Serve at %s: %s", self.config.address, self._message)

    def _local_classifier(self) -> Classifier:
        with self._lock:
            if self._local is None:
                assert self._local_factory is not None
                self._local = self._local_factory()
            return self._local

    def _with_fallback(
        self, remote: Callable[[], torch.Tensor], local: Callable[[Classifier], torch.Tensor]
    ) -> torch.Tensor:
        can_fall_back = self.config.fallback == "local" and self._local_factory is not None
        if can_fall_back and self._down_until > time.monotonic():
            return local(self._local_classifier()).cpu()
        try:
            out = remote()
        except _Unavailable as e:
            if not can_fall_back:
                raise ModelError(self._explain_failure(self.name, e)) from None
            self._fall_back(self.name, e)
            return local(self._local_classifier()).cpu()
        if self._message and self._down_until <= time.monotonic():
            self._message = ""  # the cluster is back
        return out

    # ------------------------------------------------------------------ HTTP

    def _request(self, method: str, path: str, body: bytes | None = None) -> bytes:
        """One HTTP exchange; raises _Unavailable, _UnknownScene, ModelError or LimecraftError."""
        cfg = self.config
        conn = http.client.HTTPConnection(cfg.host, cfg.port, timeout=cfg.connect_timeout)
        try:
            try:
                conn.connect()
            except TimeoutError:
                raise _Unavailable(
                    f"no connection within {cfg.connect_timeout:g} s ({ENV_TIMEOUT})"
                ) from None
            except OSError as e:
                raise _Unavailable(f"unreachable ({e.strerror or e})") from None
            conn.sock.settimeout(cfg.read_timeout)
            headers = {"Content-Type": "application/octet-stream"}
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except TimeoutError:
                raise _Unavailable(
                    f"no answer within {cfg.read_timeout:g} s ({ENV_READ_TIMEOUT})"
                ) from None
            except (OSError, http.client.HTTPException) as e:
                raise _Unavailable(
                    f"the connection broke ({type(e).__name__}: {e}); a replica may have died",
                    retry=True,
                ) from None
        finally:
            conn.close()
        if resp.status == 200:
            return data
        text = data[:2000].decode("utf-8", "replace").strip()
        if resp.status == 409:
            raise _UnknownScene(text)
        if resp.status == 400:
            raise LimecraftError(f"the Ray Serve replica refused the request: {text}")
        if resp.status == 422:
            raise ModelError(text)
        if resp.status == 404:
            raise _Unavailable(f"no deployment at {cfg.route}{path[len(cfg.route) :]} (HTTP 404)")
        raise _Unavailable(f"HTTP {resp.status}: {text[:300]}", retry=resp.status >= 500)

    def _retrying(self, method: str, path: str, body: bytes | None = None) -> bytes:
        """One retry after a broken connection or a 5xx: Serve replaces a dead replica."""
        try:
            return self._request(method, path, body)
        except _Unavailable as e:
            if not e.retry:
                raise
            time.sleep(0.5)
            return self._request(method, path, body)

    def _info(self, name: str) -> dict[str, Any]:
        data = self._request("GET", self.config.path(name, "info"))
        try:
            return json.loads(data)
        except ValueError:
            raise _Unavailable(
                f"{self.config.url(name, 'info')} is not a LIMEcraft deployment"
            ) from None

    def stats(self) -> dict[str, Any]:
        """The counters of the replica that answers (requests, forward calls, batches)."""
        return json.loads(self._request("GET", self.config.path(self.name, "stats")))

    def _score(
        self, fields: dict[str, np.ndarray], scene: dict[str, np.ndarray] | None
    ) -> np.ndarray:
        path = self.config.path(self.name, "score")
        body = encode_arrays(fields if scene is None else {**fields, **scene})
        try:
            data = self._retrying("POST", path, body)
        except _UnknownScene:
            if scene is None:
                raise
            raise _Unavailable("the replica lost the scene it was just sent") from None
        try:
            return load_npy(data)
        except ValueError:  # unreadable, or an archive rather than one array
            raise _Unavailable("the replica's answer is not an array") from None

    def _score_chunk(
        self, fields: dict[str, np.ndarray], scene: dict[str, np.ndarray], first: bool
    ) -> np.ndarray:
        if first:
            return self._score(fields, scene)
        try:
            return self._score(fields, None)
        except _UnknownScene:  # another replica, or evicted: send the scene with this chunk
            return self._score(fields, scene)

    # ------------------------------------------------------------------ the scorer

    def run_masks(
        self,
        image: torch.Tensor,
        fill: torch.Tensor | Fill,
        labels: torch.Tensor,
        masks: np.ndarray,
        batch_size: int,
        *,
        progress: Callable[[int, int], None] | None = None,
        cancel: Callable[[], bool] | None = None,
        expand: int = 0,
    ) -> torch.Tensor:
        """Scores for the perturbations ``masks`` of ``image``, computed on the cluster.

        Same arguments and result as :meth:`limecraft_core.Scorer.run_masks`. Chunks hold
        the deployment's chunk size (``batch_size`` is the front end's and is not used);
        ``progress`` and ``cancel`` act per chunk. With ``fallback="local"`` a failure reruns
        all the masks locally, so one explanation never mixes two models' precisions.
        """

        def local(clf: Classifier) -> torch.Tensor:
            dev = clf.device
            return clf.run_masks(
                image.to(dev),
                fill if isinstance(fill, Fill) else fill.to(dev),
                labels.to(dev),
                masks,
                batch_size,
                progress=progress,
                cancel=cancel,
                expand=expand,
            )

        return self._with_fallback(
            lambda: self._run_remote(image, fill, labels, masks, progress, cancel, expand), local
        )

    def _run_remote(
        self,
        image: torch.Tensor,
        fill: torch.Tensor | Fill,
        labels: torch.Tensor,
        masks: np.ndarray,
        progress: Callable[[int, int], None] | None,
        cancel: Callable[[], bool] | None,
        expand: int,
    ) -> torch.Tensor:
        masks = np.asarray(masks, dtype=bool)
        n = len(masks)
        img = image.detach().cpu().float().numpy()
        # a per-mask fill travels by its name (the replica composes it from its own table)
        fil = np.array(fill.name) if isinstance(fill, Fill) else fill.detach().cpu().float().numpy()
        lab = small_labels(labels.detach().cpu().numpy())
        scene = {"image": img, "fill": fil, "labels": lab}
        key = np.array(scene_key(img, fil, lab))
        starts = list(range(0, n, self.chunk))
        outs: list[np.ndarray] = [np.empty(0)] * len(starts)

        def fields(start: int) -> dict[str, np.ndarray]:
            part = masks[start : start + self.chunk]
            return {
                "key": key,
                "masks": pack_masks(part),
                "shape": np.array(part.shape),
                "expand": np.array(int(expand)),
            }

        window = max(1, self.config.inflight)
        with ThreadPoolExecutor(max_workers=window, thread_name_prefix="limecraft-ray") as pool:
            pending: dict[int, Any] = {}
            submitted = done = 0
            try:
                while done < len(starts):
                    while submitted < len(starts) and len(pending) < window:
                        if cancel is not None and cancel():
                            raise Cancelled("cancelled")
                        pending[submitted] = pool.submit(
                            self._score_chunk, fields(starts[submitted]), scene, submitted == 0
                        )
                        if submitted == 0:
                            pending[0].result()  # the first chunk registers the scene
                        submitted += 1
                    outs[done] = pending.pop(done).result()
                    if outs[done].shape[0] != min(self.chunk, n - starts[done]):
                        raise _Unavailable(f"the replica returned {outs[done].shape} scores")
                    done += 1
                    if progress is not None:
                        progress(min(n, starts[done - 1] + self.chunk), n)
            finally:
                for f in pending.values():
                    f.cancel()
        return torch.from_numpy(np.concatenate(outs).astype(np.float32, copy=False))

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        """Scores for a (B, 3, H, W) [0, 1] batch: resized here, normalised and run remotely."""
        if len(batch) > _CALL_WARN and not self._warned_call:
            self._warned_call = True  # e.g. a local WorkQueue wrapped around this scorer
            log.warning(
                "RemoteScorer %r got %d composed images to score: they travel over the "
                "network; call run_masks (masks only) instead",
                self.name,
                len(batch),
            )
        x = batch.detach().cpu().float()
        if self.input_size is not None and tuple(x.shape[-2:]) != self.input_size:
            x = resize_chw(x, self.input_size)

        def remote() -> torch.Tensor:
            outs = [
                self._score({"images": x[i : i + self.chunk].numpy()}, None)
                for i in range(0, len(x), self.chunk)
            ]
            return torch.from_numpy(np.concatenate(outs))

        return self._with_fallback(remote, lambda clf: clf(batch.to(clf.device)))

    def predict(self, images: np.ndarray, batch_size: int = 32) -> np.ndarray:
        """Raw scores for images given as arrays, like :meth:`limecraft_core.Classifier.predict`.

        Parameters
        ----------
        images : (H, W, 3) or (B, H, W, 3) uint8 ndarray, or float in [0, 1]
        batch_size : int, images per call of :meth:`__call__`

        Returns
        -------
        (C,) or (B, C) float32 ndarray.
        """
        return predict_arrays(self, images, batch_size)
