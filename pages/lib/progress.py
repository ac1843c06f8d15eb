"""The one line of progress an Explain shows: passes done, the queue position, the time left.

Pure (no Streamlit): the page feeds it the engine's progress and the queue's status and shows
:meth:`ExplainProgress.text`. Both feeds change the same line, so it never flickers between
two messages, and the time left is re-estimated from the passes that ran, not counting the
time spent waiting behind other sessions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class ExplainProgress:
    """Progress of one Explain.

    Attributes
    ----------
    label : str, what runs ("Explaining", "Checking", ...)
    clock : callable returning seconds; ``time.perf_counter`` unless a test gives its own
    """

    label: str
    clock: Callable[[], float] = time.perf_counter
    done: int = 0
    total: int = 0
    ahead: int = 0  # explanations of other sessions served before this one
    _served_s: float = 0.0  # time spent while this job was being served
    _served_passes: int = 0
    _last: float | None = field(default=None, repr=False)

    def passes(self, done: int, total: int) -> None:
        """The engine finished ``done`` of ``total`` model passes."""
        now = self.clock()
        if self._last is not None and self.ahead == 0 and done > self.done:
            self._served_s += now - self._last
            self._served_passes += done - self.done
        self.done, self.total, self._last = done, total, now
        self.ahead = 0  # a pass ran: this job is being served

    def waiting(self, ahead: int) -> None:
        """The queue says ``ahead`` explanations are served before this one."""
        self.ahead = max(0, int(ahead))
        if self.ahead:
            self._last = self.clock()  # waiting time does not count toward the pass rate

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0

    def seconds_left(self) -> float | None:
        """From the passes that ran so far; None before one has been timed."""
        if self._served_passes == 0 or self.total == 0:
            return None
        return self._served_s / self._served_passes * (self.total - self.done)

    def text(self) -> str:
        head = f"{self.label}: "
        head += f"{self.done}/{self.total} model passes" if self.total else "starting"
        if self.ahead:
            s = "s" if self.ahead > 1 else ""
            return f"{head} · waiting for the model: {self.ahead} explanation{s} ahead of yours"
        left = self.seconds_left()
        if left is None:
            return head + (" · timing the first passes…" if self.total else "…")
        return f"{head} · about {duration(left)} left"


def duration(s: float) -> str:
    """A time left as people say it: '1 s', '40 s', '3 min'."""
    if s < 1.5:
        return "1 s"
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min"
