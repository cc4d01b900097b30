"""One batch of the certified optimal-set search (:mod:`ers_exact.solve.optimal_set`) and the bookkeeping around
it: :func:`process_batch` contracts, prunes and Krawczyk-tests a batch of boxes; :class:`SearchState` holds the
stack of boxes, the roots, the incumbent L and the counts, and after each batch runs the incumbent search, the
cuts at root regions and the bisection (:meth:`SearchState.after_batch`). The serial search and the pool of
worker processes (:mod:`ers_exact.solve.optimal_set_pool`) share both."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.box_enclosure import BoxEnclosure
from ers_exact.solve.closed_blocks import ClosedBlocks
from ers_exact.solve.config import OptimalSetConfig
from ers_exact.solve.equivalence import LogitTies
from ers_exact.solve.krawczyk_batch import NONE, UNIQUE, krawczyk_batch
from ers_exact.solve.local_symmetry import LocalDomain
from ers_exact.solve.optimal_set_boxes import face_cuts, pop, score, split
from ers_exact.solve.optimal_set_roots import Roots, add_root, newton_from_boxes
from ers_exact.solve.orbit_domain import OrbitDomain

__all__ = ["Contraction", "FixedGate", "KrawczykGate", "SearchState", "new_counts", "process_batch"]

Contract = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Contraction:
    """The proven reductions as one contraction of boxes [P, D] (a plain object: worker processes get it
    pickled): ties of equivalent last-stage histories, then the fundamental domains of the relabellings
    and of the last-stage components, then the closed blocks' roots."""

    alpha: float
    ties: LogitTies
    domain: OrbitDomain | None = None
    local: LocalDomain | None = None
    blocks: ClosedBlocks | None = None

    def __call__(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.ties.contract(lo, hi, self.alpha)  # every fixed point has |y_p - y_q| <= slack
        # ... and an image in Delta, sorted at the last stage, at a closed block's root
        for reduction in (self.domain, self.local, self.blocks):
            if reduction is not None:
                lo, hi = reduction.contract(lo, hi)
        return lo, hi


def new_counts() -> dict[str, int]:
    """Boxes closed by each test, all zero: ``empty`` (contraction), ``value`` (J bound), ``krawczyk_none``,
    ``root`` (a root proven, or inside a root's region)."""
    return {"empty": 0, "value": 0, "krawczyk_none": 0, "root": 0}


@dataclass
class KrawczykGate:
    """Whether the Krawczyk test is worth its cost on wide boxes (max logit width >= :attr:`WIDE`): it always
    runs on narrower ones; on wide ones while it decided or shrank at least 1% of the first
    :attr:`TRIAL` of them, else on every :attr:`EVERY`-th batch only (measured: on recycling H=2 at alpha 0.25
    it never helped a wide box and took 12% of the time; on three-lever it proves wide boxes empty). Only
    the order of work changes: a box it skips is split, never discarded."""

    WIDE: ClassVar[float] = 4.0
    TRIAL: ClassVar[int] = 256
    EVERY: ClassVar[int] = 16
    tried: int = 0
    helped: int = 0
    calls: int = 0

    def open(self) -> bool:
        self.calls += 1
        return self.tried < self.TRIAL or self.helped >= 0.01 * self.tried or self.calls % self.EVERY == 0

    def record(self, wide: np.ndarray, helped: np.ndarray) -> None:
        self.tried += int(wide.sum())
        self.helped += int((wide & helped).sum())


def process_batch(
    coords: LogitCoordinates,
    enc: BoxEnclosure,
    lo: np.ndarray,
    hi: np.ndarray,
    alpha: float,
    cfg: OptimalSetConfig,
    roots: Roots,
    best: float,
    pruned: dict[str, int],
    contract: Contract,
    gate: KrawczykGate | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Contract, prune and test one batch of boxes; returns the boxes still undecided, an upper bound of J
    over each, and the new L."""
    lo, hi = contract(lo, hi)
    empty = np.any(lo > hi, axis=1)
    pruned["empty"] += int(empty.sum())
    lo, hi = lo[~empty], hi[~empty]
    bound = np.full(len(lo), np.inf)
    alive = np.ones(len(lo), dtype=bool)
    active = alive.copy()  # boxes that shrank by more than 5% in the last round (M depends on Y only)
    for rnd in range(cfg.contract_rounds):
        idx = np.flatnonzero(active)
        if not idx.size or (rnd and idx.size < cfg.contract_min):  # a few: their children contract on
            break
        exact = rnd < cfg.exact_rounds
        held = exact or enc.held.orders <= cfg.held_orders  # the held-agent bound where it is cheap
        mlo, mhi, _, jhi = enc(lo[idx], hi[idx], alpha, exact, held)
        nlo, nhi = contract(np.maximum(lo[idx], mlo), np.minimum(hi[idx], mhi))
        empty = np.any(nlo > nhi, axis=1)
        low = ~empty & (jhi < best - cfg.eps)
        pruned["empty"] += int(empty.sum())
        pruned["value"] += int(low.sum())
        shrink = np.sum(nhi - nlo, axis=1) / np.maximum(np.sum(hi[idx] - lo[idx], axis=1), 1e-300)
        lo[idx], hi[idx], bound[idx] = nlo, nhi, np.minimum(bound[idx], jhi)
        alive[idx[empty | low]] = False
        active[idx] = ~(empty | low) & (shrink <= 0.95)
    lo, hi, bound = lo[alive], hi[alive], bound[alive]
    width = (hi - lo).max(axis=1, initial=0.0)
    small = width < cfg.krawczyk_width
    wide = width >= KrawczykGate.WIDE
    if gate is not None and not gate.open():
        small &= ~wide
    idx = np.flatnonzero(small)
    if idx.size:
        w = hi[idx] - lo[idx]
        pad = 0.02 * w + 1e-10 * np.maximum(1.0, np.abs(lo[idx]) + np.abs(hi[idx]))
        status, klo, khi = krawczyk_batch(coords, lo[idx] - pad, hi[idx] + pad, alpha)
        uniq = np.flatnonzero(status == UNIQUE)
        if uniq.size:
            _, _, jlo, jhi = enc(klo[uniq], khi[uniq], alpha)
            for k, u in enumerate(uniq):
                if jhi[k] >= best - cfg.eps:
                    box = (lo[idx[u]] - pad[u], hi[idx[u]] + pad[u])
                    add_root(
                        coords, roots, klo[u], khi[u], (float(jlo[k]), float(jhi[k])), "search", alpha, box
                    )
                    best = max(best, float(jlo[k]))
        pruned["root"] += int(uniq.size)
        pruned["krawczyk_none"] += int(np.sum(status == NONE))
        done = np.zeros(len(lo), dtype=bool)
        done[idx[status != 0]] = True
        und = status == 0
        if gate is not None:
            before = np.sum(hi[idx] - lo[idx], axis=1)
            after = np.sum(np.minimum(hi[idx], khi) - np.maximum(lo[idx], klo), axis=1)
            gate.record(wide[idx], (status != 0) | (after < 0.95 * before))
        lo[idx[und]] = np.maximum(lo[idx[und]], klo[und])  # K(Y') holds every fixed point of Y
        hi[idx[und]] = np.minimum(hi[idx[und]], khi[und])
        empty = np.any(lo > hi, axis=1)
        pruned["empty"] += int(np.sum(empty & ~done))
        left = ~(done | empty)
        lo, hi, bound = lo[left], hi[left], bound[left]
    return lo, hi, bound, best


@dataclass
class FixedGate(KrawczykGate):
    """The gate's decision for one batch made elsewhere (a worker process gets it from the search's
    :class:`KrawczykGate`); its counts (``record``) are then added to that gate."""

    is_open: bool = True

    def open(self) -> bool:
        return self.is_open


@dataclass
class SearchState:
    """The branch-and-bound's state: the stack of boxes (depth first), the roots found, the incumbent L
    (``best``), boxes examined, the counts of each pruning test, the Krawczyk gate and the incumbent search's
    seconds and misses (it backs off while it finds nothing better)."""

    D: int
    B: float
    roots: Roots
    best: float
    start: float = field(default_factory=time.perf_counter)
    stack_lo: list[np.ndarray] = field(default_factory=list)
    stack_hi: list[np.ndarray] = field(default_factory=list)
    boxes: int = 0
    batches: int = 0
    spent: float = 0.0
    misses: int = 0
    pruned: dict[str, int] = field(default_factory=new_counts)
    gate: KrawczykGate = field(default_factory=KrawczykGate)

    def __post_init__(self) -> None:
        if not self.stack_lo:
            self.stack_lo, self.stack_hi = [np.full((1, self.D), -self.B)], [np.full((1, self.D), self.B)]

    def pop(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to n boxes from the top of the stack, counted as examined."""
        lo, hi = pop(self.stack_lo, self.stack_hi, n)
        self.boxes += len(lo)
        return lo, hi

    def after_batch(
        self,
        coords: LogitCoordinates,
        enc: BoxEnclosure,
        lo: np.ndarray,
        hi: np.ndarray,
        jhi: np.ndarray,
        alpha: float,
        cfg: OptimalSetConfig,
    ) -> None:
        """The boxes a batch left undecided (``jhi`` their J bounds): the incumbent search from the most
        promising ones (now and then), boxes inside a root's region dropped, the rest bisected (at a root
        region's face where one cuts them) and pushed."""
        self.batches += 1
        if (
            cfg.newton_boxes
            and len(lo)
            and self.batches % 2 ** min(self.misses, 6) == 0  # back off while it finds nothing better
            and self.spent <= cfg.newton_share * (time.perf_counter() - self.start)
        ):
            t0 = time.perf_counter()
            before = self.best
            if newton_from_boxes(coords, enc, lo, hi, jhi, alpha, cfg, self.roots, self.B):
                self.best = max([self.best, *(j[0] for j in self.roots.J)])
            self.misses = 0 if self.best > before else self.misses + 1
            self.spent += time.perf_counter() - t0
        inside, face_k, face_cut = face_cuts(lo, hi, self.roots)
        self.pruned["root"] += int(inside.sum())
        lo, hi = lo[~inside], hi[~inside]
        if len(lo):
            face = (face_k[~inside], face_cut[~inside])
            lo, hi = split(lo, hi, score(enc, lo, hi, cfg.reach_power), face)
            self.stack_lo.append(lo)
            self.stack_hi.append(hi)

    def left(self) -> tuple[np.ndarray, np.ndarray]:
        """The boxes still on the stack, [n, D] each."""
        if not self.stack_lo:
            return np.zeros((0, self.D)), np.zeros((0, self.D))
        return np.concatenate(self.stack_lo), np.concatenate(self.stack_hi)
