"""Other-play (zsc/other_play.py): the optimiser reaches the OP optimum for every seed, checked against an
independent evaluation of the lever games (written out from the game's rules below, not through
``values`` or ``objectives``), and parameter sharing changes the two-lever optimum.

Closed forms (the iterated L-lever game, 2 rounds, reward 1{a^1 = a^2}, Phi = Phi_MDP = the L! lever
relabelings applied to both agents):
* round 1: averaged over phi, the partner's first lever phi(pi)^1 is uniform, so it matches with
  probability 1/L whatever pi plays; round 2 pays at most 1. Three levers: OP <= 1/3 + 1 = 4/3, attained
  by "repeat after a match, else the unused lever", with a fixed or a uniform first lever.
* two levers, separate policies: OP <= 1/2 + 1 = 3/2, attained (agent 1 plays L1 after a mismatch,
  agent 2 plays L2). With one shared policy the mismatch branch cannot be resolved for both seat
  orders: OP <= 1/2 + 3/4 = 5/4 (e.g. uniform first lever, repeat after a match, uniform after a
  mismatch), and deterministic shared policies reach only 1.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.objectives import other_play
from ers_exact.symmetry.search import decpomdp_symmetries
from ers_exact.zsc.other_play import (
    OPConfig,
    op_gradient,
    op_values,
    solve_other_play,
    symmetry_set,
    train_other_play,
)


@pytest.fixture(scope="module")
def lever3():
    return enumerate_histories(get_game("three-lever"))


@pytest.fixture(scope="module")
def lever2():
    return enumerate_histories(get_game("two-lever"))


# --- an independent OP evaluator for the 2-round L-lever game ---------------------------------------------


def _J(first_1, second_1, first_2, second_2) -> float:
    """J of agent 1 = (first [L], second [L own, L observed, L]) against agent 2, from the rules: round 1
    pays 1{a = b}; each then sees the other's lever; round 2 pays 1{c = d}."""
    total = 0.0
    L = len(first_1)
    for a, b in itertools.product(range(L), repeat=2):
        match_2 = sum(second_1[a, b, c] * second_2[b, a, c] for c in range(L))
        total += first_1[a] * first_2[b] * (float(a == b) + match_2)
    return total


def _relabel(first, second, perm):
    """phi(pi): phi(pi)(phi(a) | phi(tau)) = pi(a | tau) for the lever relabeling ``perm``."""
    L = len(first)
    f, s = np.empty(L), np.empty((L, L, L))
    for a in range(L):
        f[perm[a]] = first[a]
        for o, c in itertools.product(range(L), repeat=2):
            s[perm[a], perm[o], perm[c]] = second[a, o, c]
    return f, s


def _op_by_hand(agents) -> float:
    """OP^{all lever relabelings}(pi) = mean_phi 1/2 (J(pi^1, phi(pi)^2) + J(phi(pi)^1, pi^2))."""
    L = len(agents[0][0])
    vals = []
    for perm in itertools.permutations(range(L)):
        images = [_relabel(f, s, perm) for f, s in agents]
        vals.append(0.5 * (_J(*agents[0], *images[1]) + _J(*images[0], *agents[1])))
    return float(np.mean(vals))


def _as_lever_policy(tree, policy):
    """The library's per-history rows as (first [L], second [L, L, L]) per agent."""
    L = tree.game.n_actions[0]
    out = []
    for i, hist in enumerate(tree.local):
        second = np.array([[policy[i][hist.index[(a, o)]] for o in range(L)] for a in range(L)])
        out.append((policy[i][0], second))
    return out


def _symmetric_three_lever(x: float, u: float, v: float, w: float):
    """The Phi_MDP-invariant shared policies: uniform first lever; after a match repeat with probability
    x (the others share 1 - x); after a mismatch (own, partner's, unused lever) with (u, v, w)."""
    second = np.empty((3, 3, 3))
    for a, o in itertools.product(range(3), repeat=2):
        if a == o:
            second[a, o] = (1 - x) / 2
            second[a, o, a] = x
        else:
            unused = 3 - a - o
            second[a, o, a], second[a, o, o], second[a, o, unused] = u, v, w
    agent = (np.full(3, 1 / 3), second)
    return [agent, agent]


def test_the_independent_evaluator_agrees_with_the_library(lever3, lever2) -> None:
    rng = np.random.default_rng(1)
    for tree in (lever3, lever2):
        phis = decpomdp_symmetries(tree.game)
        assert len(phis) == {3: 6, 2: 2}[tree.game.n_actions[0]]
        pol = tuple(rng.dirichlet(np.ones(tree.game.n_actions[0]), size=len(h)) for h in tree.local)
        expected = _op_by_hand(_as_lever_policy(tree, pol))
        assert other_play(tree, pol, phis) == pytest.approx(expected, abs=1e-12)
        assert op_values(tree, pol, phis) == pytest.approx(expected, abs=1e-12)


def test_four_thirds_is_the_three_lever_optimum_by_brute_force() -> None:
    """Every deterministic policy tree (first lever, then one lever per observation: 3^4 = 81, shared)
    and a grid over the symmetric (Phi_MDP-invariant) policies: the best is 4/3 in both classes."""
    det = []
    for a, *after in itertools.product(range(3), repeat=4):
        first, second = np.eye(3)[a], np.full((3, 3, 3), 1 / 3)
        for o in range(3):
            second[a, o] = np.eye(3)[after[o]]
        det.append(_op_by_hand([(first, second)] * 2))
    assert max(det) == pytest.approx(4 / 3, abs=1e-12)
    grid = np.linspace(0, 1, 5)
    sym = [
        _op_by_hand(_symmetric_three_lever(x, u, v, 1 - u - v))
        for x, u, v in itertools.product(grid, grid, grid)
        if u + v <= 1 + 1e-12
    ]
    assert max(sym) == pytest.approx(4 / 3, abs=1e-12)


@pytest.mark.parametrize(  # seeds 3-9 (~2 s each) under make test-slow
    "seed", [s if s < 3 else pytest.param(s, marks=pytest.mark.slow) for s in range(10)]
)
def test_every_config_seed_reaches_the_three_lever_optimum(lever3, seed) -> None:
    result = train_other_play(lever3, decpomdp_symmetries(lever3.game), OPConfig(seed=seed))
    assert result.op_value == pytest.approx(4 / 3, abs=1e-6)
    assert _op_by_hand(_as_lever_policy(lever3, result.policy)) == pytest.approx(4 / 3, abs=1e-6)
    assert pytest.approx(2.0, abs=1e-6) == result.J  # ties go to the best self-play return


@pytest.mark.parametrize("seed", range(3))
def test_the_gradient_search_alone_reaches_four_thirds(lever3, seed) -> None:
    """Without the exhaustive deterministic search: Adam from random, symmetrised starts + row search."""
    result = train_other_play(lever3, decpomdp_symmetries(lever3.game), OPConfig(seed=seed, exhaustive=0))
    assert result.op_value == pytest.approx(4 / 3, abs=1e-6)
    assert set(result.seed_methods) == {"gradient"} and result.deterministic_optimum is None


def test_the_exact_deterministic_search_rescues_a_stuck_gradient(lever3) -> None:
    """Five Adam steps from one random start reach nothing; the exhaustive search still gives 4/3."""
    phis = decpomdp_symmetries(lever3.game)
    stuck = train_other_play(lever3, phis, OPConfig(seeds=3, steps=5, restarts=1, row_search=0, exhaustive=0))
    rescued = train_other_play(lever3, phis, OPConfig(seeds=3, steps=5, restarts=1, row_search=0))
    assert max(stuck.seed_op_values) < 4 / 3 - 1e-3
    assert set(rescued.seed_methods) == {"deterministic"}
    assert rescued.seed_op_values == pytest.approx((4 / 3,) * 3, abs=1e-12)
    assert rescued.deterministic_profiles == 81 and rescued.deterministic_optimum == pytest.approx(4 / 3)


def test_independent_seeds_break_the_symmetry_independently(lever3) -> None:
    """Ties among the optimal conventions are drawn per seed (the ZSC pipeline relies on it); one short
    training per config seed (the exhaustive search's draw decides)."""
    config = OPConfig(seeds=1, restarts=2, steps=30)
    firsts = {
        int(np.argmax(solve_other_play(lever3, "mdp", replace(config, seed=s)).policy[0][0]))
        for s in range(6)
    }
    assert len(firsts) > 1


def test_two_lever_optimum_differs_with_and_without_parameter_sharing(lever2) -> None:
    shared = solve_other_play(lever2, "mdp", OPConfig(seed=0))
    separate = solve_other_play(lever2, "mdp", OPConfig(seed=0, share=False))
    assert shared.share and not separate.share
    assert shared.op_value == pytest.approx(5 / 4, abs=1e-6)
    assert separate.op_value == pytest.approx(3 / 2, abs=1e-9)
    # shared: deterministic policies reach only 1, the optimum needs mixing (found by the gradient)
    assert shared.deterministic_optimum == pytest.approx(1.0) and shared.seed_methods[0] == "gradient"
    assert separate.deterministic_optimum == pytest.approx(3 / 2)
    for result in (shared, separate):
        agents = _as_lever_policy(lever2, result.policy)
        assert _op_by_hand(agents) == pytest.approx(result.op_value, abs=1e-12)
    assert np.array_equal(shared.policy[0], shared.policy[1])


def test_five_quarters_is_the_shared_two_lever_optimum_on_a_grid() -> None:
    """Shared two-lever policies on a grid (first lever, four second-round rows): the best is 5/4."""
    grid = np.linspace(0, 1, 5)
    best = 0.0
    for p, *rows in itertools.product(grid, repeat=5):
        second = np.empty((2, 2, 2))
        for (a, o), q in zip(itertools.product(range(2), repeat=2), rows):
            second[a, o] = (q, 1 - q)
        agent = (np.array([p, 1 - p]), second)
        best = max(best, _op_by_hand([agent, agent]))
    assert best == pytest.approx(5 / 4, abs=1e-12)


def test_op_gradient_is_batched(lever3) -> None:
    rng = np.random.default_rng(0)
    phis = decpomdp_symmetries(lever3.game)
    batch = tuple(rng.dirichlet(np.ones(3), size=(4, len(h))) for h in lever3.local)
    together = op_gradient(lever3, batch, phis)
    for b in range(4):
        alone = op_gradient(lever3, tuple(p[b] for p in batch), phis)
        for i in range(2):
            np.testing.assert_allclose(together[i][b], alone[i], atol=1e-14)
    np.testing.assert_allclose(op_values(lever3, batch, phis), other_play(lever3, batch, phis), atol=1e-14)


def test_solve_other_play_names_its_symmetry_set_and_serialises(lever3) -> None:
    result = solve_other_play(lever3, "mdp", OPConfig(seed=2, seeds=2))
    data = json.loads(json.dumps(result.to_json()))
    assert data["symmetries"] == "mdp" and data["n_symmetries"] == 6 and data["share"] is True
    assert data["op_value"] == pytest.approx(4 / 3) and data["J"] == pytest.approx(2.0)
    assert data["seed"] == 2 and data["seeds"] == 2 and len(data["seed_op_values"]) == 2
    assert data["deterministic_profiles"] == 81 and "exact OP over all 81 deterministic" in data["method"]
    assert np.allclose(np.asarray(data["policy"][0]), result.policy[0])
    # the histories reached in other-play: the first lever, then repeat after a match, else the unused lever
    rows = [r for r in data["played"] if r["agent"] == 0]
    first = max(rows[0]["policy"], key=rows[0]["policy"].get)
    assert [len(r["history"]) for r in rows] == [0, 2, 2, 2] and rows[0]["policy"] == {first: 1.0}
    for r in rows[1:]:
        own, seen = r["history"]
        assert own == first and r["reach"] == pytest.approx(1 / 3)
        assert r["policy"] == ({own: 1.0} if seen == own else {({"L1", "L2", "L3"} - {own, seen}).pop(): 1.0})
    none = solve_other_play(lever3, "none", OPConfig(seeds=1))  # OP^{id} = SP
    assert none.n_symmetries == 1 and none.op_value == pytest.approx(2.0) == none.J
    with pytest.raises(ValueError, match="unknown symmetry set 'er2'"):
        symmetry_set(lever3, "er2")


@pytest.mark.parametrize("bad", [{"seeds": 0}, {"restarts": 0}, {"steps": -1}, {"learning_rate": 0.0}])
def test_config_validation(bad) -> None:
    with pytest.raises(ValueError, match="OPConfig"):
        OPConfig(**bad)
