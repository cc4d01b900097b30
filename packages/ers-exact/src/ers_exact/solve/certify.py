"""Interval certificates for Boltzmann fixed points (Krawczyk 1969; Neumaier 1990).

For g(y) = y - M(y) in logit coordinates, a box Y with centre c and C ~ Dg(c)^{-1}:

    K(Y) = c - C g(c) + (I - C Dg(Y)) (Y - c).

K(Y) in int(Y) proves that Y holds exactly one zero (one fixed point); K(Y) disjoint from Y proves it holds
none. M and Dg(Y) are enclosed by a plain (slow, rigorous) re-evaluation of the Q-gaps over
:class:`~ers_exact.solve.interval.Interval` / :class:`~ers_exact.solve.interval.IDual` numbers, including the
chance weights b_0 T U. The certified search over the whole domain built on these tests is
:mod:`ers_exact.solve.subdivision`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.interval import IDual, Interval
from ers_exact.solve.interval_scalar import interval_logit_map

__all__ = [
    "BoxVerdict",
    "certificate_bytes",
    "certified_boxes",
    "certify_point",
    "certify_points",
    "inflate",
    "interval_bounds",
    "interval_logit_map",
    "krawczyk",
]

_EPS = np.finfo(float).eps


def interval_bounds(xs: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """The lower and upper ends of Intervals (or of IDuals' values) as two arrays."""
    vals = [x.val if isinstance(x, IDual) else x for x in xs]
    return np.array([v.lo for v in vals]), np.array([v.hi for v in vals])


def _fmat_ivec(C: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Enclosure of C v for a float matrix C and an interval vector/matrix v (outward margin)."""
    cp, cn = np.maximum(C, 0), np.minimum(C, 0)
    rlo, rhi = cp @ lo + cn @ hi, cp @ hi + cn @ lo
    mag = np.abs(C) @ np.maximum(np.abs(lo), np.abs(hi))
    margin = 4 * (C.shape[-1] + 2) * _EPS * mag + 1e-300
    return rlo - margin, rhi + margin


def _imat_ivec(
    alo: np.ndarray, ahi: np.ndarray, vlo: np.ndarray, vhi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    prods = np.stack([alo * vlo, alo * vhi, ahi * vlo, ahi * vhi])
    lo, hi = prods.min(axis=0).sum(axis=1), prods.max(axis=0).sum(axis=1)
    margin = 4 * (alo.shape[1] + 2) * _EPS * np.abs(prods).max(axis=0).sum(axis=1) + 1e-300
    return lo - margin, hi + margin


def _enclosures_scalar(
    coords: LogitCoordinates, lo: np.ndarray, hi: np.ndarray, c: np.ndarray, alpha: float
) -> tuple[np.ndarray, ...]:
    """DM(Y) and M(c) enclosures by the plain scalar re-evaluation (IDual; hull of per-node gaps)."""
    D = len(lo)
    duals = [IDual(Interval(l, h), {j: Interval(1.0)}) for j, (l, h) in enumerate(zip(lo, hi))]
    image = interval_logit_map(coords, duals, alpha)
    jlo, jhi = np.zeros((D, D)), np.zeros((D, D))
    for r, x in enumerate(image):
        # a gap that does not depend on y (e.g. a one-agent game's last step) is a plain Interval: zero row
        for j, g in (x.grad if isinstance(x, IDual) else {}).items():
            jlo[r, j], jhi[r, j] = g.lo, g.hi
    mlo, mhi = interval_bounds(interval_logit_map(coords, [Interval(v) for v in c], alpha))
    return jlo, jhi, mlo, mhi


def _enclosures_vectorised(
    coords: LogitCoordinates, lo: np.ndarray, hi: np.ndarray, c: np.ndarray, alpha: float
) -> tuple[np.ndarray, ...]:
    """DM(Y) and M(c) enclosures by the exact-derivative evaluator run on interval arrays
    (:meth:`~ers_exact.solve.derivatives.LogitDerivatives.enclose`): any dimension, for small boxes. Several
    boxes at once: ``lo``, ``hi``, ``c`` [D, P] give (DM lo, hi [D, D, P], M(c) lo, hi [D, P]), one pass."""
    batch = lo.ndim == 2
    lo, hi, c = (np.asarray(v, float).reshape(len(v), -1) for v in (lo, hi, c))
    P = lo.shape[1]
    m, dm = coords.derivatives.enclose(np.hstack([lo, c]), np.hstack([hi, c]), alpha)
    assert dm is not None
    out = (dm.lo[:, :, :P], dm.hi[:, :, :P], m.lo[:, P:], m.hi[:, P:])
    return out if batch else tuple(x[..., 0] for x in out)


def krawczyk(
    coords: LogitCoordinates, lo: np.ndarray, hi: np.ndarray, alpha: float, method: str = "scalar"
) -> tuple[str, np.ndarray, np.ndarray]:
    """One Krawczyk test on the box [lo, hi]: 'unique', 'none' or 'unknown', and K(Y).

    ``method``: 'scalar' (the plain re-evaluation; tighter on wide boxes, slow beyond a few dozen
    coordinates) or 'vectorised' (interval arrays through the exact-derivative evaluator; fast at any
    dimension, meant for the small boxes around a computed fixed point)."""
    c = 0.5 * (lo + hi)
    if method == "scalar":
        enclosures = _enclosures_scalar(coords, lo, hi, c, alpha)
    elif method == "vectorised":
        enclosures = _enclosures_vectorised(coords, lo, hi, c, alpha)
    else:
        raise ValueError(f"unknown Krawczyk method {method!r}: use 'scalar' or 'vectorised'")
    return _krawczyk_test(lo, hi, c, *enclosures)


def _krawczyk_test(
    lo: np.ndarray,
    hi: np.ndarray,
    c: np.ndarray,
    jlo: np.ndarray,
    jhi: np.ndarray,
    mlo: np.ndarray,
    mhi: np.ndarray,
) -> tuple[str, np.ndarray, np.ndarray]:
    """The Krawczyk test of :func:`krawczyk` from the enclosures of DM(Y) and M(c)."""
    D = len(lo)
    if not (
        np.all(np.isfinite(jlo))
        and np.all(np.isfinite(jhi))
        and np.all(np.isfinite(mlo))
        and np.all(np.isfinite(mhi))
    ):
        return "unknown", lo, hi
    eye = np.eye(D)
    glo, ghi = eye - jhi, eye - jlo  # Dg(Y) = I - DM(Y)
    try:
        C = np.linalg.inv(0.5 * (glo + ghi))
    except np.linalg.LinAlgError:
        return "unknown", lo, hi
    gclo, gchi = c - mhi, c + 0.0 - mlo  # g(c) = c - M(c)
    gclo, gchi = gclo - 4 * _EPS * np.abs(gclo), gchi + 4 * _EPS * np.abs(gchi)
    cglo, cghi = _fmat_ivec(C, gclo, gchi)
    plo, phi = _fmat_ivec(C, glo, ghi)
    alo, ahi = eye - phi, eye - plo
    ylo, yhi = lo - c, hi - c
    ylo, yhi = ylo - 4 * _EPS * np.abs(lo), yhi + 4 * _EPS * np.abs(hi)
    aylo, ayhi = _imat_ivec(alo, ahi, ylo, yhi)
    klo, khi = c - cghi + aylo, c - cglo + ayhi
    klo, khi = klo - 4 * _EPS * np.abs(klo), khi + 4 * _EPS * np.abs(khi)
    if np.all(klo > lo) and np.all(khi < hi):
        return "unique", klo, khi
    if np.any(khi < lo) or np.any(klo > hi):
        return "none", klo, khi
    return "unknown", klo, khi


#: the relative radii of the boxes tried around a computed point, in this order: 1e-8 decides almost every point;
#: 1e-10 the low-temperature ones (alpha <= 0.1: logits of 1e3-5e3 whose Jacobian varies too fast over a 1e-8
#: box), then wider ones for points Newton left less accurate
RADII: tuple[float, ...] = (1e-8, 1e-10, 1e-6, 1e-4)

#: epsilon-inflation rounds after each radius (Rump's verification: the next box is the last one grown to hold
#: its Krawczyk image with a 25% margin, at most 100x its first radius)
INFLATIONS = 2

#: a Krawczyk test's verdict on boxes [P, D]: proven to hold exactly one zero [P], undecided [P], K(Y) [P, D]
BoxVerdict = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def certify_point(
    coords: LogitCoordinates,
    y: np.ndarray,
    alpha: float,
    radii: tuple[float, ...] = RADII,
    method: str = "auto",
) -> bool:
    """True when some box around y provably holds exactly one fixed point: y +- r max(1, |y|) for r in
    ``radii``, each followed by epsilon-inflation (:func:`inflate`).

    ``method`` 'auto' runs the vectorised Krawczyk test first and the scalar one (up to 64 coordinates)
    where the first cannot decide."""
    return certify_points(coords, np.asarray(y, float)[None], alpha, radii, method)[0]


def certify_points(
    coords: LogitCoordinates,
    ys: np.ndarray,
    alpha: float,
    radii: tuple[float, ...] = RADII,
    method: str = "auto",
    on_certified: Callable[[int], None] | None = None,
    inflations: int = INFLATIONS,
) -> list[bool]:
    """:func:`certify_point` for each row of ``ys`` [P, D]; the vectorised tests of all the points still
    undecided at one radius share one batched interval evaluation (the same boxes, the same answers).
    ``on_certified(k)`` is told after each batch how many more points it certified (a progress bar)."""
    ys = np.asarray(ys, float).reshape(len(ys), coords.dim)
    methods = {
        "auto": ["vectorised"] + (["scalar"] if coords.dim <= 64 else []),
        "scalar": ["scalar"],
        "vectorised": ["vectorised"],
    }[method]
    done = np.zeros(len(ys), dtype=bool)
    for m in methods:
        todo = np.flatnonzero(~done)
        if not todo.size:
            break

        def test(lo: np.ndarray, hi: np.ndarray, m: str = m) -> BoxVerdict:
            status, klo, khi = _tests(coords, lo, hi, alpha, m, on_certified)
            return status == "unique", status == "unknown", klo, khi

        found, _, _ = certified_boxes(test, ys[todo], radii, inflations)
        done[todo[found]] = True
    return done.tolist()


def certified_boxes(
    test: Callable[[np.ndarray, np.ndarray], BoxVerdict],
    ys: np.ndarray,
    radii: Sequence[float] = RADII,
    inflations: int = INFLATIONS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each row of ``ys`` [P, D] the first box that ``test`` proves to hold exactly one fixed point:
    y +- r max(1, |y|) for r in ``radii``, each followed by up to ``inflations`` rounds of epsilon-inflation
    (:func:`inflate`) while the test stays undecided with a finite K(Y) other than Y. Returns (found [P], lo,
    hi [P, D]; lo = hi = y where none was found)."""
    ys = np.asarray(ys, float)
    found, blo, bhi = np.zeros(len(ys), dtype=bool), ys.copy(), ys.copy()
    for r in radii:
        todo = np.flatnonzero(~found)
        first = r * np.maximum(1.0, np.abs(ys[todo]))
        lo, hi = ys[todo] - first, ys[todo] + first
        for rnd in range(inflations + 1):
            if not todo.size:
                return found, blo, bhi
            unique, unknown, klo, khi = test(lo, hi)
            found[todo[unique]] = True
            blo[todo[unique]], bhi[todo[unique]] = lo[unique], hi[unique]
            moved = (klo != lo).any(axis=1) | (khi != hi).any(axis=1)  # K(Y) = Y: no enclosure
            grow = unknown & moved & np.isfinite(klo).all(axis=1) & np.isfinite(khi).all(axis=1)
            if rnd == inflations or not grow.any():
                break
            todo, first = todo[grow], first[grow]
            lo, hi = inflate(lo[grow], hi[grow], klo[grow], khi[grow], first)
    return found, blo, bhi


def inflate(
    lo: np.ndarray, hi: np.ndarray, klo: np.ndarray, khi: np.ndarray, first: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The next box of epsilon-inflation around the same centre c: per coordinate the larger of its radius and
    1.25 |K(Y) - c|, at most 100x ``first`` (the radius it started from); it holds Y. Where K(Y) left Y because the
    rounding of g(c) is wider than Y (small logits beside large ones at low temperature) this finds the radius
    that holds it; where the Jacobian's enclosure is too wide the growth stops at the cap and the test fails,
    never falsely: Krawczyk's theorem holds for every box."""
    c = 0.5 * (lo + hi)
    half = np.maximum(hi - c, 1.25 * np.maximum(khi - c, c - klo))
    half = np.minimum(half, 100.0 * first)
    return np.minimum(lo, c - half), np.maximum(hi, c + half)  # holds Y whatever the rounding of c +- half


def _tests(
    coords: LogitCoordinates,
    lo: np.ndarray,
    hi: np.ndarray,
    alpha: float,
    method: str,
    on_certified: Callable[[int], None] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Krawczyk test of each box [lo[p], hi[p]] by ``method``: statuses [P] and K(Y) [P, D]."""
    if method == "vectorised":
        out = _vectorised_tests(coords, lo, hi, alpha, on_certified)
    else:
        out = [krawczyk(coords, lo[p], hi[p], alpha, method=method) for p in range(len(lo))]
        if on_certified is not None:
            on_certified(sum(o[0] == "unique" for o in out))
    status = np.array([o[0] for o in out], dtype=object)
    klo = np.array([o[1] for o in out], dtype=float).reshape(lo.shape)
    khi = np.array([o[2] for o in out], dtype=float).reshape(lo.shape)
    return status, klo, khi


#: working memory of one box's vectorised test per policy evaluation with the Jacobian (the box and its centre
#: as interval columns, the Krawczyk operator's D x D arrays; measured: Dec-Tiger H=4, 2.7x)
CERTIFICATE_EVALUATIONS = 3


def certificate_bytes(coords: LogitCoordinates) -> int:
    """Peak working bytes of one box's vectorised Krawczyk test (the enclosures of M and DM and the test)."""
    return CERTIFICATE_EVALUATIONS * coords.derivatives.bytes_per_policy(True)


def _vectorised_tests(
    coords: LogitCoordinates,
    lo: np.ndarray,
    hi: np.ndarray,
    alpha: float,
    on_certified: Callable[[int], None] | None = None,
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The vectorised Krawczyk test of each box [lo[p], hi[p]] (status and K(Y)), in batches under the memory
    budget (:func:`certificate_bytes` per box)."""
    if lo.shape[1] == 0:  # no free coordinate (one action everywhere): the one policy is the one fixed point
        return [("unique", lo[p], hi[p]) for p in range(len(lo))]
    step = max(1, coords.memory_budget // certificate_bytes(coords))
    out = []
    for s in range(0, len(lo), step):
        blo, bhi = lo[s : s + step], hi[s : s + step]
        c = 0.5 * (blo + bhi)
        enc = _enclosures_vectorised(coords, blo.T, bhi.T, c.T, alpha)
        batch = [_krawczyk_test(blo[p], bhi[p], c[p], *(e[..., p] for e in enc)) for p in range(len(blo))]
        if on_certified is not None:
            on_certified(sum(b[0] == "unique" for b in batch))
        out += batch
    return out
