"""The thread policy: one helper (limecraft_core/threads.py), called by each entry point before
anything that loads torch, and set nowhere else."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

from limecraft_core import threads

ROOT = Path(__file__).resolve().parents[2]
#: Every way the project starts a process of its own: the app, the command line, the Ray Serve
#: app, the tests' process, and each benchmark script (a new one is covered by the glob).
ENTRY_POINTS = sorted(
    [
        ROOT / "app.py",
        ROOT / "limecraft" / "__main__.py",
        ROOT / "serving" / "serve_app.py",
        ROOT / "tests" / "conftest.py",
        *(ROOT / "bench").glob("*.py"),
    ]
)
#: What an entry point may import before it sets the policy: nothing that loads torch.
#: bench/_common.py sets the policy itself before its own imports, and a benchmark script
#: imports it first (its test here checks it as an entry point).
BEFORE = {"__future__", "os", "sys", "pathlib", "limecraft_core.threads", "_common"}
(VARIABLE, VALUE), (BLAS, BLAS_THREADS) = threads.POLICY.items()


def imports_before_the_policy(path: Path) -> list[str] | None:
    """The modules ``path`` imports at its top level before it calls set_thread_policy(), or
    None when it never calls it at its top level."""
    seen: list[str] = []
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Import):
            seen += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            seen.append(node.module or "")
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "set_thread_policy"
        ):
            return seen
    return None


def test_the_policy_is_set_unless_the_user_chose_one(monkeypatch):
    assert (VARIABLE, VALUE) == ("OMP_" + "WAIT_POLICY", "PASSIVE")
    assert (BLAS, BLAS_THREADS) == ("OPENBLAS_" + "NUM_THREADS", "1")
    monkeypatch.delenv(VARIABLE, raising=False)
    threads.set_thread_policy()
    assert os.environ[VARIABLE] == VALUE
    monkeypatch.setenv(VARIABLE, "ACTIVE")
    threads.set_thread_policy()
    assert os.environ[VARIABLE] == "ACTIVE"


def test_it_says_whether_it_came_before_torch(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert threads.set_thread_policy() is True
    monkeypatch.setitem(sys.modules, "torch", object())
    assert threads.set_thread_policy() is False


@pytest.mark.parametrize("path", ENTRY_POINTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_entry_point_sets_it_before_anything_that_loads_torch(path):
    before = imports_before_the_policy(path)
    assert before is not None, f"{path.name} never calls set_thread_policy() at its top level"
    assert set(before) <= BEFORE, before


def test_the_policy_is_written_nowhere_else():
    """No other file of the project names the variable in its code (docs and comments may)."""
    found = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0].startswith(".") or rel.parts[0] in {"build", "dist"}:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in threads.POLICY:
                found.append(rel.as_posix())
    assert found == ["limecraft_core/threads.py"] * len(threads.POLICY), found
