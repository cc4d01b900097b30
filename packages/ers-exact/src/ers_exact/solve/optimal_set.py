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
   (:class:`~ers_exact.solve.box_enclosure.BoxEnclosure`); an empty box holds no fixed point;
3. value bound: a box whose upper bound of J is below L - eps holds no fixed point of the optimal set;
4. Krawczyk (:func:`~ers_exact.solve.krawczyk_batch.krawczyk_batch`) on the (epsilon-inflated) box: K(Y) in
   int(Y) proves exactly one fixed point there (a root, with its J enclosed over K(Y); L rises), K(Y) n Y
   empty proves none;
5. otherwise bisect (the coordinate whose action probabilities vary most, cut where the probability mass
   halves).

When no box is left the list is complete: every fixed point with J >= J* - eps is one of the roots, each in
a box proven to hold exactly it (roots whose boxes overlap are merged only after a Krawczyk test on their
hull proves them one). A search stopped by its budget reports ``complete: false`` with the boxes left and
their share of the domain (volume in the logistic measure prod_d (sigma(hi_d) - sigma(lo_d)))."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.transformation import Transformation
from ers_exact.solve.boltzmann import LogitCoordinates, check_temperature, logit_bound
from ers_exact.solve.box_enclosure import BoxEnclosure
from ers_exact.solve.config import OptimalSetConfig, SolverConfig
from ers_exact.solve.equivalence import LogitTies, logit_ties
from ers_exact.solve.fixed_points import FixedPointSet, solve_fixed_points
from ers_exact.solve.krawczyk_batch import NONE, UNIQUE, krawczyk_batch
from ers_exact.solve.newton import newton
from ers_exact.solve.optimal_set_result import CertifiedFixedPoint, OptimalSetResult
from ers_exact.solve.orbit_domain import OrbitDomain, orbit_domain
from ers_exact.util.blas import blas_threads
from ers_exact.util.budget import check_memory
from ers_exact.util.progress import Progress

__all__ = ["CertifiedFixedPoint", "OptimalSetConfig", "OptimalSetResult", "certified_optimal_set"]


@dataclass
class _Roots:
    """Root boxes found so far, each proven to hold exactly one fixed point."""

    lo: list[np.ndarray] = field(default_factory=list)
    hi: list[np.ndarray] = field(default_factory=list)
    J: list[tuple[float, float]] = field(default_factory=list)
    by: list[str] = field(default_factory=list)
    region_lo: list[np.ndarray] = field(default_factory=list)  # a box proven to hold only this root
    region_hi: list[np.ndarray] = field(default_factory=list)
    ambiguous: int = 0  # overlapping root boxes not proven to be one root
    unmapped: int = 0  # images of roots under the relabellings that failed their certificate


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _logit_mean(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """logit((sigma(lo) + sigma(hi)) / 2), stable where both are far below 0."""
    m = np.logaddexp(-np.logaddexp(0.0, -lo), -np.logaddexp(0.0, -hi)) - np.log(2.0)  # log of the mean
    return m - np.log(-np.expm1(np.minimum(m, -1e-300)))


def _face_cuts(lo: np.ndarray, hi: np.ndarray, roots: _Roots) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _split(
    lo: np.ndarray, hi: np.ndarray, score: np.ndarray, face: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, ...]:
    """Bisect each box [P, D] at the coordinate of highest score, where the probability mass halves (or at
    the given face of a root's region, where ``face`` names one)."""
    P = len(lo)
    k = np.argmax(score, axis=1)
    rows = np.arange(P)
    a, b = lo[rows, k], hi[rows, k]
    upper = a + b >= 0
    cut = np.where(upper, -_logit_mean(-b, -a), _logit_mean(a, b))
    w = b - a
    cut = np.where((w < 8) | ~np.isfinite(cut), 0.5 * (a + b), np.clip(cut, a + 1e-3 * w, b - 1e-3 * w))
    if face is not None:
        forced = face[0] >= 0
        k = np.where(forced, face[0], k)
        cut = np.where(forced, face[1], cut)
    left_hi, right_lo = hi.copy(), lo.copy()
    left_hi[rows, k], right_lo[rows, k] = cut, cut
    return np.concatenate([lo, right_lo]), np.concatenate([left_hi, hi])


def _score(enc: BoxEnclosure, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per coordinate (i, tau, a): the ranges of pi(a | tau) and pi(r | tau) over the box, weighted by the square
    root of the largest probability of reaching tau (a history that play hardly reaches hardly moves J or
    anyone's Q; measured: the weight itself closes dectiger H=2 in 37 boxes but slows two-lever alpha 0.25 from
    5 s to 99 s, its square root keeps both fast), plus a tie-break by the logit width.  # [P, D]"""
    parts = []
    pol = enc.policy_bounds(lo, hi)
    weight = enc.history_weight(pol)
    for (l, u), (k, a, r), w in zip(pol, enc.index, weight):
        parts.append(((u - l)[:, k, a] + (u - l)[:, k, r]) * np.sqrt(np.maximum(w[:, k], 1e-12)))
    return np.concatenate(parts, axis=1) + 1e-9 * np.minimum(hi - lo, 1e6)


def _add_root(
    coords: LogitCoordinates,
    roots: _Roots,
    lo: np.ndarray,
    hi: np.ndarray,
    J: tuple[float, float],
    by: str,
    alpha: float,
    region: tuple[np.ndarray, np.ndarray] | None = None,
) -> None:
    """Record a root box unless it overlaps a known one and their hull provably holds a single root."""
    for r in range(len(roots.lo)):
        if np.all(lo <= roots.hi[r]) and np.all(roots.lo[r] <= hi):
            hl, hh = np.minimum(lo, roots.lo[r]), np.maximum(hi, roots.hi[r])
            pad = 1e-3 * (hh - hl) + 1e-12 * np.maximum(1.0, np.abs(hl))
            status, _, _ = krawczyk_batch(coords, (hl - pad)[None], (hh + pad)[None], alpha)
            if status[0] == UNIQUE:
                if J[0] > roots.J[r][0]:  # keep the tighter enclosure of the same root
                    roots.lo[r], roots.hi[r], roots.J[r] = lo, hi, J
                if region is not None and np.sum(region[1] - region[0]) > np.sum(
                    roots.region_hi[r] - roots.region_lo[r]
                ):
                    roots.region_lo[r], roots.region_hi[r] = region
                return
            roots.ambiguous += 1
            break
    roots.lo.append(lo)
    roots.hi.append(hi)
    roots.J.append(J)
    roots.by.append(by)
    roots.region_lo.append(lo if region is None else region[0])
    roots.region_hi.append(hi if region is None else region[1])


def _certify_candidates(
    coords: LogitCoordinates,
    enc: BoxEnclosure,
    ys: np.ndarray,
    alpha: float,
    cfg: OptimalSetConfig,
    roots: _Roots,
    by: str = "candidate",
) -> int:
    """Krawczyk boxes around the solver's points: the largest radius that proves a single fixed point (its
    box is then excluded from the search), and a small one for the enclosure of J; returns how many were
    certified."""
    region: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for r in sorted(cfg.certify_radii, reverse=True):
        todo = np.array([k for k in range(len(ys)) if k not in region], dtype=np.int64)
        if not todo.size:
            break
        rad = r * np.maximum(1.0, np.abs(ys[todo]))
        status, _, _ = krawczyk_batch(coords, ys[todo] - rad, ys[todo] + rad, alpha)
        for k in todo[status == UNIQUE]:
            rk = r * np.maximum(1.0, np.abs(ys[k]))
            region[int(k)] = (ys[k] - rk, ys[k] + rk)
    if not region:
        return 0
    sel = np.array(sorted(region))
    rad = 1e-9 * np.maximum(1.0, np.abs(ys[sel]))
    status, klo, khi = krawczyk_batch(coords, ys[sel] - rad, ys[sel] + rad, alpha)
    klo = np.where((status == UNIQUE)[:, None], klo, np.array([region[k][0] for k in sel]))
    khi = np.where((status == UNIQUE)[:, None], khi, np.array([region[k][1] for k in sel]))
    _, _, jlo, jhi = enc(klo, khi, alpha)
    for n, k in enumerate(sel):
        _add_root(coords, roots, klo[n], khi[n], (float(jlo[n]), float(jhi[n])), by, alpha, region[k])
    return len(sel)


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
    check_memory(
        f"optimal-set search on {tree.game.name} H={tree.game.horizon} (--max-boxes {cfg.max_boxes:,})",
        cfg.max_boxes * 24.0 * max(D, 1) + cfg.batch * coords.derivatives.bytes_per_policy(True) * 8,
        "lower --max-boxes",
    )
    found = candidates or solve_fixed_points(
        tree, alpha, solver or SolverConfig(complete_search=False, certify=False, progress=cfg.progress)
    )
    enc = BoxEnclosure(coords)
    roots = _Roots()
    ys = np.array([p.y for p in found.points], dtype=float).reshape(len(found.points), D)
    n_cert = _certify_candidates(coords, enc, ys, alpha, cfg, roots) if D else len(ys)
    B = logit_bound(tree, alpha)
    ties = logit_ties(tree) if cfg.tie_equivalent and D else LogitTies.none()
    domain = orbit_domain(tree, relabellings) if cfg.orbit_domain and D else None

    def contract(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = ties.contract(lo, hi, alpha)  # every fixed point has |y_p - y_q| <= slack
        return domain.contract(lo, hi) if domain is not None else (lo, hi)  # ... and an image in Delta

    pruned = {"empty": 0, "value": 0, "krawczyk_none": 0, "root": 0}
    boxes, left_lo, left_hi = 0, np.zeros((0, D)), np.zeros((0, D))
    if D == 0:  # one policy: it is the only fixed point
        y0 = np.zeros((1, 0))
        J0 = float(coords.evaluate(y0, alpha, jacobian=False).J[0])
        roots = _Roots([np.zeros(0)], [np.zeros(0)], [(J0, J0)], ["candidate"])
    else:
        best = max((j[0] for j in roots.J), default=-np.inf)
        stack_lo, stack_hi = [np.full((1, D), -B)], [np.full((1, D), B)]
        deadline = start + cfg.max_seconds
        with Progress(cfg.max_boxes, f"optimal set {tree.game.name} alpha={alpha:g}", cfg.progress) as bar:
            while stack_lo and boxes < cfg.max_boxes and time.perf_counter() < deadline:
                lo, hi = _pop(stack_lo, stack_hi, cfg.batch)
                boxes += len(lo)
                bar.update(len(lo))
                lo, hi, best = _process(coords, enc, lo, hi, alpha, cfg, roots, best, pruned, contract)
                inside, face_k, face_cut = _face_cuts(lo, hi, roots)
                pruned["root"] += int(inside.sum())
                lo, hi = lo[~inside], hi[~inside]
                if len(lo):
                    face = (face_k[~inside], face_cut[~inside])
                    lo, hi = _split(lo, hi, _score(enc, lo, hi), face)
                    stack_lo.append(lo)
                    stack_hi.append(hi)
        if stack_lo:
            left_lo, left_hi = np.concatenate(stack_lo), np.concatenate(stack_hi)
        if domain is not None:
            _map_roots(coords, enc, domain, alpha, cfg, roots)
    reductions = _describe(ties, domain)
    return _result(
        tree, coords, alpha, cfg, roots, found, n_cert, boxes, left_lo, left_hi, pruned, B, start, reductions
    )


def _pop(stack_lo: list[np.ndarray], stack_hi: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Take up to n boxes from the top of the stack (depth first: roots, and so L, come early)."""
    lo, hi = stack_lo.pop(), stack_hi.pop()
    if len(lo) > n:
        stack_lo.append(lo[:-n])
        stack_hi.append(hi[:-n])
        lo, hi = lo[-n:], hi[-n:]
    return lo, hi


def _process(
    coords: LogitCoordinates,
    enc: BoxEnclosure,
    lo: np.ndarray,
    hi: np.ndarray,
    alpha: float,
    cfg: OptimalSetConfig,
    roots: _Roots,
    best: float,
    pruned: dict[str, int],
    contract: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, float]:
    """Contract, prune and test one batch of boxes; returns the boxes still undecided and the new L."""
    lo, hi = contract(lo, hi)
    empty = np.any(lo > hi, axis=1)
    pruned["empty"] += int(empty.sum())
    lo, hi = lo[~empty], hi[~empty]
    for _ in range(cfg.contract_rounds):
        if not len(lo):
            break
        mlo, mhi, _, jhi = enc(lo, hi, alpha)
        nlo, nhi = contract(np.maximum(lo, mlo), np.minimum(hi, mhi))
        empty = np.any(nlo > nhi, axis=1)
        low = ~empty & (jhi < best - cfg.eps)
        pruned["empty"] += int(empty.sum())
        pruned["value"] += int(low.sum())
        keep = ~(empty | low)
        shrink = np.sum(nhi - nlo, axis=1) / np.maximum(np.sum(hi - lo, axis=1), 1e-300)
        lo, hi = nlo[keep], nhi[keep]
        if not len(lo) or np.all(shrink[keep] > 0.95):
            break
    small = np.all(hi - lo < cfg.krawczyk_width, axis=1)
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
                    _add_root(
                        coords, roots, klo[u], khi[u], (float(jlo[k]), float(jhi[k])), "search", alpha, box
                    )
                    best = max(best, float(jlo[k]))
        pruned["root"] += int(uniq.size)
        pruned["krawczyk_none"] += int(np.sum(status == NONE))
        done = np.zeros(len(lo), dtype=bool)
        done[idx[status != 0]] = True
        und = status == 0
        lo[idx[und]] = np.maximum(lo[idx[und]], klo[und])  # K(Y') holds every fixed point of Y
        hi[idx[und]] = np.minimum(hi[idx[und]], khi[und])
        empty = np.any(lo > hi, axis=1)
        pruned["empty"] += int(np.sum(empty & ~done))
        lo, hi = lo[~(done | empty)], hi[~(done | empty)]
    return lo, hi, best


def _map_roots(
    coords: LogitCoordinates,
    enc: BoxEnclosure,
    domain: OrbitDomain,
    alpha: float,
    cfg: OptimalSetConfig,
    roots: _Roots,
) -> None:
    """List phi^{-1}(r) for every root r that may be optimal and every relabelling phi, each certified."""
    best = max((j[0] for j in roots.J), default=-np.inf)
    keep = [r for r in range(len(roots.lo)) if roots.J[r][1] >= best - cfg.eps]
    y = np.array([0.5 * (roots.lo[r] + roots.hi[r]) for r in keep]).reshape(len(keep), coords.dim)
    ys = domain.images(coords, y)
    roots.unmapped += len(ys) - _certify_candidates(coords, enc, ys, alpha, cfg, roots, "orbit")


def _describe(ties: LogitTies, domain: OrbitDomain | None) -> tuple[str, ...]:
    out = [f"{len(ties)} logit coordinate(s) tied to equivalent last-stage histories"] if len(ties) else []
    if domain is not None:
        out.append(
            f"fundamental domain of {len(domain.inverses)} relabelling(s): agent {domain.agent}'s first-action "
            f"probabilities sorted on {list(domain.orbit)}; roots mapped back and certified"
        )
    return tuple(out)


def _result(
    tree: HistoryTree,
    coords: LogitCoordinates,
    alpha: float,
    cfg: OptimalSetConfig,
    roots: _Roots,
    found: FixedPointSet,
    n_cert: int,
    boxes: int,
    left_lo: np.ndarray,
    left_hi: np.ndarray,
    pruned: dict[str, int],
    B: float,
    start: float,
    reductions: tuple[str, ...] = (),
) -> OptimalSetResult:
    D = coords.dim
    best_lo = max((j[0] for j in roots.J), default=-np.inf)
    best_hi = max((j[1] for j in roots.J), default=-np.inf)
    keep = [r for r in range(len(roots.lo)) if roots.J[r][1] >= best_lo - cfg.eps]
    points = []
    if keep:
        mid = np.array([0.5 * (roots.lo[r] + roots.hi[r]) for r in keep]).reshape(len(keep), D)
        y, _ = (
            newton(coords, mid, alpha, SolverConfig().newton_settings, logit_bound(tree, alpha))
            if D
            else (mid, None)
        )
        for k, r in enumerate(keep):
            if D and not (np.all(y[k] >= roots.lo[r]) and np.all(y[k] <= roots.hi[r])):
                y[k] = mid[k]
        ev = coords.evaluate(y, alpha, jacobian=False)
        res = coords.residual(y, alpha, image=ev.values) if D else np.zeros(len(keep))
        pols = coords.to_policy(y)
        for k, r in enumerate(keep):
            points.append(
                CertifiedFixedPoint(
                    policy=tuple(p[k : k + 1] for p in pols),
                    y=y[k],
                    box_lo=roots.lo[r],
                    box_hi=roots.hi[r],
                    J=float(ev.J[k]),
                    J_lo=roots.J[r][0],
                    J_hi=roots.J[r][1],
                    residual=float(res[k]),
                    optimal=bool(roots.J[r][1] >= best_lo - cfg.eps),
                    found_by=roots.by[r],
                )
            )
    points.sort(key=lambda p: -p.J)
    n_left = len(left_lo)
    if n_left:
        width = np.clip(_sigmoid(left_hi) - _sigmoid(left_lo), 1e-300, 1.0)
        total = np.clip(_sigmoid(np.array(B)) - _sigmoid(np.array(-B)), 1e-300, 1.0)
        volume = float(np.exp(np.log(width).sum(axis=1) - D * np.log(total)).sum())
    else:
        volume = 0.0
    complete = n_left == 0 and roots.ambiguous == 0 and roots.unmapped == 0 and bool(points)
    region = f"|y_d| <= B/alpha = {B:.6g} for all {D} logit coordinates (every fixed point lies there)"
    if complete:
        note = (
            f"certified complete: every fixed point with J >= J* - {cfg.eps:g} is listed "
            f"({len(points)} point(s), {boxes:,} boxes)"
        )
    else:
        why = [f"{n_left:,} box(es) left unexplored (volume share {volume:.3g})"] if n_left else []
        why += [f"{roots.ambiguous} overlapping root boxes not proven distinct"] if roots.ambiguous else []
        why += [f"{roots.unmapped} image(s) of roots not certified"] if roots.unmapped else []
        why += ["no certified fixed point"] if not points else []
        note = f"NOT proven complete after {boxes:,} boxes: " + "; ".join(why)
    return OptimalSetResult(
        game=tree.game.name,
        horizon=tree.game.horizon,
        alpha=float(alpha),
        eps=cfg.eps,
        points=tuple(points),
        J_star_lo=float(best_lo),
        J_star_hi=float(best_hi) if complete else float("inf"),
        complete=complete,
        region=region,
        boxes=boxes,
        boxes_left=n_left,
        volume_left=volume,
        pruned=pruned,
        candidates=len(found.points),
        candidates_certified=n_cert,
        seconds=time.perf_counter() - start,
        note=note,
        config=cfg,
        reductions=reductions,
    )
