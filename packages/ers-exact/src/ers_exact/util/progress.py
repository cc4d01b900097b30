"""A dependency-free progress bar for long work (printed to stderr only when it is a terminal)."""

from __future__ import annotations

import math
import sys
import time
from types import TracebackType


class Progress:
    """``with Progress(total, "optimal") as bar: bar.update(k)`` -- redraws at most 5 times a second.

    ``deadline`` (a ``time.perf_counter()`` time): the work stops there whatever its count, so the estimated
    time left is at most the time to it (a search bounded by both a count and seconds)."""

    def __init__(
        self, total: int, desc: str, enabled: bool | None = None, deadline: float | None = None
    ) -> None:
        self.total, self.desc, self.done = max(int(total), 1), desc, 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._start = self._last = time.perf_counter()
        self.deadline = deadline

    def eta(self, now: float) -> float:
        """Seconds left: the elapsed time scaled by the share of the count left, capped by the deadline."""
        frac = self.done / self.total
        eta = (now - self._start) * (1 - frac) / frac if frac > 0 else float("nan")
        if self.deadline is None:
            return eta
        left = max(self.deadline - now, 0.0)
        return left if math.isnan(eta) else min(eta, left)

    def update(self, k: int = 1) -> None:
        self.done += k
        now = time.perf_counter()
        if self.enabled and (now - self._last > 0.2 or self.done >= self.total):
            self._last = now
            frac = self.done / self.total
            bar = "#" * int(30 * frac)
            sys.stderr.write(
                f"\r{self.desc}: [{bar:<30}] {self.done:,}/{self.total:,} eta {self.eta(now):5.1f}s"
            )
            sys.stderr.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()
