"""Phi_MDP by generators and order: the coset count against the full listing where it fits, against sympy's
Schreier-Sims order of the generators everywhere, and fireFighting's 6.9e32-element group without a list."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ers_exact.games import GAMES, get_game, load_game
from ers_exact.symmetry.mdp_group import decpomdp_group, format_order
from ers_exact.symmetry.search import SymmetryBudgetError, decpomdp_symmetries, twin_classes


def _key(t):
    return (t.states, t.actions, t.observations)


@pytest.mark.parametrize("name", sorted(GAMES))
def test_group_equals_the_listing_on_builtin_games(name: str) -> None:
    game = get_game(name)
    group = decpomdp_group(game)
    listed = decpomdp_symmetries(game)
    assert group.order == len(listed) == group.generated_order()
    assert {_key(t) for t in group.elements(10**6)} == {_key(t) for t in listed}


@pytest.mark.parametrize(
    "fname", ["dectiger.dpomdp", "broadcastChannel.dpomdp", "recycling.dpomdp", "GridSmall.dpomdp"]
)
def test_group_equals_the_listing_on_standard_files(dpomdp_dir: Path, fname: str) -> None:
    game = load_game(dpomdp_dir / fname, horizon=2)
    group = decpomdp_group(game)
    assert group.order == len(decpomdp_symmetries(game)) == group.generated_order()


@pytest.mark.slow  # 7 s; the default suite reaches fireFighting H=2's groups through test_er_scale.py
def test_firefighting_group_without_listing(dpomdp_dir: Path) -> None:
    """Issue 23: `symmetries fireFighting_2_3_3 --horizon 2` was refused (>= 3.47e32 elements)."""
    game = load_game(dpomdp_dir / "fireFighting_2_3_3.dpomdp", horizon=2)
    group = decpomdp_group(game)
    twins = math.prod(math.factorial(len(c)) for c in twin_classes(game))
    assert twins > 3.4e32 and group.order == 2 * twins  # one non-trivial policy part: the agents' action swap
    assert group.generated_order() == group.order  # sympy, from the generators alone
    data = group.to_json()
    assert data["closed"] and data["order_on_policies"] == 2 and data["order_text"].startswith("~6.9e32")
    assert len(data["orbits"]["actions_0"]) == 1 and len(data["orbits"]["states"]) > 100
    with pytest.raises(SymmetryBudgetError, match=r"6\.9e32"):
        next(group.elements(10_000))


def test_format_order() -> None:
    assert format_order(8294400) == "8,294,400"
    assert format_order(math.factorial(100) * 8294400).startswith("~7.7e164")
    assert format_order(math.factorial(100) * 7, (100,)).endswith("(100! * 7)")
    assert format_order(math.factorial(432)).startswith("~4.3e952")
