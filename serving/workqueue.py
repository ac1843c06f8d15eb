"""One bounded work queue in front of a device, shared by every session of a process.

Each Explain hands its perturbations over as chunks of binary masks (a few KB each) together
with its image, fill and label map. One worker thread per queue owns the device: it takes the
next chunk of each waiting job in turn (round-robin, so a long job does not starve a short one),
composes their images next to the model, and runs chunks of the same model and input size
through it in one forward pass. The results go back to each job in order.

A job whose session has gone (its ``alive`` callable returns False), or that was cancelled, is
dropped before its next chunk. The queue holds at most ``max_jobs`` jobs; one more is refused
with a message that says how many are waiting.

    queue = WorkQueue()
    scorer = QueuedScorer(shared_classifier, queue, alive=lambda: session_is_open)
    explain(image, scorer, ...)         # as usual; the forward passes go through the queue

:class:`QueuedScorer` is a :class:`~limecraft_core.Scorer` that holds the scorer it queues for
(any :class:`BatchScorer`, e.g. a :class:`~limecraft_core.Classifier`) and forwards its
attributes; it copies and moves nothing.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from limecraft_core import Scorer
from limecraft_core._validate import Cancelled, LimecraftError, check_int
from limecraft_core.perturb import Fill, compose_batch

__all__ = ["BatchScorer", "QueueStatus", "QueuedScorer", "WorkQueue"]


@runtime_checkable
class BatchScorer(Scorer, Protocol):
    """A :class:`~limecraft_core.Scorer` that also scores composed images in this process.

    The queue's worker composes the perturbations next to the model and calls
    ``scorer(batch)``: (B, 3, h, w) float32 in [0, 1] on ``device`` -> (B, C) scores there.
    A :class:`~limecraft_core.Classifier` is one.
    """

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        """Scores for a batch of composed images."""
        ...


@dataclass
class _Chunk:
    masks: np.ndarray
    future: Future = field(default_factory=Future)


@dataclass
class _Job:
    id: int
    model: BatchScorer
    image: torch.Tensor
    fill: torch.Tensor | Fill
    labels: torch.Tensor
    expand: int
    alive: Callable[[], bool] | None
    chunks: deque[_Chunk]
    chunk: int  # the chunk size it was submitted with (its last chunk may be smaller)
    started: float = field(default_factory=time.perf_counter)


@dataclass(frozen=True)
class QueueStatus:
    """Where a job stands: ``position`` 0 is served next; ``jobs`` are waiting in all."""

    position: int
    jobs: int
    chunks_left: int


class WorkQueue:
    """A bounded, fair, micro-batching queue with one worker thread that owns the device.

    Parameters
    ----------
    max_jobs : int in [1, 10000]; jobs (Explains) that may wait at once
    max_batch : int in [1, 65536], optional; images per combined forward pass. Default: one
        chunk on a CPU, where combining does not help (a larger batch of images falls out of
        the cache: 4 sessions ran 0.70x as fast as one after another with combining, 0.89x
        without), and four chunks on a GPU, which uses large batches far better than small ones.
        Short chunks (the end of a block, a small image's per-region deltas) of several jobs
        share one pass up to that size, so small images' perturbations share forward batches.
    """

    def __init__(self, max_jobs: int = 64, max_batch: int | None = None) -> None:
        self.max_jobs = check_int("max_jobs", max_jobs, 1, 10_000)
        self.max_batch = None if max_batch is None else check_int("max_batch", max_batch, 1, 65536)
        self._jobs: deque[_Job] = deque()
        self._cv = threading.Condition()
        self._ids = itertools.count(1)
        self._worker: threading.Thread | None = None
        self._closed = False
        self.forward_calls = 0
        self.combined_calls = 0  # forward passes that served more than one job
        self.images = 0

    # ---------------------------------------------------------------- submitting side

    def submit(
        self,
        model: BatchScorer,
        image: torch.Tensor,
        fill: torch.Tensor | Fill,
        labels: torch.Tensor,
        masks: np.ndarray,
        chunk: int,
        *,
        expand: int = 0,
        alive: Callable[[], bool] | None = None,
    ) -> tuple[int, list[Future]]:
        """Queue one job: ``masks`` in chunks of ``chunk``, scored by ``model(batch)``.

        Returns its id and one future per chunk, each resolving to that chunk's (B, C) scores
        on the device. Chunks of the same ``model`` (the same object) may share a forward pass.
        """
        chunks = deque(_Chunk(masks[i : i + chunk]) for i in range(0, len(masks), chunk))
        with self._cv:
            if self._closed:
                raise LimecraftError("the work queue has been shut down")
            if len(self._jobs) >= self.max_jobs:
                raise LimecraftError(
                    f"the server is busy: {len(self._jobs)} explanations are waiting (at most "
                    f"{self.max_jobs}); try again in a minute"
                )
            job = _Job(next(self._ids), model, image, fill, labels, expand, alive, chunks, chunk)
            futures = [c.future for c in chunks]
            if chunks:
                self._jobs.append(job)
                self._ensure_worker()
                self._cv.notify_all()
        return job.id, futures

    def drop(self, job_id: int) -> int:
        """Remove a job's pending chunks (their futures are cancelled). Returns how many."""
        with self._cv:
            for job in list(self._jobs):
                if job.id == job_id:
                    self._jobs.remove(job)
                    for c in job.chunks:
                        c.future.cancel()
                    return len(job.chunks)
        return 0

    def status(self, job_id: int) -> QueueStatus | None:
        """The job's place in the rotation, or None when it has nothing left to run."""
        with self._cv:
            for i, job in enumerate(self._jobs):
                if job.id == job_id:
                    return QueueStatus(i, len(self._jobs), len(job.chunks))
        return None

    def pending(self) -> int:
        """Jobs waiting or running."""
        with self._cv:
            return len(self._jobs)

    def shutdown(self) -> None:
        """Stop the worker after the current pass; pending chunks are cancelled."""
        with self._cv:
            self._closed = True
            for job in self._jobs:
                for c in job.chunks:
                    c.future.cancel()
            self._jobs.clear()
            self._cv.notify_all()
        if self._worker is not None:
            self._worker.join(timeout=30)

    # ---------------------------------------------------------------- worker side

    def _ensure_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(
                target=self._loop, name="limecraft-work-queue", daemon=True
            )
            self._worker.start()

    def _take(self) -> list[tuple[_Job, _Chunk]]:
        """The next chunk of each job in turn, for one model and size, up to max_batch."""
        with self._cv:
            while not self._jobs and not self._closed:
                self._cv.wait()
            if self._closed:
                return []
            dead = [j for j in self._jobs if j.alive is not None and not _safe(j.alive)]
            for j in dead:
                self._jobs.remove(j)
                for c in j.chunks:
                    c.future.set_exception(Cancelled("the session has closed"))
            if not self._jobs:
                return []
            first = self._jobs[0]
            shape = tuple(first.image.shape)
            # The batch is the first job's chunk size (4 chunks on a GPU), not its next
            # chunk's length: a short chunk (the end of a block, the per-region deltas of a
            # small image) leaves room that other jobs' chunks fill.
            chunk = first.chunk
            limit = self.max_batch or (chunk if first.image.device.type == "cpu" else 4 * chunk)
            taken: list[tuple[_Job, _Chunk]] = []
            size = 0
            for job in list(self._jobs):
                if job.model is not first.model or tuple(job.image.shape) != shape:
                    continue
                c = job.chunks[0]
                if taken and size + len(c.masks) > limit:
                    continue  # it waits for the next pass; a shorter chunk may still fit
                job.chunks.popleft()
                taken.append((job, c))
                size += len(c.masks)
                # round-robin: a job that was served moves to the back of the line
                self._jobs.remove(job)
                if job.chunks:
                    self._jobs.append(job)
            return taken

    def _loop(self) -> None:
        while True:
            taken = self._take()
            if not taken:
                with self._cv:
                    if self._closed:
                        return
                continue
            taken = [(j, c) for j, c in taken if c.future.set_running_or_notify_cancel()]
            if not taken:
                continue
            try:
                outs = self._forward(taken)
            except BaseException as e:  # handed to the waiting sessions
                for _, c in taken:
                    c.future.set_exception(e)
                continue
            for (_, c), out in zip(taken, outs, strict=True):
                c.future.set_result(out)

    def _forward(self, taken: list[tuple[_Job, _Chunk]]) -> list[torch.Tensor]:
        model = taken[0][0].model
        image = taken[0][0].image
        sizes = [len(c.masks) for _, c in taken]
        batch = torch.empty((sum(sizes), *image.shape), dtype=image.dtype, device=image.device)
        start = 0
        for (job, c), n in zip(taken, sizes, strict=True):
            m = torch.from_numpy(c.masks).to(image.device, non_blocking=True)
            compose_batch(
                job.image, job.fill, job.labels, m, out=batch[start : start + n], expand=job.expand
            )
            start += n
        out = model(batch)
        self.forward_calls += 1
        self.images += len(batch)
        if len({id(j) for j, _ in taken}) > 1:
            self.combined_calls += 1
        return list(torch.split(out, sizes))


def _safe(alive: Callable[[], bool]) -> bool:
    try:
        return bool(alive())
    except Exception:  # a broken liveness check counts as a closed session
        return False


class QueuedScorer:
    """A shared scorer whose forward passes go through a :class:`WorkQueue`.

    It is what one session uses for one Explain; many of them can share one scorer and one
    queue. It holds ``inner`` and reads its attributes through (nothing is copied or moved).

    Parameters
    ----------
    inner : BatchScorer, e.g. the process's shared :class:`~limecraft_core.Classifier`
    queue : WorkQueue
    alive : callable() -> bool, optional; False once the session has gone (its work is dropped)
    on_wait : callable(QueueStatus), optional; called while the job waits, e.g. to show the
        queue position
    poll_s : float, seconds between checks of ``cancel`` and ``on_wait`` while waiting

    Raises
    ------
    LimecraftError
        If ``inner`` cannot score a batch of composed images here (it is not a BatchScorer).
    """

    def __init__(
        self,
        inner: BatchScorer,
        queue: WorkQueue,
        *,
        alive: Callable[[], bool] | None = None,
        on_wait: Callable[[QueueStatus], None] | None = None,
        poll_s: float = 0.1,
    ) -> None:
        if not isinstance(inner, BatchScorer):
            raise LimecraftError(
                f"the work queue needs a scorer that scores composed images in this process "
                f"(a Classifier); got {type(inner).__name__}. A remote scorer batches on its "
                f"cluster: pass it to explain directly"
            )
        self.inner, self.queue, self.alive, self.on_wait = inner, queue, alive, on_wait
        self.poll_s = poll_s
        self.job_id: int | None = None

    def __repr__(self) -> str:
        return f"QueuedScorer({self.inner!r})"

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def device(self) -> torch.device:
        return self.inner.device

    @property
    def input_size(self) -> tuple[int, int] | None:
        return self.inner.input_size

    @property
    def normalize(self) -> str:
        return self.inner.normalize

    @property
    def precision(self) -> str:
        return self.inner.precision

    @property
    def channels_last(self) -> bool:
        return self.inner.channels_last

    @property
    def precision_reason(self) -> str:
        return str(getattr(self.inner, "precision_reason", ""))

    def precision_for(self, image: torch.Tensor) -> tuple[str, str]:
        """The inner scorer's precision for this image (per image where it decides so)."""
        per_image = getattr(self.inner, "precision_for", None)
        if callable(per_image):
            return per_image(image)
        return self.inner.precision, self.precision_reason

    def label(self, index: int) -> str:
        """Name of class ``index``."""
        return self.inner.label(index)

    def gradient_model(self) -> Any:
        """The inner local model's gradients (:meth:`limecraft_core.Classifier.gradient_model`),
        for Integrated Gradients and Grad-CAM. They are taken in the calling job's thread on the
        same local model: the queue shares forward passes of composed images, which the
        gradient methods do not make (their few passes are the job's own).

        Raises
        ------
        LimecraftError : the inner scorer gives no gradients (the message says why)
        """
        get = getattr(self.inner, "gradient_model", None)
        if get is None:
            raise LimecraftError(
                f"the model {self.name!r} ({type(self.inner).__name__}) gives no gradients"
            )
        return get()

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
        """Scores of the perturbations ``masks``, computed by the queue's worker.

        Same arguments and result as :meth:`limecraft_core.Scorer.run_masks`; ``batch_size``
        is the chunk size. ``cancel`` and a closed session stop the job between chunks (raising
        :class:`~limecraft_core.Cancelled`); a cancelled, closed or failed job's pending chunks
        are dropped from the queue.
        """
        if len(masks) == 0:
            return torch.empty(0)
        job, futures = self.queue.submit(
            self.inner, image, fill, labels, masks, batch_size, expand=expand, alive=self.alive
        )
        self.job_id = job
        result: torch.Tensor | None = None  # one allocation for all the scores
        done = 0
        try:
            for f in futures:
                while True:
                    if cancel is not None and cancel():
                        raise Cancelled("cancelled")
                    try:
                        out = f.result(timeout=self.poll_s).float()
                        break
                    except TimeoutError:
                        if self.on_wait is not None:
                            st = self.queue.status(job)
                            if st is not None:
                                self.on_wait(st)
                    except CancelledError:
                        raise Cancelled("cancelled") from None
                if result is None:
                    shape = (len(masks), *out.shape[1:])
                    result = torch.empty(shape, dtype=out.dtype, device=out.device)
                result[done : done + len(out)] = out
                done += len(out)
                if progress is not None:
                    progress(done, len(masks))
        finally:
            if done < len(masks):
                self.queue.drop(job)  # cancelled, closed or failed: free the device for others
        return result
