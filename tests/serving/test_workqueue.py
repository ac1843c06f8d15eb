"""The shared work queue (serving/workqueue.py): equal results, cross-session batching,
fairness, drops and bounds, and the queued scorer's composition over the one it wraps."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from limecraft_core import Cancelled, Classifier, LimecraftError, ModelError, Scorer, explain
from serving.workqueue import QueuedScorer, WorkQueue
from tests.toys import LinearConv, LinearPixels

KW = dict(samples=200, segmentation="grid", n_segments=9, input_size=32, batch_size=20)


class Slow(torch.nn.Module):
    """LinearPixels that takes a while per forward and counts batch sizes."""

    def __init__(self, delay: float = 0.02) -> None:
        super().__init__()
        self.inner = LinearPixels((32, 32))
        self.delay = delay
        self.sizes: list[int] = []
        self.lock = threading.Lock()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self.lock:
            self.sizes.append(x.shape[0])
        time.sleep(self.delay)
        return self.inner(x)


@pytest.fixture
def queue():
    q = WorkQueue()
    yield q
    q.shutdown()


def shared(model: torch.nn.Module) -> Classifier:
    return Classifier(model, input_size=32, device="cpu")


def test_queued_scorer_holds_the_scorer_it_wraps(queue):
    clf = Classifier(LinearPixels((32, 32)), input_size=32, labels=["a", "b"], device="cpu")
    before = dict(vars(clf))
    q = QueuedScorer(clf, queue)
    assert isinstance(q, Scorer) and not isinstance(q, Classifier)
    assert not issubclass(QueuedScorer, Classifier)
    assert q.inner is clf and not hasattr(q, "model")
    for attr in ("name", "device", "input_size", "normalize", "precision", "channels_last"):
        assert getattr(q, attr) is getattr(clf, attr), attr
    assert q.label(1) == "b" and q.label(5) == "class 5"
    assert vars(clf) == before  # the wrapped scorer is left as it was
    clf.name = "renamed"  # read through, not copied
    assert q.name == "renamed"
    with pytest.raises(AttributeError):
        q.input_size = (64, 64)  # read-only: the inner scorer owns its settings
    # The worker needs a scorer that scores composed images here; a queued one does not.
    with pytest.raises(LimecraftError, match="scores composed images"):
        QueuedScorer(q, queue)


def test_queued_equals_local(photo, queue):
    clf = shared(LinearPixels((32, 32)))
    local = explain(photo, clf, **KW)
    remote = explain(photo, QueuedScorer(clf, queue), **KW)
    np.testing.assert_allclose(remote.weights, local.weights, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(remote.deltas, local.deltas, rtol=1e-6, atol=1e-7)
    assert queue.forward_calls >= 1 and queue.pending() == 0


def test_gradient_methods_run_on_the_queued_local_model(photo, queue):
    """The app compares explainers through the queue: Integrated Gradients and Grad-CAM take
    the wrapped local model's gradients and give what they give without the queue."""
    from limecraft_core import ExplainConfig, compare_explainers

    clf = shared(LinearConv((32, 32)))
    labels = np.arange(4).repeat(32)[None, :].repeat(96, 0)  # four vertical bands
    cfg = ExplainConfig.from_flat(samples=20)
    methods = ("lime", "ig", "gradcam")
    local = compare_explainers(photo, clf, labels, methods, config=cfg)
    queued = compare_explainers(photo, QueuedScorer(clf, queue), labels, methods, config=cfg)
    for m in ("ig", "gradcam"):
        assert np.abs(local.values(m)).max() > 0, m
        np.testing.assert_allclose(queued.values(m), local.values(m), rtol=1e-5, atol=1e-7)
    assert queue.forward_calls >= 1  # LIME's sample went through the queue


def test_two_sessions_share_forward_passes(photo):
    queue = WorkQueue(max_batch=40)  # on a CPU the default does not combine (see WorkQueue)
    model = Slow()
    clf = shared(model)
    other = np.ascontiguousarray(photo[::-1])  # a different image for the second session
    expected = [explain(img, clf, dedup=False, **KW).weights for img in (photo, other)]
    model.sizes.clear()
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def session(i: int, img: np.ndarray) -> None:
        try:
            barrier.wait()
            results[i] = explain(img, QueuedScorer(clf, queue), dedup=False, **KW).weights
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [
        threading.Thread(target=session, args=(i, im)) for i, im in enumerate((photo, other))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for i in (0, 1):
        np.testing.assert_allclose(results[i], expected[i], rtol=1e-5, atol=1e-6)
    rows = 2 * (200 + 2 * 9)
    assert sum(model.sizes) == queue.images == rows
    # Batches of 20 from two sessions were combined into passes of 40.
    assert queue.combined_calls >= 1 and max(model.sizes) == 40
    assert queue.forward_calls == len(model.sizes) < rows / 20
    queue.shutdown()


def test_on_a_cpu_the_default_does_not_combine(queue):
    clf = shared(Slow(delay=0.02))
    image = torch.rand(3, 32, 32)
    labels = torch.arange(32 * 32).reshape(32, 32) // 256
    jobs = [queue.submit(clf, image, image, labels, np.ones((40, 4), bool), 10) for _ in range(2)]
    for _, futures in jobs:
        for f in futures:
            f.result(timeout=10)
    assert queue.forward_calls == 8 and queue.combined_calls == 0
    assert clf.model.sizes == [10] * 8


def test_short_chunks_of_several_jobs_share_a_pass_up_to_the_chunk_size(queue):
    """A job's last, short chunk leaves room in its pass that other jobs' short chunks fill
    (an audit's small images: the end of each block, the per-region deltas), never more than
    the chunk size on a CPU."""
    clf = shared(Slow(delay=0.2))
    image = torch.rand(3, 32, 32)
    labels = torch.arange(32 * 32).reshape(32, 32) // 256
    first = queue.submit(clf, image, image, labels, np.ones((13, 4), bool), 10)
    time.sleep(0.05)  # the worker is busy with the first job's full chunk of 10
    second = queue.submit(clf, image, image, labels, np.ones((3, 4), bool), 10)
    third = queue.submit(clf, image, image, labels, np.ones((10, 4), bool), 10)
    for _, futures in (first, second, third):
        for f in futures:
            f.result(timeout=10)
    # job 1's 10 alone; then its short chunk of 3 and job 2's 3 in one pass (job 3's full
    # chunk does not fit beside them and waits for the next pass)
    assert clf.model.sizes == [10, 6, 10]
    assert queue.combined_calls == 1 and queue.images == 26


class Gated(Slow):
    """Slow whose first forward waits until the test releases it: the test, not the clock,
    decides what is queued while the worker is busy."""

    def __init__(self) -> None:
        super().__init__(delay=0.0)
        self.started, self.release = threading.Event(), threading.Event()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.started.is_set():
            self.started.set()
            assert self.release.wait(30), "the test never released the first pass"
        return super().forward(x)


def test_round_robin_and_position(queue):
    clf = shared(Gated())
    image = torch.rand(3, 32, 32)
    labels = torch.arange(32 * 32).reshape(32, 32) // 256
    masks = np.ones((40, 4), bool)
    a, fa = queue.submit(clf, image, image, labels, masks, 10)
    assert clf.model.started.wait(30)  # the worker is inside the long job's first chunk
    # 7 rows: a pass of its own (beside a full chunk of 10 it does not fit), told apart by size
    b, fb = queue.submit(clf, image, image, labels, masks[:7], 10)
    st_b = queue.status(b)
    assert st_b is not None and st_b.jobs == 2 and st_b.position in (0, 1)
    clf.model.release.set()
    fb[0].result(timeout=10)
    for f in fa:
        f.result(timeout=10)
    # the long job was first in line, so its next chunk goes first; then the short job's turn
    # comes before the long job's last two (first in, first out would make it the fifth pass)
    assert clf.model.sizes == [10, 10, 7, 10, 10]
    assert queue.status(a) is None and queue.pending() == 0


def test_closed_session_work_is_dropped(photo, queue):
    model = Slow(delay=0.01)
    state = {"open": True}

    def progress(done, total):
        if done >= 40:
            state["open"] = False  # the user closed the tab

    clf = QueuedScorer(shared(model), queue, alive=lambda: state["open"])
    with pytest.raises(Cancelled):
        explain(photo, clf, progress=progress, dedup=False, **KW)
    assert queue.pending() == 0
    assert sum(model.sizes) < 200  # the rest was never run


def test_cancel_drops_pending_chunks(photo, queue):
    model = Slow(delay=0.01)
    calls = {"n": 0}

    def cancel():
        calls["n"] += 1
        return calls["n"] > 3

    with pytest.raises(Cancelled):
        explain(photo, QueuedScorer(shared(model), queue), cancel=cancel, dedup=False, **KW)
    assert queue.pending() == 0 and sum(model.sizes) < 200


def test_model_error_reaches_the_session_and_the_queue_goes_on(photo, queue):
    class Flaky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            if self.calls == 3:
                raise RuntimeError("boom")
            return x.mean(dim=(2, 3))

    clf = shared(Flaky())
    with pytest.raises(ModelError, match="boom"):
        explain(photo, QueuedScorer(clf, queue), dedup=False, **KW)
    assert queue.pending() == 0
    ok = explain(photo, QueuedScorer(clf, queue), dedup=False, **KW)
    assert np.isfinite(ok.weights).all()


def test_the_queue_is_bounded(queue):
    q = WorkQueue(max_jobs=1)
    try:
        gate = threading.Event()

        def blocked(x):
            gate.wait(10)
            return x.mean(dim=(2, 3))

        clf = Classifier(blocked, device="cpu")
        image = torch.rand(3, 8, 8)
        labels = torch.zeros(8, 8, dtype=torch.int64)
        _, futures = q.submit(clf, image, image, labels, np.ones((4, 1), bool), 2)
        with pytest.raises(LimecraftError, match="busy: 1 explanations are waiting"):
            q.submit(clf, image, image, labels, np.ones((4, 1), bool), 2)
        gate.set()
        assert all(f.result(timeout=10).shape == (2, 3) for f in futures)
    finally:
        q.shutdown()


@pytest.mark.parametrize("kw", [dict(max_jobs=0), dict(max_batch=0)])
def test_queue_settings_are_checked(kw):
    with pytest.raises(LimecraftError):
        WorkQueue(**kw)
