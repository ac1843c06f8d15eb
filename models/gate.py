"""A gate on a model's forward passes that a test holds and opens from another process.

The browser tests of progress, Stop and Cancel must act while an explanation or an audit is
still running, on any machine however fast. The app runs in its own server process, so a test
cannot reach its model in memory; it reaches it through files. With ``LIMECRAFT_TEST_GATE`` set
to a folder, every model the registry loads (:func:`models.registry.load_classifier`) first
passes each forward call through the gate of that folder:

- no file ``allow``: the gate is open, and the model runs as it always does;
- ``allow`` holds a number N: the process's forward calls after the N-th wait until the number
  grows or the file goes (``allow`` equal to ``passed`` holds the model at its next call);
- ``passed`` holds how many calls have gone through, ``waiting`` how many wait now.

The test side is :class:`GateFiles`. Nothing reads the variable unless it is set; it is for
tests only, and never set by the app, the Dockerfile or the deploy examples.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import torch

__all__ = ["ENV", "Gate", "GateFiles", "gate_from_env", "gated"]

#: The environment variable that names the gate's folder.
ENV = "LIMECRAFT_TEST_GATE"
_POLL_S = 0.01


def _write(path: Path, text: str) -> None:
    """Replace ``path``'s content at once (a reader never sees it half written)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


class Gate:
    """The server side: :meth:`enter` before every forward call."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.passed = 0
        self.waiting = 0
        _write(self.folder / "passed", "0")
        _write(self.folder / "waiting", "0")

    def enter(self) -> None:
        """Return when this call may run: at once while the gate is open."""
        queued = False
        while True:
            with self._lock:
                allow = _read_int(self.folder / "allow")
                if allow is None or self.passed < allow:
                    self.passed += 1
                    _write(self.folder / "passed", str(self.passed))
                    if queued:
                        self.waiting -= 1
                        _write(self.folder / "waiting", str(self.waiting))
                    return
                if not queued:
                    queued = True
                    self.waiting += 1
                    _write(self.folder / "waiting", str(self.waiting))
            time.sleep(_POLL_S)


class _Gated(torch.nn.Module):
    """``inner`` behind ``gate``: the same module, each forward call let through first."""

    def __init__(self, inner: torch.nn.Module, gate: Gate) -> None:
        super().__init__()
        self.inner = inner
        self._gate = gate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._gate.enter()
        return self.inner(x)


_GATES: dict[str, Gate] = {}
_GATES_LOCK = threading.Lock()


def gate_from_env() -> Gate | None:
    """The process's gate for ``LIMECRAFT_TEST_GATE``'s folder, or None when it is unset."""
    folder = os.environ.get(ENV, "").strip()
    if not folder:
        return None
    with _GATES_LOCK:
        if folder not in _GATES:
            _GATES[folder] = Gate(folder)
        return _GATES[folder]


def gated(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` behind the gate when ``LIMECRAFT_TEST_GATE`` is set, else ``module`` itself."""
    gate = gate_from_env()
    if gate is None or not isinstance(module, torch.nn.Module):
        return module
    return _Gated(module, gate)


class GateFiles:
    """The test side: hold the model, let it through call by call, open the gate."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def passed(self) -> int:
        return _read_int(self.folder / "passed") or 0

    def waiting(self) -> int:
        return _read_int(self.folder / "waiting") or 0

    def allowed(self) -> int | None:
        return _read_int(self.folder / "allow")

    def hold(self) -> None:
        """Hold the model at its next forward call (calls already running finish)."""
        _write(self.folder / "allow", str(self.passed()))

    def held(self) -> bool:
        """Whether a call waits at the gate and every call let through has gone through."""
        allow = self.allowed()
        return allow is not None and self.waiting() > 0 and self.passed() >= allow

    def grant(self, calls: int = 1) -> None:
        """Let ``calls`` more forward calls through (the gate stays held after them)."""
        _write(self.folder / "allow", str(max(self.allowed() or 0, self.passed()) + calls))

    def release(self) -> None:
        """Open the gate: every call runs at once, now and later."""
        (self.folder / "allow").unlink(missing_ok=True)
