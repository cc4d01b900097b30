"""The interval product as first written (all four corner products stacked, 0 * inf read as 0, one ulp outward
by ``np.nextafter``): the reference that :class:`ers_exact.solve.interval_array.IArray`'s product must equal bit
for bit (tests) and is timed against (benchmarks)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["corner_hull"]


def corner_hull(a_lo: Any, a_hi: Any, b_lo: Any, b_hi: Any) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] of the product of the intervals [a_lo, a_hi] and [b_lo, b_hi] (numpy broadcasting)."""
    with np.errstate(invalid="ignore", over="ignore"):
        c = np.stack(np.broadcast_arrays(a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi))
    c = np.where(np.isnan(c), 0.0, c)
    return np.nextafter(c.min(axis=0), -np.inf), np.nextafter(c.max(axis=0), np.inf)
