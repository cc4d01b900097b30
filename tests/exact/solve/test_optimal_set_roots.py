"""``Roots.first_overlap`` (the vectorised overlap test of ``add_root``) against the loop it replaced: the
first root box, in the order they were added, that meets a new box, over random boxes, growing stacks and
boxes replaced by ``set_box``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_exact.solve.optimal_set_roots import Roots


def first_overlap_loop(roots: Roots, lo: np.ndarray, hi: np.ndarray) -> int | None:
    """The reference: ``add_root``'s loop before it was vectorised."""
    for r in range(len(roots.lo)):
        if np.all(lo <= roots.hi[r]) and np.all(roots.lo[r] <= hi):
            return r
    return None


def random_box(rng: np.random.Generator, D: int) -> tuple[np.ndarray, np.ndarray]:
    lo = rng.integers(0, 6, size=D).astype(float)  # a coarse grid: boxes that touch, nest and miss
    return lo, lo + rng.integers(0, 3, size=D)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), D=st.integers(0, 4), n=st.integers(0, 40))
def test_first_overlap_equals_the_loop(seed: int, D: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    roots = Roots()
    for _ in range(n):
        lo, hi = random_box(rng, D)
        assert roots.first_overlap(lo, hi) == first_overlap_loop(roots, lo, hi)
        if roots.lo and rng.random() < 0.3:  # a tighter enclosure replaces a known box
            r = int(rng.integers(len(roots.lo)))
            roots.set_box(r, lo, hi)
        else:
            roots.lo.append(lo)
            roots.hi.append(hi)


def test_a_box_that_meets_none_and_boxes_meeting_on_one_face() -> None:
    roots = Roots([np.array([0.0, 0.0]), np.array([2.0, 2.0])], [np.array([1.0, 1.0]), np.array([3.0, 3.0])])
    assert roots.first_overlap(np.array([1.5, 0.0]), np.array([1.8, 5.0])) is None  # between them in x
    assert roots.first_overlap(np.array([1.0, 1.0]), np.array([2.0, 2.0])) == 0  # touches both: the first
    assert roots.first_overlap(np.array([2.5, 0.0]), np.array([2.6, 2.0])) == 1
    assert Roots().first_overlap(np.zeros(2), np.ones(2)) is None
