"""The vertices the held-agent stage bound enumerates (``solve/stage_bound.py``): the greedy fills over
``fill_orders`` reach every vertex the fills over all A! orders reach (and nothing else), checked against that
enumeration and against the polytope's definition."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_exact.solve.stage_bound import fill_orders, polytope_vertices


def _fills(lo: np.ndarray, hi: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """The greedy fill of each order, one at a time: lo, then the remaining mass up to hi in that order."""
    out = []
    for order in orders:
        p, mass = lo.copy(), 1.0 - lo.sum()
        for a in order:
            add = min(max(mass, 0.0), hi[a] - lo[a])
            p[a] += add
            mass -= add
        out.append(p)
    return np.array(out)


def _box(rng: np.random.Generator, A: int, width: float) -> tuple[np.ndarray, np.ndarray]:
    """Probability bounds around a random distribution (some of them collapsed), holding a distribution."""
    p = rng.dirichlet(np.ones(A) * 0.5)
    w = rng.exponential(size=A) * width * (rng.random(A) < 0.7)
    return np.maximum(p - w, 0.0), np.minimum(p + w, 1.0)


def test_fill_orders_counts() -> None:
    assert [len(fill_orders(A)) for A in range(1, 6)] == [1, 2, 6, 24, 80]
    for A in range(1, 6):  # each row is an order of all A actions
        assert np.array_equal(
            np.sort(fill_orders(A), axis=1), np.tile(np.arange(A), (len(fill_orders(A)), 1))
        )


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), A=st.integers(2, 5), width=st.sampled_from([1e-3, 0.1, 0.5, 2.0]))
def test_fill_orders_reach_every_vertex(seed: int, A: int, width: float) -> None:
    rng = np.random.default_rng(seed)
    lo, hi = _box(rng, A, width)
    every = _fills(lo, hi, np.array(list(itertools.permutations(range(A)))))
    got = polytope_vertices(lo[None], hi[None])[0]  # [V, A]
    assert np.allclose(got, _fills(lo, hi, fill_orders(A)), atol=1e-12)
    gap = np.abs(every[:, None, :] - got[None, :, :]).max(axis=2)  # [A!, V]
    assert gap.min(axis=1).max() <= 1e-12  # every fill of every order is one of them ...
    assert gap.min(axis=0).max() <= 1e-12  # ... and each of them is such a fill
    assert np.all(got >= lo - 1e-12) and np.all(got <= hi + 1e-12)
    assert np.allclose(got.sum(axis=1), 1.0, atol=1e-12)
