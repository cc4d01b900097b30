"""Tabular IQL (zsc/iql.py): the batched trainer that draws its uniforms a chunk of episodes at a time equals
the plain per-draw loop (tests/exact/zsc/reference_iql.py) bit for bit, alone and batched over seeds, on
built-in games (shared and separate Q-tables) and random games with illegal actions and up to three agents;
and it learns: every run of the paper's three-lever recipe ends on a coordinated greedy policy."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.values import expected_return
from ers_exact.solve.boltzmann import softmax_policy
from ers_exact.zsc import iql
from ers_exact.zsc.iql import IQLConfig, train_iql, train_iql_batch
from tests.exact.strategies import game_specs
from tests.exact.zsc.reference_iql import ref_train_iql


def assert_tables_equal(got: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


CASES = [
    ("three-lever", IQLConfig(runs=6, episodes=300, seed=3)),
    ("two-lever", IQLConfig(runs=4, episodes=200, seed=1, shared=False)),
    ("dectiger", IQLConfig(runs=5, episodes=250, seed=7, epsilon=0.3)),
    ("toy-coordination", IQLConfig(runs=3, episodes=150, seed=0, learning_rate=0.5)),
]


@pytest.mark.parametrize("name, cfg", CASES, ids=[c[0] for c in CASES])
def test_train_iql_equals_the_reference_loop(name: str, cfg: IQLConfig, monkeypatch) -> None:
    tree = enumerate_histories(get_game(name))
    want = ref_train_iql(tree, cfg)
    assert_tables_equal(train_iql(tree, cfg), want)
    monkeypatch.setattr(iql, "_CHUNK_FLOATS", 1)  # one episode per chunk: the same stream
    assert_tables_equal(train_iql(tree, cfg), want)


def test_a_batch_over_seeds_equals_each_training_alone() -> None:
    tree = enumerate_histories(get_game("three-lever"))
    configs = [IQLConfig(runs=4, episodes=200, seed=s) for s in (5, 0, 11)]
    for got, cfg in zip(train_iql_batch(tree, configs), configs):
        assert_tables_equal(got, ref_train_iql(tree, cfg))


def test_a_batch_refuses_configs_that_differ_beyond_the_seed() -> None:
    tree = enumerate_histories(get_game("three-lever"))
    with pytest.raises(ValueError, match="only in their seed"):
        train_iql_batch(tree, [IQLConfig(seed=0), IQLConfig(seed=1, episodes=5)])
    assert train_iql_batch(tree, []) == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=game_specs(max_nodes=200), seed=st.integers(0, 2**31 - 1), shared=st.booleans())
def test_train_iql_equals_the_reference_on_random_games(spec, seed: int, shared: bool) -> None:
    tree = enumerate_histories(spec.build())
    cfg = IQLConfig(runs=3, episodes=40, seed=seed, shared=shared, epsilon=0.5)
    batch = train_iql_batch(tree, [cfg, replace(cfg, seed=seed + 1)])
    assert_tables_equal(batch[0], ref_train_iql(tree, cfg))
    assert_tables_equal(batch[1], ref_train_iql(tree, replace(cfg, seed=seed + 1)))


def test_the_papers_recipe_coordinates_on_three_lever() -> None:
    """k = 20 runs, 10,000 episodes, epsilon 0.1, lr 0.1: every greedy policy matches the partner in round
    one and repeats the match (J = 2, the self-play optimum); a no-op update would leave J at 2/3."""
    tree = enumerate_histories(get_game("three-lever"))
    tables = train_iql(tree, IQLConfig(seed=0))
    J = np.asarray(expected_return(tree, softmax_policy(tree, tables, 1e-9)))
    np.testing.assert_allclose(J, 2.0, atol=1e-9)
