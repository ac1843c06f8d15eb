"""A free loopback port for a server that binds it later, clear of the ports others pick meanwhile.

A port the kernel hands out for ``bind(0)`` lies in its ephemeral range (``ip_local_port_range``,
32768-60999 on Linux), where every outgoing connection and every ``bind(0)`` of the next seconds
also lands. A Ray cluster starting up binds dozens of those (and its workers 10002-19999), so a
port picked that way and bound by Serve's proxy 30 s later was, now and then, already taken
("Failed to bind to address"). :func:`free_port` picks at random between those two ranges and
checks that the port is free now.
"""

from __future__ import annotations

import random
import socket

#: The ports picked from: above Ray's worker ports (10002-19999), below the ephemeral range.
LOW, HIGH = 20000, 32767


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(tries: int = 200) -> int:
    """A loopback TCP port that is free now, between :data:`LOW` and :data:`HIGH` (the kernel's
    own pick when none of ``tries`` random ones is)."""
    rng = random.SystemRandom()
    for _ in range(tries):
        port = rng.randint(LOW, HIGH)
        if _bindable(port):
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
