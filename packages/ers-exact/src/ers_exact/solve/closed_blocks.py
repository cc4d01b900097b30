"""Closed blocks of last-stage logits, each solved on its own, for the certified optimal-set search
(:mod:`ers_exact.solve.optimal_set`).

Take a component C of the last stage's local histories (:func:`~ers_exact.solve.local_symmetry.components`:
histories joined where a joint node holds both). Call C *closed* when every history tau in C meets a single
tuple of the other agents' histories: all nodes n with tau^i(n) = tau have the same tau^j(n) for every j.
Then agent i's belief at tau is c(n) prod_j reach^j(n) normalised over those nodes, and the reaches, equal
on all of them, cancel: Q^i(tau, .) = sum_n c(n) G(n, ., pi^-i(tau^-i(n))) / sum_n c(n) depends on the others'
policies at C's histories only (the last stage earns its immediate reward; nothing follows). So the logits S of
C's histories satisfy a closed system y_S = M_S(y_S), whatever the other logits.

Its fixed points are enumerated once, by a small certified subdivision (contraction by the probability-space
enclosure of M_S, the Krawczyk test on the S x S block, :func:`~ers_exact.solve.krawczyk_batch.krawczyk_batch`
with ``subset``; the other logits pinned at 0, on which M_S does not depend): every fixed point of the whole
game then has y_S in one of the root boxes, so the main search contracts the S part of each box to the hull of
its intersections with them (none: the box is empty). A block whose subdivision does not finish within its
budget is not used. Found: three-lever (9 blocks of 4 logits: after the first round each history tells both
agents the whole past), two-lever."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.box_enclosure import BoxEnclosure
from ers_exact.solve.derivatives import coordinate_index
from ers_exact.solve.krawczyk_batch import UNIQUE, krawczyk_batch
from ers_exact.solve.local_symmetry import components
from ers_exact.solve.optimal_set_boxes import logit_mean

__all__ = ["ClosedBlock", "ClosedBlocks", "closed_blocks", "closed_components"]

#: boxes examined at most per block
MAX_BLOCK_BOXES = 4000
#: the Krawczyk test runs on a block's boxes narrower than this (logits)
KRAWCZYK_WIDTH = 2.0
#: blocks of at most this many logits are solved
MAX_BLOCK_DIM = 8


@dataclass(frozen=True)
class ClosedBlock:
    """One closed block: its coordinates and boxes [R, |S|] that hold every fixed point of y_S = M_S(y_S),
    each proven to hold exactly one."""

    coords: np.ndarray
    roots_lo: np.ndarray
    roots_hi: np.ndarray


@dataclass(frozen=True)
class ClosedBlocks:
    blocks: tuple[ClosedBlock, ...]

    def __len__(self) -> int:
        return len(self.blocks)

    @property
    def n_roots(self) -> int:
        return sum(len(b.roots_lo) for b in self.blocks)

    def contract(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The S part of each box [P, D] becomes the hull of its intersections with the block's root boxes
        (lo = inf where there is none: the box holds no fixed point)."""
        lo, hi = lo.copy(), hi.copy()
        for b in self.blocks:
            slo, shi = lo[:, b.coords], hi[:, b.coords]  # [P, S]
            ilo = np.maximum(slo[:, None], b.roots_lo[None])  # [P, R, S]
            ihi = np.minimum(shi[:, None], b.roots_hi[None])
            meets = np.all(ilo <= ihi, axis=2)  # [P, R]
            any_ = meets.any(axis=1)
            nlo = np.where(meets[..., None], ilo, np.inf).min(axis=1)
            nhi = np.where(meets[..., None], ihi, -np.inf).max(axis=1)
            lo[:, b.coords] = np.where(any_[:, None], nlo, np.inf)
            hi[:, b.coords] = np.where(any_[:, None], nhi, -np.inf)
        return lo, hi


def closed_components(tree: HistoryTree) -> list[np.ndarray]:
    """The logit coordinates of every closed component of the last stage (module docstring); none for H = 1
    (the last stage is the first, where every history meets every other)."""
    if len(tree.layers) < 2:
        return []
    loc = tree.layers[-1].local  # [N, n]
    n = loc.shape[1]
    index = coordinate_index(tree)
    coords = LogitCoordinates(tree)
    out = []
    for hists in components(tree):
        closed = True
        for i, hist in enumerate(hists):
            for h in hist:
                rows = loc[loc[:, i] == h]
                if any(len(np.unique(rows[:, j])) > 1 for j in range(n) if j != i):
                    closed = False
                    break
            if not closed:
                break
        if not closed:
            continue
        cols = [
            coords.slices[i].start + np.flatnonzero(np.isin(index[i][0], hist))
            for i, hist in enumerate(hists)
        ]
        block = np.concatenate(cols).astype(np.int64)
        if 0 < len(block) <= MAX_BLOCK_DIM:
            out.append(block)
    return out


def closed_blocks(
    coords: LogitCoordinates,
    enc: BoxEnclosure,
    alpha: float,
    bound: float,
    deadline: float | None = None,
) -> ClosedBlocks | None:
    """Every closed block's fixed points, enumerated (module docstring); None when no block finished. At
    ``deadline`` (a ``time.perf_counter()`` value) the enumeration stops: blocks not finished by then are left
    to the search, as those whose box budget ran out."""
    found = _enumerate(coords, enc, closed_components(coords.tree), alpha, bound, deadline)
    out = [ClosedBlock(b, np.array(lo), np.array(hi)) for b, (lo, hi) in found if lo]
    return ClosedBlocks(tuple(out)) if out else None


def _enumerate(
    coords: LogitCoordinates,
    enc: BoxEnclosure,
    blocks: list[np.ndarray],
    alpha: float,
    bound: float,
    deadline: float | None = None,
) -> list[tuple[np.ndarray, tuple[list[np.ndarray], list[np.ndarray]]]]:
    """Per block, root boxes covering every fixed point of y_S = M_S(y_S) in |y_S| <= bound (empty lists where
    its budget or the time ran out). The blocks' boxes share the batches: each row is one block's box, the other
    logits 0."""
    D = coords.dim
    stack = [(b, np.full(len(s), -bound), np.full(len(s), bound)) for b, s in enumerate(blocks)]
    found: list[list[tuple[np.ndarray, ...]]] = [[] for _ in blocks]
    count = np.zeros(len(blocks), dtype=np.int64)
    failed = np.zeros(len(blocks), dtype=bool)
    while stack:
        if deadline is not None and time.perf_counter() > deadline:  # unfinished blocks: left to the search
            failed[[x[0] for x in stack]] = True
            break
        take, stack = stack[-128:], stack[:-128]
        take = [x for x in take if not failed[x[0]]]
        which = np.array([x[0] for x in take], dtype=np.int64)
        np.add.at(count, which, 1)
        failed |= count > MAX_BLOCK_BOXES
        lo, hi = np.zeros((len(take), D)), np.zeros((len(take), D))
        mask = np.zeros((len(take), D), dtype=bool)
        for r, (b, a, z) in enumerate(take):
            lo[r, blocks[b]], hi[r, blocks[b]], mask[r, blocks[b]] = a, z, True
        alive = np.ones(len(take), dtype=bool)
        active = alive.copy()
        for _ in range(8):  # contraction y_S in M_S(Y), only on the block's own logits, while they shrink
            idx = np.flatnonzero(active)
            if not idx.size:
                break
            mlo, mhi, _, _ = enc(lo[idx], hi[idx], alpha, False, False)
            nlo = np.where(mask[idx], np.maximum(lo[idx], mlo), lo[idx])
            nhi = np.where(mask[idx], np.minimum(hi[idx], mhi), hi[idx])
            empty = np.any(nlo > nhi, axis=1)
            shrink = np.sum(nhi - nlo, axis=1) / np.maximum(np.sum(hi[idx] - lo[idx], axis=1), 1e-300)
            lo[idx], hi[idx] = nlo, nhi
            alive[idx[empty]] = False
            active[idx] = ~empty & (shrink <= 0.95)
        for b in np.unique(which[alive]):
            rows = np.flatnonzero(alive & (which == b))
            s = blocks[b]
            w = hi[rows][:, s] - lo[rows][:, s]
            pad = np.zeros((len(rows), D))
            pad[:, s] = 0.02 * w + 1e-10 * np.maximum(1.0, np.abs(lo[rows][:, s]) + np.abs(hi[rows][:, s]))
            narrow = w.max(axis=1) < KRAWCZYK_WIDTH  # wider: split without testing (it fails there)
            status = np.zeros(len(rows), dtype=np.int64)
            klo, khi = lo[rows] - pad, hi[rows] + pad
            if narrow.any():
                n = np.flatnonzero(narrow)
                status[n], klo[n], khi[n] = krawczyk_batch(coords, klo[n], khi[n], alpha, subset=s)
            for k in np.flatnonzero(status == UNIQUE):
                _add(found[b], klo[k, s], khi[k, s], lo[rows[k], s] - pad[k, s], hi[rows[k], s] + pad[k, s])
            for k in np.flatnonzero(status == 0):  # undecided (NONE: no fixed point; UNIQUE: recorded)
                a = np.maximum(lo[rows[k], s], klo[k, s])  # K(Y) holds every fixed point of Y
                z = np.minimum(hi[rows[k], s], khi[k, s])
                if np.any(a > z):
                    continue
                d = int(np.argmax(z - a))
                cut = _cut(a[d], z[d])
                left_hi, right_lo = z.copy(), a.copy()
                left_hi[d], right_lo[d] = cut, cut
                stack += [(int(b), a, left_hi), (int(b), right_lo, z)]
    return [
        (blocks[b], ([], []) if failed[b] else ([f[0] for f in found[b]], [f[1] for f in found[b]]))
        for b in range(len(blocks))
    ]


def _add(
    found: list[tuple[np.ndarray, ...]], klo: np.ndarray, khi: np.ndarray, ylo: np.ndarray, yhi: np.ndarray
) -> None:
    """Record the root in K = [klo, khi], proven the only one in Y = [ylo, yhi] (K inside Y). A root already
    recorded whose Y holds this K, or whose K lies in this Y, is the same root (each Y holds one): keep the
    intersection of the two K's."""
    for n, (a, b, c, d) in enumerate(found):
        if (np.all(c <= klo) and np.all(khi <= d)) or (np.all(ylo <= a) and np.all(b <= yhi)):
            found[n] = (np.maximum(a, klo), np.minimum(b, khi), c, d)
            return
    found.append((klo, khi, ylo, yhi))


def _cut(a: float, b: float) -> float:
    """Where to bisect [a, b]: the midpoint, or on a wide interval (>= 8 logits) where the probability mass
    sigma halves (as the main search does)."""
    if b - a < 8:
        return 0.5 * (a + b)
    lo, hi = np.array([a]), np.array([b])
    cut = float(-logit_mean(-hi, -lo)[0] if a + b >= 0 else logit_mean(lo, hi)[0])
    return min(max(cut, a + 1e-3 * (b - a)), b - 1e-3 * (b - a)) if np.isfinite(cut) else 0.5 * (a + b)
