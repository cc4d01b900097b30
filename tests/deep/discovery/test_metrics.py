"""Table 2's metrics of a deep discovery (``discovery.scores.group_metrics``) against the paper's definitions, on
three-lever with random tabular policies and hand-built symmetries, scored exactly: J_k = E_{phi_1..phi_k}
E_{pi} J((phi_1 o ... o phi_k)(pi)) with phi_i uniform over the kept, and the relative reconstruction loss."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from ers_deep.discovery import LearnedSymmetry, compose
from ers_deep.discovery.scores import (
    composition_tuples,
    exact_value,
    group_metrics,
    sample_observations,
    set_score,
)
from ers_deep.envs.tabular import TabularEnv
from ers_deep.pools import Policy
from tests.deep.discovery.random_policies import permutation_symmetry, random_tabular_policies
from tests.exact.zsc import aoh_reference as ref

GAME = "three-lever"


@pytest.fixture(scope="module")
def held_out() -> list[Policy]:
    """Two random (untrained, far from uniform) three-lever policies: symmetries change their J."""
    return random_tabular_policies(GAME, (0, 1))


@pytest.fixture(scope="module")
def symmetries() -> list[LearnedSymmetry]:
    """A lever relabelling (levers and observations 0 <-> 1), an action transposition alone, the identity."""
    env = TabularEnv(GAME)
    return [
        permutation_symmetry(env, (1, 0, 2), (1, 0, 2), "levers"),
        permutation_symmetry(env, (2, 1, 0), (0, 1, 2), "actions"),
        permutation_symmetry(env, (0, 1, 2), (0, 1, 2), "identity"),
    ]


def test_j_k_average_every_composition_of_the_kept(
    held_out: list[Policy], symmetries: list[LearnedSymmetry]
) -> None:
    """J_1 is the mean J(phi(pi)) over every kept phi and J_2, J_3 over every ordered pair and triple (as
    ers-exact's group_metrics). J_1 was a mean over min(6, l^k) draws with replacement: with two kept of
    different J, the seed decided whether one of them counted twice and the other not at all."""
    test, syms = held_out, symmetries
    value = exact_value(TabularEnv(GAME))
    obs = [sample_observations(p) for p in test]
    one = [set_score(s, test, False, value) for s in syms]
    assert max(one) - min(one) > 0.1  # the kept differ in J, so which are averaged matters
    expected = {
        k: np.mean(
            [
                set_score(compose([syms[i] for i in t]), test, False, value)
                for t in itertools.product(range(3), repeat=k)
            ]
        )
        for k in (1, 2, 3)
    }
    assert expected[1] == pytest.approx(np.mean(one), abs=1e-12)
    for seed in range(4):
        metrics = group_metrics(syms, test, obs, value, seed)
        for k in (1, 2, 3):
            assert metrics[f"J_{k}"] == pytest.approx(expected[k], abs=1e-12), (seed, k)
    two = group_metrics(syms[:2], test, obs, value, 0)
    assert two["J_1"] == pytest.approx(np.mean(one[:2]), abs=1e-12)


def test_beyond_the_budget_j_k_draws_distinct_compositions() -> None:
    rng = np.random.default_rng(0)
    assert composition_tuples(11, 1, 6, rng) == [
        (i,) for i in range(11)
    ]  # J_1: every kept phi, whatever the budget
    assert composition_tuples(2, 2, 6, rng) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    drawn = composition_tuples(3, 3, 6, rng)
    assert len(drawn) == len(set(drawn)) == 6 and all(len(t) == 3 and max(t) < 3 for t in drawn)


def test_reconstruction_loss_averages_every_held_out_policys_self_play(held_out: list[Policy]) -> None:
    """The relative reconstruction loss is E_pi E_{tau ~ pi} ||tau - phi_O^2(tau)|| / ||tau|| over the held-out
    policies (paper, Table 2). It was the mean over every local history of a tabular game, whatever the
    policies (``sample_observations`` gave every history), and over the first held-out policy's observations
    elsewhere. phi_O here maps observation L1 to L2 (not a permutation), so phi_O^2 moves exactly the
    observations L1: a one-round history (a_0, L1) has ratio ||e_L1 - e_L2|| / sqrt(2) = 1 (one-hot action and
    observation per step), any other 0, the empty ones (t = 0) are left out, and how often a policy's play
    reaches L1 decides its loss."""
    env = TabularEnv(GAME)
    merge = permutation_symmetry(env, (0, 1, 2), (1, 1, 2), "merge")
    seen = [sample_observations(p) for p in held_out]
    K = env.obs_shape[0]
    for o in seen:  # one-hot local histories of the acting seats: 64 games x 64 steps x 2 seats
        assert o.shape == (64 * 64 * 2, K) and torch.equal(o.sum(1), torch.ones(len(o)))
    assert not torch.equal(seen[0].mean(0), seen[1].mean(0))  # each policy's own play
    per = []
    for o in seen:
        ratios = []
        for k in o.argmax(1).tolist():
            i = int(np.searchsorted(env.offsets, k, side="right")) - 1
            hist = env.tree.local[i].as_tuple(k - env.offsets[i])
            if hist:  # the empty history: 0/0, left out
                ratios.append(ref.relative_error(hist, (1, 1, 2), 3, 3))
        assert len(ratios) == len(o) // 2  # two rounds: half the acting steps are at t = 0
        per.append(float(np.mean(ratios)))
    assert abs(per[0] - per[1]) > 0.1
    metrics = group_metrics([merge], held_out, seen, exact_value(env), 0)
    assert metrics["reconstruction_loss"] == pytest.approx(np.mean(per), abs=1e-6)
