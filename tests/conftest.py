"""Shared fixtures: tiny seeded images and toy models whose true attributions are known."""

import os

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch is imported anywhere (limecraft_core/threads.py)
# Never try to download weights from a test.
os.environ["LIMECRAFT_OFFLINE"] = "1"
# The app opens on a photo with the real ImageNet model (efficientnet_lite0). Most app tests
# tell the demo model's story, at a fraction of the cost: their app opens on the demo images with
# the demo model. The tests of the real first page start their own app without this
# (tests/e2e/test_e2e_real.py, tests/pages/test_app_real.py).
os.environ.setdefault("LIMECRAFT_DEFAULT_MODEL", "demo")
# precision="auto" picks bf16 on CPUs with native bf16; the tests' expected values (goldens)
# are fp32 on every machine. Tests of the automatic choice set this themselves.
os.environ.setdefault("LIMECRAFT_CPU_BF16", "0")
# Under pytest-xdist the test processes share the cores: each (and the app servers and command
# lines it starts) gets its share of threads, rather than each taking them all.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))

import ast
import atexit
import shutil
import tempfile

# Weight caches outside the repo point into a fresh temporary folder for the run (and the app
# servers the tests start inherit it): weights a developer happens to have in ~/.cache must not
# change a result. Tests that need a cache with something in it make their own under tmp_path.
_CACHES = tempfile.mkdtemp(prefix="limecraft-test-caches-")
atexit.register(shutil.rmtree, _CACHES, ignore_errors=True)
os.environ["TORCH_HOME"] = os.path.join(_CACHES, "torch")
os.environ["HF_HOME"] = os.path.join(_CACHES, "huggingface")
os.environ.pop("HF_HUB_CACHE", None)
os.environ.pop("HUGGINGFACE_HUB_CACHE", None)

import numpy as np
import pytest
from hypothesis import settings as hypothesis_settings

# In CI, Hypothesis draws the same examples every run (and keeps no example database), so a
# property test fails for its property, not for the day's random draw. `pytest` elsewhere keeps
# exploring; HYPOTHESIS_PROFILE=ci reproduces CI's draw.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
hypothesis_settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default")
)


def _bf16(item) -> bool:
    return item.get_closest_marker("bf16") is not None


def _browser(item) -> bool:
    return item.get_closest_marker("browser") is not None


def pytest_collection_modifyitems(config, items):
    """Tests marked ``bf16`` run a model under CPU bf16 autocast (forced, or chosen by
    precision="auto" with native bf16 injected). That can leave oneDNN in a state that moves a
    later fp32 result by an ulp, so they run last in their process, where no later test can see
    it. The sort is stable: every other test keeps its order. Under pytest-xdist the browser
    tests also come first, as the longest unit of work (see :func:`pytest_xdist_make_scheduler`),
    then the files with a slow test, then the rest: the long units start early, and the short
    ones fill in at the end, so that neither process is left with a long unit after the other
    has finished."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        slow = {i.nodeid.split("::")[0] for i in items if i.get_closest_marker("slow")}
        items.sort(key=lambda i: (_bf16(i), not _browser(i), i.nodeid.split("::")[0] not in slow))
    else:
        items.sort(key=_bf16)


def _units() -> tuple[set[str], set[tuple[str, str]]]:
    """The browser test files that share the session's app server, and the bf16 tests (file
    name, function), read from the test files' source: pytest-xdist's controller sees test ids
    only, not their marks."""
    browser, bf16 = set(), set()
    for p in sorted(Path(__file__).parent.rglob("test_*.py")):
        text = p.read_text()
        # a browser module with its own app server (mark own_server) is a unit of its own, so
        # it runs beside the shared server's tests rather than after them
        if "pytest.mark.browser" in text and "pytest.mark.own_server" not in text:
            browser.add(p.name)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and any(
                ast.unparse(d) == "pytest.mark.bf16" for d in node.decorator_list
            ):
                bf16.add((p.name, node.name))
    return browser, bf16


def pytest_xdist_make_scheduler(config, log):
    """Units of work that each go whole to one test process: the browser tests together (they
    share one app server and one Chromium), every other test file as one unit (module fixtures
    such as the Ray cluster start once), and the bf16 tests as the last unit, so that nothing
    runs after them in their process. The units keep the collection's order (browser first, bf16
    last: :func:`pytest_collection_modifyitems`, and ``--no-loadscope-reorder``).

    (pytest-xdist's own ``xdist_group`` marks rename test ids in a way pytest 9 ignores, so the
    units are named here.)"""
    from xdist.scheduler import LoadScopeScheduling

    browser, bf16 = _units()

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path, _, rest = nodeid.partition("::")
            name = path.rsplit("/", 1)[-1]
            if (name, rest.split("[", 1)[0]) in bf16:
                return "bf16"
            if name in browser:
                return "browser"
            return path

    return Units(config, log)


@pytest.fixture
def quadrants() -> np.ndarray:
    """A 32x32 uint8 image of four flat coloured quadrants plus seeded noise."""
    rng = np.random.default_rng(0)
    img = np.zeros((32, 32, 3), np.uint8)
    img[:16, :16] = (200, 30, 30)
    img[:16, 16:] = (30, 200, 30)
    img[16:, :16] = (30, 30, 200)
    img[16:, 16:] = (220, 220, 40)
    noise = rng.integers(-20, 21, img.shape)
    return np.clip(img.astype(int) + noise, 0, 255).astype(np.uint8)


def _apptest_once_per_process() -> None:
    """Two things Streamlit's AppTest redoes on every new AppTest, once per test process instead:

    - it scans the metadata of every installed package for Streamlit components (about 0.15 s;
      the installed packages do not change during a test run);
    - each run compiles every page script again, magic included (a fresh ``ScriptCache`` per
      run). The compiled scripts are kept here by path, size and modification time, so a
      script written by a test is compiled afresh.

    Together they were about a quarter of an AppTest test's time (py-spy over
    tests/pages/test_app_bad_inputs.py). The app server (``streamlit run``) is not touched.
    This changes how fast AppTest runs, not what it runs: if Streamlit renames these, the
    tests run as before, only slower."""
    import functools

    try:
        from streamlit.components.v2 import manifest_scanner
        from streamlit.runtime.scriptrunner.script_cache import ScriptCache
        from streamlit.testing.v1 import app_test
    except ImportError:  # pragma: no cover - another Streamlit: AppTest as it comes
        return
    if not hasattr(manifest_scanner, "scan_component_manifests") or not hasattr(
        app_test, "ScriptCache"
    ):  # pragma: no cover
        return
    manifest_scanner.scan_component_manifests = functools.cache(
        manifest_scanner.scan_component_manifests
    )

    class Scripts(ScriptCache):
        """Compiled scripts by path, compiled again when a file's size or time changes."""

        def __init__(self) -> None:
            super().__init__()
            self._stamps: dict[str, tuple[int, int]] = {}

        def get_bytecode(self, script_path: str):
            path = os.path.abspath(script_path)
            st = os.stat(path)
            with self._lock:
                if self._stamps.get(path) != (st.st_size, st.st_mtime_ns):
                    self._cache.pop(path, None)
                    self._stamps[path] = (st.st_size, st.st_mtime_ns)
            return super().get_bytecode(script_path)

    shared = Scripts()
    app_test.ScriptCache = lambda: shared


_apptest_once_per_process()


@pytest.fixture
def at():
    """A fresh session of the real app (Streamlit's AppTest), opened without an exception."""
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(
        str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=120
    )
    app.run()
    assert not app.exception, app.exception
    return app


@pytest.fixture
def photo() -> np.ndarray:
    """scikit-image's chelsea at 96x128 (ships with scikit-image; no download)."""
    from skimage import data, transform

    return (transform.resize(data.chelsea(), (96, 128), anti_aliasing=True) * 255).astype(np.uint8)


# ----------------------------------------------------------------------------- browser tests

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from serving.ports import free_port as _free_port  # clear of Ray's and the kernel's picks

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: Chromium's flags here (no sandbox as root, software rendering, no shared-memory or background
#: traffic): the browser tests' and the browser benchmarks' (bench/bench_large_image.py,
#: bench/bench_rerun.py).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
]
ARTIFACTS = ROOT / "test-artifacts"


def start_app(
    extra_env: dict | None = None,
    timeout: float = 90,
    *,
    port: int | None = None,
    extra_args: tuple[str, ...] = (),
):
    """Start ``streamlit run app.py`` on a loopback port (default: a free one), with more
    command-line flags if given; a None value in ``extra_env`` unsets that variable. Returns
    (process, url, log path)."""
    port = port or _free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / f"streamlit-{port}.log"
    log = open(log_path, "w")
    env = {**os.environ, **(extra_env or {})}
    env = {k: v for k, v in env.items() if v is not None}  # None in extra_env: unset
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
            *extra_args,
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout
    while True:
        if proc.poll() is not None:
            log.close()
            raise RuntimeError(f"streamlit exited; see {log_path}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200 and r.read() == b"ok":
                    proc.log_file = log
                    return proc, url, log_path
        except OSError:
            pass
        if time.time() > deadline:
            proc.kill()
            log.close()
            raise RuntimeError(f"no /_stcore/health within {timeout} s; see {log_path}")
        time.sleep(0.3)


def stop_app(proc) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    proc.log_file.close()


@pytest.fixture(scope="session")
def gate_folder(tmp_path_factory):
    """The folder of the app server's model gate (models/gate.py): open unless a test holds it."""
    return tmp_path_factory.mktemp("gate")


@pytest.fixture(scope="session")
def app_url(gate_folder):
    proc, url, _ = start_app({"LIMECRAFT_TEST_GATE": str(gate_folder)})
    yield url
    stop_app(proc)


@pytest.fixture
def gate(gate_folder):
    """The shared app server's model gate, open before and after the test."""
    from models.gate import GateFiles

    g = GateFiles(gate_folder)
    g.release()
    yield g
    g.release()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    # Debian's Chromium, never a downloaded build. Missing Chromium skips the browser tests
    # with a reason, except in CI, where it is a failure (.ci/run installs it).
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"Chromium is missing at {CHROMIUM}; .ci/run must install it")
        pytest.skip(f"Chromium is missing at {CHROMIUM} (apt-get install chromium)")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "headless": True,
        "args": CHROMIUM_ARGS,
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {
        **browser_context_args,
        "viewport": {"width": 1400, "height": 1100},
        "accept_downloads": True,
    }


def image_uploader(at):
    """The sidebar's image uploader in an AppTest (its key changes after every upload)."""
    return next(u for u in at.sidebar.file_uploader if u.key.startswith("image_upload"))


@pytest.fixture
def page(page):
    """pytest-playwright's page, its Streamlit script runs read from the start (e2e_helpers)."""
    from e2e_helpers import track

    return track(page)


# The generated sets of tests/limecraft_core/audit/test_grouping.py, audited once for the tests
# of that folder (a conftest.py of its own there would shadow this one's `from conftest import`).
@pytest.fixture(scope="session")
def audited():
    """{kind: (rows, the patched images' keys, {key: (image, label map)})} for the sets
    "place", "look" and "clean"."""
    from tests.limecraft_core.audit.test_grouping import audit, make_set

    out = {}
    for kind in ("place", "look", "clean"):
        images, patched = make_set(kind)
        keep: dict = {}
        out[kind] = (audit(images, keep), patched, keep)
    return out


@pytest.fixture(scope="session")
def sets(audited):
    return {kind: (rows, patched) for kind, (rows, patched, _) in audited.items()}
