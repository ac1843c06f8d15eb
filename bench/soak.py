"""Soak test: many Explains over a few minutes with faults injected, in one process, loopback only.

Worker threads play sessions that share one model (as the app's sessions do). The model fails
one batch call in ten; some Explains are cancelled after a few batches; the shared model is
reloaded now and then. Meanwhile a "requests" thread makes the other calls a session makes
(single-image predictions, segmentations), and a few Streamlit AppTest sessions explain through
the app with the same faulty model. No network at all.

Each session starts with a good result (one Explain with a model that does not fail), as an
analyst's does once Explain has run; the soak then runs a warm-up and two measured halves of the
same workload. Two ways to bound it:

- by time (the default): each phase runs until its share of ``--duration`` or of
  ``--max-explains`` is used up; the sessions share that budget, so a faster machine does more;
- by work (``--explains-per-session N``): in each half every session does exactly N Explains,
  the other-requests thread makes one request per Explain the sessions start, and each app
  session ``--app-rounds`` rounds, so a fast and a loaded machine do the same work (the test).

It checks:
- zero lost sessions: each keeps its image, regions and last good result through every fault;
- every request without an injected fault succeeds, and every injected fault is a clear error;
- every worker thread finishes its work: one that dies or hangs is reported, never silent;
- no growth of memory (RSS), open file descriptors, threads or live tensors after warm-up.

    python bench/soak.py --duration 180
    MALLOC_ARENA_MAX=1 python bench/soak.py --explains-per-session 6 --warmup-explains 3 \\
        --sessions 3 --app-sessions 1 --app-rounds 2 --max-rss-growth 16    # what the test runs

(One malloc arena: glibc gives each new thread its own and keeps their free pages, and every
phase has new threads; a short run's RSS then grew tens of MiB with nothing leaked.)

Prints a summary and writes bench/results/soak.json.
"""

from __future__ import annotations

from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import ctypes
import gc
import hashlib
import json
import os
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import limecraft_core as lc
from models.samples import load_sample, sample_names
from pages.lib.session import KEY as SESSION_KEY

FAIL_EVERY = 10  # one batch call in ten fails


# ----------------------------------------------------------------------------- measurements


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def live_tensors() -> int:
    return sum(1 for o in gc.get_objects() if issubclass(type(o), torch.Tensor))


def _release_free_heap() -> None:
    """Hand freed heap pages back to the OS (glibc), so RSS counts live memory, not the
    allocator's retained free lists; a real leak stays resident after this."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: RSS then includes free lists
        pass


def snapshot() -> dict[str, float]:
    gc.collect()
    _release_free_heap()
    return {
        "rss_mib": rss_mib(),
        "open_fds": open_fds(),
        "threads": threading.active_count(),
        "live_tensors": live_tensors(),
    }


# ----------------------------------------------------------------------------- faults


class Flaky:
    """The model behind a shared Classifier: every FAIL_EVERY-th batch call of a thread fails.

    Single-image calls (predictions) never fail: they are the "other requests" that must work.
    Counting per thread makes each fault attributable to the Explain that met it.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.local = threading.local()
        self.shared = Counter()  # threads that are not session workers (the app's script runs)
        self.lock = threading.Lock()

    def faults(self) -> int:
        return getattr(self.local, "faults", 0)

    def _count(self) -> int:
        if threading.current_thread().name.startswith("soak-"):
            n = getattr(self.local, "calls", 0) + 1
            self.local.calls = n
            return n
        with self.lock:
            self.shared["calls"] += 1
            return self.shared["calls"]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 1 and self._count() % FAIL_EVERY == 0:
            self.local.faults = self.faults() + 1
            if not threading.current_thread().name.startswith("soak-"):
                with self.lock:
                    self.shared["faults"] += 1
            raise RuntimeError("injected fault")
        return self.inner(x)


class SharedModel:
    """The process-wide model, reloadable while sessions use it (as the app's cache_resource)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reloads = 0
        self.flaky: Flaky | None = None
        self.clf: lc.Classifier | None = None
        self.reload()

    def reload(self) -> None:
        from models import demo

        fresh = Flaky(demo.load_demo_model())  # a new module and weights, not the cached one
        clf = lc.Classifier(
            fresh, input_size=demo.IMAGE_SIZE, labels=demo.CLASS_NAMES, device="cpu", name="demo"
        )
        with self.lock:
            if self.flaky is not None:  # keep the fault counts going
                fresh.local, fresh.shared, fresh.lock = (
                    self.flaky.local,
                    self.flaky.shared,
                    self.flaky.lock,
                )
            self.flaky, self.clf = fresh, clf
            self.reloads += 1

    def get(self) -> tuple[lc.Classifier, Flaky]:
        with self.lock:
            return self.clf, self.flaky


# ----------------------------------------------------------------------------- sessions


def digest(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


@dataclass
class Session:
    name: str
    image: np.ndarray
    regions: lc.Regions
    explanation: lc.Explanation | None = None
    fingerprint: str = ""
    outcomes: Counter = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # what the faults took away, if anything
    explains: int = 0  # Explains started by its worker in the current phase

    def check(self) -> None:
        """Lost: the faults took away the session's image, regions or last good result."""
        if digest(self.image, self.regions.labels) != self.fingerprint:
            self.lost.append("image or regions changed")
        if self.explanation is None:
            self.lost.append("its last good result is gone")
        elif not np.array_equal(self.explanation.segments, self.regions.labels):
            self.lost.append("result no longer matches the regions")


def make_session(i: int) -> Session:
    sample = load_sample(sample_names()[i % len(sample_names())])
    image = sample.image
    mask = sample.tag_mask if sample.tag_mask is not None else None
    if mask is None:
        mask = np.zeros(image.shape[:2], bool)
        mask[: image.shape[0] // 3, : image.shape[1] // 3] = True
    regions = lc.compose_regions(image, [mask], names=["tag"], outer_segments=12)
    s = Session(f"session-{i}", image, regions)
    s.fingerprint = digest(image, regions.labels)
    return s


def explain_once(
    s: Session, model: SharedModel, rng: np.random.Generator, samples: int, cancel_after: int | None
) -> None:
    clf, flaky = model.get()
    before = flaky.faults()
    batches = {"n": 0}

    def cancel() -> bool:
        batches["n"] += 1
        return cancel_after is not None and batches["n"] > cancel_after

    try:
        ex = lc.explain(
            s.image,
            clf,
            segments=s.regions,
            samples=samples,
            seed=int(rng.integers(0, 2**31)),
            batch_size=16,
            cancel=cancel,
        )
    except lc.Cancelled:
        s.outcomes["cancelled"] += 1
        if cancel_after is None:
            s.unexpected.append("cancelled without a cancel")
    except lc.ModelError as e:
        s.outcomes["model_error"] += 1
        if flaky.faults() == before or "injected fault" not in str(e):
            s.unexpected.append(f"model error without an injected fault: {e}")
    except Exception as e:  # anything else is a bug
        s.outcomes["unexpected"] += 1
        s.unexpected.append(f"{type(e).__name__}: {e}")
    else:
        if flaky.faults() != before:
            s.unexpected.append("an injected fault did not surface as an error")
        if not np.isfinite(ex.weights).all():
            s.unexpected.append("non-finite weights")
        s.explanation = ex
        s.outcomes["ok"] += 1
    s.check()


class Progress:
    """Explains started in a phase, shared by its threads: the duration mode's budget
    (``limit``), and the pace of the other requests in the work mode."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.started = 0
        self.finished = False  # every session worker has returned
        self.cv = threading.Condition()

    def start_one(self) -> bool:
        """Count one more Explain; False once the budget is used up."""
        with self.cv:
            if self.limit is not None and self.started >= self.limit:
                return False
            self.started += 1
            self.cv.notify_all()
            return True

    def finish(self) -> None:
        with self.cv:
            self.finished = True
            self.cv.notify_all()

    def wait_for(self, started: int) -> None:
        """Until the sessions have started this many Explains, or have all returned."""
        with self.cv:
            self.cv.wait_for(lambda: self.started >= started or self.finished)


def guarded(target, died: list[str]):
    """Run ``target`` in a worker thread; a worker that dies is reported, never silent."""

    def run(*a: Any) -> None:
        try:
            target(*a)
        except BaseException:
            died.append(f"{threading.current_thread().name} died: {traceback.format_exc(limit=4)}")

    return run


def session_worker(
    s: Session,
    model: SharedModel,
    seed: int,
    stop: threading.Event,
    progress: Progress,
    quota: int | None,
    args,
) -> None:
    """Explains until ``quota`` are done (work mode), or until the phase's time or shared
    budget is used up (duration mode)."""
    rng = np.random.default_rng(seed)
    s.explains = 0
    while (s.explains < quota) if quota is not None else not stop.is_set():
        if not progress.start_one():
            return
        s.explains += 1
        r = rng.random()
        if r < args.reload_rate:
            model.reload()
            s.outcomes["reload"] += 1
        cancel_after = int(rng.integers(1, 4)) if r > 1 - args.cancel_rate else None
        explain_once(s, model, rng, args.samples, cancel_after)


def requests_worker(
    model: SharedModel,
    stop: threading.Event,
    stats: Counter,
    progress: Progress,
    count: int | None,
) -> None:
    """Other requests: single-image predictions and segmentations; every one must succeed.

    Work mode: ``count`` requests, the i-th once the sessions have started i Explains (so they
    run alongside the Explains on a fast and a slow machine alike). Duration mode: one every
    20 ms until the phase stops."""
    images = [load_sample(n).image for n in sample_names()[:3]]
    i = 0
    while (i < count) if count is not None else not stop.is_set():
        if count is not None:
            progress.wait_for(i + 1)
        img = images[i % len(images)]
        clf, _ = model.get()
        try:
            p = clf.predict(img)
            lab = lc.segment(img, "slic", 20)
            assert np.isfinite(p).all() and lab.max() >= 1
            stats["ok"] += 1
        except Exception as e:
            stats["failed"] += 1
            stats[f"error: {type(e).__name__}: {e}"] += 1
        i += 1
        if count is None:
            stop.wait(0.02)


# ----------------------------------------------------------------------------- app sessions


def _app_rounds(
    n_sessions: int, rounds: int, model: SharedModel, phase_seed: int = 0
) -> dict[str, Any]:
    """AppTest sessions explaining through the app with the faulty model; state must survive.

    Every round of every phase has its own seed, so no Explain is answered from the app's
    explanation cache: each one runs the (faulty) model."""
    from streamlit.testing.v1 import AppTest

    from pages.lib import runtime

    saved = runtime.classifier
    runtime.classifier = lambda *a, **k: model.get()[0]  # the app's model, shared and faulty
    out: Counter = Counter()
    problems: list[str] = []
    try:
        sessions = []
        for _ in range(n_sessions):
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
            at.run()
            at.number_input(key="set_samples").set_value(50)
            at.number_input(key="set_repeats").set_value(1)
            at.run()
            sessions.append(at)
        for r in range(rounds):
            for k, at in enumerate(sessions):
                s = at.session_state[SESSION_KEY].app
                before = (s.image_name, digest(s.image), s.explanation)
                at.number_input(key="set_seed").set_value(
                    10_000 + 10_000 * phase_seed + 100 * r + k
                ).run()
                next(b for b in at.button if b.label == "Explain").click().run()
                if at.exception:
                    problems.append(f"exception: {at.exception}")
                    continue
                errors = [e.value for e in at.error]
                if errors:
                    out["in_page_error"] += 1
                    if not all("Explain failed" in e for e in errors):
                        problems.append(f"unexpected page error: {errors}")
                    if s.explanation is not before[2]:
                        problems.append("an earlier result was lost")
                elif s.explanation is None or s.explanation is before[2]:
                    problems.append("Explain neither failed nor gave a result")
                else:
                    out["ok"] += 1
                if (s.image_name, digest(s.image)) != before[:2]:
                    problems.append("the image was lost")
        out["sessions_alive"] = sum(
            SESSION_KEY in at.session_state and at.session_state[SESSION_KEY].app is not None
            for at in sessions
        )
    finally:
        runtime.classifier = saved
    return {"outcomes": dict(out), "problems": problems, "sessions": n_sessions}


# ----------------------------------------------------------------------------- run


def phase(
    sessions: list[Session],
    model: SharedModel,
    args: argparse.Namespace,
    *,
    seed: int,
    app_sessions: int,
    app_rounds: int,
    quota: int | None = None,
) -> tuple[Counter, Counter, dict[str, Any], list[str]]:
    """One bounded run of the workload: session workers, other requests, and app sessions.

    ``quota``: Explains per session (work mode); None: bounded by ``args.duration`` and
    ``args.max_explains``. Returns the Explains started, the other requests' counts, the app
    sessions' outcomes and the workers' problems (a worker that died, hung or fell short)."""
    stop = threading.Event()
    progress = Progress(None if quota is not None else args.max_explains)
    req: Counter = Counter()
    died: list[str] = []
    workers = [
        threading.Thread(
            target=guarded(session_worker, died),
            args=(s, model, 1000 * seed + i, stop, progress, quota, args),
            name=f"soak-session-{i}",
            daemon=True,
        )
        for i, s in enumerate(sessions)
    ]
    n_requests = None if quota is None else quota * len(sessions)
    requests = threading.Thread(
        target=guarded(requests_worker, died),
        args=(model, stop, req, progress, n_requests),
        name="soak-requests",
        daemon=True,
    )
    t0 = time.perf_counter()
    for t in [*workers, requests]:
        t.start()
    app: dict[str, Any] = {"outcomes": {}, "problems": [], "sessions": 0}
    if app_sessions:
        app = _app_rounds(app_sessions, app_rounds, model, seed)
    if quota is None:
        while time.perf_counter() - t0 < args.duration and progress.started < args.max_explains:
            time.sleep(0.2)
        stop.set()
    # Work mode waits for the work to be done; hang_timeout only stops a hung soak from
    # hanging its caller, and a worker still running then is reported.
    deadline = time.monotonic() + args.hang_timeout
    for t in workers:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    progress.finish()
    requests.join(timeout=max(0.0, deadline - time.monotonic()))
    problems = list(died)
    problems += [
        f"{t.name} still running {args.hang_timeout:g} s after the rest of its phase"
        for t in [*workers, requests]
        if t.is_alive()
    ]
    if quota is not None:
        problems += [
            f"{s.name} did {s.explains} of its {quota} Explains"
            for s in sessions
            if s.explains != quota
        ]
        if req["ok"] + req["failed"] != n_requests:
            problems.append(f"{req['ok'] + req['failed']} of {n_requests} other requests made")
    return Counter(explains=progress.started), req, app, problems


def run(args: argparse.Namespace) -> dict[str, Any]:
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)  # several sessions on a small machine
    try:
        return _run(args)
    finally:
        torch.set_num_threads(threads_before)


def _run(args: argparse.Namespace) -> dict[str, Any]:
    t = time.perf_counter()
    model = SharedModel()
    sessions = [make_session(i) for i in range(args.sessions)]
    # Each session starts with a good result, as an analyst's does once Explain has run once:
    # the faults that follow must never take it away. (A session never explained has nothing
    # to lose, and would pass or fail by the luck of its first faults.)
    from models import demo

    clean = lc.Classifier(
        demo.load_demo_model(), input_size=demo.IMAGE_SIZE, labels=demo.CLASS_NAMES, device="cpu"
    )
    for i, s in enumerate(sessions):
        s.explanation = lc.explain(
            s.image, clean, segments=s.regions, samples=args.samples, seed=i, batch_size=16
        )
    del clean
    work = args.explains_per_session  # None: bounded by time (and --max-explains)
    warm_quota = None if work is None else -(-args.warmup_explains // len(sessions))
    app_kw = {"app_sessions": args.app_sessions, "app_rounds": args.app_rounds}

    # Warm-up: a short phase of the same workload, so that lazy imports, caches, the allocator
    # and the per-thread malloc arenas settle; growth is measured from its end.
    warm = argparse.Namespace(**{**vars(args), "max_explains": args.warmup_explains})
    phase_s = {"setup": round(time.perf_counter() - t, 1)}
    t = time.perf_counter()
    *_, warm_problems = phase(sessions, model, warm, seed=1, quota=warm_quota, **app_kw)
    phase_s["warm-up"] = round(time.perf_counter() - t, 1)
    for s in sessions:
        s.outcomes.clear()
    # Two identical halves: caches that fill up and then stay bounded grow in the first half
    # only; a leak grows in both. Growth is judged on the second half.
    half = argparse.Namespace(
        **{**vars(args), "duration": args.duration / 2, "max_explains": args.max_explains // 2}
    )
    start = snapshot()
    t0 = time.perf_counter()
    budget, req, app, problems = phase(sessions, model, half, seed=2, quota=work, **app_kw)
    phase_s["first half"] = round(time.perf_counter() - t0, 1)
    base = snapshot()
    t = time.perf_counter()
    budget2, req2, app2, problems2 = phase(sessions, model, half, seed=3, quota=work, **app_kw)
    phase_s["second half"] = round(time.perf_counter() - t, 1)
    elapsed = time.perf_counter() - t0
    end = snapshot()
    second_half_explains = budget2["explains"]
    budget += budget2
    req += req2
    worker_problems = warm_problems + problems + problems2
    app = {
        "outcomes": dict(Counter(app["outcomes"]) + Counter(app2["outcomes"])),
        "problems": app["problems"] + app2["problems"],
        "sessions": app["sessions"] + app2["sessions"],
    }
    app["outcomes"]["sessions_alive"] = app["outcomes"].get("sessions_alive", 0)

    for s in sessions:
        s.check()
    outcomes = sum((s.outcomes for s in sessions), Counter())
    lost = [s.name for s in sessions if s.lost]
    growth = {k: end[k] - base[k] for k in base}
    result = {
        "mode": "time" if work is None else "work",
        "duration_s": round(elapsed, 1),
        "phase_s": phase_s,
        "sessions": len(sessions),
        "explains": int(budget["explains"]),
        "explains_second_half": int(second_half_explains),
        "explains_per_session": work,
        "outcomes": dict(outcomes),
        "per_session": {s.name: dict(s.outcomes) for s in sessions},
        "reloads": model.reloads - 1,
        "unexpected": ([u for s in sessions for u in s.unexpected] + worker_problems)[:20],
        "worker_problems": worker_problems[:20],
        "lost_sessions": lost,
        "lost": {s.name: sorted(set(s.lost)) for s in sessions if s.lost},
        "requests": {"ok": req["ok"], "failed": req["failed"]},
        "request_errors": [k for k in req if k.startswith("error")][:5],
        "app": app,
        # the app's batch calls (through the work queue's thread) and the faults among them,
        # over the whole run, warm-up included
        "app_model": {
            "batch_calls": model.flaky.shared["calls"],
            "faults": model.flaky.shared["faults"],
        },
        "before": base,
        "after": end,
        "growth": growth,
        "growth_first_half": {k: base[k] - start[k] for k in base},
        "at_start": start,
        # Open files and threads must not grow at all. Memory and live tensors get a small
        # allowance for lazily filled, bounded caches; a leak of one tensor or one image per
        # Explain would be hundreds over the run.
        "limits": {
            "rss_mib": args.max_rss_growth,
            "open_fds": 0,
            "threads": 0,
            "live_tensors": args.max_tensor_growth,
        },
        "settings": {
            "samples": args.samples,
            "fail_every": FAIL_EVERY,
            "cancel_rate": args.cancel_rate,
            "reload_rate": args.reload_rate,
            "app_sessions": args.app_sessions,
            "app_rounds": args.app_rounds,
        },
    }
    result["ok"] = bool(
        not lost
        and not result["unexpected"]
        and not worker_problems
        and req["failed"] == 0
        and req["ok"] > 0
        and not app["problems"]
        and app["outcomes"].get("sessions_alive", 0) == 2 * args.app_sessions
        and growth["rss_mib"] <= args.max_rss_growth
        and growth["open_fds"] <= 0
        and growth["threads"] <= 0
        and growth["live_tensors"] <= args.max_tensor_growth
        and outcomes["model_error"] > 0
        and outcomes["cancelled"] > 0
        and outcomes["ok"] > 0
    )
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--duration", type=float, default=180.0, help="seconds (a bound, not a target; time mode)"
    )
    p.add_argument("--max-explains", type=int, default=2000, help="shared budget (time mode)")
    p.add_argument(
        "--explains-per-session",
        type=int,
        help="bound the run by work instead of time: exactly this many Explains per session "
        "in each measured half (--duration and --max-explains then do not apply)",
    )
    p.add_argument(
        "--hang-timeout",
        type=float,
        default=600.0,
        help="seconds to wait for a phase's worker threads, once the rest of the phase is "
        "done, before reporting them as hung",
    )
    p.add_argument("--sessions", type=int, default=4)
    p.add_argument("--samples", type=int, default=60)
    p.add_argument("--cancel-rate", type=float, default=0.15)
    p.add_argument("--reload-rate", type=float, default=0.05)
    p.add_argument("--app-sessions", type=int, default=2)
    p.add_argument("--app-rounds", type=int, default=10)
    p.add_argument(
        "--warmup-explains", type=int, default=60, help="in all (work mode: split over sessions)"
    )
    p.add_argument("--max-rss-growth", type=float, default=64.0, help="MiB")
    p.add_argument("--max-tensor-growth", type=int, default=16)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "soak.json"))
    args = p.parse_args(argv)
    work = args.explains_per_session
    if work is not None and work < 1:
        p.error("--explains-per-session must be at least 1")
    if work is not None and work * args.sessions <= args.max_tensor_growth:
        # A leak of one tensor per Explain must show as more growth than the allowance.
        p.error(
            f"--explains-per-session {work} x --sessions {args.sessions} must exceed "
            f"--max-tensor-growth {args.max_tensor_growth}: with fewer Explains in the measured "
            "half, a leak of one tensor per Explain would pass the live-tensor check"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    res = run(args)
    o = res["outcomes"]
    print(
        f"soak ({res['mode']} mode): {res['explains']} Explains in {res['duration_s']} s over "
        f"{res['sessions']} sessions "
        f"(ok {o.get('ok', 0)}, model errors {o.get('model_error', 0)}, cancelled "
        f"{o.get('cancelled', 0)}), {res['reloads']} reloads; other requests ok "
        f"{res['requests']['ok']}, failed {res['requests']['failed']}; app {res['app']['outcomes']}"
    )
    g = res["growth"]
    print(
        f"growth after warm-up: RSS {g['rss_mib']:+.1f} MiB, open files {g['open_fds']:+d}, "
        f"threads {g['threads']:+d}, live tensors {g['live_tensors']:+d}; lost sessions "
        f"{len(res['lost_sessions'])}; unexpected {len(res['unexpected']) + len(res['app']['problems'])}"
    )
    for problem in res["unexpected"] + res["app"]["problems"]:
        print(f"  {problem}")
    print("PASS" if res["ok"] else "FAIL")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=2))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
