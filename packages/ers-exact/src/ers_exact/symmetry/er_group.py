"""Phi_ER as a permutation group given by generators and order, found without listing its elements.

Paper, Definition "Expected Return Symmetries": Phi_ER = {phi in Psi | for all pi in Pi*_alpha:
phi(pi) in Pi*_alpha}. State permutations act trivially on policies, so Phi_ER = S_{|S|} x H with H its
policy part, and when Pi*_alpha is finite, H is the setwise stabiliser of Pi*_alpha among the admissible
(DESIGN.md) elements of Psi_pol = prod_i S_{|A^i|} x S_{|O^i|}. Here the pool Pi' replaces Pi*_alpha:

    H(Pi') = {phi in Psi_pol admissible : phi(Pi') = Pi'},

a group whatever the pool (the exhaustive :func:`~ers_exact.symmetry.er.er_symmetries` lists instead the
phi with phi(Pi') inside the optimal fixed points, which is the same set exactly when no such phi maps a
pool point outside the pool -- in particular when Pi' is all of Pi*_alpha).

Algorithm (a subgroup search along a base, as in Schreier-Sims / Leon's backtrack). Base: every label point
in the order of :mod:`~ers_exact.symmetry.er_search`; H_k = the elements of H fixing points 0..k-1.
Level by level from the last point to the first, with every H_j (j > k) known by generators:

1. start from the known elements of H_k: the generators found at levels >= k and the strong generators of
   a seed subgroup (Phi_MDP's policy parts: Phi_MDP <= Phi_ER, paper appendix) that fix 0..k-1;
2. for each point gamma of k's block outside the orbit of k under them, search for one h in H_k with
   h(k) = gamma (:class:`~ers_exact.symmetry.er_search.Searcher`); found: add h, recompute the orbit; none:
   the whole orbit of gamma under the known part of H_k is excluded.

At the end the orbit of k under the generators is the orbit under H_k, so the generators of levels >= k
generate H_k, and |H| = the product of the orbit lengths -- checked against sympy's Schreier-Sims order of
the generators. A search that runs out of its node or time budget stops at its level: the result is then
a *lower bound*, H >= <generators>, with H_{k+1} exact (``stopped_at``), and says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.transformation import Transformation, apply_to_log_policy, apply_to_policy
from ers_exact.symmetry.er_search import MATCH_TOL, SearchBudgetError, Searcher, pool_orbits, pool_permutation
from ers_exact.symmetry.er_test import ERTest, log_pool_of
from ers_exact.symmetry.mdp_group import format_order
from ers_exact.symmetry.policy_points import from_points, label_orbits, point_orbit, to_points
from ers_exact.util.errors import InputError
from ers_exact.util.progress import Progress

__all__ = ["ERGroup", "ERGroupBudgetError", "er_group", "label_orbits"]


@dataclass(frozen=True)
class ERGroup:
    """H(Pi'), the policy part of Phi_ER w.r.t. a pool, by ``generators`` (identity on states) and order.

    ``complete``: the search finished, so ``order_on_policies`` = |H| exactly (the product of the basic
    ``orbit_lengths``); else it is the order of the group the generators generate, a lower bound, and
    ``stopped_at`` names the base point whose level was unfinished (H_{stopped_at + 1} is exact)."""

    game: str
    alpha: float
    J_star: float
    n_states: int
    sizes: tuple[tuple[int, int], ...]  # (|A^i|, |O^i|) per agent
    pool_size: int
    pool_complete: bool  # the solver certified its optimal set complete
    generators: tuple[Transformation, ...] = field(repr=False)
    n_seeds: int  # generators taken from the seed subgroup (Phi_MDP's policy parts)
    orbit_lengths: tuple[int, ...]  # per base point (1 where the level was not finished)
    order_on_policies: int
    complete: bool
    stopped_at: int | None
    pool_orbits: tuple[tuple[int, ...], ...]
    nodes: int  # backtrack nodes over all searches
    rejected: int  # full assignments that matched the pool within MATCH_TOL but failed the exact ER test
    seconds: float
    tol: float

    def order(self) -> int:
        """|Phi_ER| as a subgroup of Psi: |S|! * |H| (a lower bound unless ``complete``)."""
        return math.factorial(self.n_states) * self.order_on_policies

    @cached_property
    def _group(self) -> Any:
        from sympy.combinatorics import Permutation, PermutationGroup

        n = sum(a + o for a, o in self.sizes)
        perms = [Permutation(list(to_points(g))) for g in self.generators]
        return PermutationGroup(perms or [Permutation(list(range(n)))])

    def contains(self, phi: Transformation) -> bool:
        """phi's policy part is in the group the generators generate (sympy's sifting)."""
        from sympy.combinatorics import Permutation

        return bool(self._group.contains(Permutation(list(to_points(phi)))))

    def generated_order(self) -> int:
        """The order of <generators> by sympy's Schreier-Sims: equals ``order_on_policies`` when complete."""
        return int(self._group.order())

    def elements(self, max_elements: int) -> Iterator[Transformation]:
        """Every policy part (identity on states); :class:`ERGroupBudgetError` beyond ``max_elements``."""
        if self.order_on_policies > max_elements:
            raise ERGroupBudgetError(
                f"{self.game}: Phi_ER has {format_order(self.order_on_policies)} policy parts, more than "
                f"--max-elements {max_elements:,} lists (its order, generators and orbits need no list)"
            )
        for perm in self._group.generate_schreier_sims():
            yield from_points(perm.array_form, self.n_states, self.sizes)

    def orbits(self) -> dict[str, list[list[int]]]:
        """Non-trivial orbits of H on each agent's actions and observations."""
        return label_orbits(self.generators, self.sizes)

    def order_text(self) -> str:
        """``432! * 4 (~1.7e953)``: |S|! times the order on policies."""
        return f"{self.n_states}! * {format_order(self.order_on_policies)} ({format_order(self.order())})"

    @property
    def claim(self) -> str:
        """What is proven, in words."""
        n = self.order_text()
        what = (
            "Phi_ER (the pool is all of Pi*_alpha, certified)"
            if self.pool_complete
            else "Phi_ER relative to the pool Pi' of optimal fixed points found (not certified to be all of "
            "Pi*_alpha; a phi mapping a pool point onto an unfound optimal point is not sought)"
        )
        if self.complete:
            return (
                f"{what} = S_|S| x H with H = {{phi admissible : phi(Pi') = Pi'}} = <{len(self.generators)} "
                f"generators>, order exactly {n}; {self.tested}"
            )
        return (
            f"{what} contains S_|S| x <{len(self.generators)} generators>, order >= {n}; completeness NOT "
            f"proven: the search stopped (budget) at base point {self.stopped_at}, the stabiliser of points "
            f"0..{self.stopped_at} is exact; {self.tested}"
        )

    @property
    def tested(self) -> str:
        """What phi(Pi') = Pi' was tested by, in words: the match on probabilities, then the exact ER test
        (:mod:`~ers_exact.symmetry.er_test`: a relative tolerance on logits, an absolute one on J)."""
        text = (
            f"phi(Pi') = Pi' means every phi(pi) matches a point of Pi' within {MATCH_TOL:g} in probabilities and "
            f"passes the exact ER test in its logits y: ||M(y) - y||_inf <= {self.tol:g} * max(1, ||y||_inf) (a "
            f"Boltzmann fixed point, the solver's measure) and |J(phi(pi)) - J*| <= {self.tol:g}"
        )
        if self.rejected:
            text += f" ({self.rejected} candidate(s) matched the pool but failed that test and were left out)"
        return text

    def to_json(self, max_elements: int = 10_000) -> dict[str, Any]:
        order = self.order()
        listed = self.order_on_policies <= max_elements
        return {
            "method": "generators",
            "alpha": self.alpha,
            "J_star": self.J_star,
            "pool_size": self.pool_size,
            "pool_complete": self.pool_complete,
            "complete": self.complete,
            "claim": self.claim,
            "order": _big(order),
            "order_text": self.order_text(),
            "order_on_policies": self.order_on_policies,
            "order_is_lower_bound": not self.complete,
            "generated_order": _big(self.generated_order()),  # sympy's Schreier-Sims, from the generators
            "stopped_at": self.stopped_at,
            "orbit_lengths": list(self.orbit_lengths),
            "n_generators": len(self.generators),
            "n_seed_generators": self.n_seeds,
            "generators": [g.to_json() for g in self.generators],
            "orbits": self.orbits(),
            "orbits_on_pool": [list(o) for o in self.pool_orbits],
            "elements": [e.to_json() for e in self.elements(max_elements)] if listed else [],
            "elements_listed": listed,
            "elements_note": "policy parts; every state permutation may be composed with each",
            "search_nodes": self.nodes,
            "rejected_by_exact_test": self.rejected,
            "seconds": round(self.seconds, 3),
            "tol": self.tol,
        }


def _big(n: int) -> int | str:
    """An integer for JSON: exact digits as a string beyond float precision (2^53)."""
    return n if n < 2**53 else str(n)


class ERGroupBudgetError(InputError, RuntimeError):
    """Listing the group's elements was asked beyond ``max_elements``."""


def er_group(
    tree: HistoryTree,
    pool: Sequence[Sequence[np.ndarray]] | None,
    alpha: float,
    J_star: float,
    *,
    tol: float = 1e-8,
    pool_complete: bool = False,
    seeds: Sequence[Transformation] = (),
    max_nodes: int = 2_000_000,
    max_seconds: float = float("inf"),
    progress: bool | None = None,
    log_pool: Sequence[Sequence[np.ndarray]] | None = None,
) -> ERGroup:
    """H(Pi') by generators and order (module docstring), never listing its elements.

    Args:
        tree: the game's histories.
        pool: Pi', self-play-optimal Boltzmann fixed points at ``alpha`` (each checked by the exact ER test:
            relative logit residual ||M(y) - y||_inf / max(1, ||y||_inf) and |J - J_star| within ``tol``), as
            probabilities; None when ``log_pool`` gives them (exactly one of the two, else ValueError).
        seeds: elements known to map the pool onto itself (Phi_MDP's, when the pool is closed under it);
            each is checked, and one that does not raises ValueError.
        max_nodes, max_seconds: budget of the backtrack; past it the result is a lower bound
            (``complete`` False), never an error.
        log_pool: Pi' as log-policies, the exact test's input (:mod:`~ers_exact.symmetry.er_test`), in
            place of ``pool``; without it the test takes log of ``pool``, refused where a legal action's
            probability underflowed to 0. The search matches the pool onto itself on probabilities (exp of
            the log-policies); each match is then tested in log space.
    """
    start = time.perf_counter()
    game = tree.game
    logs = log_pool_of(tree, pool, log_pool)
    pols = tuple(np.exp(lp) for lp in logs)
    P = pols[0].shape[0]
    test = ERTest(tree, alpha, J_star, tol)
    _check_pool(test, logs, tree.game.name)
    sizes = tuple(zip(game.n_actions, game.n_observations))

    def images(img: np.ndarray) -> tuple[np.ndarray, ...]:
        return apply_to_policy(tree, from_points(img, game.n_states, sizes), pols)

    def exact_test(img: np.ndarray) -> bool:
        batch = apply_to_log_policy(tree, from_points(img, game.n_states, sizes), logs)
        return bool(test.members(batch, 1, P)[0])

    searcher = Searcher(tree, pols, exact_test, max_nodes=max_nodes, max_seconds=max_seconds)
    gens_at: list[list[np.ndarray]] = [[] for _ in range(searcher.n_points)]
    sigmas: list[np.ndarray] = []
    n_seeds = _distribute_seeds(seeds, pols, images, gens_at, sigmas)
    desc = f"Phi_ER by generators ({searcher.n_points} base points, pool of {P})"
    lengths, stopped_at = _search_levels(searcher, gens_at, sigmas, desc, progress)
    gens = [g for level in gens_at for g in level]
    result = ERGroup(
        game=game.name,
        alpha=float(alpha),
        J_star=float(J_star),
        n_states=game.n_states,
        sizes=sizes,
        pool_size=P,
        pool_complete=pool_complete,
        generators=tuple(from_points(g, game.n_states, sizes) for g in gens),
        n_seeds=n_seeds,
        orbit_lengths=tuple(lengths),
        order_on_policies=math.prod(lengths),
        complete=stopped_at is None,
        stopped_at=stopped_at,
        pool_orbits=pool_orbits(P, sigmas),
        nodes=searcher.nodes,
        rejected=searcher.rejected,
        seconds=time.perf_counter() - start,
        tol=tol,
    )
    generated = result.generated_order()
    if stopped_at is not None:
        return replace(result, order_on_policies=generated)
    assert generated == result.order_on_policies, (generated, result.order_on_policies)
    return result


def _check_pool(test: ERTest, logs: tuple[np.ndarray, ...], name: str) -> None:
    """Every pool point (log pi ``logs``) a self-play-optimal Boltzmann fixed point at the test's alpha
    (residual and |J - J*| within its ``tol``), else an :class:`InputError` naming the first that is not."""
    res, J = test.pool_values(logs)  # (refuses a temperature where not even log space can evaluate it)
    bad = np.flatnonzero(~((res <= test.tol) & (np.abs(J - test.J_star) <= test.tol)))
    if len(bad):
        p = int(bad[0])
        raise InputError(
            f"{name}: pool point {p} is not a self-play-optimal Boltzmann fixed point at alpha = {test.alpha} "
            f"(relative logit residual {res[p]:.2e}, J - J* = {J[p] - test.J_star:.2e}, tol {test.tol:g})"
        )


def _search_levels(
    searcher: Searcher,
    gens_at: list[list[np.ndarray]],
    sigmas: list[np.ndarray],
    desc: str,
    progress: bool | None,
) -> tuple[list[int], int | None]:
    """The levels of the base from the last point to the first (module docstring, steps 1-2): the generators
    found at each level into ``gens_at`` (their pool permutations into ``sigmas``); the basic orbit lengths
    and the level where a search budget stopped it (None: finished)."""
    N = searcher.n_points
    prefixes = searcher.identity_prefixes()
    orbit_sets: list[frozenset[int]] = [frozenset({j}) for j in range(N)]
    lengths = [1] * N
    with Progress(N, desc, enabled=progress) as bar:
        for k in reversed(range(N)):
            known = [g for level in gens_at[k:] for g in level]
            orbit, excluded = point_orbit(k, known), set[int]()
            try:
                for gamma in range(k + 1, int(searcher.block[k][1])):
                    if gamma in orbit or gamma in excluded:
                        continue
                    found = searcher.search(k, gamma, prefixes[k], orbit_sets)
                    if found is None:
                        excluded |= point_orbit(gamma, known)
                    else:
                        gens_at[k].append(found[0])
                        sigmas.append(found[1])
                        known.append(found[0])
                        orbit = point_orbit(k, known)
            except SearchBudgetError:
                return lengths, k
            orbit_sets[k], lengths[k] = orbit, len(orbit)
            bar.update(1)
    return lengths, None


def _distribute_seeds(
    seeds: Sequence[Transformation],
    pols: Sequence[np.ndarray],
    images: Any,
    gens_at: list[list[np.ndarray]],
    sigmas: list[np.ndarray],
) -> int:
    """Strong generators of <seeds> along the base (sympy), each filed under the first point it moves."""
    perms = []
    for phi in seeds:
        img = to_points(phi)
        if np.array_equal(img, np.arange(len(img))):
            continue
        if pool_permutation(pols, images(img)) is None:
            raise ValueError(f"seed {phi.to_json()} does not map the pool onto itself (close the pool first)")
        perms.append(img)
    if not perms:
        return 0
    from sympy.combinatorics import Permutation, PermutationGroup

    N = len(gens_at)
    _, strong = PermutationGroup([Permutation(list(p)) for p in perms]).schreier_sims_incremental(
        base=list(range(N))
    )
    count = 0
    for s in strong:
        img = np.array(s.array_form + list(range(s.size, N)), dtype=np.int64)
        moved = np.flatnonzero(img != np.arange(N))
        if len(moved):
            gens_at[int(moved[0])].append(img)
            sigma = pool_permutation(pols, images(img))
            assert sigma is not None
            sigmas.append(sigma)
            count += 1
    return count
