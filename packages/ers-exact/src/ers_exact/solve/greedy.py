"""The simplex-aware greedy bound shared by :mod:`ers_exact.solve.box_enclosure` and
:mod:`ers_exact.solve.stage_bound`: max sum_a p_a v_a over lo <= p <= hi, sum_a p_a = 1 (fill the lower bounds, give
the remaining mass to the largest v first), outward rounded, and its use for the expectation over several
agents' action distributions (contracted one agent at a time: valid, and tight for the last agent)."""

from __future__ import annotations

import numpy as np

from ers_exact.util.ulp import next_up

__all__ = ["expect_bounds", "expect_upper", "greedy_max"]

_EPS = np.finfo(float).eps
_TINY = np.finfo(float).tiny
#: up to this many actions the greedy order comes from pairwise comparisons (faster than argsort there)
_PAIRWISE = 4


_up = next_up  # np.nextafter(x, +inf), the same bits, faster


def greedy_max(v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """An upper bound (rounded up) of max sum_a p_a v_a over lo <= p <= hi, sum_a p_a = 1, along the last
    axis (lo, hi broadcast to v's shape; the set must hold some distribution, as it does when lo and hi
    enclose the policies of a box).  # [...]"""
    lo, hi = np.broadcast_to(lo, v.shape), np.broadcast_to(hi, v.shape)
    A = v.shape[-1]
    c = np.where(hi > 0, v, np.inf).min(axis=-1, keepdims=True)  # actions with p = 0 do not count
    c = np.where(np.isfinite(c), c, 0.0)
    w = np.where(hi > 0, np.maximum(_up(v - c), 0.0), 0.0)  # >= 0: extra mass can only add
    if A <= _PAIRWISE:  # the greedy order by pairwise comparison (w descending, ties by index): no sort
        ws, ls, cap = w, lo, np.maximum(hi - lo, 0.0)
        before = np.zeros(v.shape)
        later = np.arange(A)
        for b in range(A):
            wb = w[..., b : b + 1]
            before += np.where((wb > w) | ((wb == w) & (b < later)), cap[..., b : b + 1], 0.0)
    else:
        order = np.argsort(-w, axis=-1)
        ws = np.take_along_axis(w, order, axis=-1)
        ls = np.take_along_axis(lo, order, axis=-1)
        cap = np.maximum(np.take_along_axis(hi, order, axis=-1) - ls, 0.0)
        before = np.cumsum(cap, axis=-1) - cap
    lsum = ls.sum(axis=-1)
    mass = np.maximum(1.0 - lsum + (A + 2) * _EPS * (1.0 + lsum), 0.0)
    alloc = np.clip(mass[..., None] - before, 0.0, cap)
    with np.errstate(invalid="ignore"):
        terms = ls * ws + alloc * ws
        total = terms.sum(axis=-1)
        err = 4 * (A + 2) * _EPS * (np.abs(terms).sum(axis=-1) + ws.max(axis=-1) * (mass + cap.sum(-1)))
    out = _up(_up(c[..., 0] + total + err) + _EPS * np.abs(c[..., 0]) + _TINY)
    return np.where(np.isnan(out), np.inf, out)


def expect_bounds(
    vlo: np.ndarray, vhi: np.ndarray, bounds: list[tuple[np.ndarray, np.ndarray]], axes: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Enclosure of sum over the given action axes of prod_j pi^j(a_j) v (agents contracted one at a time,
    last axis first); ``bounds[k]`` are the (lo, hi) of the agent on ``axes[k]``, shaped to broadcast."""
    for (l, u), ax in sorted(zip(bounds, axes), key=lambda x: -x[1]):
        vl, vh = np.moveaxis(vlo, ax, -1), np.moveaxis(vhi, ax, -1)
        ll, uu = np.moveaxis(l, ax, -1), np.moveaxis(u, ax, -1)
        vhi = np.expand_dims(greedy_max(vh, ll, uu), ax)  # the contracted axis kept, of size 1
        vlo = np.expand_dims(-greedy_max(-vl, ll, uu), ax)
    return vlo, vhi


def expect_upper(vhi: np.ndarray, bounds: list[tuple[np.ndarray, np.ndarray]], axes: list[int]) -> np.ndarray:
    """The upper half of :func:`expect_bounds` alone (the same greedy steps on ``vhi``)."""
    for (l, u), ax in sorted(zip(bounds, axes), key=lambda x: -x[1]):
        vh = np.moveaxis(vhi, ax, -1)
        vhi = np.expand_dims(greedy_max(vh, np.moveaxis(l, ax, -1), np.moveaxis(u, ax, -1)), ax)
    return vhi
