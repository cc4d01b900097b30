"""Interval enclosures of M and DM at low temperature, where a history is reached with probability ~0.

The per-history rescaling w_n = exp(log p^{-i}(n) - shift) of the evaluator held the partner's factors as
intervals in num and den independently, so an unreached history's M got a width of ~ 2 delta |gap| / alpha over
a box of width delta in the partner's logits (toy-coordination at alpha 1e-4, convention "both play the
reference": 4e-4 over a box 2e-8 wide, 4e4 over 2e-4; optimal-set stopped NOT complete). The weights are now
taken relative to a pivot node of the history with common factors cancelled (solve/reach.py), num(a) - num(r)
is formed before the partner's policy is contracted in, and the gap is intersected with the hull of the
per-node ratios. The fuzz checks the enclosures against float evaluations at points of low-temperature boxes
on named and random games (3 agents, gamma < 1, legal-action masks)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ers_exact.games import get_game
from ers_exact.model.game import Game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.box_enclosure import BoxEnclosure
from ers_exact.solve.config import OptimalSetConfig
from ers_exact.solve.krawczyk_batch import UNIQUE, krawczyk_batch
from ers_exact.solve.optimal_set import certified_optimal_set
from tests.exact.strategies import game_specs, random_game

ALPHAS = (1e-2, 1e-4, 1e-6)


def _games() -> dict[str, Game]:
    return {
        "toy-coordination": get_game("toy-coordination"),
        "toy-coordination-h3-gamma0.9": get_game("toy-coordination", horizon=3, discount=0.9),
        "handshake": get_game("handshake"),
        "two-lever": get_game("two-lever"),
        "dectiger-h2": get_game("dectiger", horizon=2),
        "random-3-agents-gamma0.9": random_game(
            np.random.default_rng(7), n_agents=3, n_states=2, horizon=2, discount=0.9, legal=True
        ),
        "random-2-agents-h3": random_game(
            np.random.default_rng(11),
            n_agents=2,
            n_states=3,
            n_observations=2,
            horizon=3,
            reward_kind="float",
        ),
    }


GAMES = _games()


def _centre(rng: np.random.Generator, coords: LogitCoordinates, alpha: float) -> np.ndarray:
    """A low-temperature point: a fixed point reached by iterating M from a random saturated start (a
    convention, with unreached histories), or random logits of size up to 1 / alpha."""
    if rng.random() < 0.5:
        y = rng.choice([-1.0, 1.0], coords.dim) / alpha
        for _ in range(30):
            y = coords.logit_map(y[None], alpha)[0]
        return y
    return rng.choice([-1.0, 0.0, 1.0], coords.dim) * 10.0 ** rng.uniform(-1, np.log10(1 / alpha), coords.dim)


def _check(
    coords: LogitCoordinates, lo: np.ndarray, hi: np.ndarray, alpha: float, rng: np.random.Generator
) -> None:
    """M, DM (the evaluator's enclosure) and J (the box enclosure) hold float values at points of [lo, hi]."""
    der = coords.derivatives
    m, dm = der.enclose(lo, hi, alpha)
    assert dm is not None
    assert not np.isnan(m.lo).any() and not np.isnan(m.hi).any()
    assert not np.isnan(dm.lo).any() and not np.isnan(dm.hi).any()
    pts = np.vstack([lo + (hi - lo) * rng.random((24, coords.dim)), lo, hi, 0.5 * (lo + hi)])
    ev = coords.evaluate(pts, alpha, jacobian=True)
    assert ev.jacobian is not None
    ok = np.isfinite(ev.values).all(axis=1) & np.isfinite(ev.jacobian).all(axis=(1, 2))
    vals, jac = ev.values[ok], ev.jacobian[ok]
    # float rounding: of a gap / alpha, and of log pi = z - lse(z) at logits of size |y| (~ eps |y|)
    rel = 1e-12 + 1e-15 * np.abs(pts).max()
    tol = rel * (1 + np.abs(vals)) + 1e-15 / alpha
    assert np.all(vals >= m.lo[:, 0] - tol) and np.all(vals <= m.hi[:, 0] + tol)
    tol_j = rel * (1 + np.abs(jac)) + 1e-15 / alpha
    assert np.all(jac >= dm.lo[:, :, 0] - tol_j) and np.all(jac <= dm.hi[:, :, 0] + tol_j)
    _, _, jlo, jhi = BoxEnclosure(coords)(lo[None], hi[None], alpha)
    tol_v = rel * (1 + np.abs(ev.J[ok]))
    assert np.all(ev.J[ok] >= jlo[0] - tol_v) and np.all(ev.J[ok] <= jhi[0] + tol_v)


@pytest.mark.parametrize("name", sorted(GAMES))
@pytest.mark.parametrize("alpha", ALPHAS)
def test_low_temperature_boxes_hold_sampled_values(name: str, alpha: float) -> None:
    coords = LogitCoordinates(enumerate_histories(GAMES[name]))
    rng = np.random.default_rng(int(alpha**-0.5) + len(name))
    for _ in range(8):
        c = _centre(rng, coords, alpha)
        w = 10.0 ** rng.uniform(-12, 0.5, coords.dim) * np.maximum(1.0, np.abs(c)) ** rng.uniform(0, 1)
        _check(coords, c - w, c + w, alpha, rng)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=game_specs(max_nodes=120),
    seed=st.integers(0, 2**32 - 1),
    alpha=st.sampled_from(ALPHAS),
    log_width=st.floats(-12, 1),
)
def test_random_games_low_temperature_boxes_hold_sampled_values(
    spec, seed: int, alpha: float, log_width: float
) -> None:
    coords = LogitCoordinates(enumerate_histories(spec.build()))
    if coords.dim == 0:
        return
    rng = np.random.default_rng(seed)
    c = _centre(rng, coords, alpha)
    w = 10.0**log_width * np.maximum(1.0, np.abs(c)) ** rng.uniform(0, 1)
    _check(coords, c - w, c + w, alpha, rng)


@pytest.mark.parametrize("alpha", [1e-4, 1e-6])
def test_unreached_history_enclosure_does_not_grow_with_the_partners_box(alpha: float) -> None:
    """toy-coordination, both agents on the reference action (J = 1): the histories after (1, m) are unreached
    and their gap is 0 whatever the policy. Before: M's enclosure there ~ 4e4 wide over a box of relative radius
    1e-4 (2e4 / alpha per unit width in the partner's logit) and Krawczyk failed at every radius."""
    coords = LogitCoordinates(enumerate_histories(get_game("toy-coordination")))
    y = np.full((1, coords.dim), -1.0 / alpha)
    for _ in range(5):
        y = coords.logit_map(y, alpha)
    assert coords.residual(y, alpha)[0] == 0.0
    for r in (1e-8, 1e-6, 1e-4):  # (below: M is O(eps / alpha) wide from the rounding of the rewards)
        rad = r * np.maximum(1.0, np.abs(y))
        m, dm = coords.derivatives.enclose((y - rad)[0], (y + rad)[0], alpha)
        assert dm is not None
        assert np.max(m.width) < 1e-12 / alpha and np.max(dm.width) < 1e-12 / alpha, (
            r
        )  # rounding of |M| = 1 / alpha
        status, _, _ = krawczyk_batch(coords, y - rad, y + rad, alpha)
        assert status[0] == UNIQUE, r


def test_optimal_set_lists_both_conventions_at_low_temperature() -> None:
    """Before: NOT complete after 400,000 boxes (3 minutes), one convention listed."""
    tree = enumerate_histories(get_game("toy-coordination"))
    res = certified_optimal_set(tree, 1e-4, OptimalSetConfig(max_seconds=30.0, progress=False))
    assert res.complete, res.note
    assert len(res.optimal_points) == 2
