"""Boltzmann fixed-point solver throughput: fixed points found per second on three-lever at alpha = 0.25
with 200 starts, and the share of starts that converge (recorded in extra_info). Every point found must be a fixed
point (residual below 1e-10) and, with certificates, certified; J* is the best of them."""

from __future__ import annotations

import pytest

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points


@pytest.mark.parametrize("certify", [False, True], ids=["no-certificates", "with-certificates"])
def test_fixed_points_per_second_three_lever(benchmark, certify: bool) -> None:
    tree = enumerate_histories(get_game("three-lever"))
    cfg = SolverConfig(n_starts=200, seed=0, certify=certify, complete_search=False)
    result = benchmark.pedantic(solve_fixed_points, args=(tree, 0.25, cfg), rounds=1, iterations=1)
    seconds = benchmark.stats.stats.mean
    benchmark.extra_info.update(
        alpha=0.25,
        starts=result.n_starts,
        converged_starts=result.converged_starts,
        converged_share=result.converged_starts / result.n_starts,
        fixed_points=len(result.points),
        optimal_points=len(result.optimal_points),
        J_star=result.J_star,
        fixed_points_per_second=len(result.points) / seconds,
        certified=sum(bool(p.certified) for p in result.points),
    )
    print(
        f"\nthree-lever alpha=0.25, 200 starts ({'with' if certify else 'no'} certificates): "
        f"{len(result.points)} fixed points in {seconds:.2f}s = {len(result.points) / seconds:.1f}/s; "
        f"{result.converged_starts}/{result.n_starts} starts converged; {len(result.optimal_points)} optimal"
    )
    assert result.converged_starts > 0 and result.points
    assert all(p.residual < 1e-10 for p in result.points)
    assert result.J_star == max(p.J for p in result.points)
    if certify:
        assert all(p.certified for p in result.points if abs(p.spectral_radius - 1.0) > 1e-6)
