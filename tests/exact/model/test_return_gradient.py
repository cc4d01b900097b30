"""The exact return gradient dJ / dpi^i(a | tau) (values.return_gradient) against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from ers_exact.model.histories import enumerate_histories
from ers_exact.model.values import return_gradient

from ..finite_differences import perturbed_value, raw_return
from ..strategies import random_game


@pytest.mark.parametrize("seed", range(4))
def test_return_gradient_matches_finite_differences(seed: int) -> None:
    rng = np.random.default_rng(seed)
    game = random_game(
        rng, n_agents=2, n_states=2, n_actions=(2, 3), n_observations=2, horizon=3, discount=0.9
    )
    tree = enumerate_histories(game)
    pol = tuple(rng.dirichlet(np.ones(game.n_actions[h.agent]), size=len(h)) for h in tree.local)
    grad = return_gradient(tree, pol)
    J = raw_return(tree)
    for _ in range(6):
        i = int(rng.integers(2))
        k, a = int(rng.integers(len(tree.local[i]))), int(rng.integers(game.n_actions[i]))
        assert grad[i][k, a] == pytest.approx(perturbed_value(J, pol, i, k, a), abs=1e-6)
