"""Bad input to the public Python API is refused by name (a TypeError or ValueError that names the argument),
not by an AttributeError or IndexError deep inside: a Game where the enumerated HistoryTree is expected (and
the reverse), and a pool that is not a list of joint policies (one joint policy passed as the pool, an empty
or stacked pool, a policy of another shape)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ers_exact.analysis.report import atlas, symmetry_report
from ers_exact.games import get_game
from ers_exact.model.exhaustive import self_play_optimum
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.objectives import cross_play, other_play, symmetrise
from ers_exact.model.values import (
    PolicyError,
    expected_return,
    local_q_values,
    return_gradient,
    uniform_policy,
)
from ers_exact.solve.boltzmann import TemperatureError
from ers_exact.solve.fixed_points import solve_fixed_points
from ers_exact.solve.sweep import sweep
from ers_exact.symmetry.search import decpomdp_symmetries
from ers_exact.zsc.config import DiscoveryConfig, OPConfig, PoolConfig
from ers_exact.zsc.discovery import discover
from ers_exact.zsc.other_play import train_other_play
from ers_exact.zsc.pipeline import run_zsc
from ers_exact.zsc.pools import build_pool

GAME = get_game("two-lever")
TREE = enumerate_histories(GAME)
PI = uniform_policy(TREE)
PHIS = decpomdp_symmetries(GAME)

# every public function the READMEs call on a tree, with its other arguments valid
TREE_FUNCTIONS: dict[str, Callable[[Any], object]] = {
    "expected_return": lambda t: expected_return(t, PI),
    "expected_return(sequence=False)": lambda t: expected_return(t, PI, sequence=False),
    "local_q_values": lambda t: local_q_values(t, PI),
    "return_gradient": lambda t: return_gradient(t, PI),
    "uniform_policy": uniform_policy,
    "cross_play": lambda t: cross_play(t, PI, PI),
    "other_play": lambda t: other_play(t, PI, PHIS),
    "symmetrise": lambda t: symmetrise(t, PI, PHIS),
    "self_play_optimum": self_play_optimum,
    "solve_fixed_points": lambda t: solve_fixed_points(t, 0.25),
    "sweep": lambda t: sweep(t, [0.25]),
    "symmetry_report": lambda t: symmetry_report(t, 0.25),
    "atlas": lambda t: atlas(t, [0.25]),
    "discover": lambda t: discover(t, [PI]),
    "build_pool": lambda t: build_pool(t, PoolConfig(k=2, episodes=10), 0),
    "train_other_play": lambda t: train_other_play(t, PHIS, OPConfig(seeds=1, steps=2)),
    "run_zsc": run_zsc,
}


@pytest.mark.parametrize("name", list(TREE_FUNCTIONS))
def test_a_game_where_the_tree_belongs_is_refused_by_name(name: str) -> None:
    with pytest.raises(TypeError, match=r"tree must be a HistoryTree, got the Game 'two-lever': pass "):
        TREE_FUNCTIONS[name](GAME)


@pytest.mark.parametrize("function", [enumerate_histories, decpomdp_symmetries])
def test_a_tree_or_a_name_where_the_game_belongs_is_refused_by_name(
    function: Callable[[Any], object],
) -> None:
    with pytest.raises(TypeError, match=r"game must be a Game .*got HistoryTree: pass tree.game"):
        function(TREE)
    with pytest.raises(TypeError, match=r"game must be a Game .*got str$"):
        function("two-lever")


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        ([], r"^pool holds no policy"),
        (PI, r"^pool\[0\] is one array of shape \(5, 2\), not a joint policy .*\[pi\] for one policy pi"),
        (tuple(np.stack([p, p]) for p in PI), r"^pool\[0\] is one array of shape \(2, 5, 2\)"),
        ([PI, (PI[0][:, :1], PI[1])], r"^pool\[1\]: policy of agent 0 has shape \(5, 1\), expected \[5, 2\]"),
        ([PI, tuple(2 * p for p in PI)], r"^pool\[1\]: policy of agent 0, history 0 .* sums to 2.0"),
        ([[np.stack([p, p]) for p in PI]], r"^pool\[0\] is a batch of joint policies"),
        ("two-lever", r"^pool must be a list of joint policies, got str"),
    ],
    ids=["empty", "one-policy", "stacked", "wrong-shape", "unnormalised", "batch", "str"],
)
def test_discover_refuses_a_pool_that_is_not_a_list_of_joint_policies(pool: Any, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        discover(TREE, pool)
    with pytest.raises(PolicyError, match=message.replace("pool", "unseen_pool", 1)):
        discover(TREE, [PI], unseen_pool=pool)


def test_discover_refuses_a_config_that_is_not_a_discovery_config() -> None:
    with pytest.raises(TypeError, match="config must be a DiscoveryConfig, got dict"):
        discover(TREE, [PI], {"top": 2})  # type: ignore[arg-type]


def test_a_valid_pool_gives_the_result_it_gave_before() -> None:
    """The checks change nothing for a valid pool (lists of lists included): the same result as the pool given
    as a list of tuples of arrays."""
    pool = [PI, tuple(np.where(TREE.local[i].legal, [[0.9, 0.1]], 0) for i in range(2))]
    pool[1] = tuple(p / p.sum(axis=1, keepdims=True) for p in pool[1])
    as_lists = [[p.tolist() for p in policy] for policy in pool]
    assert discover(TREE, as_lists, DiscoveryConfig(top=2)) == discover(TREE, pool, DiscoveryConfig(top=2))


@pytest.mark.parametrize("alpha", ["0.25", None, True, [0.25]])
def test_an_alpha_that_is_not_a_number_is_refused_by_name(alpha: Any) -> None:
    """A str alpha failed in math.isfinite ("must be real number, not str"), naming no argument."""
    with pytest.raises(TemperatureError, match=r"temperature alpha must be a positive number, got "):
        symmetry_report(TREE, alpha)
    with pytest.raises(TemperatureError, match=r"temperature alpha must be a positive number, got "):
        solve_fixed_points(TREE, alpha)


def test_a_numpy_alpha_is_a_number() -> None:
    assert solve_fixed_points(TREE, np.float64(0.25)).J_star == solve_fixed_points(TREE, 0.25).J_star
