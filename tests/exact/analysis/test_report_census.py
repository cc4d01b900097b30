"""Symmetry reports (Phi_MDP and Phi_ER as groups at one alpha, and the atlas over a grid of alphas) and
the census of random small games, directly and through the CLI."""

from __future__ import annotations

import json

import pytest

from ers_exact.analysis.report import atlas, symmetry_report
from ers_exact.cli import main
from ers_exact.games import get_game
from ers_exact.io.dpomdp import read_dpomdp
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.fixed_points import SolverConfig


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
    print(
        f"toy alpha={alpha}: |Phi_MDP| = {rep['mdp']['order']}, |Phi_ER| = {rep['er']['order']} "
        f"({rep['er']['order_on_policies']} on policies)"
    )
    # the member is the admissible twin: it also swaps the observations x and m
    twin = next(e for e in rep["er"]["elements"] if swap_both(e))
    names = toy.game.observation_names[0]
    x, m = names.index("x"), names.index("m")
    assert twin["observations"][0][x] == m and twin["observations"][0][m] == x


@pytest.mark.parametrize("er_method", ["exhaustive", "generators"])
def test_er_report_is_defined_where_policies_underflow(toy, er_method: str, capsys) -> None:
    """At alpha = 0.001 the toy game's optimal points have logit gaps near 1 / alpha = 1000, beyond the ~745
    where exp underflows: action probabilities are exactly 0, the histories after them unreachable in float64,
    and every residual on policies NaN. The exhaustive test then rejected every candidate, the identity
    included (|Phi_ER| = 0), and the generator search dropped the double swap (1 on policies); then both
    refused alpha <= 0.0013 and atlas marked those rows er_undefined. The test now runs on the solver's
    log-policies (symmetry/er_test.py): 2 on policies at 0.001, as at 0.0014 (just above the underflow, on
    probabilities) and README's 0.2-0.45. Undefined rows remain where the solver itself refuses alpha
    (logits beyond LOGIT_LIMIT: 1e-9 here); atlas names the reason and goes on with the other alphas."""
    ok = symmetry_report(toy, 0.0014, er_method=er_method)  # the smallest logits still representable
    low = symmetry_report(toy, 0.001, er_method=er_method)
    assert ok["er"]["order_on_policies"] == low["er"]["order_on_policies"] == 2
    assert ok["mdp_subgroup_of_er"] and low["mdp_subgroup_of_er"]
    result = atlas(toy, [0.3, 0.001, 1e-9])
    tiny, low_row, high = result["rows"]
    assert tiny["alpha"] == 1e-9 and "too small" in tiny["er_undefined"]
    assert tiny["er_order_on_policies"] is None and tiny["pool_size"] is None
    assert low_row["er_order_on_policies"] == high["er_order_on_policies"] == 2
    assert "er_undefined" not in low_row and "er_undefined" not in high
    assert tiny["mdp_order"] == low_row["mdp_order"] == high["mdp_order"] == 1  # independent of alpha
    assert main(["atlas", "toy-coordination", "--alphas", "1e-9,0.001,0.3"]) == 0
    out = capsys.readouterr().out
    assert "alpha 1e-09: " in out and "alpha 0.001: " not in out


def test_atlas_psi_order_beyond_float_precision_is_exact_digits_as_symmetries_gives() -> None:
    """|Psi| = |S|! x (action and observation permutations) passes 2^53 at 19 states: ``symmetries`` writes
    it as a string of its digits (a JSON reader that parses numbers as doubles would round it), ``atlas`` wrote
    the bare integer. Both now give the digits, checked against math.factorial. (The reward grows with the
    state, so that Phi_MDP permutes no states and stays small.)"""
    import math

    import numpy as np

    from ers_exact.analysis.report import atlas
    from ers_exact.model.game import make_game

    S = 19
    game = make_game(
        name="wide",
        states=tuple(f"s{k}" for k in range(S)),
        actions=(("a", "b"), ("a", "b")),
        observations=(("n",), ("n",)),
        transition=np.full((S, 4, S), 1.0 / S),
        observation=np.ones((4, S, 1)),
        reward=np.array([1.0, 0.0, 0.0, 1.0])[None, :, None]
        * (1.0 + np.arange(S))[:, None, None]
        / S
        * np.ones((S, 4, S)),
        initial_belief=np.full(S, 1.0 / S),
        horizon=1,
        discount=1.0,
    )
    tree = enumerate_histories(game)
    expected = math.factorial(S) * 2 * 2  # |S|! x (2 action permutations per agent), one observation each
    assert expected > 2**53
    res = atlas(tree, [1.0], SolverConfig(n_starts=2))
    assert (
        res["psi_order"] == str(expected) == symmetry_report(tree, 1.0, SolverConfig(n_starts=2))["psi_order"]
    )


@pytest.mark.parametrize("alpha, er_order", [(0.25, 6), (0.5, 1296), (1.0, 1296)])
def test_three_lever_er_symmetries(alpha: float, er_order: int) -> None:
    rep = symmetry_report(enumerate_histories(get_game("three-lever")), alpha, SolverConfig(n_starts=16))
    assert rep["er"]["order_on_policies"] == er_order
    assert rep["mdp"]["order"] == 6 and rep["mdp_subgroup_of_er"]


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
    for r in out["games"]:  # larger as maps of policies implies larger as subgroups of Psi
        assert r["er_larger_on_policies"] is None or r["er_larger_on_policies"] <= r["er_strictly_larger"]
    saved = [r["saved"] for r in out["games"] if r.get("saved")]
    assert len(saved) == out["summary"]["all"]["er_strictly_larger"]
    for path in saved:
        read_dpomdp(path, horizon=2)


@pytest.mark.parametrize(("horizon", "er_distinct"), [(1, 4), (2, 4)])
def test_distinct_maps_on_policies_count_images_of_a_generic_policy(horizon: int, er_distinct: int) -> None:
    """At H = 1 no local history of dectiger holds an observation: Phi_ER's 16 policy parts are 4 maps of
    policies (its 4 action parts), and the census counted such a game as "Phi_ER strictly larger" on
    policies. ``distinct_on_policies`` against a second method: the distinct images of one random policy
    with distinct entries (two different maps of policies move it differently)."""
    import numpy as np

    from ers_exact.model.transformation import Transformation, apply_to_policy

    tree = enumerate_histories(get_game("dectiger").with_horizon(horizon))
    rep = symmetry_report(tree, 0.25, SolverConfig(n_starts=8, seed=0), max_elements=10_000)
    rng = np.random.default_rng(0)
    pi = tuple(rng.dirichlet(np.ones(h.legal.shape[1]), size=len(h)) for h in tree.local)

    def images(elements: list[dict]) -> int:
        found = {
            b"".join(p.round(12).tobytes() for p in apply_to_policy(tree, Transformation.from_json(e), pi))
            for e in elements
        }
        return len(found)

    er = rep["er"]
    assert er["distinct_on_policies"] == images(er["elements"]) == er_distinct
    assert rep["mdp"]["distinct_on_policies"] == images(rep["mdp"]["elements"]) == 2
    assert er["order_on_policies"] == (16 if horizon == 1 else 4)
