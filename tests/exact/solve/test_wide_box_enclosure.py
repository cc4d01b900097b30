"""Interval log of a subnormal lower end, and the evaluator's enclosures on boxes wider than ~708 logits.

IArray.log raised a positive lower end to the smallest normal float before taking its log, so log(6.9e-319)
was bounded below by -708.4 instead of -732.6. The log-sum-exp of a box of logits wider than ~708 has such a
lower end: on handshake at alpha = 1e-3 over y_0 in [-732.6, 732.6] the enclosure of agent 1's M was
[-3.1e-8, 1000] while M takes every value in [-1000, 1000] there (pi^0(reference) bounded by 3e-11, not 1)."""

from __future__ import annotations

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.interval_array import IArray


@pytest.fixture(scope="module")
def handshake() -> LogitCoordinates:
    return LogitCoordinates(enumerate_histories(get_game("handshake")))


def test_log_of_a_subnormal_lower_end_is_its_own_log() -> None:
    x = np.array([6.9e-319, 5e-324, 2.0**-1050])
    out = IArray(x, np.ones(3)).log()
    assert np.all(out.lo <= np.log(x)) and np.all(out.lo > np.log(x) - 1e-9)


def test_enclosure_of_a_box_wider_than_708_logits(handshake: LogitCoordinates) -> None:
    lo, hi = np.array([-732.6124034, -7.8259137159e-03]), np.array([732.59048844, -7.8250178325e-03])
    m, _ = handshake.derivatives.enclose(lo, hi, 1e-3, jacobian=False)
    assert m.lo[1, 0] <= -999.0 and m.hi[1, 0] >= 999.0  # pi^0 ranges over (0, 1) on the box


def test_enclosure_holds_sampled_values_on_wide_and_saturated_boxes(handshake: LogitCoordinates) -> None:
    """M and DM enclosures hold sampled values on boxes up to 2e3 logits wide, across saturation."""
    rng = np.random.default_rng(3)
    for alpha in (1e-3, 0.1, 1.0):
        for _ in range(20):
            c = rng.uniform(-1, 1, handshake.dim) * 10.0 ** rng.uniform(-2, 4)
            w = 10.0 ** rng.uniform(-8, 3, handshake.dim)
            m, dm = handshake.derivatives.enclose(c - w, c + w, alpha, jacobian=True)
            assert dm is not None
            pts = c - w + rng.random((50, handshake.dim)) * 2 * w
            ev = handshake.evaluate(pts, alpha, jacobian=True)
            assert ev.jacobian is not None
            tol = 1e-12 * np.maximum(1.0, np.abs(ev.values))
            assert np.all(ev.values >= m.lo.T - tol) and np.all(ev.values <= m.hi.T + tol)
            assert np.all(ev.jacobian >= dm.lo.transpose(2, 0, 1) - 1e-12 * (1 + np.abs(ev.jacobian)))
            assert np.all(ev.jacobian <= dm.hi.transpose(2, 0, 1) + 1e-12 * (1 + np.abs(ev.jacobian)))
