"""The fast paths of small games against their slow references: the dense sequence-form evaluator of M, DM and J
(solve/dense.py) against solve/derivatives.py, the vectorised interval map (solve/interval_map.py) against the
scalar Interval code bit for bit, on the built-in games, the standard .dpomdp files and random games
(Hypothesis); and the principal branch that the benchmark times (one branch, stopped at its first crossing)
against the full trace and against Gambit's logit QRE."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ers_exact.games import GAMES, get_game
from ers_exact.games.registry import load_game
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.config import ContinuationConfig
from ers_exact.solve.continuation import continuation
from ers_exact.solve.dense import (
    GROUPED_FROM,
    MAX_DENSE_BYTES,
    DenseLogitMap,
    dense_logit_map,
    dense_structure_bytes,
)
from ers_exact.solve.interval import Interval
from ers_exact.solve.interval_map import interval_map
from ers_exact.solve.interval_scalar import interval_logit_map, structure
from tests.exact.strategies import game_specs

DPOMDP = [
    ("dectiger.dpomdp", 2, 1.0),
    ("dectiger.dpomdp", 3, 0.9),
    ("broadcastChannel.dpomdp", 2, 1.0),
    ("broadcastChannel.dpomdp", 3, 1.0),
    ("recycling.dpomdp", 2, 0.9),
    ("recycling.dpomdp", 4, 0.9),  # 468 sequences per agent: beyond the former 400-sequence limit
    ("GridSmall.dpomdp", 3, 1.0),  # 455
    ("GridSmall.dpomdp", 2, 1.0),
    ("2generals.dpomdp", 2, 1.0),
    ("prisoners.dpomdp", 2, 1.0),
]


def _dpomdp(dpomdp_dir, name: str, horizon: int, discount: float) -> HistoryTree:
    return enumerate_histories(load_game(str(dpomdp_dir / name), horizon=horizon, discount=discount))


def assert_same_evaluation(tree: HistoryTree, y: np.ndarray, alpha: float) -> None:
    """The dense evaluation (through LogitCoordinates, with its fallback) equals the reference's to 1e-12
    relative to the size of the values."""
    fast = LogitCoordinates(tree).evaluate(y, alpha)
    ref = LogitCoordinates(tree, dense=False).evaluate(y, alpha)
    assert fast.jacobian is not None and ref.jacobian is not None
    for got, want in ((fast.values, ref.values), (fast.jacobian, ref.jacobian), (fast.J, ref.J)):
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("name", [g for g in GAMES if get_game(g).n_agents == 2])
def test_dense_equals_reference_on_builtin_games(name: str) -> None:
    tree = enumerate_histories(get_game(name))
    coords = LogitCoordinates(tree)
    assert coords.dense_map is not None
    rng = np.random.default_rng(0)
    for scale, alpha in ((0.5, 1.0), (3.0, 0.25), (40.0, 0.05)):
        y = rng.normal(0.0, scale, size=(5, coords.dim))
        assert_same_evaluation(tree, y, alpha)
        assert_same_evaluation(tree, y[:1], alpha)


@pytest.mark.parametrize(
    "name, horizon, discount", DPOMDP, ids=[f"{n.split('.')[0]}-H{h}" for n, h, _ in DPOMDP]
)
def test_dense_equals_reference_on_dpomdp_files(dpomdp_dir, name: str, horizon: int, discount: float) -> None:
    """One policy and a batch large enough for the grouped (pattern-only) Jacobian, at moderate and large logits."""
    tree = _dpomdp(dpomdp_dir, name, horizon, discount)
    coords = LogitCoordinates(tree)
    dense = coords.dense_map
    assert dense is not None
    rng = np.random.default_rng(1)
    batch = max(2, GROUPED_FROM // (dense.S * dense.D) + 1)
    for P, scale in ((1, 1.0), (batch, 2.0), (3, 30.0)):
        assert_same_evaluation(tree, rng.normal(0.0, scale, size=(P, coords.dim)), 0.5)


def test_dense_declines_underflow_to_the_reference() -> None:
    """Logits so large that an agent's observation probabilities underflow (three-lever: the partner's
    choice is observed): those rows are declined (ok False) and LogitCoordinates takes them from the
    reference, which carries the probabilities in logs."""
    tree = enumerate_histories(get_game("three-lever"))
    coords = LogitCoordinates(tree)
    dense = coords.dense_map
    assert dense is not None
    y = np.random.default_rng(2).normal(0.0, 1.0, size=(4, coords.dim)) * np.array(
        [[1.0], [1e4], [1.0], [3e4]]
    )
    _, _, _, ok = dense.evaluate(y, 1.0, True)
    assert list(ok) == [True, False, True, False]
    assert_same_evaluation(tree, y, 1.0)


def test_dense_map_only_for_two_agents_of_bounded_size(dpomdp_dir) -> None:
    assert dense_logit_map(enumerate_histories(get_game("three-lever"))) is not None
    big = _dpomdp(dpomdp_dir, "dectiger.dpomdp", 5, 1.0)  # 3 x 1365 sequences per agent: ~12 GB of arrays
    assert dense_structure_bytes(big) > MAX_DENSE_BYTES and dense_logit_map(big) is None
    assert LogitCoordinates(enumerate_histories(get_game("dectiger")), dense=False).dense_map is None


def _held_bytes(m: DenseLogitMap) -> int:
    arrays = [v for v in vars(m).values() if isinstance(v, np.ndarray)]
    arrays += [v for v in vars(m.own).values() if isinstance(v, np.ndarray)]
    return sum(a.nbytes for a in arrays) + sum(side.nbytes for side in m.sides)


@pytest.mark.parametrize(
    "name, horizon",
    [("dectiger.dpomdp", 2), ("dectiger.dpomdp", 3), ("recycling.dpomdp", 3), ("GridSmall.dpomdp", 3)],
)
def test_dense_structure_estimate_bounds_the_arrays_held(dpomdp_dir, name: str, horizon: int) -> None:
    """The estimate that decides whether a game gets the dense path (and that the solver's memory budget
    counts) is at least what the built map holds, and not far above it."""
    tree = _dpomdp(dpomdp_dir, name, horizon, 1.0)
    held, estimate = _held_bytes(DenseLogitMap(tree)), dense_structure_bytes(tree)
    assert estimate is not None
    assert held <= estimate <= 1.3 * held + 100_000


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=game_specs(max_agents=2, max_nodes=300),
    seed=st.integers(0, 2**32 - 1),
    alpha=st.sampled_from([0.2, 1.0]),
)
def test_dense_equals_reference_on_random_games(spec, seed: int, alpha: float) -> None:
    assume(spec.n_agents == 2)
    tree = enumerate_histories(spec.build())
    coords = LogitCoordinates(tree)
    assume(coords.dim > 0)
    y = np.random.default_rng(seed).normal(0.0, 2.0, size=(3, coords.dim))
    assert_same_evaluation(tree, y, alpha)  # a batch
    assert_same_evaluation(tree, y[:1], alpha)  # one policy (its own code path at H = 2)


def assert_same_enclosure(tree: HistoryTree, lo: np.ndarray, hi: np.ndarray, alpha: float) -> None:
    """Bit for bit where every history has two legal actions (the map's ``exact``), else a superset (the scalar
    code keeps products of a one-action history's float 1.0 exact, the arrays widen them by an ulp)."""
    coords = LogitCoordinates(tree)
    scalar = interval_logit_map(coords, [Interval(a, b) for a, b in zip(lo, hi)], alpha)
    want_lo, want_hi = np.array([v.lo for v in scalar]), np.array([v.hi for v in scalar])
    fast = interval_map(tree, structure(coords))
    got_lo, got_hi = fast.gaps(lo, hi, alpha)
    if fast.exact:
        np.testing.assert_array_equal(got_lo, want_lo)
        np.testing.assert_array_equal(got_hi, want_hi)
    else:
        assert np.all(got_lo <= want_lo) and np.all(got_hi >= want_hi)
        np.testing.assert_allclose(got_lo, want_lo, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got_hi, want_hi, rtol=1e-12, atol=1e-12)


def _boxes(D: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for width in (0.0, 1e-6, 0.5, 20.0, 2000.0):
        c = rng.normal(0.0, 3.0, size=D)
        w = width * rng.random(D)
        out.append((c - w, c + w))
    return out


@pytest.mark.parametrize("name", list(GAMES))
def test_interval_map_equals_scalar_bit_for_bit_on_builtin_games(name: str) -> None:
    tree = enumerate_histories(get_game(name))
    D = LogitCoordinates(tree).dim
    for lo, hi in _boxes(D, 3):
        assert_same_enclosure(tree, lo, hi, 0.4)


@pytest.mark.parametrize(
    "name, horizon, discount", DPOMDP[:5], ids=[f"{n.split('.')[0]}-H{h}" for n, h, _ in DPOMDP[:5]]
)
def test_interval_map_equals_scalar_bit_for_bit_on_dpomdp_files(
    dpomdp_dir, name: str, horizon: int, discount: float
) -> None:
    tree = _dpomdp(dpomdp_dir, name, horizon, discount)
    for lo, hi in _boxes(LogitCoordinates(tree).dim, 4)[1:4]:
        assert_same_enclosure(tree, lo, hi, 1.0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=game_specs(max_nodes=200), seed=st.integers(0, 2**32 - 1))
def test_interval_map_equals_scalar_bit_for_bit_on_random_games(spec, seed: int) -> None:
    tree = enumerate_histories(spec.build())
    D = LogitCoordinates(tree).dim
    assume(D > 0)
    lo, hi = _boxes(D, seed % 2**16)[seed % 5]
    assert_same_enclosure(tree, lo, hi, 0.7)


PRINCIPAL = ContinuationConfig(max_branches=1, locate_branch_points=False, stop_at_crossing=True)


@pytest.mark.parametrize("alpha", [1.0, 0.25])
@pytest.mark.parametrize(
    "name, horizon", [("dectiger.dpomdp", 2), ("broadcastChannel.dpomdp", 2), ("recycling.dpomdp", 2)]
)
def test_principal_branch_stopped_at_its_crossing_is_gambits_qre(
    dpomdp_dir, name: str, horizon: int, alpha: float
) -> None:
    """The branch the Gambit benchmark times: its crossing is the full trace's first crossing and Gambit's logit
    QRE (pygambit traces the same branch from lambda = 0)."""
    tree = _dpomdp(dpomdp_dir, name, horizon, 1.0)
    coords = LogitCoordinates(tree)
    stopped = continuation(coords, alpha, PRINCIPAL, progress=False)
    full = continuation(
        coords, alpha, ContinuationConfig(max_branches=1, locate_branch_points=False), progress=False
    )
    assert len(stopped.points) == 1 and stopped.branches[0].end.startswith("crossed")
    pol = coords.to_policy(stopped.points[0])
    assert max(float(np.abs(a - b).max()) for a, b in zip(pol, coords.to_policy(full.points[0]))) < 1e-8
    assert float(coords.residual(stopped.points[0][None], alpha)[0]) < 1e-10
    pytest.importorskip("pygambit", reason="pygambit==17.0.0b2 (requirements-dev.txt) is the oracle")
    from ..gambit_oracle import gambit_qre_policy

    qre = gambit_qre_policy(tree, alpha)
    assert max(float(np.abs(a[0] - b).max()) for a, b in zip(pol, qre)) < 1e-6


@pytest.mark.parametrize(
    "name, horizon", [("dectiger", 2), ("three-lever", None), ("toy-coordination", None)]
)
def test_damped_iteration_on_stacked_arrays_equals_reference(name: str, horizon) -> None:
    """The multistart's damped iteration on the dense map's stacked log-policies: the reference's iterates bit
    for bit (same operations on the legal entries; illegal and padding ones stay at exp(NEG) = 0)."""
    from ers_exact.solve import damped
    from ers_exact.solve.boltzmann import logit_bound
    from ers_exact.solve.config import SolverConfig
    from ers_exact.util.progress import Progress

    tree = enumerate_histories(get_game(name, **({"horizon": horizon} if horizon else {})))
    coords = LogitCoordinates(tree)
    y = np.random.default_rng(5).normal(0.0, 3.0, size=(40, coords.dim))
    cfg, bound = SolverConfig(progress=False), logit_bound(tree, 0.25)
    with Progress(1, "", enabled=False) as bar:
        fast = damped._dense(coords, y.copy(), 0.25, cfg, bound, bar)
        ref = damped._reference(coords, y.copy(), 0.25, cfg, bound, bar)
    for a, b in zip(fast, ref):
        np.testing.assert_array_equal(a, b)
