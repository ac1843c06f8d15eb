"""The process's thread policy: one helper, called by each entry point before torch loads.

On small, throttled machines torch's OpenMP threads busy-wait between operations, which costs
about 8 ms per operation; waiting passively costs nothing measurable elsewhere (README,
Performance). OpenMP reads its policy once, when torch starts its thread pool, so the policy
must be in the environment before ``import torch``; OpenBLAS (numpy's) reads its thread count
when numpy loads, so before that too. The entry points (``app.py``,
``python -m limecraft``, ``serving/serve_app.py``, each script in ``bench/``, and the tests'
``conftest.py``) call :func:`set_thread_policy` first; ``tests/limecraft_core/test_threads.py``
checks that each calls it before anything that loads torch, and that nothing else sets it.

This module imports only the standard library.
"""

from __future__ import annotations

import os
import sys

#: Each variable the entry points set, and its value, unless the environment sets it already.
#: numpy's OpenBLAS gets one thread: its products here are small (an early-stop check's 41
#: ridge fits), and its own threads, which spin while they wait, fought torch's for the cores:
#: a check then took about 3x its one-thread time and slowed the model batches beside it.
POLICY: dict[str, str] = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_NUM_THREADS": "1"}


def set_thread_policy() -> bool:
    """Put :data:`POLICY` into this process's environment, keeping any value the user set.

    Returns
    -------
    bool
        Whether it came in time: False when torch was already imported, whose thread pool
        then follows the environment it found (the policy still reaches child processes).
    """
    for name, value in POLICY.items():
        os.environ.setdefault(name, value)
    return "torch" not in sys.modules
