"""Proven reductions of the certified optimal-set search: logit ties of probabilistically equivalent
last-stage histories (:mod:`ers_exact.solve.equivalence`) and a fundamental domain of exact Dec-POMDP
relabellings (:mod:`ers_exact.solve.orbit_domain`). Each reduction must hold for the real map M (sampled),
refuse what it cannot prove (planted non-equivalent histories, inexact symmetries), and leave the certified
optimal set unchanged."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_exact.games import get_game, load_game
from ers_exact.model.game import Game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.transformation import Transformation
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.config import OptimalSetConfig
from ers_exact.solve.equivalence import equivalent_histories, logit_ties
from ers_exact.solve.optimal_set import certified_optimal_set
from ers_exact.solve.orbit_domain import orbit_domain
from ers_exact.symmetry.mdp_group import decpomdp_group
from tests.exact.strategies import random_game

FAST = OptimalSetConfig(max_seconds=30.0, progress=False)


def _recycling(dpomdp_dir: Path) -> Game:
    return load_game(str(dpomdp_dir / "recycling.dpomdp"), horizon=2)


def _check_ties_hold(game: Game, alpha: float = 0.25, seed: int = 0) -> None:
    """|M_p(y) - M_q(y)| <= slack (plus the float evaluation's own rounding) at random y, for every tie."""
    tree = enumerate_histories(game)
    ties = logit_ties(tree)
    if not len(ties):
        return
    coords = LogitCoordinates(tree)
    y = np.random.default_rng(seed).normal(size=(16, coords.dim)) * 4.0
    m = coords.logit_map(y, alpha)
    scale = 1e-12 * (1.0 + np.abs(m).max())
    assert np.all(np.abs(m[:, ties.p] - m[:, ties.q]) <= ties.slack(alpha) + scale)


def test_recycling_equivalent_histories_are_proven(dpomdp_dir: Path) -> None:
    """Histories 1, 2, 4 (and 3, 5) of each agent at t = 1: 12 tied coordinate pairs, slack ~1e-14."""
    tree = enumerate_histories(_recycling(dpomdp_dir))
    for agent in range(2):
        pairs = {(rep, tau) for rep, tau, _ in equivalent_histories(tree, agent)}
        assert pairs == {(1, 2), (1, 4), (3, 5)}
    ties = logit_ties(tree)
    assert len(ties) == 12
    assert np.all(ties.slack(0.25) < 1e-13)
    _check_ties_hold(_recycling(dpomdp_dir))


def _blind(game: Game) -> Game:
    """``game`` with uniform observations: last-stage histories that differ in observations only are
    equivalent."""
    return dataclasses.replace(
        game, observation=np.full_like(game.observation, 1.0 / game.observation.shape[2])
    )


@pytest.mark.parametrize("size", [1e-3, 1e-13], ids=["large", "below-float-noise"])
def test_planted_non_equivalent_history_is_not_tied(size: float) -> None:
    """A blind random game has ties; moving ``size`` of U's mass between two joint observations in state 0
    only makes those histories non-proportional (however small the change): fewer pairs are tied, every
    tie left still holds, and (for the large change) a dropped pair really differs."""
    blind = _blind(random_game(np.random.default_rng(7)))
    U = blind.observation.copy()
    U[:, 0, 0] += size
    U[:, 0, 1] -= size
    planted = dataclasses.replace(blind, observation=U)
    before = {(i, r, t) for i in range(2) for r, t, _ in equivalent_histories(enumerate_histories(blind), i)}
    tree = enumerate_histories(planted)
    after = {(i, r, t) for i in range(2) for r, t, _ in equivalent_histories(tree, i)}
    assert before and not after
    _check_ties_hold(planted)
    if size > 1e-6:
        coords = LogitCoordinates(tree)
        where = {lab: d for d, lab in enumerate(coords.labels)}
        m = coords.logit_map(np.random.default_rng(0).normal(size=(16, coords.dim)) * 4.0, 0.25)
        gaps = [np.max(np.abs(m[:, where[(i, r, 1)]] - m[:, where[(i, t, 1)]])) for i, r, t in before]
        assert max(gaps) > 1e-6  # a tie here would have been wrong


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_obs=st.integers(2, 3))
def test_ties_hold_on_random_games(seed: int, n_obs: int) -> None:
    """Random two-stage games, as drawn and with uninformative observations (U uniform: last-stage
    histories that differ in their observations only are then equivalent)."""
    rng = np.random.default_rng(seed)
    game = random_game(rng, n_observations=n_obs)
    _check_ties_hold(game, alpha=0.5, seed=seed % 1000)
    blind = dataclasses.replace(
        game, observation=np.full_like(game.observation, 1.0 / game.observation.shape[2])
    )
    assert len(logit_ties(enumerate_histories(blind))) > 0
    _check_ties_hold(blind, alpha=0.5, seed=seed % 1000)


def test_three_lever_domain_holds_an_image_of_every_policy() -> None:
    """Delta: agent 0's first-action probabilities sorted; some relabelling maps each policy into it."""
    game = get_game("three-lever")
    tree = enumerate_histories(game)
    domain = orbit_domain(tree, decpomdp_group(game).policy_parts)
    assert domain is not None and domain.orbit == (0, 1, 2) and domain.order == 6
    coords = LogitCoordinates(tree)
    y = np.random.default_rng(1).normal(size=(50, coords.dim)) * 3.0
    images = domain.images(coords, y).reshape(-1, len(y), coords.dim)  # [G - 1, P, D]
    every = np.concatenate([y[None], images])
    for p in range(len(y)):
        lo, hi = domain.contract(every[:, p], every[:, p])
        assert np.any(np.all(lo <= hi, axis=1))
    lo, hi = domain.contract(y, y)  # a point-box survives the contraction only if it lies in Delta
    inside = np.all(lo <= hi, axis=1)
    first = coords.to_policy(y)[0][:, 0]  # [P, 3]
    assert np.array_equal(inside, (first[:, 0] >= first[:, 1]) & (first[:, 1] >= first[:, 2]))


def test_images_are_linear_in_the_logits_at_low_temperature() -> None:
    """A relabelling permutes actions, so each image logit is a difference of logits: images(c y) = c images(y).
    At logits of 1e3 (alpha <= 0.1) the probabilities underflow; the images are taken in log space and stay
    exact (through probabilities they were -inf, and dectiger's optimal set at alpha 0.05 was not proven)."""
    game = get_game("three-lever")
    tree = enumerate_histories(game)
    domain = orbit_domain(tree, decpomdp_group(game).policy_parts)
    assert domain is not None
    coords = LogitCoordinates(tree)
    y = np.random.default_rng(2).normal(size=(6, coords.dim)) * 3.0
    big = domain.images(coords, 400.0 * y)
    assert np.isfinite(big).all()
    np.testing.assert_allclose(big, 400.0 * domain.images(coords, y), rtol=1e-12, atol=1e-10)


def test_dectiger_at_low_temperature_is_proven_complete() -> None:
    """alpha 0.05: the optimum's logits reach -825; its mirror image is certified and the set proven complete."""
    game = get_game("dectiger")
    result = certified_optimal_set(
        enumerate_histories(game), 0.05, FAST, relabellings=decpomdp_group(game).policy_parts
    )
    assert result.complete, result.note
    assert len(result.optimal_points) == 1 and pytest.approx(-4.0, abs=1e-9) == result.optimal_points[0].J


def test_inexact_symmetry_is_refused() -> None:
    """A reward changed by 1e-13 breaks the lever relabellings; a non-symmetry is refused as well."""
    game = get_game("three-lever")
    R = game.reward.copy()
    R[0, 0] += 1e-13
    perturbed = dataclasses.replace(game, reward=R)
    assert orbit_domain(enumerate_histories(perturbed), decpomdp_group(game).policy_parts) is None
    swap_obs_only = Transformation((0,), ((0, 1, 2), (0, 1, 2)), ((1, 0, 2), (1, 0, 2)))
    assert orbit_domain(enumerate_histories(game), [Transformation.identity(game), swap_obs_only]) is None


@pytest.mark.parametrize("name", ["dectiger", "handshake"])
def test_reductions_leave_the_certified_set_unchanged(name: str) -> None:
    """The same optimal points (J and policies) with and without ties and the symmetry domain."""
    game = get_game(name)
    tree = enumerate_histories(game)
    off = certified_optimal_set(tree, 0.25, dataclasses.replace(FAST, tie_equivalent=False))
    on = certified_optimal_set(tree, 0.25, FAST, relabellings=decpomdp_group(game).policy_parts)
    assert off.complete and on.complete
    assert on.reductions
    assert len(on.optimal_points) == len(off.optimal_points)
    for p in off.optimal_points:
        assert any(np.max(np.abs(p.y - q.y)) < 1e-6 for q in on.optimal_points)


@pytest.mark.slow
def test_two_lever_orbits_complete_the_set() -> None:
    """two-lever alpha 0.25: 4 optimal points, some found only as images of roots in the domain."""
    game = get_game("two-lever")
    result = certified_optimal_set(
        enumerate_histories(game), 0.25, FAST, relabellings=decpomdp_group(game).policy_parts
    )
    assert result.complete and len(result.optimal_points) == 4
