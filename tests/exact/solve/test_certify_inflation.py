"""Certificates at low temperature: the boxes around a computed fixed point and their epsilon-inflation.

At alpha = 0.05 on Dec-Tiger H=2 the logits reach ~1e3 beside others of ~0.35. A box of relative radius r is
then thinner in the small coordinates than the rounding of g(c) carried from the large ones, and a wider box
lets the Jacobian's enclosure blow up; before inflation 2 of the 13 points found were left uncertified."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.certify import certify_points, inflate, krawczyk
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points

ALPHA = 0.05


@pytest.fixture(scope="module")
def cold() -> tuple[LogitCoordinates, np.ndarray]:
    tree = enumerate_histories(get_game("dectiger", horizon=2))
    fs = solve_fixed_points(tree, ALPHA, SolverConfig(certify=False, complete_search=False))
    coords = LogitCoordinates(tree)
    return coords, np.array([p.y for p in fs.points]).reshape(len(fs.points), coords.dim)


def test_every_low_temperature_point_is_certified(cold) -> None:
    coords, ys = cold
    assert len(ys) >= 10 and np.abs(ys).max() > 500  # the regime described above
    assert all(certify_points(coords, ys, ALPHA))


def test_inflation_certifies_what_a_too_thin_box_cannot(cold) -> None:
    coords, ys = cold
    # 1e-12: since the enclosure of a saturated non-reference action no longer grows with the box
    # (test_saturated_enclosure.py), 1e-10 alone certifies all 13 points
    plain = certify_points(coords, ys, ALPHA, radii=(1e-12,), inflations=0)
    grown = certify_points(coords, ys, ALPHA, radii=(1e-12,), inflations=2)
    assert not all(plain)
    assert all(grown)


@pytest.mark.parametrize("method", ["vectorised", "scalar"])
def test_inflated_boxes_still_reject_points_that_are_not_fixed_points(cold, method: str) -> None:
    """Moved by 50 in every logit: inflation grows a box by at most 100x a radius of 1e-4 max(1, |y|), which
    cannot reach back to the fixed point in the small coordinates, so no box may be certified."""
    coords, ys = cold
    assert not any(certify_points(coords, ys[:4] + 50.0, ALPHA, method=method))


def test_the_inflated_box_that_certifies_holds_the_point(cold) -> None:
    """Krawczyk's K(Y) from the grown box lies inside it and holds the computed point (within its residual)."""
    coords, ys = cold
    y = ys[0]
    rad = 1e-10 * np.maximum(1.0, np.abs(y))
    lo, hi = y - rad, y + rad
    for _ in range(3):
        status, klo, khi = krawczyk(coords, lo, hi, ALPHA, method="vectorised")
        if status == "unique":
            break
        lo, hi = inflate(lo, hi, klo, khi, rad)
    assert status == "unique"
    assert np.all(lo < klo) and np.all(khi < hi)
    assert np.all(klo <= y + 1e-9) and np.all(y - 1e-9 <= khi)


floats = st.floats(-1e4, 1e4, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    arrays(np.float64, 6, elements=floats),
    arrays(np.float64, 6, elements=st.floats(1e-12, 1.0)),
    arrays(np.float64, 6, elements=floats),
    arrays(np.float64, 6, elements=st.floats(0.0, 1e3)),
)
def test_inflate_keeps_the_centre_grows_and_stops_at_its_cap(
    c: np.ndarray, first: np.ndarray, shift: np.ndarray, spread: np.ndarray
) -> None:
    lo, hi = c - first, c + first
    klo, khi = c + shift - spread, c + shift + spread
    nlo, nhi = inflate(lo, hi, klo, khi, first)
    tol = (
        8 * np.finfo(float).eps * (1 + np.abs(nlo) + np.abs(nhi))
    )  # c +- half rounds to the grid of the ends
    assert np.all(nlo <= lo) and np.all(hi <= nhi)  # it holds the box it grew from
    assert np.all(np.abs(0.5 * (nlo + nhi) - c) <= tol)
    half = 0.5 * (nhi - nlo)
    assert np.all(half <= 100.0 * first + tol)  # the cap
    need = 1.25 * np.maximum(khi - c, c - klo)
    inside = need <= 100.0 * first
    assert np.all(half[inside] >= need[inside] - tol[inside])  # K(Y) fits where the cap allows
