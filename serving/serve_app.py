"""The model side on Ray Serve: one deployment per registry model, batched across sessions.

Each deployment loads one registry model (``demo``, ``resnet50``, ...) on its replica's device
and serves it over Serve's HTTP proxy at ``/limecraft/<model>``:

- ``POST .../score``: an ``.npz`` with a scene (image, fill, label map; sent once, then named
  by its digest) and packed binary masks, or ready images; answers the ``.npy`` (n, C) scores.
  The replica composes the perturbations with the engine's
  :func:`~limecraft_core.perturb.compose_batch`, next to the model.
- ``GET .../info``: input size, normalisation, class names, device, precision, chunk sizes.
- ``GET .../stats``: counters (requests, forward calls, batches that joined several scenes).

``@serve.batch`` joins the chunks that arrive together, from any session, into one forward
pass of up to ``max_batch_images`` images. Replicas declare a GPU fraction by model size
(:data:`GPU_FRACTION`: four small models share a GPU) and scale by ``num_replicas`` or
autoscaling. Deploy on a running cluster::

    python -m serving.serve_app --address auto --models demo,resnet50 --replicas 2
"""

from __future__ import annotations

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import asyncio
import json
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from limecraft_core import Classifier, LimecraftError, ModelError
from limecraft_core.codecs.npz import encode_npy
from limecraft_core.perturb import FILLS, Fill, compose_batch, default_batch_size
from models.registry import load_classifier, model_info

from . import wire

__all__ = [
    "GPU_FRACTION",
    "LimecraftModel",
    "build_app",
    "deploy",
    "gpu_fraction",
    "main",
    "model_deployment",
    "parser",
    "serve_local",
]

#: Share of one GPU a replica asks Ray for, by model. Ray packs replicas by these numbers (it
#: does not enforce them): small convnets leave most of a GPU idle at these batch sizes, so four
#: share one; transformers and VGG's large activations get half or a whole one.
GPU_FRACTION: dict[str, float] = {
    "demo": 0.1,
    "resnet18": 0.25,
    "mobilenet_v3_large": 0.25,
    "efficientnet_b0": 0.25,
    "resnet50": 0.5,
    "densenet121": 0.5,
    "inception_v3": 0.5,
    "convnext_tiny": 0.5,
    "swin_t": 0.5,
    "vit_b_16": 1.0,
    "vgg16": 1.0,
}
#: Scenes a replica remembers (about 2 MB each at 224 px).
SCENE_CACHE = 32
#: Default cap on images per forward pass, and requests a replica holds at once (Serve warns
#: when a batch could be larger than the requests it may hold; a request is at least 1 image).
MAX_BATCH_IMAGES = 512


def gpu_fraction(model: str) -> float:
    """The GPU share a replica of ``model`` declares (0.5 for a model not in the table)."""
    return GPU_FRACTION.get(model, 0.5)


@dataclass(frozen=True)
class _Scene:
    image: torch.Tensor  # (3, h, w) float32 on the device
    fill: torch.Tensor | Fill  # a static fill's image, or a per-mask fill (FILLS, by name)
    diff: torch.Tensor | None  # image - fill, once per scene (None for a per-mask fill)
    labels: torch.Tensor  # (h, w) int64


@dataclass(frozen=True)
class _Chunk:
    """One request: masks over a known scene, or images ready for the model."""

    key: str
    n: int
    scene: _Scene | None = None
    masks: torch.Tensor | None = None  # (n, K) bool on the device
    expand: int = 0
    images: torch.Tensor | None = None  # (n, 3, h, w) float32

    @property
    def shape(self) -> tuple[int, ...]:
        src = self.images[0] if self.images is not None else self.scene.image
        return tuple(src.shape)


def _images_in(chunks: list[_Chunk]) -> int:
    return sum(c.n for c in chunks)


class LimecraftModel:
    """A replica: one registry model on the replica's device, scoring chunks in batches.

    Parameters
    ----------
    model : str, a registry name
    device : {"auto", "cpu", "cuda"}
    precision : {"auto", "fp32", "bf16", "fp16"}
    pretrained : bool; False builds a zoo model with random weights (tests, benchmarks)
    chunk : int, optional; masks per request the clients send (default: the engine's batch
        size for the device and input size, halved on a GPU: 128 at 224 px)
    max_batch_images : int, optional; images per forward pass, across requests (default 4
        chunks, at most 512)
    batch_wait_s : float; how long a batch waits for more requests once one arrived
    """

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        precision: str = "auto",
        pretrained: bool = True,
        chunk: int | None = None,
        max_batch_images: int | None = None,
        batch_wait_s: float = 0.01,
    ) -> None:
        # A replica always runs its model here (the registry is local-only).
        self.clf: Classifier = load_classifier(
            model, device=device, precision=precision, pretrained=pretrained
        )
        self.clf.settle_precision()  # warms "auto"'s per-image check on a photo
        size = self.clf.input_size or (224, 224)
        if chunk is None:  # the engine's batch size; half on a GPU, where 4 chunks make a batch
            chunk = default_batch_size(self.clf.device, size[0] * size[1])
            chunk = max(1, chunk // 2) if self.clf.device.type == "cuda" else chunk
        self.chunk = int(chunk)
        # Room for several sessions' chunks (each session has 2 in flight) in one pass.
        self.max_batch_images = int(max_batch_images or min(4 * self.chunk, MAX_BATCH_IMAGES))
        self.chunk = min(self.chunk, self.max_batch_images)
        self._score.set_max_batch_size(self.max_batch_images)
        self._score.set_batch_wait_timeout_s(batch_wait_s)
        self._scenes: OrderedDict[str, _Scene] = OrderedDict()
        self._lock = threading.Lock()
        self.counters = {
            "requests": 0,
            "images": 0,
            "forward_calls": 0,
            "batches": 0,
            "multi_request_batches": 0,
            "cross_scene_batches": 0,
            "max_requests_per_batch": 0,
            "scenes_received": 0,
            "scene_misses": 0,
        }

    # ------------------------------------------------------------------ HTTP

    async def __call__(self, request: Request) -> Response:
        endpoint = request.url.path.rstrip("/").rsplit("/", 1)[-1]
        if request.method == "GET" and endpoint == "info":
            return JSONResponse(self.info())
        if request.method == "GET" and endpoint == "stats":
            return JSONResponse(self.stats())
        if request.method != "POST" or endpoint != "score":
            return Response("use GET info, GET stats or POST score", status_code=404)
        try:
            chunk = self._parse(await request.body())
        except LimecraftError as e:
            return Response(str(e), status_code=400)
        except KeyError as e:
            return Response(str(e), status_code=409)
        out = await self._score(chunk)
        if isinstance(out, ModelError):
            return Response(str(out), status_code=422)
        if isinstance(out, Exception):
            return Response(f"{type(out).__name__}: {out}", status_code=500)
        return Response(encode_npy(out), media_type="application/octet-stream")

    def info(self) -> dict[str, Any]:
        """What a client needs to act as this model."""
        clf = self.clf
        return {
            "model": clf.name,
            "input_size": list(clf.input_size) if clf.input_size else None,
            "normalize": clf.normalize,
            "labels": list(clf.labels) if clf.labels else None,
            "device": clf.device.type,
            "precision": clf.precision,
            "precision_reason": clf.precision_reason,
            "chunk": self.chunk,
            "max_batch_images": self.max_batch_images,
        }

    def stats(self) -> dict[str, int]:
        """Counters since the replica started, and the replica's process id."""
        with self._lock:
            return {**self.counters, "pid": os.getpid()}

    def _parse(self, body: bytes) -> _Chunk:
        """Turn a request body into a chunk; KeyError for a scene this replica has not seen."""
        a = wire.decode_arrays(body)
        dev = self.clf.device
        if "images" in a:
            images = a["images"]
            if images.ndim != 4 or images.shape[1] != 3 or images.dtype != np.float32:
                raise LimecraftError(f"images must be float32 (B, 3, H, W); got {images.shape}")
            return _Chunk("", len(images), images=torch.from_numpy(images).to(dev))
        try:
            key, packed = str(a["key"]), a["masks"]
            n, k = (int(v) for v in a["shape"])
            expand = int(a.get("expand", 0))
        except (KeyError, ValueError, TypeError) as e:
            raise LimecraftError(f"a score request needs key, masks, shape: {e}") from None
        if "image" in a:
            self._add_scene(key, a["image"], a["fill"], a["labels"], k)
        with self._lock:
            scene = self._scenes.get(key)
            if scene is None:
                self.counters["scene_misses"] += 1
                raise KeyError(f"unknown scene {key}; send it with the masks")
            self._scenes.move_to_end(key)
        masks = wire.unpack_masks(packed, k)
        if masks.shape[0] != n or not 0 <= expand <= 64:
            raise LimecraftError("masks do not match their shape, or expand is not in 0..64")
        return _Chunk(key, n, scene=scene, masks=torch.from_numpy(masks).to(dev), expand=expand)

    def _add_scene(
        self, key: str, image: np.ndarray, fill: np.ndarray, labels: np.ndarray, k: int
    ) -> None:
        if wire.scene_key(image, fill, labels) != key:
            raise LimecraftError("the scene does not match its key")
        per_mask = None
        if fill.dtype.kind == "U" and fill.ndim == 0:  # a per-mask fill, by name
            per_mask = FILLS.get(str(fill))
            if per_mask is None or not per_mask.is_per_mask:
                raise LimecraftError(f"{str(fill)!r} is not a per-mask fill of this replica")
        if (
            image.ndim != 3
            or image.shape[0] != 3
            or (per_mask is None and fill.shape != image.shape)
            or labels.shape != image.shape[1:]
            or image.dtype != np.float32
            or (per_mask is None and fill.dtype != np.float32)
        ):
            raise LimecraftError("a scene is float32 (3, H, W) image and fill, (H, W) labels")
        if labels.size and int(labels.max()) >= k:
            raise LimecraftError(f"labels go up to {int(labels.max())} but masks have {k} regions")
        dev = self.clf.device
        img = torch.from_numpy(image).to(dev)
        fil = per_mask if per_mask is not None else torch.from_numpy(fill).to(dev)
        lab = torch.from_numpy(labels.astype(np.int64)).to(dev)
        diff = None if isinstance(fil, Fill) else img - fil
        with self._lock:
            self._scenes[key] = _Scene(img, fil, diff, lab)
            self._scenes.move_to_end(key)
            while len(self._scenes) > SCENE_CACHE:
                self._scenes.popitem(last=False)
            self.counters["scenes_received"] += 1

    # ------------------------------------------------------------------ batching

    @serve.batch(
        max_batch_size=MAX_BATCH_IMAGES, batch_wait_timeout_s=0.01, batch_size_fn=_images_in
    )
    async def _score(self, chunks: list[_Chunk]) -> list[np.ndarray | Exception]:
        # The model runs in a thread so the replica keeps taking requests for the next batch.
        return await asyncio.to_thread(self._forward, chunks)

    def _forward(self, chunks: list[_Chunk]) -> list[np.ndarray | Exception]:
        """Compose every chunk, one forward pass per image shape, split the scores."""
        results: list[np.ndarray | Exception] = [np.empty(0)] * len(chunks)
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, c in enumerate(chunks):
            groups.setdefault(c.shape, []).append(i)
        calls = 0
        for shape, idx in groups.items():
            try:
                scores, n_calls = self._forward_group([chunks[i] for i in idx], shape)
                calls += n_calls
            except Exception as e:  # every request of the group gets the error
                for i in idx:
                    results[i] = e
                continue
            start = 0
            for i in idx:
                results[i] = scores[start : start + chunks[i].n]
                start += chunks[i].n
        with self._lock:
            c = self.counters
            c["requests"] += len(chunks)
            c["images"] += _images_in(chunks)
            c["forward_calls"] += calls
            c["batches"] += 1
            c["multi_request_batches"] += len(chunks) > 1
            c["cross_scene_batches"] += len({ch.key for ch in chunks if ch.key}) > 1
            c["max_requests_per_batch"] = max(c["max_requests_per_batch"], len(chunks))
        return results

    def _forward_group(
        self, chunks: list[_Chunk], shape: tuple[int, ...]
    ) -> tuple[np.ndarray, int]:
        total = _images_in(chunks)
        dev = self.clf.device
        try:
            batch = torch.empty((total, *shape), dtype=torch.float32, device=dev)
            start = 0
            for c in chunks:
                part = batch[start : start + c.n]
                if c.images is not None:
                    part.copy_(c.images)
                else:
                    s = c.scene
                    compose_batch(
                        s.image, s.fill, s.labels, c.masks, out=part, diff=s.diff, expand=c.expand
                    )
                start += c.n
            return self.clf(batch).float().cpu().numpy(), 1
        except torch.OutOfMemoryError:
            if len(chunks) == 1 and chunks[0].n == 1:
                raise
            del batch
            if dev.type == "cuda":
                torch.cuda.empty_cache()
            # Halve: each request alone, and a single request in two halves.
            if len(chunks) > 1:
                parts = [self._forward_group([c], shape) for c in chunks]
            else:
                parts = [self._forward_group([h], shape) for h in _halves(chunks[0])]
            return np.concatenate([p[0] for p in parts]), sum(p[1] for p in parts)


def _halves(c: _Chunk) -> list[_Chunk]:
    m = c.n // 2
    if c.images is not None:
        return [_Chunk(c.key, m, images=c.images[:m]), _Chunk(c.key, c.n - m, images=c.images[m:])]
    return [
        _Chunk(c.key, m, scene=c.scene, masks=c.masks[:m], expand=c.expand),
        _Chunk(c.key, c.n - m, scene=c.scene, masks=c.masks[m:], expand=c.expand),
    ]


# --------------------------------------------------------------------------- building


def model_deployment(
    model: str,
    *,
    replicas: int = 1,
    autoscale: tuple[int, int] | None = None,
    num_gpus: float | None = None,
    num_cpus: float = 1.0,
    max_ongoing_requests: int = MAX_BATCH_IMAGES,
) -> serve.Deployment:
    """The Serve deployment for one registry model, with its resources declared.

    Parameters
    ----------
    model : str, a registry name
    replicas : int, fixed replica count (ignored with ``autoscale``)
    autoscale : (min, max), optional; replicas follow the load, ~8 requests in flight each
    num_gpus : float, optional; GPU share per replica (default :func:`gpu_fraction`; 0: CPU)
    num_cpus : float; CPU cores per replica (Ray sets the replica's torch threads from it)
    max_ongoing_requests : int; requests a replica holds at once, so that chunks from many
        sessions can meet in one batch

    Raises
    ------
    LimecraftError
        For an unknown model or a bad count.
    """
    model_info(model)  # raises for unknown names
    gpus = gpu_fraction(model) if num_gpus is None else float(num_gpus)
    if not 0 <= gpus <= 8 or num_cpus <= 0 or replicas < 1:
        raise LimecraftError("num_gpus must be in [0, 8], num_cpus > 0 and replicas >= 1")
    options: dict[str, Any] = {
        "name": f"limecraft-{model}",
        "ray_actor_options": {"num_cpus": num_cpus, "num_gpus": gpus},
        "max_ongoing_requests": max_ongoing_requests,
        "health_check_period_s": 5.0,
    }
    if autoscale is not None:
        lo, hi = autoscale
        if not 0 <= lo <= hi or hi < 1:
            raise LimecraftError(f"autoscale must be MIN:MAX with 0 <= MIN <= MAX; got {autoscale}")
        options["autoscaling_config"] = {
            "min_replicas": lo,
            "max_replicas": hi,
            "target_ongoing_requests": 8,
        }
    else:
        options["num_replicas"] = replicas
    return serve.deployment(LimecraftModel).options(**options)


def build_app(
    model: str,
    *,
    device: str = "auto",
    precision: str = "auto",
    pretrained: bool = True,
    chunk: int | None = None,
    max_batch_images: int | None = None,
    batch_wait_s: float = 0.01,
    **deployment: Any,
) -> serve.Application:
    """The Serve application for one model; ``deployment`` goes to :func:`model_deployment`."""
    return model_deployment(model, **deployment).bind(
        model,
        device=device,
        precision=precision,
        pretrained=pretrained,
        chunk=chunk,
        max_batch_images=max_batch_images,
        batch_wait_s=batch_wait_s,
    )


def deploy(
    models: Sequence[str], *, route: str = wire.DEFAULT_ROUTE, **kwargs: Any
) -> dict[str, Any]:
    """Run one application per model at ``route/<model>`` on the connected cluster.

    Returns the deployment handles by model name. ``kwargs`` go to :func:`build_app`.
    """
    handles = {}
    for m in models:
        prefix = "/" + route.strip("/") + f"/{m}"
        handles[m] = serve.run(build_app(m, **kwargs), name=f"limecraft-{m}", route_prefix=prefix)
    return handles


def serve_local(
    models: Sequence[str],
    *,
    cluster_cpus: int,
    http_port: int,
    ready: Any = None,
    **kwargs: Any,
) -> None:
    """Start a one-node Ray cluster on loopback, deploy ``models``, serve until stdin closes.

    For trying things on one machine, tests and benchmarks. Ray's files go to a fresh temp
    dir, removed afterwards; the cluster stops with this process. Set ``RAY_AUTH_TOKEN`` (and
    ``RAY_AUTH_MODE=token``) in the environment, else Ray writes a token to ~/.ray/auth_token.
    ``ready(url)`` is called once the deployments answer; ``kwargs`` go to :func:`deploy`.
    """
    import shutil
    import signal
    import tempfile

    import ray

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # run the cleanup below
    tmp = tempfile.mkdtemp(prefix="lc-ray-")  # short: Ray's socket paths must stay < 108 chars
    try:
        ray.init(
            num_cpus=cluster_cpus,
            num_gpus=0,
            include_dashboard=False,
            _temp_dir=tmp,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
            configure_logging=False,
        )
        serve.start(http_options={"host": "127.0.0.1", "port": http_port})
        deploy(models, **kwargs)
        if ready is not None:
            ready(f"http://127.0.0.1:{http_port}")
        sys.stdin.read()  # until the parent closes it
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
            shutil.rmtree(tmp, ignore_errors=True)


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m serving.serve_app``."""
    ap = argparse.ArgumentParser(
        prog="python -m serving.serve_app",
        description="Deploy LIMEcraft's models on a running Ray cluster (Ray Serve).",
    )
    ap.add_argument("--address", default="auto", help="Ray address (auto: the local node's)")
    ap.add_argument("--models", default="demo", help="comma-separated registry names")
    ap.add_argument("--replicas", type=int, default=1, help="replicas per model")
    ap.add_argument("--autoscale", default=None, help="MIN:MAX replicas, instead of --replicas")
    ap.add_argument(
        "--gpus",
        default="auto",
        help="GPU share per replica: table (GPU_FRACTION by model), auto (the table when the "
        "cluster has GPUs now, else 0), or a number",
    )
    ap.add_argument("--cpus", type=float, default=1.0, help="CPU cores per replica")
    ap.add_argument("--http-host", default="0.0.0.0", help="where Serve's HTTP proxy listens")
    ap.add_argument("--http-port", type=int, default=8000)
    ap.add_argument("--route", default=wire.DEFAULT_ROUTE)
    ap.add_argument("--batch-wait", type=float, default=0.01, help="seconds a batch waits")
    ap.add_argument("--random-weights", action="store_true", help="zoo models untrained (tests)")
    ap.add_argument(
        "--local",
        type=int,
        metavar="CPUS",
        default=None,
        help="start a one-node cluster on loopback with CPUS logical CPUs (CPU only), serve "
        "until stdin closes; prints one JSON line when ready",
    )
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)

    import ray

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        model_info(m)
    autoscale = None
    if args.autoscale:
        lo, hi = (int(v) for v in args.autoscale.split(":"))
        autoscale = (lo, hi)
    if args.local is not None:
        serve_local(
            models,
            cluster_cpus=args.local,
            http_port=args.http_port,
            ready=lambda url: print(json.dumps({"ready": True, "url": url}), flush=True),
            route=args.route,
            replicas=args.replicas,
            autoscale=autoscale,
            num_gpus=0,
            num_cpus=args.cpus,
            pretrained=not args.random_weights,
            batch_wait_s=args.batch_wait,
        )
        return 0
    ray.init(address=args.address)
    has_gpu = ray.cluster_resources().get("GPU", 0) > 0
    serve.start(http_options={"host": args.http_host, "port": args.http_port})
    for m in models:
        if args.gpus in ("auto", "table"):
            gpus = gpu_fraction(m) if has_gpu or args.gpus == "table" else 0.0
        else:
            gpus = float(args.gpus)
        deploy(
            [m],
            route=args.route,
            replicas=args.replicas,
            autoscale=autoscale,
            num_gpus=gpus,
            num_cpus=args.cpus,
            pretrained=not args.random_weights,
            batch_wait_s=args.batch_wait,
        )
        print(
            json.dumps(
                {
                    "model": m,
                    "url": f"http://{args.http_host}:{args.http_port}/{args.route.strip('/')}/{m}",
                    "num_gpus": gpus,
                    "replicas": autoscale or args.replicas,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
