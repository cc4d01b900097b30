"""ers-exact's relative reconstruction loss (``group_metrics``; ``ers_exact.zsc.reconstruction``) against the
paper's definition E_pi E_{tau ~ pi} ||tau - phi_O^2(tau)|| / ||tau|| computed by hand from the AOH vectors
(``aoh_reference``: one-hot action and observation per step, exact history probabilities, empty history left
out). The deep package's agreement with it is in tests/deep/discovery/test_reconstruction.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ers_exact.games import lever_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.transformation import Transformation
from ers_exact.zsc.discovery import group_metrics
from ers_exact.zsc.reconstruction import history_ratios, step_errors
from tests.exact.zsc import aoh_reference as ref


def _random_pool(tree, n: int, seed: int) -> list[tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(seed)
    return [
        tuple(rng.dirichlet(np.ones(tree.game.n_actions[i]), size=len(h)) for i, h in enumerate(tree.local))
        for _ in range(n)
    ]


def test_closed_form_on_four_levers_over_three_rounds() -> None:
    """Four levers, three rounds: histories of length 1 and 2 whose observations phi_O^2 moves in part (sigma^2
    fixes lever 4 for agent 1, lever 1 for agent 2), so the loss weighs sqrt(c / t) by each history's reach."""
    tree = enumerate_histories(lever_game(levers=4, rounds=3))
    pool = _random_pool(tree, 2, seed=3)
    first = Transformation((0,), ((1, 2, 0, 3), (0, 1, 2, 3)), ((1, 2, 0, 3), (0, 2, 3, 1)))
    second = Transformation((0,), ((3, 2, 1, 0), (3, 2, 1, 0)), ((3, 0, 1, 2), (1, 0, 3, 2)))
    expected = ref.reconstruction_loss(tree.game, tree, pool, [first.observations, second.observations])
    assert 0.2 < expected < 0.9
    got = group_metrics(tree, [first, second], pool)["reconstruction_loss"]
    assert got == pytest.approx(expected, abs=1e-12)
    alone = ref.reconstruction_loss(tree.game, tree, pool[:1], [first.observations])
    assert group_metrics(tree, [first], pool[:1])["reconstruction_loss"] == pytest.approx(alone, abs=1e-12)


def test_each_history_scores_sqrt_of_its_moved_share() -> None:
    """Per history, ||tau - phi_O^2(tau)|| / ||tau|| is sqrt(c / t) (c of its t observations moved; ||tau||^2 = 2t
    with one-hot action and observation per step), NaN on the empty history."""
    tree = enumerate_histories(lever_game(levers=4, rounds=3))
    sigma = (1, 2, 0, 3)
    ratios = history_ratios(tree, 0, step_errors(sigma))
    hist = tree.local[0]
    assert math.isnan(ratios[0])
    for k in range(1, len(hist)):
        h = hist.as_tuple(k)
        assert ratios[k] == pytest.approx(ref.relative_error(h, sigma, 4, 4), abs=1e-12)
        moved = sum(o != 3 for o in h[1::2])
        assert ratios[k] == pytest.approx(math.sqrt(moved / hist.time[k]), abs=1e-12)


def test_one_round_has_no_history_to_reconstruct() -> None:
    """With H = 1 every history an agent acts on is empty (||tau|| = 0): the loss is undefined (NaN), not 0."""
    tree = enumerate_histories(lever_game(levers=3, rounds=1))
    cycle = Transformation((0,), ((1, 2, 0), (1, 2, 0)), ((1, 2, 0), (1, 2, 0)))
    assert math.isnan(group_metrics(tree, [cycle], _random_pool(tree, 2, seed=0))["reconstruction_loss"])
