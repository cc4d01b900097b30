"""The optimal-set search over a pool of worker processes (``OptimalSetConfig.workers`` > 1, ``optimal-set
--workers N``): each worker contracts, prunes and Krawczyk-tests one batch of boxes at a time
(:func:`~ers_exact.solve.optimal_set_step.process_batch`, the serial search's own step); this process keeps the
stack, the roots and the incumbent L, and merges the batches' results in the order it sent them.

Workers start from a clean interpreter (the ``forkserver`` start method where the system has it, else
``spawn``), never by forking this process: a process that has loaded torch or JAX runs native threads, and a
fork of it can deadlock (JAX warns so; pytest runs the deep and exact tests in one process). Each worker gets
the search's structures once, pickled (the coordinates and enclosures of the history tree, the contraction of
the proven reductions: tens to hundreds of KB on the games here); a batch travels as its boxes, the current L
and the Krawczyk gate's decision, and comes back as the boxes left undecided, their J bounds, the roots found
(each added here by :func:`~ers_exact.solve.optimal_set_roots.add_root`, which merges overlapping boxes only
where a Krawczyk test on their hull proves one root) and the counts of each test. With ``workers`` batches in
flight the search leaves strict depth-first order, so box counts differ from the serial search's; the set
proven is the same (every box is still closed only by a test that proves it holds no other fixed point of the
optimal set). Runs are deterministic for a given ``workers``: results are merged first-sent first, and L
travels with each batch as it stood when the batch was sent. Starting the workers costs about a second.
As with any non-fork start method, a script that calls this at import time must guard its entry point with
``if __name__ == "__main__":`` (each worker imports the main module; Python then raises a RuntimeError that
says so); the ``ers-exact`` command, notebooks and pytest need nothing."""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import numpy as np

from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.box_enclosure import BoxEnclosure
from ers_exact.solve.config import OptimalSetConfig
from ers_exact.solve.optimal_set_roots import Roots, add_root
from ers_exact.solve.optimal_set_step import Contract, FixedGate, SearchState, new_counts, process_batch
from ers_exact.util.blas import blas_threads

__all__ = ["search_pool"]

#: what a worker needs besides its batch: set once in each worker by :func:`_start`
_SHARED: dict[str, Any] = {}


def _start(state: dict[str, Any]) -> None:
    """A worker's initializer: keep the search's structures (pickled once per worker)."""
    _SHARED.update(state)


def _context() -> multiprocessing.context.BaseContext:
    """A start method that never forks this process: forkserver where available, else spawn."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


BatchResult = tuple[
    np.ndarray, np.ndarray, np.ndarray, float, list[tuple[Any, ...]], dict[str, int], tuple[int, int]
]


def _work(lo: np.ndarray, hi: np.ndarray, best: float, gate_open: bool) -> BatchResult:
    """One batch in a worker: :func:`process_batch` with roots recorded apart (returned, not kept)."""
    s = _SHARED
    roots, gate, pruned = Roots(), FixedGate(is_open=gate_open), new_counts()
    with blas_threads(1):
        lo, hi, jhi, best = process_batch(
            s["coords"], s["enc"], lo, hi, s["alpha"], s["cfg"], roots, best, pruned, s["contract"], gate
        )
    found = [
        (roots.lo[r], roots.hi[r], roots.J[r], roots.by[r], (roots.region_lo[r], roots.region_hi[r]))
        for r in range(len(roots.lo))
    ]
    return lo, hi, jhi, best, found, pruned, (gate.tried, gate.helped)


def _merge(coords: LogitCoordinates, alpha: float, st: SearchState, result: BatchResult) -> tuple[Any, ...]:
    """Add a worker's roots, L and counts to the search; returns its undecided boxes and their J bounds."""
    lo, hi, jhi, best, found, pruned, (tried, helped) = result
    for rlo, rhi, J, by, region in found:
        add_root(coords, st.roots, rlo, rhi, J, by, alpha, region)
    st.best = max(st.best, best)
    for k, v in pruned.items():
        st.pruned[k] += v
    st.gate.tried += tried
    st.gate.helped += helped
    return lo, hi, jhi


#: the smallest batch a worker is sent while the stack is short (a narrow frontier is shared out)
MIN_SHARE = 16


def _share(st: SearchState, cfg: OptimalSetConfig, busy: int) -> int:
    """How many boxes to send next: a full batch where the stack holds enough for every idle worker, else an
    even share of what it holds (at least :data:`MIN_SHARE`)."""
    idle = cfg.workers - busy
    held = sum(len(x) for x in st.stack_lo)
    return min(cfg.batch, max(MIN_SHARE, -(-held // idle)))


def search_pool(
    coords: LogitCoordinates,
    enc: BoxEnclosure,
    alpha: float,
    cfg: OptimalSetConfig,
    contract: Contract,
    st: SearchState,
    deadline: float,
    progress: Callable[[int], object] = lambda n: None,
) -> None:
    """Run the branch-and-bound of ``st`` with ``cfg.workers`` processes until its stack is empty, ``max_boxes``
    boxes were sent or ``deadline`` (a ``time.perf_counter()`` value) passed; batches in flight then are
    finished and their undecided boxes left on the stack. ``progress(n)``: called with each batch's size."""
    state = {"coords": coords, "enc": enc, "alpha": alpha, "cfg": cfg, "contract": contract}
    inflight: deque[Future[BatchResult]] = deque()
    with ProcessPoolExecutor(
        cfg.workers, mp_context=_context(), initializer=_start, initargs=(state,)
    ) as pool:
        while st.stack_lo or inflight:
            while (
                st.stack_lo
                and len(inflight) < cfg.workers
                and st.boxes < cfg.max_boxes
                and time.perf_counter() < deadline
            ):
                lo, hi = st.pop(_share(st, cfg, len(inflight)))
                progress(len(lo))
                inflight.append(pool.submit(_work, lo, hi, st.best, st.gate.open()))
            if not inflight:
                break
            lo, hi, jhi = _merge(coords, alpha, st, inflight.popleft().result())
            st.after_batch(coords, enc, lo, hi, jhi, alpha, cfg)
