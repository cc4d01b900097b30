"""Last-stage relabellings (:mod:`ers_exact.solve.local_symmetry`) and closed blocks
(:mod:`ers_exact.solve.closed_blocks`): every relabelling found commutes with the
Boltzmann map and keeps J (sampled), an inexact game loses exactly the relabellings it breaks, and the
certified optimal set is the same with the reduction on and off (two-lever, random games with a planted
last-stage symmetry); a closed block's logits depend on it alone, its root boxes hold exactly the roots a dense
grid + Newton search finds, and the certified set is the same with the blocks on and off."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ers_exact.games import get_game
from ers_exact.model.game import Game
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.solve.boltzmann import LogitCoordinates, logit_bound
from ers_exact.solve.box_enclosure import BoxEnclosure
from ers_exact.solve.closed_blocks import closed_blocks, closed_components
from ers_exact.solve.config import OptimalSetConfig, SolverConfig
from ers_exact.solve.local_symmetry import LocalDomain, local_domain
from ers_exact.solve.optimal_set import certified_optimal_set
from tests.exact.strategies import random_game

FAST = OptimalSetConfig(max_seconds=60.0, progress=False)
SOLVER = SolverConfig(n_starts=16, complete_search=False, progress=False)


def _check_commutes(tree: HistoryTree, dom: LocalDomain, seed: int) -> None:
    """M(g y) = g M(y) and J(g y) = J(y) at random points, for every relabelling g of every component."""
    coords = LogitCoordinates(tree)
    y = np.random.default_rng(seed).normal(size=(8, coords.dim)) * 2
    for alpha in (0.3, 1.0):
        ev = coords.evaluate(y, alpha, jacobian=False)
        for comp in dom.components:
            for perm in comp.perms:
                gy = dom.apply(coords, y, comp, perm)
                ev_g = coords.evaluate(gy, alpha, jacobian=False)
                assert np.allclose(ev_g.J, ev.J, rtol=0, atol=1e-12)
                g_m = dom.apply(coords, ev.values, comp, perm)
                assert np.allclose(ev_g.values, g_m, rtol=1e-9, atol=1e-9)


def test_three_lever_components() -> None:
    """After the first round, the pair of histories (a, b) of agent 1 and (b, a) of agent 2 meet only each
    other: 9 components, each with S_3 on both agents' levers at once (5 relabellings besides the identity)."""
    tree = enumerate_histories(get_game("three-lever"))
    dom = local_domain(tree)
    assert dom is not None and len(dom) == 9
    for comp in dom.components:
        assert all(len(h) == 1 for h in comp.histories)
        assert sorted(comp.perms) == sorted(
            (p, p) for p in itertools.permutations(range(3)) if p != (0, 1, 2)
        )
    _check_commutes(tree, dom, 0)


def test_relabellings_are_linear_in_the_logits_at_low_temperature() -> None:
    """apply(c y) = c apply(y) (each image logit is a difference of logits), also at logits of 1e3 where the
    probabilities underflow (the relabelling runs in log space)."""
    tree = enumerate_histories(get_game("three-lever"))
    dom = local_domain(tree)
    assert dom is not None
    coords = LogitCoordinates(tree)
    y = np.random.default_rng(3).normal(size=(4, coords.dim)) * 3.0
    for comp in dom.components[:3]:
        for perm in comp.perms:
            big = dom.apply(coords, 400.0 * y, comp, perm)
            assert np.isfinite(big).all()
            np.testing.assert_allclose(big, 400.0 * dom.apply(coords, y, comp, perm), rtol=1e-12, atol=1e-10)


def test_inexact_reward_keeps_only_the_relabellings_it_allows() -> None:
    """A reward changed by 1e-13 at (lever 1, lever 1) breaks every relabelling that moves lever 1: only the
    swap of levers 0 and 2 is left (compared bit for bit, not to a tolerance)."""
    game = get_game("three-lever")
    reward = game.reward.copy()
    reward[0, 4, 0] += 1e-13  # joint action (1, 1)
    tree = enumerate_histories(dataclasses.replace(game, reward=reward))
    dom = local_domain(tree)
    assert dom is not None
    for comp in dom.components:
        assert comp.perms == (((2, 1, 0), (2, 1, 0)),)
    _check_commutes(tree, dom, 1)


@pytest.mark.parametrize("name", ["dectiger", "toy-coordination", "handshake"])
def test_no_relabelling_where_none_exists(name: str) -> None:
    assert local_domain(enumerate_histories(get_game(name))) is None


def _planted(seed: int, n_actions: tuple[int, int], n_obs: int) -> Game:
    """A random H = 2 game whose T[s, a, :] and R[s, a, :] are invariant under a random joint permutation
    (sigma_1, sigma_2) of the actions (each orbit of joint actions copies its first member's rows: exact)."""
    rng = np.random.default_rng(seed)
    game = random_game(
        rng, n_states=2, n_actions=n_actions, n_observations=n_obs, horizon=2, reward_kind="float"
    )
    sig = [rng.permutation(a) for a in n_actions]
    ja = [tuple(int(x) for x in row) for row in np.asarray(game.joint_actions)]
    index = {a: k for k, a in enumerate(ja)}
    T, R = game.transition.copy(), game.reward.copy()
    done: set[int] = set()
    for k, a in enumerate(ja):
        if k in done:
            continue
        cur = a
        while True:
            cur = tuple(int(sig[j][x]) for j, x in enumerate(cur))
            m = index[cur]
            if m == k:
                break
            T[:, m], R[:, m] = T[:, k], R[:, k]
            done.add(m)
    return dataclasses.replace(game, transition=T, reward=R)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_actions=st.sampled_from([(2, 2), (2, 3), (3, 3)]),
    n_obs=st.sampled_from([1, 2]),
)
def test_found_relabellings_commute_with_the_map(seed: int, n_actions: tuple[int, int], n_obs: int) -> None:
    """On random games with a planted last-stage symmetry, every relabelling found is a symmetry of M and J."""
    tree = enumerate_histories(_planted(seed, n_actions, n_obs))
    dom = local_domain(tree)
    assume(dom is not None)
    assert dom is not None
    _check_commutes(tree, dom, seed % 1000)


def _same_sets(game: Game, alpha: float) -> bool:
    tree = enumerate_histories(game)
    on = certified_optimal_set(tree, alpha, FAST, solver=SOLVER)
    off = certified_optimal_set(tree, alpha, dataclasses.replace(FAST, local_domain=False), solver=SOLVER)
    if not (on.complete and off.complete):
        return False
    assert len(on.optimal_points) == len(off.optimal_points)
    for p in off.optimal_points:
        hits = [
            q for q in on.optimal_points if np.all(q.box_lo <= p.y + 1e-7) and np.all(p.y - 1e-7 <= q.box_hi)
        ]
        assert len(hits) == 1 and abs(hits[0].J - p.J) < 1e-9
    return True


def test_two_lever_same_optimal_set_with_and_without() -> None:
    """two-lever at alpha 0.25: the same four optimal points (57 boxes instead of 729 here)."""
    assert _same_sets(get_game("two-lever"), 0.25)


def test_planted_game_same_optimal_set_with_and_without() -> None:
    assert _same_sets(_planted(5, (2, 2), 1), 0.25)


@pytest.mark.slow
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(seed=st.integers(0, 2**32 - 1), alpha=st.sampled_from([0.1, 0.25, 0.5]))
def test_planted_games_same_optimal_set(seed: int, alpha: float) -> None:
    """Random planted games: the reduction changes nothing in a complete answer."""
    game = _planted(seed, (2, 2), 1)
    assume(local_domain(enumerate_histories(game)) is not None)
    assume(_same_sets(game, alpha))


def test_closed_block_logits_do_not_depend_on_the_rest() -> None:
    """three-lever's closed blocks: M_S(y) is unchanged (to rounding) when every logit outside S is redrawn."""
    tree = enumerate_histories(get_game("three-lever"))
    coords = LogitCoordinates(tree)
    blocks = closed_components(tree)
    assert len(blocks) == 9 and all(len(b) == 4 for b in blocks)
    rng = np.random.default_rng(0)
    y = rng.normal(size=(16, coords.dim)) * 3
    for b in blocks:
        z = rng.normal(size=y.shape) * 3
        z[:, b] = y[:, b]
        assert np.allclose(coords.logit_map(y, 0.4)[:, b], coords.logit_map(z, 0.4)[:, b], rtol=0, atol=1e-12)
    assert closed_components(enumerate_histories(get_game("dectiger"))) == []


def test_closed_block_roots_match_a_dense_grid_newton_search() -> None:
    """Each block's root boxes hold every fixed point of y_S = M_S(y_S) that Newton reaches from a dense grid
    (the other logits pinned), one root per box and one box per root: the 7 logit equilibria of the 3 x 3
    coordination subgame at alpha 0.25 (uniform, three two-lever mixtures, three conventions)."""
    tree = enumerate_histories(get_game("three-lever"))
    coords = LogitCoordinates(tree)
    alpha = 0.25
    B = logit_bound(tree, alpha)
    found = closed_blocks(coords, BoxEnclosure(coords), alpha, B)
    assert found is not None and len(found) == 9
    block = found.blocks[0]
    s = block.coords
    axis = np.linspace(-B, B, 7)
    grid = np.array(np.meshgrid(*[axis] * len(s))).reshape(len(s), -1).T
    y = np.zeros((len(grid), coords.dim))
    y[:, s] = grid
    for _ in range(60):  # Newton on the block alone (M_S does not depend on the rest)
        ev = coords.evaluate(y, alpha, jacobian=True)
        assert ev.jacobian is not None
        g = (y - ev.values)[:, s]
        jac = np.eye(len(s))[None] - ev.jacobian[:, s][:, :, s]
        step = np.linalg.solve(jac, g[:, :, None])[:, :, 0]
        y[:, s] -= np.clip(step, -2, 2)
    res = np.abs(y - coords.logit_map(y, alpha))[:, s].max(axis=1)
    roots = y[res < 1e-10][:, s]
    distinct = roots[np.unique(np.round(roots, 6), axis=0, return_index=True)[1]]
    assert len(distinct) == 7 == len(block.roots_lo)
    for r in distinct:
        inside = np.all((block.roots_lo <= r + 1e-9) & (r - 1e-9 <= block.roots_hi), axis=1)
        assert inside.sum() == 1


def test_closed_blocks_change_nothing_in_the_certified_set() -> None:
    """two-lever at alpha 0.25 (4 closed blocks): the same optimal points with and without them."""
    tree = enumerate_histories(get_game("two-lever"))
    on = certified_optimal_set(tree, 0.25, FAST, solver=SOLVER)
    off = certified_optimal_set(
        tree, 0.25, dataclasses.replace(FAST, closed_blocks=False, local_domain=False), solver=SOLVER
    )
    assert on.complete and off.complete and len(on.optimal_points) == len(off.optimal_points) == 4
    for p in off.optimal_points:
        assert (
            sum(np.all(q.box_lo <= p.y + 1e-7) and np.all(p.y - 1e-7 <= q.box_hi) for q in on.optimal_points)
            == 1
        )
