"""The model gate the browser tests hold the app's model with (models/gate.py): open by default,
held at the next call, let through call by call, opened again; and only when the variable is
set."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from models import gate as G
from models.registry import load_classifier


def _until(condition, what: str, timeout: float = 30.0) -> None:
    """Until ``condition()`` holds (a deadline only against a hang, never a measurement)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)


def _caller(gate: G.Gate, calls: int):
    """A thread making ``calls`` calls through the gate; returns it and its count of returns."""
    done = []

    def run() -> None:
        for _ in range(calls):
            gate.enter()
            done.append(1)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, done


def test_an_open_gate_lets_every_call_through_and_counts_them(tmp_path):
    gate, files = G.Gate(tmp_path), G.GateFiles(tmp_path)
    for _ in range(3):
        gate.enter()
    assert files.passed() == 3 and files.waiting() == 0 and files.allowed() is None
    assert not files.held()


def test_a_held_gate_waits_then_lets_calls_through_one_at_a_time_then_opens(tmp_path):
    gate, files = G.Gate(tmp_path), G.GateFiles(tmp_path)
    gate.enter()
    files.hold()
    t, done = _caller(gate, 3)
    _until(files.held, "the first call waits at the held gate")
    assert done == [] and files.passed() == 1 and files.waiting() == 1
    files.grant(1)
    _until(lambda: len(done) == 1 and files.held(), "one call through, the next one waiting")
    assert files.passed() == 2
    files.grant(1)
    _until(lambda: len(done) == 2 and files.held(), "a second call through")
    files.release()
    t.join(30)
    assert not t.is_alive() and len(done) == 3
    assert files.passed() == 4 and files.waiting() == 0 and not files.held()


def test_threads_share_one_count(tmp_path):
    gate, files = G.Gate(tmp_path), G.GateFiles(tmp_path)
    files.hold()
    a, done_a = _caller(gate, 2)
    b, done_b = _caller(gate, 2)
    _until(lambda: files.waiting() == 2, "both threads wait")
    files.grant(3)
    _until(lambda: len(done_a) + len(done_b) == 3 and files.held(), "three calls through")
    assert files.passed() == 3 and files.waiting() == 1
    files.release()
    a.join(30), b.join(30)
    assert len(done_a) + len(done_b) == 4


def test_unset_means_no_gate_and_the_same_module(monkeypatch):
    monkeypatch.delenv(G.ENV, raising=False)
    m = torch.nn.Linear(2, 2)
    assert G.gate_from_env() is None and G.gated(m) is m


def test_the_registry_puts_its_models_behind_the_gate_when_set(monkeypatch, tmp_path):
    img = np.random.default_rng(0).random((64, 64, 3)).astype(np.float32)
    x = torch.from_numpy(img.transpose(2, 0, 1).copy())[None]
    monkeypatch.delenv(G.ENV, raising=False)
    plain = load_classifier("demo", precision="fp32")
    monkeypatch.setenv(G.ENV, str(tmp_path))
    held = load_classifier("demo", precision="fp32")
    files = G.GateFiles(tmp_path)
    assert files.passed() == 0
    # the same scores, and the call went through the gate
    assert torch.equal(held(x), plain(x)) and files.passed() == 1
    files.hold()
    out = []
    t = threading.Thread(target=lambda: out.append(held(x)), daemon=True)
    t.start()
    _until(files.held, "the model waits at the gate")
    assert out == []
    files.release()
    t.join(30)
    assert len(out) == 1 and torch.equal(out[0], plain(x))


@pytest.fixture(autouse=True)
def _fresh_gates():
    """Each test its own gate per folder (the process keeps one per folder)."""
    G._GATES.clear()
    yield
    G._GATES.clear()
