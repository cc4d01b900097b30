"""Symmetry searches: the full ER search on three-lever at alpha = 0.25 (every candidate of Psi's policy
part against the whole optimal pool), and Phi_MDP by the exhaustive, pruned and graph methods at three game
sizes (a ~10^6-candidate game included); the pruned and graph cases run the exhaustive search in the same test
(untimed by the benchmark) and must find the same symmetries (ratio = exhaustive seconds / method seconds).
Every method's answer must also be the group known by construction (``GROUPS``): the n! relabellings of n levers
(the same on both agents' actions and observations) and, on the planted game, the identity and the planted
swap, and closed under composition."""

from __future__ import annotations

import importlib.util
import itertools
import time

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.games.random import planted_game
from ers_exact.model.game import make_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.transformation import Transformation
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
from ers_exact.symmetry.er import er_symmetries
from ers_exact.symmetry.search import decpomdp_symmetries, policy_part_order, psi_order


def test_er_search_three_lever(benchmark) -> None:
    tree = enumerate_histories(get_game("three-lever"))
    fs = solve_fixed_points(tree, 0.25, SolverConfig(n_starts=64, complete_search=False, certify=False))
    pool = [p.policy for p in fs.optimal_points]
    er = benchmark.pedantic(er_symmetries, args=(tree, pool, 0.25, fs.J_star), rounds=3, iterations=1)
    benchmark.extra_info.update(
        candidates=er.n_candidates,
        pool_size=len(pool),
        members=len(er.members),
        evaluations=er.n_candidates * len(pool),
        evaluations_per_second=er.n_candidates * len(pool) / benchmark.stats.stats.mean,
    )
    assert len(er.members) == 6


def _large_planted_game() -> object:
    """6 states, 3 actions and 3 observations per agent: |Psi| = 720 * 6^4 = 933,120."""
    rng = np.random.default_rng(7)
    S, A, O = 6, 9, 9
    rows = lambda shape: rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])  # noqa: E731
    game = make_game(
        "planted-6x3x3",
        [f"s{k}" for k in range(S)],
        [["a0", "a1", "a2"]] * 2,
        [["o0", "o1", "o2"]] * 2,
        rows((S, A, S)),
        rows((A, S, O)),
        rng.choice([0.0, 1.0], size=(S, A)),
        np.full(S, 1 / S),
        horizon=1,
    )
    return planted_game(game, PLANTED)


#: the planted game's symmetry (an involution: with the identity, the group that planting averages over)
PLANTED = Transformation((1, 0, 3, 2, 5, 4), ((1, 0, 2), (1, 0, 2)), ((2, 1, 0), (2, 1, 0)))


GAMES = {
    "three-lever": lambda: get_game("three-lever"),
    "four-lever": lambda: get_game("three-lever", levers=4),
    "planted-6x3x3": _large_planted_game,
}
METHODS = ["exhaustive", "pruned", "graph"]


def _levers(n: int) -> set[tuple]:
    """The n! lever relabellings of the lever game: one permutation of the levers on both agents' actions and
    on their observations (each sees the partner's lever); one state."""
    return {((0,), (p, p), (p, p)) for p in itertools.permutations(range(n))}


#: Phi_MDP of each game by construction, as (states, actions, observations)
GROUPS = {
    "three-lever": _levers(3),
    "four-lever": _levers(4),
    "planted-6x3x3": {((0, 1, 2, 3, 4, 5), ((0, 1, 2),) * 2, ((0, 1, 2),) * 2)}
    | {(PLANTED.states, PLANTED.actions, PLANTED.observations)},
}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", list(GAMES))
def test_mdp_search(benchmark, name: str, method: str) -> None:
    game = GAMES[name]()
    if method == "graph":
        if importlib.util.find_spec("ers_exact.symmetry.graph") is None:
            pytest.skip("graph method not available")
        from ers_exact.symmetry.graph import decpomdp_symmetries_graph as search

        found = benchmark.pedantic(search, args=(game,), rounds=1, iterations=1)
    else:
        found = benchmark.pedantic(decpomdp_symmetries, args=(game, method), rounds=1, iterations=1)
    seconds = benchmark.stats.stats.mean
    if method == "exhaustive":
        want, exhaustive_s = found, seconds
    else:
        t0 = time.perf_counter()
        want = decpomdp_symmetries(game, "exhaustive")
        exhaustive_s = time.perf_counter() - t0
    benchmark.extra_info.update(
        game=name,
        method=method,
        psi_order=psi_order(game),
        psi_order_on_policies=policy_part_order(game),
        symmetries=len(found),
        candidates_per_second=psi_order(game) / seconds,
        exhaustive_seconds=exhaustive_s,
        speedup_vs_exhaustive=exhaustive_s / seconds,
    )
    key = lambda p: (p.states, p.actions, p.observations)  # noqa: E731
    assert len(found) >= 2
    assert sorted(map(key, found)) == sorted(map(key, want))
    got = set(map(key, found))
    assert got == GROUPS[name] and len(got) == len(
        found
    )  # the group known by construction, each element once
    assert all(key(a.compose(b)) in got for a in found for b in found)
