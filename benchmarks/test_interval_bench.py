"""The outward rounding and interval products under the certificates: ``util.ulp.next_down`` (the bit-pattern
step) against ``np.nextafter``, and ``IArray.__mul__`` (its point and nonnegative short cuts) against the plain
four-corner hull rounded by ``np.nextafter`` (``tests/exact/solve/reference_interval.py``), on 2M-element arrays, measured in the same run. Ratio =
reference seconds / fast seconds; both must give the same bits."""

from __future__ import annotations

import numpy as np
import pytest

from ers_exact.solve.interval_array import IArray
from ers_exact.util.ulp import next_down
from tests.exact.solve.reference_interval import corner_hull

N = 2_000_000


def _operands(kind: str) -> tuple[IArray, IArray]:
    rng = np.random.default_rng(0)
    lo = rng.standard_normal(N)
    a = IArray(lo, lo + rng.random(N))
    if kind == "point":
        return a, IArray(rng.standard_normal(N))
    p = rng.random(N)
    if kind == "nonnegative":
        return IArray(np.abs(lo), np.abs(lo) + 1.0), IArray(p, p + 0.1)
    return a, IArray(p - 0.5, p)


def _report(benchmark, what: str, reference: float) -> None:
    fast = benchmark.stats.stats.min
    benchmark.extra_info.update(operation=what, elements=N, reference_seconds=reference, fast_seconds=fast,
                                speedup=reference / fast)  # fmt: skip
    print(
        f"\n{what}, {N:,} elements: {fast * 1e3:.1f} ms, reference {reference * 1e3:.1f} ms ({reference / fast:.1f}x)"
    )


def test_next_down_vs_nextafter(benchmark, best_of) -> None:
    x = np.random.default_rng(1).standard_normal(N)
    reference = best_of(lambda: np.nextafter(x, -np.inf))
    got = benchmark(next_down, x)
    assert np.array_equal(got.view(np.int64), np.nextafter(x, -np.inf).view(np.int64))
    _report(benchmark, "next_down", reference)


@pytest.mark.parametrize("kind", ["point", "nonnegative", "mixed"])
def test_interval_product_vs_four_corner_hull(benchmark, best_of, kind: str) -> None:
    a, b = _operands(kind)
    reference = best_of(lambda: corner_hull(a.lo, a.hi, b.lo, b.hi))
    got = benchmark(lambda: a * b)
    lo, hi = corner_hull(a.lo, a.hi, b.lo, b.hi)
    assert np.array_equal(got.lo.view(np.int64), lo.view(np.int64))
    assert np.array_equal(got.hi.view(np.int64), hi.view(np.int64))
    _report(benchmark, f"interval product ({kind})", reference)
