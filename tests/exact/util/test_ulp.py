"""``next_down`` / ``next_up`` (the bit-pattern step) against ``np.nextafter`` itself, bit for bit: random
bit patterns (every class of float64: normal, subnormal, +-0, +-inf, NaNs with any payload), the edges by
name, scalars and strided views."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ers_exact.util.ulp import next_down, next_up

FINFO = np.finfo(np.float64)
EDGES = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, FINFO.max, -FINFO.max, FINFO.tiny, -FINFO.tiny,
     FINFO.smallest_subnormal, -FINFO.smallest_subnormal, 1.0, -1.0, 2.0, -2.0, 0.5, 1.0 + FINFO.eps]
)  # fmt: skip
STEPS = [(next_down, -np.inf), (next_up, np.inf)]


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.all(a.view(np.int64) == b.view(np.int64)))


@pytest.mark.parametrize(("step", "toward"), STEPS)
def test_edges_equal_nextafter(step, toward) -> None:
    with np.errstate(all="ignore"):
        assert _same_bits(step(EDGES), np.nextafter(EDGES, toward))


def test_patterns_around_every_class_boundary_equal_nextafter() -> None:
    """Every pattern within 3 of a boundary between float classes (sign, zero, subnormal, normal, inf, NaN) or of
    the int64 wrap-around, where an integer step could cross from one class into another."""
    edges = [0, 1, 2**52, 0x7FEFFFFFFFFFFFFF, 0x7FF0000000000000, 0x7FF8000000000000, 2**63 - 1]
    edges = [e for b in edges for e in (b, b - 2**63, -b)] + [-1, -(2**63)]
    bits = np.array(
        sorted({e + d for e in edges for d in range(-3, 4) if -(2**63) <= e + d < 2**63}), np.int64
    )
    for step, toward in STEPS:
        with np.errstate(all="ignore"):
            assert _same_bits(step(bits.view(np.float64)), np.nextafter(bits.view(np.float64), toward))


@settings(max_examples=200, deadline=None)
@given(bits=hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(-(2**63), 2**63 - 1)))
def test_random_bit_patterns_equal_nextafter(bits: np.ndarray) -> None:
    x = bits.view(np.float64)
    for step, toward in STEPS:
        with np.errstate(all="ignore"):
            assert _same_bits(step(x), np.nextafter(x, toward))


@settings(max_examples=100, deadline=None)
@given(x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=5)))
def test_any_shape_and_scalars_equal_nextafter(x: np.ndarray) -> None:
    for step, toward in STEPS:
        with np.errstate(all="ignore"):
            assert _same_bits(step(x), np.nextafter(x, toward))
            if x.ndim == 2:  # a strided view
                assert _same_bits(step(x[:, ::2]), np.nextafter(x[:, ::2], toward))


def test_the_input_is_left_alone_and_the_step_is_one_ulp() -> None:
    x = np.array([1.0, -3.0, 0.0])
    down, up = next_down(x), next_up(x)
    assert np.array_equal(x, [1.0, -3.0, 0.0])
    assert np.all(down < x) and np.all(up > x)
    assert down[0] == 1.0 - FINFO.eps / 2 and up[0] == 1.0 + FINFO.eps
    assert float(next_up(1.0)) == 1.0 + FINFO.eps
