"""One-ulp outward rounding of float64 arrays: ``np.nextafter(x, -inf)`` and ``np.nextafter(x, +inf)``,
bit for bit, about 4x faster.

``np.nextafter`` calls libm once per element (~15 ns each here); the interval arithmetic of the certificates
and of the certified search widens every product, sum and quotient by it, so it was a third of their time.
For a finite nonzero float the neighbour is one step of its IEEE 754 bit pattern read as an integer: towards
-inf that is ``bits - 1`` for x > 0 and ``bits + 1`` for x < 0 (the sign bit makes the int64 negative), and the
opposite towards +inf: ``bits -/+ s`` with ``s = (bits >> 63) | 1`` (+1 or -1). The integer step is wrong only for
+-0, +-inf, NaN inputs and the largest float towards the infinity beyond it; each of these has a non-finite
input or lands on a non-finite result, and those few elements are handed to ``np.nextafter`` itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["next_down", "next_up"]


def _step(x: Any, toward: float) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0:  # a scalar: nothing to vectorise
        return np.nextafter(x, toward)
    bits = x.view(np.int64)
    out = np.right_shift(bits, 63)
    out |= 1  # +1 for x >= +0, -1 for x <= -0 (and negative NaNs)
    if toward < 0:
        np.subtract(bits, out, out=out)
    else:
        out += bits
    res = out.view(np.float64)
    finite = np.isfinite(res)
    finite &= np.isfinite(x)  # a NaN's payload can step onto a number (-1 + 1 = +0.0)
    if not finite.all():
        odd = ~finite
        with np.errstate(all="ignore"):  # as np.nextafter(x, +-inf) on these elements (no warning there)
            res[odd] = np.nextafter(x[odd], toward)
    return res


def next_down(x: Any) -> np.ndarray:
    """The largest float64 below each element of ``x`` (``np.nextafter(x, -np.inf)``, the same bits)."""
    return _step(x, -np.inf)


def next_up(x: Any) -> np.ndarray:
    """The smallest float64 above each element of ``x`` (``np.nextafter(x, np.inf)``, the same bits)."""
    return _step(x, np.inf)
