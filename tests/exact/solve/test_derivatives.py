"""The exact Jacobian of the logit map M(y) = Q-gaps / alpha (solve/derivatives.py) against central
differences of an independent evaluation (model/values.py's local Q), on random games (Hypothesis), and
its interval enclosure (the Krawczyk test's input) against float evaluations inside the box."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.values import local_q_values
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.derivatives import LogitDerivatives, MemoryBudgetError
from tests.exact.strategies import game_specs


def reference_map(coords: LogitCoordinates, y: np.ndarray, alpha: float) -> np.ndarray:
    """M(y) from model/values.py's local Q (no shared code with the evaluator under test).  # [P, D]"""
    return coords.gaps(local_q_values(coords.tree, coords.to_policy(y)), alpha)


def central_differences(
    coords: LogitCoordinates, y: np.ndarray, alpha: float, step: float = 1e-6
) -> np.ndarray:
    D = y.shape[0]
    probes = np.concatenate([y + step * np.eye(D), y - step * np.eye(D)])
    vals = reference_map(coords, probes, alpha)
    return ((vals[:D] - vals[D:]) / (2 * step)).T  # [D, D]: row = output, column = input


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=game_specs(max_nodes=300),
    seed=st.integers(0, 2**32 - 1),
    alpha=st.sampled_from([0.3, 1.0, 2.5]),
    scale=st.sampled_from([0.5, 2.0]),
)
def test_exact_jacobian_matches_central_differences(spec, seed: int, alpha: float, scale: float) -> None:
    tree = enumerate_histories(spec.build())
    coords = LogitCoordinates(tree)
    if coords.dim == 0:
        return
    y = np.random.default_rng(seed).normal(0.0, scale, size=(2, coords.dim))
    ev = LogitDerivatives(tree).evaluate(y, alpha)
    np.testing.assert_allclose(ev.values, reference_map(coords, y, alpha), rtol=1e-9, atol=1e-9)
    for p in range(2):
        fd = central_differences(coords, y[p], alpha)
        tol = 1e-6 * max(1.0, np.abs(fd).max())
        np.testing.assert_allclose(ev.jacobian[p], fd, atol=tol, rtol=1e-5)


def test_dectiger_h3_jacobian_matches_central_differences() -> None:
    tree = enumerate_histories(get_game("dectiger", horizon=3))
    coords = LogitCoordinates(tree)
    y = np.random.default_rng(1).normal(0.0, 1.0, size=(1, coords.dim))
    ev = LogitDerivatives(tree).evaluate(y, 0.5)
    fd = central_differences(coords, y[0], 0.5)
    np.testing.assert_allclose(ev.jacobian[0], fd, atol=1e-5 * np.abs(fd).max())


def test_chunking_gives_the_same_result_and_budget_refuses_with_an_estimate() -> None:
    tree = enumerate_histories(get_game("dectiger", horizon=2))
    der = LogitDerivatives(tree)
    y = np.random.default_rng(2).normal(size=(7, der.D))
    whole = der.evaluate(y, 0.5)
    per = der.bytes_per_policy(jacobian=True)
    chunked = der.evaluate(y, 0.5, budget=2 * per)
    np.testing.assert_allclose(chunked.jacobian, whole.jacobian, rtol=0, atol=1e-12)
    np.testing.assert_allclose(chunked.values, whole.values, rtol=0, atol=1e-12)
    with pytest.raises(MemoryBudgetError, match=r"needs about .* budget is"):
        der.evaluate(y, 0.5, budget=per // 2)


def test_low_temperature_values_stay_finite_where_products_underflow() -> None:
    """Logits of +-900 make the other agent's path probabilities underflow to 0 in plain products; the
    rescaled evaluation keeps every Q finite."""
    tree = enumerate_histories(get_game("dectiger", horizon=3))
    der = LogitDerivatives(tree)
    y = np.random.default_rng(3).choice([-900.0, 900.0], size=(2, der.D))
    ev = der.evaluate(y, 0.25)
    assert np.all(np.isfinite(ev.values)) and np.all(np.isfinite(ev.jacobian))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=game_specs(max_nodes=150), seed=st.integers(0, 2**32 - 1), alpha=st.sampled_from([0.5, 1.0]))
def test_interval_enclosure_holds_float_values_inside_the_box(spec, seed: int, alpha: float) -> None:
    tree = enumerate_histories(spec.build())
    der = LogitDerivatives(tree)
    if der.D == 0:
        return
    rng = np.random.default_rng(seed)
    c = rng.normal(size=der.D)
    lo, hi = c - 1e-3, c + 1e-3
    m, dm = der.enclose(lo, hi, alpha)
    inside = lo + (hi - lo) * rng.random((4, der.D))
    ev = der.evaluate(np.vstack([inside, lo, hi]), alpha)
    assert np.all(m.lo[:, 0] <= ev.values) and np.all(ev.values <= m.hi[:, 0])
    assert np.all(dm.lo[:, :, 0] <= ev.jacobian) and np.all(ev.jacobian <= dm.hi[:, :, 0])
    point, _ = der.enclose(c, c, alpha, jacobian=False)
    exact = der.evaluate(c[None], alpha, jacobian=False).values[0]
    assert np.all(point.lo[:, 0] <= exact) and np.all(exact <= point.hi[:, 0])
    assert np.all(point.width < 1e-9 * (1 + np.abs(exact[:, None])))
