"""Phi_MDP (two exhaustive searches) and Phi_ER (exact membership against the optimal pool), as groups."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from ers_exact.boltzmann import boltzmann_residual
from ers_exact.census import planted_game, random_small_game
from ers_exact.cli import main
from ers_exact.er_symmetry import er_symmetries
from ers_exact.fixed_points import SolverConfig, solve_fixed_points
from ers_exact.games import GAMES, get_game
from ers_exact.groups import is_subset, summarise
from ers_exact.histories import enumerate_histories
from ers_exact.report import symmetry_report
from ers_exact.symmetry import decpomdp_symmetries, psi_order
from ers_exact.transformation import Transformation, apply_to_policy, is_decpomdp_symmetry
from ers_exact.values import expected_return


def keyset(phis):
    return {(p.states, p.actions, p.observations) for p in phis}


@pytest.mark.parametrize("name", list(GAMES))
def test_exhaustive_and_pruned_searches_agree_on_builtin_games(name: str) -> None:
    game = get_game(name)
    assert keyset(decpomdp_symmetries(game, "exhaustive")) == keyset(decpomdp_symmetries(game, "pruned"))


@pytest.mark.parametrize("seed", range(12))
def test_searches_agree_on_random_and_planted_games(seed: int) -> None:
    rng = np.random.default_rng(seed)
    game = random_small_game(rng, f"r{seed}")
    if seed % 2:
        phi = Transformation.random(game, rng)
        game = planted_game(game, phi)
        assert is_decpomdp_symmetry(game, phi, atol=1e-12)
    exhaustive = decpomdp_symmetries(game, "exhaustive")
    assert keyset(exhaustive) == keyset(decpomdp_symmetries(game, "pruned"))
    if seed % 2:
        assert (phi.states, phi.actions, phi.observations) in keyset(exhaustive)
    assert summarise(exhaustive).closed  # a group: closed under composition


def test_three_lever_mdp_symmetries_are_the_six_lever_relabelings() -> None:
    expected = {((0,), (p, p), (p, p)) for p in itertools.permutations(range(3))}
    assert keyset(decpomdp_symmetries(get_game("three-lever"))) == expected
    assert psi_order(get_game("three-lever")) == 6**4


@pytest.fixture(scope="module")
def toy():
    return enumerate_histories(get_game("toy-coordination"))


@pytest.mark.parametrize("alpha", [0.2, 0.3, 0.45])
def test_toy_double_action_swap_is_er_not_mdp(toy, alpha: float) -> None:
    rep = symmetry_report(toy, alpha)
    swap_both = lambda t: t["actions"] == [[1, 0], [1, 0]]  # noqa: E731
    assert any(swap_both(e) for e in rep["er"]["elements"])
    assert not any(swap_both(e) for e in rep["mdp"]["elements"])
    assert rep["mdp_subgroup_of_er"] and rep["er"]["closed"]
    print(f"toy alpha={alpha}: |Phi_MDP| = {rep['mdp']['order']}, |Phi_ER| = {rep['er']['order']} "
          f"({rep['er']['order_on_policies']} on policies)")
    # the member is the admissible twin: it also swaps the observations x and m
    twin = [e for e in rep["er"]["elements"] if swap_both(e)][0]
    names = toy.game.observation_names[0]
    x, m = names.index("x"), names.index("m")
    assert twin["observations"][0][x] == m and twin["observations"][0][m] == x


def test_er_members_really_preserve_the_optimal_pool(toy) -> None:
    fs = solve_fixed_points(toy, 0.3)
    pool = [p.policy for p in fs.optimal_points]
    er = er_symmetries(toy, pool, 0.3, fs.J_star)
    assert len(er.members) == 2 and er.orbits == ((0, 1),) and er.images_outside_pool == 0
    for phi in er.members:
        for pi in pool:
            image = apply_to_policy(toy, phi, pi)
            assert boltzmann_residual(toy, image, 0.3) < 1e-8
            assert expected_return(toy, image) == pytest.approx(fs.J_star, abs=1e-8)


@pytest.mark.parametrize("alpha, er_order", [(0.25, 6), (0.5, 1296), (1.0, 1296)])
def test_three_lever_er_symmetries(alpha: float, er_order: int) -> None:
    rep = symmetry_report(enumerate_histories(get_game("three-lever")), alpha, SolverConfig(n_starts=16))
    assert rep["er"]["order_on_policies"] == er_order
    assert rep["mdp"]["order"] == 6 and rep["mdp_subgroup_of_er"]


@pytest.mark.parametrize("name", list(GAMES))
@pytest.mark.parametrize("alpha", [0.25, 1.0])
def test_mdp_is_a_subgroup_of_er(name: str, alpha: float) -> None:
    tree = enumerate_histories(get_game(name))
    fs = solve_fixed_points(tree, alpha, SolverConfig(n_starts=8, complete_search=False, certify=False))
    er = er_symmetries(tree, [p.policy for p in fs.optimal_points], alpha, fs.J_star)
    mdp = decpomdp_symmetries(tree.game)
    assert is_subset(mdp, er.members)
    if er.members:
        assert summarise(er.members, include_states=False).closed


def test_symmetries_cli_json(capsys) -> None:
    assert main(["symmetries", "toy-coordination", "--alpha", "0.3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"alpha", "psi_order", "pool_size", "mdp", "er", "mdp_subgroup_of_er"} <= set(out)
    for part in ("mdp", "er"):
        assert {"order", "elements"} <= set(out[part])
    assert out["psi_order"] == 24 * 2 * 2 * 6 * 6 and out["er"]["order"] == 24 * 2


def test_atlas_and_census_cli(tmp_path, capsys) -> None:
    png = tmp_path / "atlas.png"
    assert main(["atlas", "toy-coordination", "--alphas", "0.3,0.6", "--plot", str(png), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["er_order_on_policies"] for r in out["rows"]] == [2, 4] and png.stat().st_size > 1000
    assert main(["census", "--games", "4", "--seed", "1", "--out", str(tmp_path / "c"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["all"]["games"] == 4 and out["summary"]["all"]["mdp_subgroup_of_er_everywhere"]
    saved = [r["saved"] for r in out["games"] if r.get("saved")]
    assert len(saved) == out["summary"]["all"]["er_strictly_larger"]
    from ers_exact.io.dpomdp import read_dpomdp

    for path in saved:
        read_dpomdp(path, horizon=2)
