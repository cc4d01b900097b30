"""Exact pools (``--pool-source exact``) are drawn from Pi*_alpha closed under the Dec-POMDP symmetries, from one
solve for every agent: checked against the fixed-point equation, the relabelings and J computed here."""

from __future__ import annotations

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.transformation import apply_to_policy
from ers_exact.model.values import expected_return, local_q_values
from ers_exact.solve.boltzmann import softmax_policy
from ers_exact.symmetry.mdp_group import decpomdp_group
from ers_exact.zsc.pools import PoolConfig, build_pools, optimal_points


def _flat(pi: tuple[np.ndarray, ...]) -> np.ndarray:
    return np.concatenate([a.ravel() for a in pi])


def test_three_lever_pools_hold_the_six_relabelled_optima_of_one_solve() -> None:
    """Three-lever at alpha 0.25: one solve finds one optimal point; its images under the 6 lever relabelings
    are 6 distinct points, each a Boltzmann fixed point (pi = softmax(Q^pi / alpha) on every history) with the
    same J, and the set is closed under the relabelings. Every agent's pool draws from it (before 2026-12-07
    a pool held the solve's one point, and some pool seeds' own solves stopped 3e-5 below the optimum)."""
    tree = enumerate_histories(get_game("three-lever"))
    points = optimal_points(tree, 0.25, k=20)
    assert len(points) == 6
    J = [float(np.asarray(expected_return(tree, p))) for p in points]
    assert max(J) - min(J) < 1e-9 and J[0] == pytest.approx(1.8963613, abs=1e-6)
    flats = [_flat(p) for p in points]
    for pi in points:
        fixed = softmax_policy(tree, local_q_values(tree, pi), 0.25)
        assert max(float(np.abs(a - b).max()) for a, b in zip(fixed, pi)) < 1e-8
        for phi in decpomdp_group(tree.game).policy_parts:
            image = _flat(apply_to_policy(tree, phi, pi))
            assert min(float(np.abs(image - f).max()) for f in flats) < 1e-9  # closed
    pools = build_pools(tree, PoolConfig(source="exact", k=20, alpha=0.25), [1, 500, 1000, 1001])
    for pool, deployed in pools:
        assert len(pool) == 6 and deployed is pool[0]
        got = sorted(float(np.asarray(expected_return(tree, p))) for p in pool)
        assert got == pytest.approx(sorted(J), abs=1e-12)
    small = build_pools(tree, PoolConfig(source="exact", k=2, alpha=0.25), [1, 2])
    assert [len(p) for p, _ in small] == [2, 2]
    assert any(
        float(np.abs(_flat(a) - _flat(b)).max()) > 1e-6 for a, b in zip(small[0][0], small[1][0])
    )  # the seeds pick different points
