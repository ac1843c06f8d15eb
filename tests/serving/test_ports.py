"""serving.ports: a port for a server that binds it later, clear of the ephemeral range."""

import socket
from pathlib import Path

from serving import ports


def _ephemeral() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except OSError:
        return 32768, 60999


def test_free_port_is_free_and_clear_of_ray_and_the_kernels_picks():
    low, _ = _ephemeral()
    picked = {ports.free_port() for _ in range(20)}
    assert all(ports.LOW <= p <= ports.HIGH for p in picked)
    assert all(p < low and p > 19999 for p in picked)  # not Ray's worker ports nor ephemeral
    assert len(picked) > 1  # random, so two callers rarely meet
    p = picked.pop()
    with socket.socket() as s:
        s.bind(("127.0.0.1", p))  # free now


def test_free_port_falls_back_to_the_kernels_pick_when_the_range_is_taken(monkeypatch):
    monkeypatch.setattr(ports, "_bindable", lambda port: False)
    p = ports.free_port(tries=3)
    assert p > 0 and not (ports.LOW <= p <= ports.HIGH and p < 32768)
