"""Pi*_alpha proven complete: a certified branch-and-bound for every Boltzmann fixed point whose expected
return is within eps of the best, J(pi) >= J*_alpha - eps (paper: Pi*_alpha = argmax_{pi in Pi^alpha} J(pi),
the set that Phi_ER is defined against).

Domain: every fixed point pi = F(pi) has full support and logits |y| <= B / alpha
(:func:`~ers_exact.solve.boltzmann.logit_bound`), so the box Y_0 = [-B / alpha, B / alpha]^D holds them all.
Method (per batch of boxes, numpy over the batch):

1. candidates: :func:`~ers_exact.solve.fixed_points.solve_fixed_points` (multistart + continuation); each is
   certified by a Krawczyk test on a small box around it, and the best certified lower bound of J over
   those boxes is L <= J*_alpha;
2. contraction: Y <- Y n M(Y) (every fixed point in Y is in M(Y)), M enclosed in probability space
   (:class:`~ers_exact.solve.box_enclosure.BoxEnclosure`; rounds after the first only on the boxes that still
   shrink); an empty box holds no fixed point. Proven reductions contract it further: ties of equivalent
   last-stage histories (:mod:`~ers_exact.solve.equivalence`), a fundamental domain of the given relabellings
   (:mod:`~ers_exact.solve.orbit_domain`) and of last-stage relabellings per component of histories
   (:mod:`~ers_exact.solve.local_symmetry`), and the root boxes of closed blocks of last-stage logits, each
   enumerated once on its own (:mod:`~ers_exact.solve.closed_blocks`);
3. value bound: a box whose upper bound of J is below L - eps holds no fixed point of the optimal set;
4. Krawczyk (:func:`~ers_exact.solve.krawczyk_batch.krawczyk_batch`) on the (epsilon-inflated) box: K(Y) in
   int(Y) proves exactly one fixed point there (a root, with its J enclosed over K(Y); L rises), K(Y) n Y
   empty proves none;
5. otherwise bisect (the coordinate whose action probabilities vary most, cut where the probability mass
   halves);
6. incumbent: Newton from the centres of the boxes with the highest J bound
   (:func:`~ers_exact.solve.optimal_set_roots.newton_from_boxes`), each root certified before it raises L (the
   candidates may miss the optimum: three-lever at alpha 0.25).

When no box is left the list is complete: every fixed point with J >= J* - eps is one of the roots, each in
a box proven to hold exactly it (roots whose boxes overlap are merged only after a Krawczyk test on their
hull proves them one). A search stopped by its budget reports ``complete: false`` with the boxes left and
their share of the domain (volume in the logistic measure prod_d (sigma(hi_d) - sigma(lo_d)))."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.transformation import Transformation
from ers_exact.solve.boltzmann import LogitCoordinates, check_temperature, logit_bound
from ers_exact.solve.box_enclosure import BoxEnclosure
from ers_exact.solve.closed_blocks import ClosedBlocks, closed_blocks
from ers_exact.solve.config import OptimalSetConfig, SolverConfig
from ers_exact.solve.equivalence import LogitTies, logit_ties
from ers_exact.solve.fixed_points import FixedPointSet, solve_fixed_points
from ers_exact.solve.local_symmetry import LocalDomain, local_domain
from ers_exact.solve.optimal_set_pool import search_pool
from ers_exact.solve.optimal_set_result import CertifiedFixedPoint, OptimalSetResult, build_result
from ers_exact.solve.optimal_set_roots import Roots, certify_candidates, map_roots
from ers_exact.solve.optimal_set_step import Contraction, SearchState, process_batch
from ers_exact.solve.orbit_domain import OrbitDomain, orbit_domain
from ers_exact.util.blas import blas_threads
from ers_exact.util.budget import check_memory
from ers_exact.util.progress import Progress

__all__ = ["CertifiedFixedPoint", "OptimalSetConfig", "OptimalSetResult", "certified_optimal_set"]


def certified_optimal_set(
    tree: HistoryTree,
    alpha: float,
    config: OptimalSetConfig | None = None,
    solver: SolverConfig | None = None,
    candidates: FixedPointSet | None = None,
    relabellings: Sequence[Transformation] = (),
) -> OptimalSetResult:
    """Every Boltzmann fixed point with J >= J*_alpha - eps, each certified, and a proof that the list is
    complete where the search finishes within its budget (see module docstring). ``candidates``: a
    :class:`FixedPointSet` already computed at this alpha (else ``solve_fixed_points`` runs with ``solver``).
    ``relabellings``: exact Dec-POMDP symmetries (Phi_MDP's action parts, e.g. ``decpomdp_group(game).policy_parts``);
    the search then explores a fundamental domain of them (:mod:`~ers_exact.solve.orbit_domain`)."""
    cfg = config or OptimalSetConfig()
    with blas_threads(1):
        return _run(tree, alpha, cfg, solver, candidates, relabellings)


def _run(
    tree: HistoryTree,
    alpha: float,
    cfg: OptimalSetConfig,
    solver: SolverConfig | None,
    candidates: FixedPointSet | None,
    relabellings: Sequence[Transformation] = (),
) -> OptimalSetResult:
    start = time.perf_counter()
    check_temperature(tree, alpha)
    coords = LogitCoordinates(tree)
    D = coords.dim
    boxes = cfg.max_boxes * 24.0 * max(D, 1)
    batches = cfg.workers * cfg.batch * coords.derivatives.bytes_per_policy(True) * 8  # a batch per worker
    check_memory(
        f"optimal-set search on {tree.game.name} H={tree.game.horizon} (--max-boxes {cfg.max_boxes:,}, "
        f"--workers {cfg.workers})",
        boxes + batches,
        "lower --workers" if batches > boxes else "lower --max-boxes",
    )
    found = candidates or solve_fixed_points(
        tree, alpha, solver or SolverConfig(complete_search=False, certify=False, progress=cfg.progress)
    )
    enc = BoxEnclosure(coords)
    roots = Roots()
    ys = np.array([p.y for p in found.points], dtype=float).reshape(len(found.points), D)
    n_cert = certify_candidates(coords, enc, ys, alpha, cfg, roots) if D else len(ys)
    B = logit_bound(tree, alpha)
    ties = logit_ties(tree) if cfg.tie_equivalent and D else LogitTies.none()
    domain = orbit_domain(tree, relabellings) if cfg.orbit_domain and D else None
    local = local_domain(tree) if cfg.local_domain and D else None
    deadline = start + cfg.max_seconds  # the search: closed blocks, then the branch-and-bound
    blocks = closed_blocks(coords, enc, alpha, B, deadline) if cfg.closed_blocks and D else None

    contract = Contraction(alpha, ties, domain, local, blocks)
    left_lo, left_hi = np.zeros((0, D)), np.zeros((0, D))
    st = SearchState(D, B, roots, max((j[0] for j in roots.J), default=-np.inf), start)
    if D == 0:  # one policy: it is the only fixed point
        y0 = np.zeros((1, 0))
        J0 = float(coords.evaluate(y0, alpha, jacobian=False).J[0])
        roots = st.roots = Roots([np.zeros(0)], [np.zeros(0)], [(J0, J0)], ["candidate"])
    else:
        desc = f"optimal set {tree.game.name} alpha={alpha:g}"
        with Progress(cfg.max_boxes, desc, cfg.progress, deadline) as bar:  # stops at max_boxes or deadline
            if cfg.workers > 1:
                search_pool(coords, enc, alpha, cfg, contract, st, deadline, bar.update)
            else:
                while st.stack_lo and st.boxes < cfg.max_boxes and time.perf_counter() < deadline:
                    lo, hi = st.pop(cfg.batch)
                    bar.update(len(lo))
                    lo, hi, jhi, st.best = process_batch(
                        coords, enc, lo, hi, alpha, cfg, roots, st.best, st.pruned, contract, st.gate
                    )
                    st.after_batch(coords, enc, lo, hi, jhi, alpha, cfg)
        left_lo, left_hi = st.left()
        if domain is not None or local is not None:  # the listing of images: max_seconds again at most
            map_roots(coords, enc, domain, alpha, cfg, roots, local, time.perf_counter() + cfg.max_seconds)
    reductions = _describe(ties, domain, local, blocks)
    return build_result(
        tree,
        coords,
        alpha,
        cfg,
        roots,
        found,
        n_cert,
        st.boxes,
        left_lo,
        left_hi,
        st.pruned,
        B,
        start,
        reductions,
    )


def _describe(
    ties: LogitTies, domain: OrbitDomain | None, local: LocalDomain | None, blocks: ClosedBlocks | None
) -> tuple[str, ...]:
    out = [f"{len(ties)} logit coordinate(s) tied to equivalent last-stage histories"] if len(ties) else []
    if domain is not None:
        out.append(
            f"fundamental domain of {len(domain.inverses)} relabelling(s): agent {domain.agent}'s first-action "
            f"probabilities sorted on {list(domain.orbit)}; roots mapped back and certified"
        )
    if local is not None:
        out.append(
            f"last-stage relabellings on {len(local)} component(s) of histories: each sorted at one history; "
            "optimal roots' orbits listed and certified"
        )
    if blocks is not None:
        out.append(
            f"{len(blocks)} closed block(s) of last-stage logits solved on their own ({blocks.n_roots} root "
            "boxes); every box contracted to them"
        )
    return tuple(out)
