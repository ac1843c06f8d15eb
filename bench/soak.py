"""Soak test: many Explains over a few minutes with faults injected, in one process, loopback only.

Worker threads play sessions that share one model (as the app's sessions do). The model fails
one batch call in ten; some Explains are cancelled after a few batches; the shared model is
reloaded now and then. Meanwhile a "requests" thread makes the other calls a session makes
(single-image predictions, segmentations), and a few Streamlit AppTest sessions explain through
the app with the same faulty model. Bounded in time and count; no network at all.

It checks:
- zero lost sessions: each keeps its image, regions and last good result through every fault;
- every request without an injected fault succeeds, and every injected fault is a clear error;
- no growth of memory (RSS), open file descriptors, threads or live tensors after warm-up.

    python bench/soak.py --duration 180
    python bench/soak.py --duration 30 --max-explains 300 --app-sessions 1   # what the test runs

Prints a summary and writes bench/results/soak.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import ctypes
import gc
import hashlib
import json
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import limecraft_core as lc  # noqa: E402
from models.samples import load_sample, sample_names  # noqa: E402

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

    def check(self) -> None:
        if digest(self.image, self.regions.labels) != self.fingerprint:
            self.unexpected.append("image or regions changed")
        if self.explanation is not None and not np.array_equal(
            self.explanation.segments, self.regions.labels
        ):
            self.unexpected.append("result no longer matches the regions")


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


def session_worker(
    s: Session, model: SharedModel, seed: int, stop: threading.Event, budget: Counter, args
) -> None:
    rng = np.random.default_rng(seed)
    while not stop.is_set():
        with budget_lock:
            if budget["explains"] >= args.max_explains:
                return
            budget["explains"] += 1
        r = rng.random()
        if r < args.reload_rate:
            model.reload()
            s.outcomes["reload"] += 1
        cancel_after = int(rng.integers(1, 4)) if r > 1 - args.cancel_rate else None
        explain_once(s, model, rng, args.samples, cancel_after)


budget_lock = threading.Lock()


def requests_worker(model: SharedModel, stop: threading.Event, stats: Counter) -> None:
    """Other requests: single-image predictions and segmentations; every one must succeed."""
    images = [load_sample(n).image for n in sample_names()[:3]]
    i = 0
    while not stop.is_set():
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
        stop.wait(0.02)


# ----------------------------------------------------------------------------- app sessions


def _app_rounds(n_sessions: int, rounds: int, model: SharedModel) -> dict[str, Any]:
    """AppTest sessions explaining through the app with the faulty model; state must survive."""
    from streamlit.testing.v1 import AppTest

    from pages.lib import state as app_state

    saved = app_state.classifier
    app_state.classifier = lambda *a, **k: model.get()[0]  # the app's model, shared and faulty
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
                s = at.session_state["app"]
                before = (s.image_name, digest(s.image), s.explanation)
                at.number_input(key="set_seed").set_value(10_000 + 100 * r + k).run()
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
        out["sessions_alive"] = sum("app" in at.session_state for at in sessions)
    finally:
        app_state.classifier = saved
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
) -> tuple[Counter, Counter, dict[str, Any]]:
    """One bounded run of the workload: session workers, other requests, and app sessions."""
    stop = threading.Event()
    budget: Counter = Counter()
    req: Counter = Counter()
    threads = [
        threading.Thread(
            target=session_worker,
            args=(s, model, 1000 * seed + i, stop, budget, args),
            name=f"soak-session-{i}",
            daemon=True,
        )
        for i, s in enumerate(sessions)
    ]
    threads.append(
        threading.Thread(
            target=requests_worker, args=(model, stop, req), name="soak-requests", daemon=True
        )
    )
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    app: dict[str, Any] = {"outcomes": {}, "problems": [], "sessions": 0}
    if app_sessions:
        app = _app_rounds(app_sessions, app_rounds, model)
    while time.perf_counter() - t0 < args.duration and budget["explains"] < args.max_explains:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    return budget, req, app


def run(args: argparse.Namespace) -> dict[str, Any]:
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)  # several sessions on a small machine
    try:
        return _run(args)
    finally:
        torch.set_num_threads(threads_before)


def _run(args: argparse.Namespace) -> dict[str, Any]:
    model = SharedModel()
    sessions = [make_session(i) for i in range(args.sessions)]

    # Warm-up: a short phase of the same workload, so that lazy imports, caches, the allocator
    # and the per-thread malloc arenas settle; growth is measured from its end.
    warm = argparse.Namespace(**{**vars(args), "max_explains": args.warmup_explains})
    phase(sessions, model, warm, seed=1, app_sessions=args.app_sessions, app_rounds=args.app_rounds)
    for s in sessions:
        s.outcomes.clear()
    # Two identical halves: caches that fill up and then stay bounded grow in the first half
    # only; a leak grows in both. Growth is judged on the second half.
    half = argparse.Namespace(
        **{**vars(args), "duration": args.duration / 2, "max_explains": args.max_explains // 2}
    )
    start = snapshot()
    t0 = time.perf_counter()
    budget, req, app = phase(
        sessions, model, half, seed=2, app_sessions=args.app_sessions, app_rounds=args.app_rounds
    )
    base = snapshot()
    budget2, req2, app2 = phase(
        sessions, model, half, seed=3, app_sessions=args.app_sessions, app_rounds=args.app_rounds
    )
    elapsed = time.perf_counter() - t0
    end = snapshot()
    budget += budget2
    req += req2
    app = {
        "outcomes": dict(Counter(app["outcomes"]) + Counter(app2["outcomes"])),
        "problems": app["problems"] + app2["problems"],
        "sessions": app["sessions"] + app2["sessions"],
    }
    app["outcomes"]["sessions_alive"] = app["outcomes"].get("sessions_alive", 0)

    outcomes = sum((s.outcomes for s in sessions), Counter())
    lost = [
        s.name
        for s in sessions
        if s.explanation is None or s.unexpected or s.outcomes["unexpected"]
    ]
    growth = {k: end[k] - base[k] for k in base}
    result = {
        "duration_s": round(elapsed, 1),
        "sessions": len(sessions),
        "explains": int(budget["explains"]),
        "outcomes": dict(outcomes),
        "reloads": model.reloads - 1,
        "unexpected": [u for s in sessions for u in s.unexpected][:20],
        "lost_sessions": lost,
        "requests": {"ok": req["ok"], "failed": req["failed"]},
        "request_errors": [k for k in req if k.startswith("error")][:5],
        "app": app,
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
    p.add_argument("--duration", type=float, default=180.0, help="seconds (a bound, not a target)")
    p.add_argument("--max-explains", type=int, default=2000)
    p.add_argument("--sessions", type=int, default=4)
    p.add_argument("--samples", type=int, default=60)
    p.add_argument("--cancel-rate", type=float, default=0.15)
    p.add_argument("--reload-rate", type=float, default=0.05)
    p.add_argument("--app-sessions", type=int, default=2)
    p.add_argument("--app-rounds", type=int, default=10)
    p.add_argument("--warmup-explains", type=int, default=60)
    p.add_argument("--max-rss-growth", type=float, default=64.0, help="MiB")
    p.add_argument("--max-tensor-growth", type=int, default=16)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "soak.json"))
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    res = run(args)
    o = res["outcomes"]
    print(
        f"soak: {res['explains']} Explains in {res['duration_s']} s over {res['sessions']} sessions "
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
    print("PASS" if res["ok"] else "FAIL")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=2))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
