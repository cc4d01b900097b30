"""Memory of the reference evaluator's index structures and of the certificates: the estimate that the solver's
budget counts bounds the arrays actually held (counted without building them), the sparse parts share their
index arrays, and a solve whose budget holds the dense evaluator for the search but not beside the
certificates' interval parts releases it before certifying, with the same certified points."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.io.dpomdp import read_dpomdp
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.solve import boltzmann, fixed_point_budget
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.dense import MAX_DENSE_BYTES, dense_logit_map, dense_structure_bytes
from ers_exact.solve.derivatives import LogitDerivatives
from ers_exact.solve.fixed_points import DENSE_BUILD_PEAK, SolverConfig, solve_fixed_points
from ers_exact.solve.newton import policy_bytes
from ers_exact.util.sparse import SparseMatrix


def _arrays(m: SparseMatrix) -> list[np.ndarray]:
    out = [m.data, m.rows, m.cols, m._row_ids, m._starts]
    out += [] if m._dense is None else [m._dense]
    if "_scipy" in m.__dict__:
        out += [m._scipy.data, m._scipy.indices, m._scipy.indptr]
    return out


def _held(der: LogitDerivatives) -> int:
    """Bytes of every distinct array the structures hold once the interval parts and scipy copies exist."""
    seen: dict[int, np.ndarray] = {}
    mats = list(der.mats.values()) + der.flat["proj"] + der.flat["path"] + der.child
    for m in der.mats.values():
        for part in (m.positive, m.negative, m.absolute):
            _ = part._scipy
            mats.append(part)
        _ = m._scipy
    for m in mats:
        for a in _arrays(m):
            base = a if a.base is None else a.base
            seen.setdefault(id(base), base)
    flat = [v for v in der.flat.values() if isinstance(v, np.ndarray)]
    flat += der.flat["group"] + der.flat["order"] + der.flat["starts"]
    return sum(a.nbytes for a in seen.values()) + sum(a.nbytes for a in flat)


def _tree(dpomdp_dir, name: str, horizon: int) -> HistoryTree:
    if name.endswith(".dpomdp"):
        return enumerate_histories(read_dpomdp(dpomdp_dir / name, horizon=horizon))
    return enumerate_histories(get_game(name, horizon=horizon))


@pytest.mark.parametrize(
    "name, horizon",
    [("dectiger", 2), ("dectiger", 3), ("GridSmall.dpomdp", 2), ("Mars.dpomdp", 2)],
)
def test_structure_estimate_bounds_the_arrays_held(dpomdp_dir, name: str, horizon: int) -> None:
    """``structure_bytes`` (what the budget counts before anything is built) is at least what the scatter
    matrices, their interval parts, scipy's copies and the flat index hold, and at most 1.5x that."""
    der = LogitDerivatives(_tree(dpomdp_dir, name, horizon))
    estimate = der.structure_bytes()
    entries, _, _ = der.scatter_sizes()
    assert entries >= sum(m.nnz for m in der.mats.values())  # counted before building: an upper bound
    held = _held(der)
    assert held <= estimate + 100_000 and estimate <= 1.5 * held + 100_000
    assert der.interval_built


def test_parts_and_scipy_copies_share_the_index_arrays() -> None:
    rng = np.random.default_rng(0)
    rows, cols = np.divmod(rng.choice(300 * 400, 2000, replace=False), 400)  # no duplicates: no zero sums
    m = SparseMatrix(rng.choice([-1.0, 1.0], 2000), rows, cols, (300, 400), dense=False)
    assert m.rows.dtype == m.cols.dtype == np.int32
    assert m.absolute.cols is m.cols and m.absolute.rows is m.rows
    assert np.shares_memory(m._scipy.indices, m.cols) and np.shares_memory(m._scipy.data, m.data)
    x = rng.normal(size=(400, 3))
    np.testing.assert_allclose(m.absolute @ x, np.abs(m.toarray()) @ x, rtol=1e-13, atol=1e-13)
    assert not m.parts_built
    np.testing.assert_array_equal(m.positive.toarray() - m.negative.toarray(), m.toarray())
    assert m.parts_built


def _fake_resident(tree: HistoryTree):
    """What the solve holds, from the estimates (the process's own resident memory varies by megabytes)."""
    der = LogitCoordinates(tree).derivatives

    def resident() -> float:
        held = float(dense_structure_bytes(tree) or 0) if tree.has_derived("solve.dense") else 0.0
        if der.prepared:
            held += der.structure_bytes() - (0 if der.interval_built else der.interval_bytes())
        return held

    return resident


def test_certificates_release_the_dense_evaluator_where_both_do_not_fit(monkeypatch) -> None:
    cfg = SolverConfig(n_starts=6, continuation=False, progress=False)  # budgets what the solve adds
    roomy = enumerate_histories(get_game("dectiger", horizon=3))
    wide = solve_fixed_points(roomy, 1.0, cfg)
    assert roomy.has_derived("solve.dense")  # kept where there is room

    tree = enumerate_histories(get_game("dectiger", horizon=3))
    coords = LogitCoordinates(tree)
    der = coords.derivatives
    search = der.structure_bytes() - der.interval_bytes()
    budget = int(search + DENSE_BUILD_PEAK * dense_structure_bytes(tree) + policy_bytes(coords)) + 1
    monkeypatch.setattr(fixed_point_budget, "resident_bytes", _fake_resident(tree))
    built = []
    monkeypatch.setattr(
        boltzmann, "dense_logit_map", lambda t, cap: built.append(t) or dense_logit_map(t, cap)
    )
    tight = solve_fixed_points(tree, 1.0, replace(cfg, memory_budget_bytes=budget))
    assert len(built) == 1 and not tree.has_derived("solve.dense")  # built for the search, then released
    assert tight.points and all(p.certified for p in tight.points)
    assert [p.J for p in tight.points] == pytest.approx([p.J for p in wide.points], abs=1e-9)
    assert [p.certified for p in tight.points] == [p.certified for p in wide.points]


def test_the_solve_takes_a_dense_evaluator_past_the_default_limit_where_its_budget_holds_it(
    monkeypatch,
) -> None:
    """Coordinates made outside a solve stop at ``MAX_DENSE_BYTES`` (no budget to check it against); the solve
    counts the dense arrays in its budget and takes them past that limit (Mars H=3: 564 MB)."""
    tree = enumerate_histories(get_game("dectiger", horizon=3))
    huge = MAX_DENSE_BYTES + 1  # what the estimate says; the real map is small
    for module in (boltzmann, fixed_point_budget):
        monkeypatch.setattr(module, "dense_structure_bytes", lambda t: huge)
    assert LogitCoordinates(tree).dense_map is None
    built = []
    monkeypatch.setattr(
        boltzmann, "dense_logit_map", lambda t, cap: built.append(cap) or dense_logit_map(t, 2 * huge)
    )
    cfg = SolverConfig(n_starts=4, continuation=False, certify=False, progress=False)
    points = solve_fixed_points(tree, 1.0, replace(cfg, memory_budget_bytes=8 * huge)).points
    assert built == [huge] and points
    built.clear()
    solve_fixed_points(tree, 1.0, replace(cfg, memory_budget_bytes=huge // 2, memory_scope="call"))
    assert built == []  # a budget that cannot hold it: the reference alone
