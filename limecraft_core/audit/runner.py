"""Many images explained with several in flight through one scorer, sharing its forward passes.

Their perturbations share the scorer's forward passes where they fit. Each image's loading and
result are handed to callables of the edge, and a Cancel is honoured between chunks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np

from .._validate import Cancelled, LimecraftError, ModelError, check_int
from ..config import IN_FLIGHT, ExplainConfig
from ..explain import explain
from ..result import Explanation
from ..scorer import Scorer
from .rows import AuditRow, audit_row, error_row, location_grid


@dataclass(frozen=True, eq=False)
class AuditInput:
    """One image, read and ready to explain.

    Attributes
    ----------
    image : (H, W, 3) uint8 ndarray
    expected : (H, W) bool ndarray or None, the expected region (already checked against the
        image's size)
    regions : tuple of (H, W) bool ndarray, handcrafted regions (the analyst's own, proposed)
    region_names : tuple of str, their names
    region_origins : tuple of str, where each came from (``uploaded``, ``proposed:<proposer>``)
    notes : tuple of str, what proposing them said ("No text found.")
    """

    image: np.ndarray
    expected: np.ndarray | None = None
    regions: tuple[np.ndarray, ...] = ()
    region_names: tuple[str, ...] = ()
    region_origins: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class AuditItem:
    """One image to audit: its names and how to read it (the edge reads the files).

    Attributes
    ----------
    file : str, as :attr:`AuditRow.file`
    key : str, as :attr:`AuditRow.key`
    digest : str, as :attr:`AuditRow.digest`
    load : callable() -> AuditInput; raises LimecraftError for a bad image or mask
    """

    file: str
    key: str
    digest: str
    load: Callable[[], AuditInput]


@dataclass(frozen=True, eq=False)
class AuditOutcome:
    """What one image gave: its row, and on success its input, explanation and location grid."""

    item: AuditItem
    row: AuditRow
    input: AuditInput | None = None
    explanation: Explanation | None = None
    grid: np.ndarray | None = None


def _audit_one(
    item: AuditItem,
    scorer: Scorer,
    config: ExplainConfig,
    stop: threading.Event,
    save: Callable[[AuditOutcome], None] | None,
) -> AuditOutcome:
    out = _explain_one(item, scorer, config, stop)
    if save is not None:
        save(out)
    return out


def _explain_one(
    item: AuditItem, scorer: Scorer, config: ExplainConfig, stop: threading.Event
) -> AuditOutcome:
    t0 = time.perf_counter()
    try:
        inp = item.load()
        ex = explain(
            inp.image,
            scorer,
            regions_mask=list(inp.regions) or None,
            region_names=list(inp.region_names) or None,
            region_origins=list(inp.region_origins) or None,
            config=config,
            expected_mask=inp.expected,
            cancel=stop.is_set,
        )
        row = audit_row(
            ex,
            file=item.file,
            key=item.key,
            digest=item.digest,
            has_mask=inp.expected is not None,
            seconds=time.perf_counter() - t0,
            image=inp.image,
        )
        return AuditOutcome(item, row, inp, ex, location_grid(ex))
    except (Cancelled, KeyboardInterrupt):
        raise
    except (LimecraftError, ModelError) as e:
        msg = str(e)
    except Exception as e:  # a bug of ours on one odd image must not end a long run
        msg = f"internal error: {type(e).__name__}: {e}"
    return AuditOutcome(
        item, error_row(item.file, item.key, item.digest, msg, time.perf_counter() - t0)
    )


def run_audit(
    items: Iterable[AuditItem],
    scorer: Scorer,
    config: ExplainConfig,
    on_result: Callable[[AuditOutcome], None],
    *,
    in_flight: int = IN_FLIGHT,
    save: Callable[[AuditOutcome], None] | None = None,
    tick: Callable[[], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    poll_s: float = 0.2,
) -> int:
    """Explain every item with ``in_flight`` images at a time through one scorer.

    Several explanations in flight call ``scorer.run_masks`` from their own threads: a
    :class:`serving.QueuedScorer` then combines the chunks of images of the same input size into
    shared forward passes, and a :class:`serving.RemoteScorer` keeps that many images' chunks in
    flight to a Ray Serve deployment. An image that fails (unreadable, a bad mask, the model
    raising) gives an error row and the run goes on.

    Parameters
    ----------
    items : AuditItem iterable, read lazily (at most ``in_flight`` images are held at once)
    scorer : Scorer, safe to call from several threads (Classifier, QueuedScorer, RemoteScorer)
    config : ExplainConfig (see :func:`audit_config`)
    on_result : callable(AuditOutcome), called in the caller's thread as each image finishes,
        in the order they finish
    in_flight : int in [1, 64]
    save : callable(AuditOutcome), optional; called in the image's own thread once it is
        explained, before ``on_result`` (the edge writes the image's files there, so that
        writing overlaps the other images' explanations); an exception there ends the run
    tick : callable(), optional; called in the caller's thread at least every ``poll_s``
        seconds while waiting (progress display; an exception raised there stops the run)
    cancel : callable() -> bool, optional; True stops the run (raises ``Cancelled``)

    Returns
    -------
    int, the number of images done. On ``Cancelled``, ``KeyboardInterrupt`` or an exception from
    ``on_result`` or ``tick``, the explanations in flight are stopped at their next batch
    (their images are not reported) before it propagates: everything reported stays reported.
    """
    in_flight = check_int("in_flight", in_flight, 1, 64)
    stop = threading.Event()
    todo = iter(items)
    pending: set[Future] = set()
    done = 0
    pool = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="limecraft-audit")
    try:

        def refill() -> None:
            while len(pending) < in_flight:
                item = next(todo, None)
                if item is None:
                    return
                pending.add(pool.submit(_audit_one, item, scorer, config, stop, save))

        refill()
        while pending:
            finished, _ = wait(pending, timeout=poll_s, return_when=FIRST_COMPLETED)
            for f in finished:
                pending.discard(f)
                on_result(f.result())
                done += 1
            if cancel is not None and cancel():
                raise Cancelled("the audit was cancelled")
            if tick is not None:
                tick()
            refill()
        return done
    finally:
        stop.set()  # explanations still in flight stop at their next batch
        for f in pending:
            f.cancel()
        pool.shutdown(wait=True)
