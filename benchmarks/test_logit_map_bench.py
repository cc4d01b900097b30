"""The logit map M and its exact Jacobian DM of a batch of policies: the dense sequence-form evaluator
(solve/dense.py with its block Jacobian, solve/dense_blocks.py) against the tree-walking reference
(solve/derivatives.py), measured in the same run on Dec-Tiger H = 3 and H = 4 (1,036 coordinates; beyond
the dense path's former 400-sequence limit). Ratio = reference seconds / dense seconds; the two must agree
to 1e-12 relative to the size of the values. Both sides run under the same memory budget (4 GB: neither is
chunked), and each timed reference call gets policies of its own (y shifted by k * 1e-9), so the reference's
cache of the last single policy's pass (``LogitDerivatives._run``) never answers a timed call; the dense side
keeps no such cache."""

from __future__ import annotations

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.boltzmann import LogitCoordinates

CASES = [(3, 64, False), (3, 16, True), (4, 64, False), (4, 16, True), (4, 1, True)]


@pytest.mark.parametrize(
    "horizon, batch, jacobian", CASES, ids=[f"H{h}-P{p}-{'DM' if j else 'M'}" for h, p, j in CASES]
)
def test_dense_logit_map_vs_reference(benchmark, best_of, horizon: int, batch: int, jacobian: bool) -> None:
    tree = enumerate_histories(get_game("dectiger", horizon=horizon))
    budget = 4 * 2**30
    dense = LogitCoordinates(tree, memory_budget=budget)
    reference = LogitCoordinates(tree, memory_budget=budget, dense=False)
    assert dense.dense_map is not None
    y = np.random.default_rng(0).normal(0.0, 2.0, size=(batch, dense.dim))
    want = reference.evaluate(y, 0.5, jacobian=jacobian)  # also builds the reference's index structures
    # fresh policies per timed call (the reference keeps the last single policy's pass), under the same budget
    fresh = iter([y + k * 1e-9 for k in range(1, 4)])
    reference_s = best_of(lambda: reference.evaluate(next(fresh), 0.5, jacobian=jacobian), 3)
    got = benchmark(dense.evaluate, y, 0.5, jacobian)
    for a, b in ((got.values, want.values), (got.J, want.J), (got.jacobian, want.jacobian)):
        if b is not None:
            scale = max(1.0, float(np.abs(b).max()))
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * scale)
    dense_s = benchmark.stats.stats.min
    benchmark.extra_info.update(
        game="dectiger",
        horizon=horizon,
        coordinates=dense.dim,
        batch=batch,
        jacobian=jacobian,
        memory_budget=budget,
        reference_seconds=reference_s,
        dense_seconds=dense_s,
        speedup=reference_s / dense_s,
    )
    print(
        f"\ndectiger H={horizon} D={dense.dim}, {batch} policies, {'M and DM' if jacobian else 'M'}: "
        f"dense {dense_s * 1e3:.1f} ms, reference {reference_s * 1e3:.1f} ms ({reference_s / dense_s:.1f}x)"
    )
    if not benchmark.disabled:  # one untimed call (--benchmark-disable) is not a measurement
        assert reference_s / dense_s > 1.0
