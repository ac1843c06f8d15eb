"""The model side on Ray Serve (serving/client.py, config.py, wire.py, serve_app.py).

The cluster tests start a real Ray on loopback (its files in a private temp dir, a random auth
token, nothing under ~/.ray), deploy the demo model with Serve, explain through it, and stop
everything afterwards.
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

from limecraft_core import (
    Cancelled,
    Classifier,
    Explanation,
    LimecraftError,
    ModelError,
    Scorer,
    explain,
    segment,
)
from models import demo
from models.registry import load_classifier
from serving import load_scorer
from serving.client import RemoteScorer
from serving.config import RemoteConfig, remote_config
from serving.ports import free_port as _free_port
from serving.wire import (
    decode_arrays,
    encode_arrays,
    pack_masks,
    scene_key,
    small_labels,
    unpack_masks,
)

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = 200

# ray 2.60's serve config models, on import, use a pydantic field option that pydantic 2.14
# deprecates; not ours to fix.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Using extra keyword arguments on `Field` is deprecated:DeprecationWarning"
)


def _serve_app():
    """serving.serve_app; skipped where Ray is not installed, except in CI (requirements.txt)."""
    if os.environ.get("CI"):
        import serving.serve_app

        return serving.serve_app
    return pytest.importorskip("serving.serve_app", reason="ray[serve] is not installed")


@pytest.fixture(scope="module")
def images() -> list[np.ndarray]:
    return [demo.generate(1, seed=s, mode="conflict")[0].image for s in (3, 4)]


def _explain(image: np.ndarray, model, **kw):
    segments = segment(image, "slic", 16, seed=0)
    return explain(image, model, segments=segments, samples=SAMPLES, seed=0, **kw)


@pytest.fixture(scope="module")
def local_results(images):
    clf = load_classifier("demo", device="cpu")
    return [_explain(im, clf) for im in images]


# ----------------------------------------------------------------------------- no cluster


def test_config_from_env():
    assert remote_config({}) is None
    cfg = remote_config(
        {"LIMECRAFT_RAY_ADDRESS": "ray-head:8000", "LIMECRAFT_RAY_FALLBACK": "Local"}
    )
    assert cfg.address == "http://ray-head:8000" and cfg.fallback == "local"
    assert cfg.url("demo", "score") == "http://ray-head:8000/limecraft/demo/score"
    with pytest.raises(LimecraftError, match="Serve's HTTP address"):
        remote_config({"LIMECRAFT_RAY_ADDRESS": "ray://ray-head:10001"})
    with pytest.raises(LimecraftError, match="LIMECRAFT_RAY_FALLBACK"):
        remote_config({"LIMECRAFT_RAY_ADDRESS": "h:1", "LIMECRAFT_RAY_FALLBACK": "gpu"})


def test_wire_is_compact_and_exact():
    rng = np.random.default_rng(0)
    masks = rng.random((1000, 37)) < 0.5
    packed = pack_masks(masks)
    assert packed.nbytes == 1000 * 5  # 37 regions in 5 bytes a row
    np.testing.assert_array_equal(unpack_masks(packed, 37), masks)
    labels = small_labels(rng.integers(0, 37, (224, 224)))
    assert labels.dtype == np.uint8
    body = encode_arrays({"masks": packed, "shape": np.array(masks.shape), "key": np.array("k")})
    assert len(body) < 6_000  # the masks of 1000 perturbations, against 150 MB of images
    back = decode_arrays(body)
    np.testing.assert_array_equal(back["masks"], packed)
    assert str(back["key"]) == "k"
    with pytest.raises(LimecraftError, match=r"not a valid \.npz"):
        decode_arrays(b"not a zip")
    with pytest.raises(LimecraftError, match=r"^request of \d+ bytes is larger than 100$"):
        decode_arrays(encode_arrays({"a": np.zeros(1000)}), max_bytes=100)
    # Object arrays would need pickles, which a replica never reads.
    with pytest.raises(LimecraftError):
        decode_arrays(encode_arrays({"a": np.array([{}], dtype=object)}))
    img = rng.random((3, 8, 8), dtype=np.float32)
    assert scene_key(img, img, labels[:8, :8]) != scene_key(img, 1 - img, labels[:8, :8])


def test_unreachable_cluster_fails_fast_and_clearly():
    port = _free_port()  # nothing listens there
    t0 = time.perf_counter()
    with pytest.raises(ModelError) as e:
        RemoteScorer("demo", RemoteConfig(f"http://127.0.0.1:{port}"))
    # a refused connection fails at once; the bound is the default connect timeout (3 s), checked
    # with a wide margin for a loaded machine (a hang would be the 300 s read timeout)
    assert time.perf_counter() - t0 < 3 + 10
    msg = str(e.value)
    assert f"127.0.0.1:{port}" in msg and "unreachable" in msg
    assert "LIMECRAFT_RAY_FALLBACK=local" in msg and "unset LIMECRAFT_RAY_ADDRESS" in msg


def test_silent_cluster_times_out_within_the_connect_timeout():
    # A listening socket whose accept queue is full: Linux drops further SYNs, so a connect
    # hangs like one to a host that is down or firewalled.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        fillers = []
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            fillers.append(c)
        try:
            t0 = time.perf_counter()
            with pytest.raises(ModelError, match=f"127.0.0.1:{port}") as e:
                RemoteScorer("demo", RemoteConfig(f"http://127.0.0.1:{port}", connect_timeout=1))
            # the bound is the 1 s connect timeout, with a wide margin for a loaded machine
            assert time.perf_counter() - t0 < 1 + 10
            assert "within 1 s" in str(e.value)
        finally:
            for c in fillers:
                c.close()


def test_replica_that_never_answers_times_out(flaky_server, monkeypatch):
    clf = RemoteScorer("demo", RemoteConfig(flaky_server, read_timeout=1))
    monkeypatch.setattr(_Flaky, "do_POST", lambda self: time.sleep(3))
    masks = np.ones((4, 2), bool)
    img = torch.zeros(3, 128, 128)
    t0 = time.perf_counter()
    with pytest.raises(ModelError, match="no answer within 1 s"):
        clf.run_masks(img, img, torch.zeros(128, 128, dtype=torch.int64), masks, 4)
    # the bound is two 1 s read timeouts and the 0.5 s pause between them (the replica would
    # answer after 3 s), with a margin for a loaded machine
    assert time.perf_counter() - t0 < 2.5 + 5


def test_registry_picks_remote_from_env_and_falls_back(monkeypatch, images, local_results):
    port = _free_port()
    monkeypatch.setenv("LIMECRAFT_RAY_ADDRESS", f"http://127.0.0.1:{port}")
    with pytest.raises(ModelError, match="unreachable"):
        load_scorer("demo")
    # The registry itself is local-only; the deployment's size and normalisation are not
    # overridden from a front end.
    assert type(load_classifier("demo")) is Classifier
    with pytest.raises(LimecraftError, match="deployment's"):
        load_scorer("demo", input_size=64)
    monkeypatch.setenv("LIMECRAFT_RAY_FALLBACK", "local")
    clf = load_scorer("demo", device="cpu")
    assert isinstance(clf, RemoteScorer)
    assert clf.status.mode == "local fallback" and "unreachable" in clf.status.message
    r = _explain(images[0], clf)
    np.testing.assert_array_equal(r.weights, local_results[0].weights)


class _Flaky(BaseHTTPRequestHandler):
    """Answers info like a replica, then breaks the connection on every score: a dying replica."""

    info: ClassVar[dict] = {
        "input_size": [128, 128],
        "normalize": "none",
        "labels": list(demo.CLASS_NAMES),
        "device": "cuda",
        "precision": "bf16",
        "chunk": 64,
        "max_batch_images": 256,
    }
    scores = 0

    def do_GET(self):
        body = json.dumps(self.info).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        type(self).scores += 1
        self.rfile.read(int(self.headers["Content-Length"]))
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Flaky.scores = 0
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_dying_replica_is_retried_once_then_reported(flaky_server, images, local_results):
    clf = RemoteScorer("demo", RemoteConfig(flaky_server))
    assert clf.precision == "bf16" and clf.input_size == (128, 128)
    with pytest.raises(ModelError, match="a replica may have died") as e:
        _explain(images[0], clf)
    assert "LIMECRAFT_RAY_FALLBACK=local" in str(e.value)
    assert _Flaky.scores == 2  # one retry
    # With the fallback, the whole explanation reruns locally: the same as local.
    fallback = RemoteScorer(
        "demo",
        RemoteConfig(flaky_server, fallback="local"),
        local=lambda: load_classifier("demo", device="cpu"),
    )
    r = _explain(images[0], fallback)
    np.testing.assert_array_equal(r.weights, local_results[0].weights)
    assert fallback.status.mode == "local fallback"


def test_remote_scorer_is_a_scorer_by_composition(flaky_server, monkeypatch):
    clf = RemoteScorer("demo", RemoteConfig(flaky_server), labels=["a", "b"])
    assert isinstance(clf, Scorer) and not isinstance(clf, Classifier)
    assert not issubclass(RemoteScorer, Classifier)
    assert not hasattr(clf, "model")  # no stand-in local model
    assert clf.device == torch.device("cpu") and clf.channels_last is False
    assert (clf.name, clf.normalize, clf.precision) == ("demo", "none", "bf16")
    assert clf.labels == ("a", "b") and clf.label(1) == "b" and clf.label(7) == "class 7"
    assert clf.remote_device == "cuda" and clf.chunk == 64
    # What a deployment says about itself is checked at the door.
    monkeypatch.setitem(_Flaky.info, "normalize", "zscore")
    with pytest.raises(LimecraftError, match="normalize must be one of"):
        RemoteScorer("demo", RemoteConfig(flaky_server))


def test_deployment_declares_resources():
    serve_app = _serve_app()
    small = serve_app.model_deployment("resnet18")
    assert small.ray_actor_options == {"num_cpus": 1.0, "num_gpus": 0.25}
    assert small.num_replicas == 1 and small.name == "limecraft-resnet18"
    assert serve_app.model_deployment("demo").ray_actor_options["num_gpus"] == 0.1
    assert serve_app.model_deployment("resnet50").ray_actor_options["num_gpus"] == 0.5
    assert serve_app.model_deployment("vit_b_16").ray_actor_options["num_gpus"] == 1.0
    # Every registered model has a declared share of a GPU.
    from models import zoo

    assert set(serve_app.GPU_FRACTION) == {"demo", *zoo.ZOO}
    two = serve_app.model_deployment("resnet50", replicas=2, num_gpus=0)
    assert two.num_replicas == 2 and two.ray_actor_options["num_gpus"] == 0
    assert two.max_ongoing_requests >= serve_app.MAX_BATCH_IMAGES
    auto = serve_app.model_deployment("resnet50", autoscale=(1, 8))
    cfg = auto._deployment_config.autoscaling_config
    assert (cfg.min_replicas, cfg.max_replicas) == (1, 8)
    with pytest.raises(LimecraftError, match="unknown model"):
        serve_app.model_deployment("nope")
    with pytest.raises(LimecraftError, match="autoscale"):
        serve_app.model_deployment("demo", autoscale=(3, 2))


# ----------------------------------------------------------------------------- on a cluster


ONNX_NAME = "tinyonnx"


def _onnx_model_dir() -> Path:
    """A folder holding ``tinyonnx.onnx`` (the ONNX tests' hand-built NHWC graph, as a Keras
    export would be) and its class names in ``tinyonnx.txt``."""
    from onnx_graphs import TinyCNN, graph_file

    folder = Path(tempfile.mkdtemp(prefix="limecraft-models-"))
    graph_file(folder / f"{ONNX_NAME}.onnx", TinyCNN().eval(), layout="NHWC")
    (folder / f"{ONNX_NAME}.txt").write_text("\n".join(f"kind {c}" for c in "abcde") + "\n")
    return folder


@pytest.fixture(scope="module")
def cluster():
    """A Ray cluster on loopback serving the demo model, in a child process; stopped afterwards.

    ``python -m serving.serve_app --local`` runs Ray in its own process, so that Ray's auth
    settings, threads and warnings stay out of pytest's. Its files go to a private temp dir;
    a random token in its environment keeps Ray from writing ~/.ray/auth_token.
    """
    _serve_app()
    port = _free_port()
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.pop("LIMECRAFT_RAY_ADDRESS", None)
    # A team's ONNX model by name, from the model folder, served beside the demo model.
    env["LIMECRAFT_MODEL_DIR"] = str(_onnx_model_dir())
    # A long batch window so that concurrent sessions' chunks meet (the default is 10 ms).
    models = f"demo,{ONNX_NAME}"
    cmd = [sys.executable, "-m", "serving.serve_app", "--local", "4", "--models", models]
    cmd += ["--http-port", str(port), "--batch-wait", "0.2"]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        start_new_session=True,  # its own group: Ray's processes are stopped with it
    )
    try:
        ready = _wait_ready(proc, deadline=time.monotonic() + 180)
        if ready is None:
            log.seek(0)
            pytest.fail("the local Ray cluster did not start:\n" + log.read().decode()[-3000:])
        yield ready["url"]
    finally:
        proc.stdin.close()  # serve_local shuts Serve and Ray down when stdin closes
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        proc.stdout.close()
        log.close()


def _wait_ready(proc: subprocess.Popen, deadline: float) -> dict | None:
    lines: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            lines.append(line.decode())
            if '"ready"' in lines[-1]:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(max(0.0, deadline - time.monotonic()))
    if lines and '"ready"' in lines[-1]:
        return json.loads(lines[-1])
    return None


def _remote(url: str, **kw) -> RemoteScorer:
    return RemoteScorer(
        "demo",
        RemoteConfig(url, **kw),
        local=lambda: load_classifier("demo", device="cpu"),
    )


@pytest.mark.slow
def test_remote_equals_local(cluster, images, local_results):
    clf = _remote(cluster)
    assert clf.input_size == (128, 128) and clf.labels == tuple(demo.CLASS_NAMES)
    assert clf.remote_device == "cpu"
    done = []
    r = _explain(images[0], clf, progress=lambda d, t: done.append((d, t)))
    # the engine used the scorer as it is (not wrapped as a model that scores images)
    assert r.run.model == "demo" and r.run.input_size == [128, 128]
    np.testing.assert_allclose(r.weights, local_results[0].weights, rtol=0, atol=1e-6)
    np.testing.assert_allclose(r.deltas, local_results[0].deltas, rtol=0, atol=1e-6)
    assert r.target == local_results[0].target
    assert done[-1][0] == done[-1][1] and len(done) > 2  # progress per chunk
    local = load_classifier("demo", device="cpu")
    np.testing.assert_allclose(clf.predict(images[1]), local.predict(images[1]), atol=1e-5)


def test_a_per_mask_fill_travels_by_name(cluster, images):
    """inpaint has no fill image: the scene names it and the replica composes it from its own
    table of fills, pixel for pixel as the local engine does."""
    here = _explain(images[0], load_classifier("demo", device="cpu"), fill="inpaint")
    there = _explain(images[0], _remote(cluster), fill="inpaint")
    np.testing.assert_allclose(there.weights, here.weights, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_cancel_between_chunks(cluster, images):
    clf = _remote(cluster)
    calls = []
    with pytest.raises(Cancelled):
        _explain(
            images[0], clf, progress=lambda d, t: calls.append(d), cancel=lambda: len(calls) >= 1
        )
    assert len(calls) <= 1 + clf.config.inflight


@pytest.mark.slow
def test_two_sessions_share_forward_passes(cluster, images, local_results):
    # One chunk in flight per session: every batch that joins requests joins two sessions.
    clf = _remote(cluster, inflight=1)
    before = clf.stats()
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda im: _explain(im, clf), images))
    after = clf.stats()
    d = {k: after[k] - before[k] for k in after if k not in ("max_requests_per_batch", "pid")}
    assert d["cross_scene_batches"] >= 1, d
    assert d["forward_calls"] < d["requests"], d
    for r, ref in zip(results, local_results, strict=True):
        np.testing.assert_allclose(r.weights, ref.weights, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_registry_uses_the_cluster_from_env(cluster, monkeypatch, images, local_results):
    monkeypatch.setenv("LIMECRAFT_RAY_ADDRESS", cluster)
    clf = load_scorer("demo")
    assert isinstance(clf, RemoteScorer) and clf.status.mode == "remote"
    before = clf.stats()["requests"]
    r = _explain(images[1], clf)
    assert clf.stats()["requests"] > before  # scored on the cluster
    np.testing.assert_allclose(r.weights, local_results[1].weights, rtol=0, atol=1e-6)
    with pytest.raises(ModelError, match="no deployment"):
        load_scorer("resnet18")  # registered, but not deployed on this cluster


@pytest.mark.slow
def test_an_audit_through_the_cluster_gives_the_local_weights(cluster, monkeypatch, tmp_path):
    """python -m limecraft audit with LIMECRAFT_RAY_ADDRESS set scores on the deployment,
    several images in flight (their chunks meet in the replica's batches), and every image's
    weights and row are the local audit's."""
    from limecraft.cli import main
    from models.demo_data import write_demo_mixed

    data = tmp_path / "data"
    write_demo_mixed(data, 4, seed=8_080)
    args = ["audit", str(data / "images"), "--expected-masks", str(data / "masks")]
    args += ["--samples", "200", "--in-flight", "4", "--quiet"]
    monkeypatch.delenv("LIMECRAFT_RAY_ADDRESS", raising=False)
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    monkeypatch.setenv("LIMECRAFT_RAY_ADDRESS", cluster)
    before = _remote(cluster).stats()
    assert main([*args, "--out", str(tmp_path / "remote")]) == 0
    after = _remote(cluster).stats()
    assert after["requests"] > before["requests"]  # scored on the cluster
    assert after["cross_scene_batches"] > before["cross_scene_batches"]  # images shared batches
    local = json.loads((tmp_path / "local" / "audit.json").read_text())
    remote = json.loads((tmp_path / "remote" / "audit.json").read_text())
    assert remote["run"]["scored"].startswith(f"on Ray Serve at {cluster}")
    assert local["run"]["scored"].startswith("locally")
    for a, b in zip(local["rows"], remote["rows"], strict=True):
        assert (a["file"], a["predicted"], a["top_region"], a["flags"]) == (
            b["file"], b["predicted"], b["top_region"], b["flags"]
        )  # fmt: skip
        ea = Explanation.from_json(
            (tmp_path / "local/images" / a["key"] / "explanation.json").read_text()
        )
        eb = Explanation.from_json(
            (tmp_path / "remote/images" / b["key"] / "explanation.json").read_text()
        )
        np.testing.assert_allclose(eb.weights, ea.weights, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_killed_replica_is_reported_or_replaced(cluster, images, local_results):
    clf = _remote(cluster)
    pid = clf.stats()["pid"]
    os.kill(pid, signal.SIGKILL)  # the replica (a descendant of the fixture's process)
    t0 = time.monotonic()
    try:
        r = _explain(images[0], _remote(cluster, fallback="local"))
    finally:
        elapsed = time.monotonic() - t0
    # Either Serve's restarted replica answered, or the explanation ran locally: same weights.
    np.testing.assert_allclose(r.weights, local_results[0].weights, rtol=0, atol=1e-6)
    assert elapsed < 60
    # Without the fallback, a failure is a clear error, never a hang; once Serve has replaced
    # the replica, explanations go through again.
    deadline = time.monotonic() + 90
    while True:
        try:
            r = _explain(images[0], _remote(cluster))
            break
        except ModelError as e:
            assert "LIMECRAFT_RAY_FALLBACK=local" in str(e)
            assert time.monotonic() < deadline, "Serve did not replace the replica in 90 s"
            time.sleep(0.5)  # a retry costs a refused request: poll often
    np.testing.assert_allclose(r.weights, local_results[0].weights, rtol=0, atol=1e-6)
    assert clf.stats()["pid"] != pid


def test_compose_overlay_runs_a_head_gpu_workers_and_front_ends():
    import shlex

    import yaml

    serve_app = _serve_app()
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    overlay = yaml.safe_load((ROOT / "deploy/ray-compose.yml").read_text())
    services = overlay["services"]
    assert "limecraft" in base["services"]  # the overlay adds to the app's own service
    front = services["limecraft"]["environment"]
    assert front["LIMECRAFT_RAY_ADDRESS"] == "http://ray-head:8000"
    head = " ".join(services["ray-head"]["command"])
    assert "ray start --head" in head and "--num-gpus=0" in head
    deploy = head.split("python -m serving.serve_app", 1)[1].split("&&")[0]
    env = services["ray-head"]["environment"]
    for name in ("LIMECRAFT_MODELS", "LIMECRAFT_REPLICAS"):  # "${NAME:-default}" -> default
        deploy = deploy.replace(f"$${name}", env[name].split(":-", 1)[1].rstrip("}"))
    args = serve_app.parser().parse_args(shlex.split(deploy))
    assert args.models == "demo,resnet50" and args.replicas == 1
    assert args.http_port == 8000 and args.gpus == "table" and args.address == "auto"
    worker = services["ray-worker"]
    assert "--address=ray-head:6379" in " ".join(worker["command"])
    (gpu,) = worker["deploy"]["resources"]["reservations"]["devices"]
    assert gpu["driver"] == "nvidia" and gpu["capabilities"] == ["gpu"]
    # The same token on every node.
    assert (
        worker["environment"]["RAY_AUTH_TOKEN"]
        == services["ray-head"]["environment"]["RAY_AUTH_TOKEN"]
    )


@pytest.mark.slow
def test_the_app_explains_through_the_cluster(cluster, monkeypatch, tmp_path):
    """The web app with LIMECRAFT_RAY_ADDRESS set: Explain runs on the cluster, not the queue.

    In this process (Streamlit's AppTest): the app's model and explanation caches are emptied
    before, so that the app loads its model with the address set and explains anew, and after,
    so that no later test of this process gets the cluster's model."""
    from streamlit.testing.v1 import AppTest

    from pages.lib import caches, runtime

    def forget() -> None:
        runtime._classifier.clear()
        caches.explanation_cache.clear()

    before = _remote(cluster).stats()
    monkeypatch.setenv("LIMECRAFT_RAY_ADDRESS", cluster)
    monkeypatch.setenv("LIMECRAFT_STORE_DIR", str(tmp_path / "store"))
    forget()
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        at.run()
        at.number_input(key="set_samples").set_value(100)
        at.number_input(key="set_repeats").set_value(1)
        at.run()
        queue_calls = runtime.work_queue().forward_calls
        next(b for b in at.button if b.label == "Explain").click().run()
        assert not at.exception and [e.value for e in at.error] == []
        assert at.session_state["limecraft_session"].app.explanation is not None
        assert runtime.work_queue().forward_calls == queue_calls  # the local queue was not used
        assert any("Ray Serve cluster" in c.value for c in at.sidebar.caption)
    finally:
        forget()
    after = _remote(cluster).stats()
    assert after["requests"] > before["requests"]


@pytest.mark.slow
def test_the_cluster_serves_an_onnx_model_by_name(cluster, monkeypatch):
    """``--models demo,tinyonnx`` with ``LIMECRAFT_MODEL_DIR``: the ONNX model is a registry
    name on the cluster too, and its remote explanation equals the local one."""
    monkeypatch.setenv("LIMECRAFT_MODEL_DIR", str(_onnx_model_dir()))
    local = load_classifier(ONNX_NAME, device="cpu")
    assert local.label(0) == "kind a"
    remote = RemoteScorer(ONNX_NAME, RemoteConfig(cluster), local=lambda: local)
    image = np.random.default_rng(1).integers(0, 256, (48, 48, 3), dtype=np.uint8)
    settings = dict(samples=60, seed=0, segmentation="grid", n_segments=9, compute_deltas=False)
    r = explain(image, remote, **settings)
    want = explain(image, local, **settings)
    assert r.run.model == ONNX_NAME and r.class_labels[0].startswith("kind ")
    np.testing.assert_allclose(r.weights, want.weights, rtol=0, atol=1e-5)


def test_a_job_queues_a_local_model_and_leaves_a_deployment_as_it_is(flaky_server):
    """serving.queued, the one place that tells a Ray Serve scorer from a local one: the app's
    Explain, its audit and the CLI's audit all get their scorer through it."""
    from toys import ChannelMeans

    from limecraft_core import Classifier
    from serving import QueuedScorer, WorkQueue, queued

    queue = WorkQueue()
    remote = RemoteScorer("demo", RemoteConfig(flaky_server))
    assert queued(remote, queue) is remote
    local = Classifier(ChannelMeans(classes=3), input_size=32)
    runner = queued(local, queue, alive=lambda: True)
    assert isinstance(runner, QueuedScorer) and runner.inner is local
