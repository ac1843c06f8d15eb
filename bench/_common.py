"""What the benchmark scripts share: the repository's root on ``sys.path``, the timers, the
chelsea photo and the rank correlation.

A script imports it first (``from _common import ROOT``, before any project import): the
import puts the repository's root on ``sys.path`` so that ``limecraft_core``, ``models`` and
``pages`` import when a script runs as ``python bench/NAME.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before anything that loads torch: a script imports this module first

import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

__all__ = ["ROOT", "chelsea", "median_time", "spearman", "timed", "write_results"]

T = TypeVar("T")


def _sync() -> None:
    """Wait for the GPU's queued work, so that a timing covers it (no-op without CUDA)."""
    torch = sys.modules.get("torch")  # never import torch for a timer
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()``'s result and its wall time in seconds."""
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def median_time(fn: Callable[[], T], repeats: int) -> tuple[float, T | None]:
    """Median wall time of ``repeats`` calls (synchronised on a GPU), and the last result."""
    times, out = [], None
    for _ in range(repeats):
        _sync()
        t = time.perf_counter()
        out = fn()
        _sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def chelsea(size: int = 224, *, rounded: bool = False) -> np.ndarray:
    """scikit-image's chelsea resized (anti-aliased) to (size, size, 3) uint8; ``rounded``
    rounds the floats to the nearest level instead of truncating them."""
    from skimage import data, transform

    img = transform.resize(data.chelsea(), (size, size), anti_aliasing=True) * 255
    return (img.round() if rounded else img).astype(np.uint8)


def spearman(a: Any, b: Any) -> float:
    """Spearman's rank correlation of two equal-length vectors (nan when one is constant)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def write_results(out: str | Path | None, name: str, r: dict, text: str) -> None:
    """Print ``text`` (a result's Markdown), then write ``name``.json (``r``) and ``name``.md
    (``text``) to the folder ``out``, made if needed; None (``--no-write``): print only."""
    import json

    print(text)
    if out is not None:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(r, indent=2) + "\n")
        (folder / f"{name}.md").write_text(text)
