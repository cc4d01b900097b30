"""Exact self-play optimum: published optimal values (masplan.org, undiscounted), the exhaustive reference
against brute force and against the full-tree best response, GMAA* against the exhaustive reference on
built-in and random games, and the admissibility of its upper bounds."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from ers_exact.model.bounds import HEURISTICS, upper_bound_q
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.model.optimal import (
    AUTO_EXHAUSTIVE_MAX,
    OptimalResult,
    PolicyBudgetError,
    count_policy_trees,
    optimal_for_game,
    optimal_value,
    self_play_optimum,
)
from ers_exact.model.values import best_response, expected_return, uniform_policy
from ers_exact.util.budget import BudgetError
from tests.exact.strategies import GameSpec, deterministic_policies, game_specs, random_game, tiny_game_specs

# Published values carry 6 decimals: agree within half a unit of the last one (plus rounding noise).
HALF_UNIT = 5e-7 + 1e-12

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# (file, horizon, published optimum): Nair et al. 2003; Szer et al. 2005; Hansen et al. 2004; Oliehoek et al.
# 2008; as tabulated on masplan.org "Optimal values for Finite-Horizon Dec-POMDPs" (undiscounted).
PUBLISHED = [
    ("dectiger.dpomdp", 2, -4.0),
    ("dectiger.dpomdp", 3, 5.190812),
    ("dectiger.dpomdp", 4, 4.802755),
    ("broadcastChannel.dpomdp", 2, 2.0),
    ("broadcastChannel.dpomdp", 3, 2.99),
    ("broadcastChannel.dpomdp", 4, 3.89),
    ("GridSmall.dpomdp", 2, 0.91),
    ("GridSmall.dpomdp", 3, 1.550444),
    ("GridSmall.dpomdp", 4, 2.241577),
]


def _ids(cases: list[tuple[str, int, float]]) -> list[str]:
    return [f"{f.split('.')[0]}-H{h}" for f, h, _ in cases]


def _tree(dpomdp_dir: Path, fname: str, horizon: int) -> HistoryTree:
    from ers_exact.games import load_game

    return enumerate_histories(load_game(dpomdp_dir / fname, horizon=horizon, discount=1.0))


def _check_policy(tree: HistoryTree, result: OptimalResult) -> None:
    """The reported policy is deterministic, legal, and achieves the reported value."""
    for pol, hist in zip(result.policy, tree.local):
        assert np.all((pol == 0) | (pol == 1)) and np.all(pol.sum(axis=1) == 1)
        assert np.all(pol[~hist.legal] == 0)
    assert expected_return(tree, result.policy) == pytest.approx(result.value, abs=1e-9)


@pytest.mark.parametrize("fname, horizon, published", PUBLISHED, ids=_ids(PUBLISHED))
def test_published_optimal_values_gmaa(dpomdp_dir: Path, fname: str, horizon: int, published: float) -> None:
    tree = _tree(dpomdp_dir, fname, horizon)
    result = optimal_value(tree, method="gmaa")
    assert result.method == "gmaa" and result.nodes_expanded is not None
    assert result.value == pytest.approx(published, abs=HALF_UNIT)
    assert result.upper_bound is not None and result.upper_bound >= result.value - 1e-12
    _check_policy(tree, result)


EXHAUSTIVE = [case for case in PUBLISHED if case[1] < 4 or case[0] == "broadcastChannel.dpomdp"]


@pytest.mark.slow  # 1.7 million joint histories at t = 4
def test_published_dectiger_h5(dpomdp_dir: Path) -> None:
    """Dec-Tiger H=5 = 7.026451 (Oliehoek, Whiteson & Spaan 2009, GMAA* with lossless clustering; masplan.org);
    not in ../shared/dpomdp/README.md's table. Types per agent at t=3: 8, clustered to fewer. The tree-based
    GMAA* here; the ice search is pinned in test_ice.py."""
    tree = _tree(dpomdp_dir, "dectiger.dpomdp", 5)
    result = optimal_value(tree, method="gmaa")
    assert result.method == "gmaa"
    assert result.value == pytest.approx(7.026451, abs=HALF_UNIT)
    _check_policy(tree, result)


@pytest.mark.parametrize("fname, horizon, published", EXHAUSTIVE, ids=_ids(EXHAUSTIVE))
def test_published_optimal_values_exhaustive(
    dpomdp_dir: Path, fname: str, horizon: int, published: float
) -> None:
    tree = _tree(dpomdp_dir, fname, horizon)
    result = self_play_optimum(tree, progress=False)
    assert result.method == "exhaustive"
    assert result.value == pytest.approx(published, abs=HALF_UNIT)
    _check_policy(tree, result)


@pytest.mark.parametrize("heuristic", ["Q_POMDP", pytest.param("Q_MDP", marks=pytest.mark.slow)])  # Q_MDP 50s
def test_published_dectiger_h4_with_looser_bounds(dpomdp_dir: Path, heuristic: str) -> None:
    tree = _tree(dpomdp_dir, "dectiger.dpomdp", 4)
    result = optimal_value(tree, method="gmaa", heuristic=heuristic)
    assert result.value == pytest.approx(4.802755, abs=HALF_UNIT)


@pytest.mark.parametrize("horizon, published", [(2, -4.0), (3, 5.190812)])
def test_builtin_dectiger_matches_published(horizon: int, published: float) -> None:
    from ers_exact.games import get_game

    tree = enumerate_histories(get_game("dectiger", horizon=horizon))
    assert self_play_optimum(tree).value == pytest.approx(published, abs=HALF_UNIT)
    assert optimal_value(tree, method="gmaa").value == pytest.approx(published, abs=HALF_UNIT)


def _brute_force(tree: HistoryTree) -> float:
    """Max J over ALL deterministic joint policies on all local histories (tiny games only)."""
    per_agent = []
    for _i, hist in enumerate(tree.local):
        choices = [np.flatnonzero(row) for row in hist.legal]
        per_agent.append(list(itertools.product(*choices)))
    best = -np.inf
    for joint in itertools.product(*per_agent):
        pol = tuple(np.eye(tree.game.n_actions[i])[list(a)] for i, a in enumerate(joint))
        best = max(best, float(expected_return(tree, pol)))
    return best


@pytest.mark.parametrize("name", ["handshake", "toy-coordination", "two-lever"])
def test_optimum_equals_brute_force_on_tiny_games(name: str) -> None:
    from ers_exact.games import get_game

    game = get_game(name)
    tree = enumerate_histories(game)
    n_all = np.prod([np.prod(h.legal.sum(axis=1).astype(float)) for h in tree.local])
    if n_all > 5e4:
        pytest.skip(f"{name}: {n_all:.0f} joint deterministic policies is too many for brute force")
    assert self_play_optimum(tree).value == pytest.approx(_brute_force(tree), abs=1e-12)


def test_known_optima_of_builtin_games() -> None:
    from ers_exact.games import get_game

    # closed forms: handshake 1 (coordinate once); three-lever 2 rounds, reward 1 per match: 2;
    # toy coordination: (0,0) then anything gives 1, (1,1) then reward 1 in m gives 1, so J* = 1.
    known = [("handshake", 1.0), ("three-lever", 2.0), ("two-lever", 2.0), ("toy-coordination", 1.0)]
    for name, value in known:
        tree = enumerate_histories(get_game(name))
        for method in ("exhaustive", "gmaa"):
            assert optimal_value(tree, method=method).value == pytest.approx(value, abs=1e-12), (name, method)


def test_gmaa_agrees_with_exhaustive_on_every_builtin_game() -> None:
    from ers_exact.games import GAMES, get_game

    for name in GAMES:
        tree = enumerate_histories(get_game(name))
        reference = self_play_optimum(tree, progress=False)
        for heuristic in HEURISTICS:
            for method in ("gmaa", "ice"):
                fast = optimal_value(tree, method=method, heuristic=heuristic)
                assert fast.value == pytest.approx(reference.value, abs=1e-9), (name, heuristic, method)
                _check_policy(tree, fast)


def test_lossless_clustering_shrinks_the_search_and_keeps_the_optimum(dpomdp_dir: Path) -> None:
    tree = _tree(dpomdp_dir, "dectiger.dpomdp", 4)
    plain = optimal_value(tree, method="gmaa", cluster=False)
    clustered = optimal_value(tree, method="gmaa")
    assert clustered.value == pytest.approx(plain.value, abs=1e-9)
    assert clustered.n_candidates < plain.n_candidates
    _check_policy(tree, plain)


def test_budget_refusal_names_the_count() -> None:
    from ers_exact.games import get_game

    tree = enumerate_histories(get_game("dectiger", horizon=3))
    n = count_policy_trees(tree, [0])
    assert n == 3**7
    with pytest.raises(PolicyBudgetError, match="2,187"):
        self_play_optimum(tree, max_policies=100)
    with pytest.raises(PolicyBudgetError, match="81"):  # stage 1: 3^2 rules per agent
        optimal_value(tree, method="gmaa", max_children=50)


def test_exhaustive_refuses_a_template_too_large_and_auto_avoids_it() -> None:
    """A POMDP (one agent) with 3 observations that are in fact deterministic: its tree is small, 3^t nodes
    per stage, but the exhaustive template counts every observation, 9^t."""
    game = random_game(
        np.random.default_rng(5), n_agents=1, n_actions=3, n_observations=3, horizon=8, sparsity=1
    )
    tree = enumerate_histories(game)
    assert tree.n_joint_nodes < 4000
    with pytest.raises(PolicyBudgetError, match="template nodes"):
        self_play_optimum(tree)
    result = optimal_value(tree)
    assert result.method == "ice"
    _check_policy(tree, result)


def test_auto_picks_enumeration_only_when_small() -> None:
    from ers_exact.games import get_game

    small = enumerate_histories(get_game("dectiger", horizon=2))
    assert count_policy_trees(small, [0]) <= AUTO_EXHAUSTIVE_MAX
    assert optimal_value(small).method == "exhaustive"
    large = enumerate_histories(get_game("dectiger", horizon=3))
    result = optimal_value(large)
    assert result.method == "ice"
    data = result.to_json()
    assert data["method"] == "ice" and data["nodes_expanded"] >= 1 and "GMAA*" in data["description"]
    assert data["optimal"] is True and data["stopped"] is None
    assert data["search"]["heuristic"] == "Q_BG" and data["upper_bound"] >= data["value"]
    with pytest.raises(ValueError, match="unknown method"):
        optimal_value(small, method="dfs")


def test_auto_on_an_enumerable_game_keeps_the_time_limit_and_memory_budget() -> None:
    """``optimal_for_game(method="auto")`` on a game small enough to enumerate still runs ice when agent 0 has
    too many policy trees (Dec-Tiger H=3: 1,333 joint nodes, 2,187 trees): ``max_seconds`` and
    ``budget_bytes`` must reach that search (they were dropped, so ``ers-exact optimal GAME --max-seconds S``
    ignored S on such games), stopping it exactly as ``method="ice"`` does."""
    from ers_exact.games import get_game

    game = get_game("dectiger", horizon=3)
    reference = optimal_for_game(game, "ice", max_seconds=1e-9)
    assert reference.stopped is not None and not reference.optimal
    result = optimal_for_game(game, "auto", max_seconds=1e-9)
    assert result.method == "ice"
    assert result.stopped == reference.stopped and not result.optimal
    with pytest.raises(BudgetError, match="over the memory budget"):
        optimal_for_game(game, "ice", budget_bytes=1e3)
    with pytest.raises(BudgetError, match="over the memory budget"):
        optimal_for_game(game, "auto", budget_bytes=1e3)


# ----- random games -----
def _exhaustive_is_cheap(tree: HistoryTree, limit: int = 20_000) -> bool:
    return count_policy_trees(tree, list(range(tree.game.n_agents - 1))) <= limit


@given(game_specs())
@SETTINGS
def test_gmaa_agrees_with_exhaustive_on_random_games(spec: GameSpec) -> None:
    tree = enumerate_histories(spec.build())
    assume(_exhaustive_is_cheap(tree))
    reference = self_play_optimum(tree, progress=False)
    _check_policy(tree, reference)
    for heuristic in HEURISTICS:
        for method in ("gmaa", "ice"):
            fast = optimal_value(tree, method=method, heuristic=heuristic)
            assert fast.value == pytest.approx(reference.value, abs=1e-9), (heuristic, method)
            _check_policy(tree, fast)


@given(game_specs())
@SETTINGS
def test_upper_bounds_are_admissible_and_ordered(spec: GameSpec) -> None:
    """At the root, Q_MDP >= Q_POMDP >= Q_BG >= J*; the bound at every node dominates the Q of any
    deterministic continuation, checked through the root value of random deterministic policies."""
    tree = enumerate_histories(spec.build())
    assume(_exhaustive_is_cheap(tree))
    optimum = self_play_optimum(tree, progress=False).value
    bounds = [upper_bound_q(tree, kind).root_bound for kind in ("Q_MDP", "Q_POMDP", "Q_BG")]
    slack = 1e-9 * max(1.0, abs(optimum))
    assert bounds[0] >= bounds[1] - slack >= bounds[2] - 2 * slack >= optimum - 3 * slack
    q_bg = upper_bound_q(tree, "Q_BG").q
    for layer, q in zip(tree.layers, q_bg):
        assert np.all(np.isneginf(q[~layer.legal])) and np.all(np.isfinite(q[layer.legal]))


@given(tiny_game_specs())
@SETTINGS
def test_restricted_best_response_equals_full_tree_best_response(spec: GameSpec) -> None:
    """The exhaustive search (policy trees + best response on the reached subtree) against agent 0's
    deterministic policies on all its histories answered by :func:`values.best_response` on the full tree."""
    tree = enumerate_histories(spec.build())
    if tree.game.n_agents == 1:
        expected = best_response(tree, uniform_policy(tree), 0)[1]
    else:
        base = uniform_policy(tree)
        pols = deterministic_policies(tree, 0)
        batch = (pols, *tuple(np.broadcast_to(p, (len(pols), *p.shape)) for p in base[1:]))
        expected = float(np.max(best_response(tree, batch, tree.game.n_agents - 1)[1]))
    result = self_play_optimum(tree, progress=False)
    assert result.value == pytest.approx(expected, abs=1e-9)
    _check_policy(tree, result)
