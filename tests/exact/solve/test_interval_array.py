"""The interval product of :class:`ers_exact.solve.interval_array.IArray` (its point and nonnegative short cuts)
against the plain four-corner hull rounded by ``np.nextafter``, bit for bit, and against the exact rational
product (fractions.Fraction): point factors, nonnegative ones, mixed signs, zeros against infinities,
broadcasting."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_exact.solve.interval_array import IArray
from tests.exact.solve.reference_interval import corner_hull

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 2.5, -3e300, 5e-324, 1e308, 0.1])


def _interval(rng: np.random.Generator, shape: tuple[int, ...], kind: str) -> tuple[np.ndarray, np.ndarray]:
    if kind == "special":
        a, b = rng.choice(SPECIAL, shape), rng.choice(SPECIAL, shape)
    elif kind == "nonnegative":
        a = np.abs(rng.standard_normal(shape)) * (rng.random(shape) > 0.2)
        b = a + np.where(rng.random(shape) < 0.1, np.inf, np.abs(rng.standard_normal(shape)))
    else:
        a = rng.standard_normal(shape) * rng.choice([1.0, 1e300, 1e-300], shape)
        b = a + np.abs(rng.standard_normal(shape))
    return np.minimum(a, b), np.maximum(a, b)


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).view(np.int64)


KINDS = st.sampled_from(["special", "nonnegative", "general"])


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kinds=st.tuples(KINDS, KINDS), point=st.sampled_from([0, 1, 2]))
def test_product_equals_the_four_corner_hull_bit_for_bit(seed: int, kinds, point: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
    a_lo, a_hi = _interval(rng, shape, kinds[0])
    b_lo, b_hi = _interval(rng, shape[1:] if rng.random() < 0.3 else shape, kinds[1])
    a = IArray(a_lo) if point == 1 else IArray(a_lo, a_hi)  # IArray(x): a point, lo is hi
    b = IArray(b_lo) if point == 2 else IArray(b_lo, b_hi)
    with np.errstate(all="ignore"):
        got = a * b
        want = corner_hull(a.lo, a.hi, b.lo, b.hi)
    assert np.array_equal(_bits(got.lo), _bits(want[0])) and np.array_equal(_bits(got.hi), _bits(want[1]))


@settings(max_examples=200, deadline=None)
@given(
    x=st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)).map(sorted),
    y=st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)).map(sorted),
    f=st.floats(-1e3, 1e3),
)
def test_product_encloses_the_exact_rational_products(x, y, f) -> None:
    prod = IArray(np.array([x[0]]), np.array([x[1]])) * IArray(np.array([y[0]]), np.array([y[1]]))
    scaled = f * IArray(np.array([x[0]]), np.array([x[1]]))
    for u in x:
        assert Fraction(scaled.lo[0]) <= Fraction(f) * Fraction(u) <= Fraction(scaled.hi[0])
        for v in y:
            exact = Fraction(u) * Fraction(v)
            assert Fraction(prod.lo[0]) <= exact <= Fraction(prod.hi[0])
