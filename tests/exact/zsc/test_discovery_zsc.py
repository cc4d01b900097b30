"""Discovery (Algorithms 1-3), other-play training and the ZSC pipeline (the shared interface types' round
trips are in tests/interface; the exact return gradient is in tests/exact/model)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ers_exact.cli import main
from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.objectives import cross_play, other_play
from ers_exact.model.transformation import Transformation, apply_to_policy
from ers_exact.model.values import expected_return
from ers_exact.solve.fixed_points import solve_fixed_points
from ers_exact.symmetry.candidates import CandidateSpace
from ers_exact.symmetry.search import decpomdp_symmetries
from ers_exact.zsc.discovery import DiscoveryConfig, discover, group_metrics, learn_action_distribution
from ers_exact.zsc.iql import IQLConfig, iql_pool
from ers_exact.zsc.other_play import OPConfig, op_gradient, train_other_play
from ers_exact.zsc.pipeline import PopulationConfig, run_zsc

from ..finite_differences import perturbed_value, raw_return


@pytest.fixture(scope="module")
def lever3():
    return enumerate_histories(get_game("three-lever"))


def test_op_gradient_matches_finite_differences(lever3) -> None:
    rng = np.random.default_rng(0)
    phis = decpomdp_symmetries(lever3.game)
    pol = tuple(rng.dirichlet(np.ones(3), size=len(h)) for h in lever3.local)
    grad = op_gradient(lever3, pol, phis)
    J = raw_return(lever3)

    def op(p):  # OP = mean over phi and seats of J of mixed profiles, spelled out with the raw J
        vals = []
        for phi in phis:
            img = tuple(_image_raw(lever3, phi, i, p[i]) for i in range(2))
            vals += [J((p[0], img[1])), J((img[0], p[1]))]
        return float(np.mean(vals))

    for i, k, a in [(0, 0, 1), (1, 4, 2), (0, 7, 0)]:
        assert grad[i][k, a] == pytest.approx(perturbed_value(op, pol, i, k, a), abs=1e-6)


def _image_raw(tree, phi, i, pol_i):
    from ers_exact.model.transformation import history_map

    hmap = history_map(tree, phi, i)
    out = np.empty_like(pol_i)
    out[hmap[:, None], np.asarray(phi.actions[i])[None, :]] = pol_i
    return out


def test_other_play_training_reaches_the_four_thirds_optimum(lever3) -> None:
    result = train_other_play(lever3, decpomdp_symmetries(lever3.game), OPConfig(seeds=5))
    assert result.op_value == pytest.approx(4 / 3, abs=1e-6)
    assert other_play(lever3, result.policy, decpomdp_symmetries(lever3.game)) == pytest.approx(
        4 / 3, abs=1e-6
    )


def test_each_of_five_ers_agents_finds_exactly_the_six_lever_relabelings(lever3) -> None:
    """The paper's claim with its own recipe: IQL pools (shared Q, epsilon 0.1, lr 0.1) at alpha = 1."""
    mdp = {(m.actions, m.observations) for m in decpomdp_symmetries(lever3.game)}
    for agent in range(5):
        pool = iql_pool(lever3, 1.0, IQLConfig(runs=10, episodes=1500, seed=agent))
        found = discover(lever3, pool, DiscoveryConfig(top=6))
        assert {(t.actions, t.observations) for t in found.transformations} == mdp
        # Dec-POMDP symmetries preserve J exactly, so every composition does too
        assert pytest.approx(found.pool_return, abs=1e-12) == found.J_1
        assert pytest.approx(found.pool_return, abs=1e-12) == found.J_3


@pytest.fixture(scope="module")
def toy_pool():
    tree = enumerate_histories(get_game("toy-coordination"))
    fs = solve_fixed_points(tree, 0.3)
    return tree, [p.policy for p in fs.optimal_points], fs.J_star


def _is_twin(t: Transformation, tree) -> bool:
    names = tree.game.observation_names[0]
    x, m = names.index("x"), names.index("m")
    return t.actions == ((1, 0), (1, 0)) and all(o[x] == m and o[m] == x for o in t.observations)


def test_toy_gradient_discovery_recovers_the_swap(toy_pool) -> None:
    tree, pool, j_star = toy_pool
    result = discover(tree, pool, DiscoveryConfig(search="gradient", top=2, steps=80, samples=16))
    twin = [t for t in result.transformations if _is_twin(t, tree)]
    assert twin and max(result.scores) == pytest.approx(j_star, abs=1e-9)


def test_toy_action_distribution_converges_to_the_swap(toy_pool) -> None:
    tree, pool, _ = toy_pool
    ident = Transformation.identity(tree.game)
    twin = next(t for t in discover(tree, pool, DiscoveryConfig(top=4)).transformations if _is_twin(t, tree))
    probs = learn_action_distribution(
        tree, pool, [ident, twin], bias=[0.0, 0.01], steps=2000, learning_rate=5.0
    )
    assert probs[0, 1] == pytest.approx(0.5) and probs[-1, 1] > 0.99


def test_toy_algorithm_3_maps_pi_plus_to_pi_minus(toy_pool) -> None:
    tree, pool, j_star = toy_pool
    result = discover(tree, pool, DiscoveryConfig(algorithm="xp-max", top=1))
    phi = result.transformations[0]
    assert cross_play(tree, pool[0], apply_to_policy(tree, phi, pool[1])) == pytest.approx(j_star, abs=1e-6)
    assert result.scores[0] == pytest.approx(j_star, abs=1e-6)


def test_group_metrics_reconstruction_loss(lever3) -> None:
    rng = np.random.default_rng(1)
    pool = [tuple(rng.dirichlet(np.ones(3), size=len(h)) for h in lever3.local) for _ in range(3)]
    swap = Transformation((0,), ((1, 0, 2), (1, 0, 2)), ((1, 0, 2), (1, 0, 2)))  # an involution
    cycle = Transformation((0,), ((1, 2, 0), (1, 2, 0)), ((1, 2, 0), (1, 2, 0)))  # phi_O^2 != id
    assert group_metrics(lever3, [swap], pool)["reconstruction_loss"] == 0.0
    assert group_metrics(lever3, [cycle], pool)["reconstruction_loss"] == pytest.approx(1.0)


def test_zsc_cli_on_the_toy_game(capsys) -> None:
    assert (
        main(
            [
                "zsc",
                "toy-coordination",
                "--agents",
                "3",
                "--pool-source",
                "exact",
                "--alpha",
                "0.3",
                "--k",
                "2",
                "--top",
                "2",
                "--m",
                "2",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in out["rows"]]
    assert names[1] == "OP + Phi_MDP" and len(out["discovery"]) == 3
    er_row = out["rows"][2]
    # agents that other-play with the learned swap never mis-coordinate with each other: XP = SP
    assert er_row["xp"]["value"] == pytest.approx(er_row["sp"]["value"], abs=1e-6)


@pytest.mark.slow
def test_three_lever_op_er_cross_play_beats_self_play(lever3) -> None:
    report, _ = run_zsc(lever3, PopulationConfig(episodes=2000))
    sp, _, er = report.rows
    assert er.xp.value > sp.xp.value


def test_ties_within_rounding_are_broken_by_candidate_order() -> None:
    """Exact returns of symmetric candidates differ by rounding only; which of them is kept, and in which
    order, must not depend on that noise (the float arithmetic of J changed once and reordered the kept
    set of a run)."""
    from ers_exact.zsc import discovery

    scores = [1.0, 2.0 - 1e-15, 2.0, 0.5, 2.0 + 1e-15, 1.0 + 1e-13]
    assert discovery._ranking(scores) == [1, 2, 4, 0, 5, 3]
    assert discovery._first_best(np.array(scores)) == 1
    assert discovery._first_best(np.array([0.0, -1.0, 3.0])) == 2


def _xp_by_hand(tree, a, b) -> float:
    """eq. XP for two agents, from J alone: 1/2 (J(a^1, b^2) + J(b^1, a^2))."""
    return 0.5 * (expected_return(tree, (a[0], b[1])) + expected_return(tree, (b[0], a[1])))


def test_er_agents_use_the_identity_and_their_learned_set(monkeypatch) -> None:
    """An OP + Phi_ER agent's Phi is {Id} united with its learned symmetries, as in the official code and
    ers-deep (``op_symmetries``): OP averages XP over [pi], which holds pi. On the toy game xp-max learns
    the swap alone; without Id, OP trained XP(pi, swap(pi)) only and the "+ER" symmetriser returned
    swap(pi), a relabelled policy, not a symmetrised one."""
    from ers_exact.zsc import pipeline

    tree = enumerate_histories(get_game("toy-coordination"))
    calls = []  # (Phi, deployed policy) of every OP training, per agent OP + Phi_MDP then OP + Phi_ER
    real = pipeline.train_other_play

    cfg = PopulationConfig(
        agents=3, pool_source="exact", alpha=0.3, k=2, top=2, m=2, op_steps=60, algorithm="xp-max"
    )

    def spy(tree_, phis, config, progress=None):
        result = real(tree_, phis, config, progress)
        calls.append((list(phis), pipeline.deployed_policy(result, cfg.select_by)))
        return result

    monkeypatch.setattr(pipeline, "train_other_play", spy)
    report, discoveries = run_zsc(tree, cfg)
    ident = Transformation.identity(tree.game)
    er_calls = calls[1::2]
    for (phis, _), found in zip(er_calls, discoveries):
        assert ident not in found.transformations  # what makes the rule matter here
        assert len(phis) == len(set(phis)) and set(phis) == {ident, *found.transformations}
    # the OP column: OP^Phi of each deployed policy, spelled out as the mean over Phi of XP(pi, phi(pi))
    op = [
        np.mean([_xp_by_hand(tree, pol, apply_to_policy(tree, f, pol)) for f in phis])
        for phis, pol in er_calls
    ]
    assert report.rows[2].op.value == pytest.approx(np.mean(op), abs=1e-9)
    # XP(*)+ER: the median XP of the policies symmetrised by hand over the same Phi
    sym = [
        tuple(np.mean([apply_to_policy(tree, f, pol)[i] for f in phis], axis=0) for i in range(2))
        for phis, pol in er_calls
    ]
    xp = [_xp_by_hand(tree, sym[a], sym[b]) for a in range(3) for b in range(a + 1, 3)]
    assert report.rows[2].xp_median_er.value == pytest.approx(np.median(xp), abs=1e-9)


def test_algorithm_2_composes_with_the_identity_and_ranks_by_the_plain_return(lever3) -> None:
    """eq. sp-max-with-reg-stoch draws phi_i, phi_j from {Id} united with the known symmetries (the official
    code appends the identity; so does ers-deep): given a 3-cycle alone, each kept phi maximises the objective
    spelled out here over {Id, cycle}^2 among the candidates of its action tuple (it averaged J(cycle o phi o
    cycle) alone before). Algorithm 2 then keeps the top l by J-bar_phi = mean_{pi in Pi'} J(phi(pi)), the plain
    return (its lines 21-25): the scores are J-bar, in decreasing order (they were the regularised objective,
    which ranked them, before 2026-12-07)."""
    pool = iql_pool(lever3, 1.0, IQLConfig(runs=3, episodes=300, seed=0))
    cycle = Transformation((0,), ((1, 2, 0), (1, 2, 0)), ((1, 2, 0), (1, 2, 0)))
    cfg = DiscoveryConfig(algorithm="sp-max-reg", top=36)
    found = discover(lever3, pool, cfg, known=[cycle])
    drawn = [Transformation.identity(lever3.game), cycle]

    def mean_j(phi):
        return np.mean([expected_return(lever3, apply_to_policy(lever3, phi, pi)) for pi in pool])

    def objective(phi):
        composed = np.mean([mean_j(f.compose(phi).compose(g)) for f in drawn for g in drawn])
        moved = [np.mean(np.asarray(o)[np.asarray(o)] != np.arange(len(o))) for o in phi.observations]
        return (1 - cfg.lambda1) * mean_j(phi) + cfg.lambda1 * composed - cfg.lambda2 * 2.0 * np.mean(moved)

    assert len(found.transformations) == 36
    for phi, score in zip(found.transformations, found.scores):
        assert score == pytest.approx(mean_j(phi), abs=1e-9)
    assert all(a >= b - 1e-9 for a, b in zip(found.scores, found.scores[1:]))
    space = CandidateSpace(lever3)
    candidates = [space.transformation(c) for c in space.admissible_combos()]
    for phi in found.transformations[:3]:
        rivals = [objective(c) for c in candidates if c.actions == phi.actions]
        assert len(rivals) == 36 and objective(phi) == pytest.approx(max(rivals), abs=1e-9)
