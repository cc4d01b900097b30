"""Box operations of the certified optimal-set search (:mod:`ers_exact.solve.optimal_set`): the bisection
(coordinate choice and cut), cuts at the faces of a root's region, and the depth-first stack."""

from __future__ import annotations

import numpy as np

from ers_exact.solve.box_enclosure import BoxEnclosure
from ers_exact.solve.optimal_set_roots import Roots

__all__ = ["face_cuts", "logit_mean", "pop", "score", "sigmoid", "split"]


def sigmoid(x: np.ndarray) -> np.ndarray:
    """sigma(x) = 1 / (1 + e^-x), elementwise, through tanh (no overflow)."""
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def logit_mean(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """logit((sigma(lo) + sigma(hi)) / 2), stable where both are far below 0."""
    m = np.logaddexp(-np.logaddexp(0.0, -lo), -np.logaddexp(0.0, -hi)) - np.log(2.0)  # log of the mean
    return m - np.log(-np.expm1(np.minimum(m, -1e-300)))


def face_cuts(lo: np.ndarray, hi: np.ndarray, roots: Roots) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each box [P, D]: whether it lies inside a root's region (a box proven to hold only that root), and
    for a box that overlaps one, the face of the region to cut it at (coordinate, position; -1 if none)."""
    P = len(lo)
    inside, k, cut = np.zeros(P, dtype=bool), np.full(P, -1), np.zeros(P)
    if not roots.region_lo or not P:
        return inside, k, cut
    rlo, rhi = np.array(roots.region_lo), np.array(roots.region_hi)  # [R, D]
    meets = np.all((lo[:, None] <= rhi[None]) & (rlo[None] <= hi[:, None]), axis=2)  # [P, R]
    within = np.all((lo[:, None] >= rlo[None]) & (hi[:, None] <= rhi[None]), axis=2)
    inside = within.any(axis=1)
    for p in np.flatnonzero(meets.any(axis=1) & ~inside):
        r = int(np.flatnonzero(meets[p])[0])
        if np.any(hi[p] - lo[p] > 4 * (rhi[r] - rlo[r])):  # cut at a face only once the box is that small
            continue
        w = np.maximum(hi[p] - lo[p], 1e-300)
        below = np.where((rlo[r] > lo[p]) & (rlo[r] < hi[p]), (rlo[r] - lo[p]) / w, -1.0)
        above = np.where((rhi[r] < hi[p]) & (rhi[r] > lo[p]), (hi[p] - rhi[r]) / w, -1.0)
        d_b, d_a = int(np.argmax(below)), int(np.argmax(above))
        if max(below[d_b], above[d_a]) > 0:
            k[p], cut[p] = (d_b, rlo[r, d_b]) if below[d_b] >= above[d_a] else (d_a, rhi[r, d_a])
    return inside, k, cut


def split(
    lo: np.ndarray, hi: np.ndarray, score: np.ndarray, face: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, ...]:
    """Bisect each box [P, D] at the coordinate of highest score, where the probability mass halves (or at
    the given face of a root's region, where ``face`` names one)."""
    P = len(lo)
    k = np.argmax(score, axis=1)
    rows = np.arange(P)
    a, b = lo[rows, k], hi[rows, k]
    upper = a + b >= 0
    cut = np.where(upper, -logit_mean(-b, -a), logit_mean(a, b))
    w = b - a
    cut = np.where((w < 8) | ~np.isfinite(cut), 0.5 * (a + b), np.clip(cut, a + 1e-3 * w, b - 1e-3 * w))
    if face is not None:
        forced = face[0] >= 0
        k = np.where(forced, face[0], k)
        cut = np.where(forced, face[1], cut)
    left_hi, right_lo = hi.copy(), lo.copy()
    left_hi[rows, k], right_lo[rows, k] = cut, cut
    return np.concatenate([lo, right_lo]), np.concatenate([left_hi, hi])


def score(enc: BoxEnclosure, lo: np.ndarray, hi: np.ndarray, power: float = 0.5) -> np.ndarray:
    """Per coordinate (i, tau, a): the ranges of pi(a | tau) and pi(r | tau) over the box, weighted by the square
    root of the largest probability of reaching tau (a history that play hardly reaches hardly moves J or
    anyone's Q; measured: the weight itself closes dectiger H=2 in 37 boxes but slows two-lever alpha 0.25 from
    5 s to 99 s, its square root keeps both fast) and by the square root of the coordinate's own range
    sigma(hi) - sigma(lo) (the share of a among {a, r}, the measure ``split`` halves), plus a tie-break by the
    logit width.  # [P, D]

    The own range matters where tau has three or more actions: pi(a | tau) and pi(r | tau) also vary with tau's
    other logits, so a coordinate saturated against r (y_b in [13.9, 62.6] beside y_a in [-6.8, 36.2]) scored
    as high as its sibling, won by its width, and was cut where sigma(y_b) halves, a sliver at ~14.6 that left
    both children as wide as the parent. Measured (benchmarks/test_optimal_set_bench.py, one core): recycling
    H=2 at alpha 0.25 17,551 -> ~2,300 boxes (40 s -> 5 s); the own range itself (no root) cut it to 2,061 but
    took dectiger H=2 from 41 to 71 boxes, its square root 47."""
    parts = []
    pol = enc.policy_bounds(lo, hi)
    weight = enc.history_weight(pol)
    for (l, u), (k, a, r), w in zip(pol, enc.index, weight):
        parts.append(((u - l)[:, k, a] + (u - l)[:, k, r]) * np.maximum(w[:, k], 1e-12) ** power)
    own = np.sqrt(sigmoid(hi) - sigmoid(lo))
    return np.concatenate(parts, axis=1) * own + 1e-9 * np.minimum(hi - lo, 1e6)


def pop(stack_lo: list[np.ndarray], stack_hi: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Take up to n boxes from the top of the stack (depth first: roots, and so L, come early)."""
    lo, hi = stack_lo.pop(), stack_hi.pop()
    if len(lo) > n:
        stack_lo.append(lo[:-n])
        stack_hi.append(hi[:-n])
        lo, hi = lo[-n:], hi[-n:]
    return lo, hi
