"""Interval enclosures where an action other than the reference saturates at probability 1 (low temperature).

log pi(a) = z_a - lse(z) holds z_a's interval twice: over a box of width w the enclosure of pi(a) was
[e^-w, 1] however saturated a is, so M and DM got ranges of ~ w / alpha. At alpha = 1e-6 on handshake the
fixed point y = +1/alpha (both agents on the non-reference action) could not be certified at any radius
while its mirror image y = -1/alpha was certified at every one, and ``optimal-set`` stopped with "1 image(s)
of roots not certified". The enclosure is now intersected with -log(1 + sum_{b != a} exp(z_b - z_a)), in which
the own logit cancels."""

from __future__ import annotations

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.config import OptimalSetConfig
from ers_exact.solve.krawczyk_batch import UNIQUE, krawczyk_batch
from ers_exact.solve.optimal_set import certified_optimal_set
from ers_exact.symmetry.mdp_group import decpomdp_group

ALPHA = 1e-6


@pytest.fixture(scope="module")
def handshake() -> LogitCoordinates:
    return LogitCoordinates(enumerate_histories(get_game("handshake")))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_saturated_fixed_point_is_certified_on_either_side_of_the_reference(
    handshake: LogitCoordinates, sign: float
) -> None:
    y = np.full((1, handshake.dim), sign / ALPHA)
    assert handshake.residual(y, ALPHA)[0] == 0.0  # M(y) = y in floating point: both play one action
    for r in (1e-9, 1e-5, 1e-3):
        rad = r * np.abs(y)
        status, klo, khi = krawczyk_batch(handshake, y - rad, y + rad, ALPHA)
        assert status[0] == UNIQUE, r
        assert np.all(klo <= y) and np.all(y <= khi)


def test_saturated_enclosure_does_not_grow_with_the_box(handshake: LogitCoordinates) -> None:
    """M is flat there (dM/dy ~ e^-1e6): its enclosure over a box of width 2e3 stays within a few ulps of
    1e6 (before: [-4e-10, 1e6]) and DM's within rounding of 0 (before: up to 1e6)."""
    y = np.full(handshake.dim, 1.0 / ALPHA)
    m, dm = handshake.derivatives.enclose(y - 1e3, y + 1e3, ALPHA, jacobian=True)
    assert dm is not None
    assert np.all(m.lo <= 1e6) and np.all(m.hi >= 1e6) and np.all(m.hi - m.lo < 1e-6)
    assert np.abs(dm.lo).max() < 1e-6 and np.abs(dm.hi).max() < 1e-6


def test_optimal_set_at_low_temperature_lists_both_conventions() -> None:
    tree = enumerate_histories(get_game("handshake"))
    res = certified_optimal_set(
        tree,
        ALPHA,
        OptimalSetConfig(max_seconds=20.0, progress=False),
        relabellings=decpomdp_group(tree.game).policy_parts,
    )
    assert res.complete, res.note
    assert len(res.optimal_points) == 2
    firsts = sorted(round(float(p.policy[0][0, 0])) for p in res.optimal_points)
    assert firsts == [0, 1]  # one point per action, both certified
