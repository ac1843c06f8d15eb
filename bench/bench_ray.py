"""Load on the Ray Serve model side: K sessions explaining at once, through 1 and 2 replicas.

For each replica count, a one-node Ray cluster on loopback is started in a child process
(``python -m serving.serve_app --local``), the demo model is deployed with that many replicas
(1 CPU each, so each replica's torch uses one thread), and K sessions (threads of this
process, each with its own image, like K browser tabs on one Streamlit replica) explain:

* sequential: one explanation after another (one user at a time);
* concurrent: all K at once (the cluster batches their chunks across sessions).

The local engine in this process (torch on every core) is the single-machine baseline. Every
explanation is checked against the local one (same seed: the same weights). Bounded: each
cluster gets ``--budget`` seconds, and is stopped afterwards whatever happens.

    python bench/bench_ray.py                    # K=4 sessions, N=500, 1 and 2 replicas
    python bench/bench_ray.py --sessions 8 --samples 1000

Writes bench/results/ray.json and prints a Markdown table.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import json
import os
import platform
import secrets
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from limecraft_core import explain, segment
from models import demo
from models.registry import load_classifier
from serving.client import RemoteScorer
from serving.config import RemoteConfig
from serving.ports import free_port as _free_port


class LocalCluster:
    """``python -m serving.serve_app --local`` in a child process; stopped on exit."""

    def __init__(
        self, replicas: int, cluster_cpus: int, timeout: float = 180, models: str = "demo"
    ) -> None:
        port = _free_port()
        env = {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(16),  # nothing written to ~/.ray
            "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        env.pop("LIMECRAFT_RAY_ADDRESS", None)
        cmd = [sys.executable, "-m", "serving.serve_app", "--local", str(cluster_cpus)]
        cmd += ["--models", models, "--replicas", str(replicas), "--cpus", "1"]
        cmd += ["--http-port", str(port)]
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,
        )
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()))
        reader.daemon = True
        reader.start()
        reader.join(timeout)
        if not line or b'"ready"' not in line[0]:
            self.close()
            self.log.seek(0)
            raise RuntimeError(
                "the local cluster did not start:\n" + self.log.read().decode()[-3000:]
            )
        self.url = json.loads(line[0])["url"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def replica_stats(clf: RemoteScorer, replicas: int, tries: int = 40) -> dict[int, dict]:
    """Counters of every replica (each GET reaches one replica; ask until all have answered)."""
    seen: dict[int, dict] = {}
    for _ in range(tries):
        s = clf.stats()
        seen[s["pid"]] = s
        if len(seen) >= replicas:
            break
    return seen


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sessions", type=int, default=4, help="K concurrent sessions")
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--regions", type=int, default=25, help="SLIC regions per image")
    ap.add_argument("--replicas", default="1,2")
    ap.add_argument("--cluster-cpus", type=int, default=4, help="logical CPUs of the cluster")
    ap.add_argument("--budget", type=float, default=600, help="seconds per cluster, at most")
    ap.add_argument("--json", default=str(ROOT / "bench/results/ray.json"))
    args = ap.parse_args()

    images = [s.image for s in demo.generate(args.sessions, seed=77, mode="conflict")]
    segs = [segment(im, "slic", args.regions, seed=0) for im in images]
    kw = {"samples": args.samples, "seed": 0}

    def run(model: Any, i: int):
        return explain(images[i], model, segments=segs[i], **kw)

    k = args.sessions
    passes = sum(args.samples + 2 * (int(s.max()) + 1) for s in segs)  # model images in all
    rows: list[dict] = []

    local = load_classifier("demo", device="cpu")
    run(local, 0)  # warm-up
    t = time.perf_counter()
    reference = [run(local, i) for i in range(k)]
    local_s = time.perf_counter() - t
    rows.append(
        {
            "setup": f"local engine ({torch.get_num_threads()} torch threads), sequential",
            "replicas": 0,
            "mode": "sequential",
            "seconds": local_s,
        }
    )

    for replicas in [int(r) for r in args.replicas.split(",")]:
        deadline = time.monotonic() + args.budget
        t_start = time.perf_counter()
        with LocalCluster(replicas, args.cluster_cpus) as cluster:
            started = time.perf_counter() - t_start
            clf = RemoteScorer("demo", RemoteConfig(cluster.url))
            for i in range(min(k, 2 * replicas)):
                run(clf, i)  # warm-up: every replica has run the model
            before = replica_stats(clf, replicas)
            for mode in ("sequential", "concurrent"):
                if time.monotonic() > deadline:
                    raise SystemExit(f"over the {args.budget} s budget with {replicas} replicas")
                t = time.perf_counter()
                if mode == "sequential":
                    results = [run(clf, i) for i in range(k)]
                else:
                    with ThreadPoolExecutor(k) as pool:
                        results = list(pool.map(lambda i, c=clf: run(c, i), range(k)))
                seconds = time.perf_counter() - t
                for r, ref in zip(results, reference, strict=True):
                    np.testing.assert_allclose(r.weights, ref.weights, rtol=0, atol=1e-6)
                rows.append(
                    {
                        "setup": f"Ray Serve, {replicas} replica{'s' * (replicas > 1)} (1 CPU each)",
                        "replicas": replicas,
                        "mode": mode,
                        "seconds": seconds,
                        "cluster_start_s": started,
                    }
                )
            after = replica_stats(clf, replicas)
        counters = {}
        for pid, s in after.items():
            b = before.get(pid, dict.fromkeys(s, 0))
            for key in ("requests", "forward_calls", "cross_scene_batches", "images"):
                counters[key] = counters.get(key, 0) + s[key] - b[key]
        rows[-1]["counters"] = counters  # sequential + concurrent, all replicas answered

    for r in rows:
        r["explanations_per_s"] = k / r["seconds"]
        r["images_per_s"] = passes / r["seconds"]
    base = {r["replicas"]: r["seconds"] for r in rows if r["mode"] == "sequential"}
    for r in rows:
        r["speedup_vs_sequential_same_setup"] = base[r["replicas"]] / r["seconds"]
        r["speedup_vs_local"] = local_s / r["seconds"]

    print(
        f"\n{k} sessions, demo model (128 px), N={args.samples}, SLIC {args.regions} regions; "
        f"{os.cpu_count()} CPU cores; weights equal to the local engine's in every run\n"
    )
    print(
        "| setup | sessions | wall s | explanations/s | model images/s | vs sequential | vs local |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['setup']} | {'1 at a time' if r['mode'] == 'sequential' else f'{k} at once'} "
            f"| {r['seconds']:.1f} | {r['explanations_per_s']:.2f} | {r['images_per_s']:.0f} "
            f"| {r['speedup_vs_sequential_same_setup']:.2f}x | {r['speedup_vs_local']:.2f}x |"
        )
    for r in rows:
        if "counters" in r:
            c = r["counters"]
            print(
                f"\n{r['replicas']} replica(s), sequential + concurrent: {c['requests']} requests in "
                f"{c['forward_calls']} forward passes, {c['cross_scene_batches']} of them joined "
                "several sessions' chunks"
            )
    out = {
        "args": vars(args),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "model_images": passes,
        "rows": rows,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
