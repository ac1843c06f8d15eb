"""Load test: K simulated sessions press Explain at once, in one app process.

Each session is a Streamlit AppTest of the real app.py (its own session state, the shared model
and the shared work queue), run in its own thread; it opens the app on the demo sample with the
demo model, sets its own seed (so that no cache answers), and presses Explain with the app's
default settings. No network is used.

For each K, the same K Explains are also run one after another, and the table reports
throughput concurrent / sequential, p50 and p95 latency of the concurrent runs, errors, the
share of forward passes that served more than one session, and RSS growth.

    python bench/bench_load.py                  # K = 1, 2, 4, 8
    python bench/bench_load.py --ks 1,2 --samples 300

AppTest runs one session at a time: every run sets process-wide state that a server sets once
(see ``one_app_process``). For the sessions that run at once, that state is set once here, as
in the one server process the benchmark stands for.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import contextlib
import json
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import streamlit.testing.v1.app_test as _app_test
from streamlit.runtime import Runtime
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest

from pages.lib.session import KEY as SESSION_KEY

APP = str(ROOT / "app.py")


@contextlib.contextmanager
def one_app_process() -> Iterator[None]:
    """AppTest sessions in threads, sharing what a server's one process shares.

    Every ``AppTest.run`` sets process-wide state as it starts and ends, which a server sets once.
    With sessions running at once in threads, one session's start or end changed it under
    another's running script:

    * ``PagesManager.uses_pages_directory``: reset to None and recomputed at every run's start
      (True: our ``pages/`` package sits next to app.py), set False by ``st.navigation``. A
      script that read it mid-change went the other way through navigation: in 4 of 51 runs of
      ``--ks 4`` twice, and, when the app's sidebar had ``st.page_link``, that failed with
      "Could not find page: `pages/...`".
    * ``Runtime._instance``: set at every run's start, cleared at its end. Scripts still running
      after another session's run ended found no runtime: 231 times in those runs (images sent
      inline, the data caches replaced by empty ones, and ``Runtime.instance()`` raising if the
      runtime went between a check and its use).
    * Each run compiles the scripts afresh, and CPython 3.11's AST conversion keeps its recursion
      depth per interpreter, not per thread: two sessions compiling at once raised "SystemError:
      AST constructor recursion depth mismatch" (python/cpython#106905).
    * ``config.get_option`` is patched for each run; nested patches from threads restore each
      other's mock, which then outlives the benchmark.

    Here, as in one server process: the pages flag is set once (AppTest resets a copy of it);
    the first running session's runtime stays until the last running session's run ends; scripts
    are compiled one at a time; the config option is patched once around everything.
    """
    names = ("PagesManager", "Runtime", "patch_config_options")
    missing = [n for n in names if not hasattr(_app_test, n)]
    if missing or not hasattr(ScriptCache, "get_bytecode"):
        raise RuntimeError(
            f"streamlit's AppTest no longer has {missing or ['ScriptCache.get_bytecode']}: "
            "update bench_load.one_app_process for this version"
        )
    saved = {n: getattr(_app_test, n) for n in names}
    saved_flag = PagesManager.uses_pages_directory
    saved_compile = ScriptCache.get_bytecode
    lock, compile_lock = threading.Lock(), threading.Lock()
    running = [0]

    class PinnedPagesFlag(PagesManager):
        """AppTest resets this class's copy of the flag; Streamlit reads PagesManager's."""

    def set_instance(value: Any) -> None:
        with lock:
            if value is None:
                running[0] -= 1
                if running[0] == 0:
                    Runtime._instance = None
            else:
                running[0] += 1
                if Runtime._instance is None:
                    Runtime._instance = value

    class CountedInstance(type(Runtime)):
        def __setattr__(cls, name: str, value: Any) -> None:
            if name == "_instance":
                set_instance(value)
            else:
                super().__setattr__(name, value)

    class OneRuntime(Runtime, metaclass=CountedInstance):
        """AppTest sets and clears this class's ``_instance``: counted into Runtime's."""

    def get_bytecode(self: ScriptCache, script_path: str) -> Any:
        with compile_lock:
            return saved_compile(self, script_path)

    _app_test.PagesManager = PinnedPagesFlag
    _app_test.Runtime = OneRuntime
    _app_test.patch_config_options = lambda _overrides: contextlib.nullcontext()
    ScriptCache.get_bytecode = get_bytecode
    try:
        with saved["patch_config_options"]({"global.appTest": True}):
            yield
    finally:
        for n, v in saved.items():
            setattr(_app_test, n, v)
        ScriptCache.get_bytecode = saved_compile
        PagesManager.uses_pages_directory = saved_flag


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_session(seed: int, samples: int) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    if at.exception:
        raise RuntimeError(at.exception[0].value)
    at.number_input(key="set_seed").set_value(seed)
    at.number_input(key="set_samples").set_value(samples)
    at.run()
    return at


def press_explain(at: AppTest) -> float:
    button = next(b for b in at.button if b.label == "Explain")
    t = time.perf_counter()
    button.click().run()
    dt = time.perf_counter() - t
    if at.exception:
        raise RuntimeError(at.exception[0].value)
    if at.error:
        raise RuntimeError(at.error[0].value)
    if at.session_state[SESSION_KEY].app.explanation is None:
        raise RuntimeError("no explanation")
    return dt


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def run_k(k: int, samples: int, seed0: int) -> dict[str, Any]:
    from pages.lib.runtime import work_queue

    q = work_queue()
    # Sequential: K sessions, one after another.
    sessions = [open_session(seed0 + i, samples) for i in range(k)]
    t = time.perf_counter()
    seq_lat = [press_explain(at) for at in sessions]
    seq_s = time.perf_counter() - t
    # Concurrent: K new sessions (new seeds), all pressing Explain at once.
    sessions = [open_session(seed0 + 1000 + i, samples) for i in range(k)]
    calls0, combined0 = q.forward_calls, q.combined_calls
    barrier = threading.Barrier(k)
    lat: list[float] = []
    errors: list[str] = []

    def go(at: AppTest) -> None:
        try:
            barrier.wait()
            lat.append(press_explain(at))
        except Exception as e:  # counted and reported, never hidden
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=go, args=(at,)) for at in sessions]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join(900)
    conc_s = time.perf_counter() - t
    calls = q.forward_calls - calls0
    return {
        "k": k,
        "sequential_s": seq_s,
        "concurrent_s": conc_s,
        "throughput_ratio": seq_s / conc_s,
        "p50_s": statistics.median(lat) if lat else None,
        "p95_s": percentile(lat, 0.95) if lat else None,
        "sequential_p50_s": statistics.median(seq_lat),
        "errors": errors,
        "forward_calls": calls,
        "shared_forward_calls": q.combined_calls - combined0,
        "rss_mb": rss_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    """The command line; ``argv`` (default: ``sys.argv[1:]``) lets a test run it in-process."""
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--ks", default="1,2,4,8")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "load.json"))
    args = ap.parse_args(argv)
    ks = [int(v) for v in args.ks.split(",")]
    if max(ks) > 16 or min(ks) < 1:
        ap.error("K must be in [1, 16]")
    with one_app_process():
        # Warm-up: load the model, compile the page, fill Streamlit's caches.
        press_explain(open_session(99_999, args.samples))
        rss0 = rss_mb()
        rows = [run_k(k, args.samples, 10_000 * (i + 1)) for i, k in enumerate(ks)]
    result = {
        "samples": args.samples,
        "rss_start_mb": rss0,
        "rss_end_mb": rss_mb(),
        "rows": rows,
        "command": "python bench/bench_load.py " + " ".join(argv),
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))
    print(
        "| K | throughput vs sequential | p50 s | p95 s | sequential p50 s | errors "
        "| shared passes | RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['k']} | {r['throughput_ratio']:.2f}x | {r['p50_s']:.2f} | {r['p95_s']:.2f} "
            f"| {r['sequential_p50_s']:.2f} | {len(r['errors'])} "
            f"| {r['shared_forward_calls']}/{r['forward_calls']} | {r['rss_mb']:.0f} |"
        )
    print(f"RSS growth over the whole run: {result['rss_end_mb'] - rss0:.0f} MB")
    for r in rows:
        for e in r["errors"]:
            print(f"K={r['k']} error: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
