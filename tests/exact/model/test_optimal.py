"""Exact self-play optimum against published optimal values (masplan.org, undiscounted) and brute force."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from ers_exact.model.histories import enumerate_histories
from ers_exact.model.optimal import PolicyBudgetError, count_policy_trees, self_play_optimum
from ers_exact.model.values import expected_return

# Published values carry 6 decimals: agree within half a unit of the last one (plus rounding noise).
HALF_UNIT = 5e-7 + 1e-12

# (file, horizon, published optimum): Nair et al. 2003; Szer et al. 2005; Hansen et al. 2004; as tabulated
# on masplan.org "Optimal values for Finite-Horizon Dec-POMDPs" (undiscounted).
PUBLISHED = [
    pytest.param("dectiger.dpomdp", 2, -4.0, id="dectiger-H2"),
    pytest.param("dectiger.dpomdp", 3, 5.190812, id="dectiger-H3"),
    pytest.param("broadcastChannel.dpomdp", 2, 2.0, id="broadcast-H2"),
    pytest.param("broadcastChannel.dpomdp", 3, 2.99, id="broadcast-H3"),
    pytest.param("broadcastChannel.dpomdp", 4, 3.89, id="broadcast-H4", marks=pytest.mark.slow),
    pytest.param("GridSmall.dpomdp", 2, 0.91, id="gridsmall-H2"),
    pytest.param("GridSmall.dpomdp", 3, 1.550444, id="gridsmall-H3", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("fname, horizon, published", PUBLISHED)
def test_published_optimal_values(dpomdp_dir: Path, fname: str, horizon: int, published: float) -> None:
    from ers_exact.io.dpomdp import read_dpomdp

    game = read_dpomdp(dpomdp_dir / fname, horizon=horizon).with_discount(1.0)
    tree = enumerate_histories(game)
    result = self_play_optimum(tree)
    assert result.value == pytest.approx(published, abs=HALF_UNIT)
    # the reported policy really achieves the value
    assert expected_return(tree, result.policy) == pytest.approx(result.value, abs=1e-12)


@pytest.mark.parametrize("horizon, published", [(2, -4.0), (3, 5.190812)])
def test_builtin_dectiger_matches_published(horizon: int, published: float) -> None:
    from ers_exact.games import get_game

    tree = enumerate_histories(get_game("dectiger", horizon=horizon))
    assert self_play_optimum(tree).value == pytest.approx(published, abs=HALF_UNIT)


def _brute_force(tree) -> float:
    """Max J over ALL deterministic joint policies on all local histories (tiny games only)."""
    per_agent = []
    for i, hist in enumerate(tree.local):
        choices = [np.flatnonzero(row) for row in hist.legal]
        per_agent.append(list(itertools.product(*choices)))
    best = -np.inf
    for joint in itertools.product(*per_agent):
        pol = tuple(np.eye(tree.game.n_actions[i])[list(a)] for i, a in enumerate(joint))
        best = max(best, expected_return(tree, pol))
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
    for name, value in [("handshake", 1.0), ("three-lever", 2.0), ("two-lever", 2.0), ("toy-coordination", 1.0)]:
        assert self_play_optimum(enumerate_histories(get_game(name))).value == pytest.approx(value, abs=1e-12)


def test_budget_refusal_names_the_count() -> None:
    from ers_exact.games import get_game

    tree = enumerate_histories(get_game("dectiger", horizon=3))
    n = count_policy_trees(tree, [0])
    assert n == 3**7
    with pytest.raises(PolicyBudgetError, match="2,187"):
        self_play_optimum(tree, max_policies=100)
