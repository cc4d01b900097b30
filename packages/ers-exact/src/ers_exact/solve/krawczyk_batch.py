"""The Krawczyk test (Krawczyk 1969; Neumaier 1990) on a batch of boxes at once, for g(y) = y - M(y):

    K(Y) = c - C g(c) + (I - C Dg(Y)) (Y - c),   c = mid Y,  C ~ Dg(c)^{-1} (here mid(Dg(Y))^{-1}).

K(Y) in int(Y): Y holds exactly one zero (one Boltzmann fixed point); K(Y) n Y empty: none. Dg(Y) and M(c)
are enclosed by the exact-derivative evaluator on interval arrays
(:meth:`~ers_exact.solve.derivatives.LogitDerivatives._run`, P boxes as its batch axis), the matrix
products by outward-rounded bounds. Same test as :func:`ers_exact.solve.certify.krawczyk`, vectorised
over boxes ([P, D] end points); a box whose enclosures are not finite is 'unknown'.
"""

from __future__ import annotations

import numpy as np

from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.interval_array import IArray

__all__ = ["NONE", "UNIQUE", "UNKNOWN", "krawczyk_batch", "logit_map_enclosure"]

UNKNOWN, UNIQUE, NONE = 0, 1, 2
_EPS = np.finfo(float).eps


def _fmat_ivec(C: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Enclosure of C v for float matrices C [P, D, D] and interval v ([P, D] or [P, D, K]; batched matmul,
    which rounds no worse than the sum the margin bounds), outward margin."""
    vec = lo.ndim == 2
    if vec:
        lo, hi = lo[..., None], hi[..., None]
    cp, cn = np.maximum(C, 0), np.minimum(C, 0)
    rlo = cp @ lo + cn @ hi
    rhi = cp @ hi + cn @ lo
    mag = np.abs(C) @ np.maximum(np.abs(lo), np.abs(hi))
    if vec:
        rlo, rhi, mag = rlo[..., 0], rhi[..., 0], mag[..., 0]
    margin = 4 * (C.shape[-1] + 2) * _EPS * mag + 1e-300
    return rlo - margin, rhi + margin


def _inverse_or_nan(m: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.inv(m)
    except np.linalg.LinAlgError:
        return np.full_like(m, np.nan)


def _enclose(
    coords: LogitCoordinates, lo: np.ndarray, hi: np.ndarray, alpha: float, jacobian: bool
) -> tuple[IArray, IArray | None]:
    return coords.derivatives.enclose(lo.T, hi.T, alpha, jacobian)


def logit_map_enclosure(
    coords: LogitCoordinates, lo: np.ndarray, hi: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """M(Y) enclosed by the exact-form evaluator (tight on narrow boxes), [P, D] lo and hi."""
    m, _ = _enclose(coords, lo, hi, alpha, jacobian=False)
    return m.lo.T, m.hi.T


def krawczyk_batch(
    coords: LogitCoordinates,
    lo: np.ndarray,
    hi: np.ndarray,
    alpha: float,
    subset: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One Krawczyk test per box [lo, hi] ([P, D]): status [P] (UNKNOWN, UNIQUE or NONE) and K(Y) [P, D].

    ``subset``: test only the subsystem y_S = M_S(y) on those coordinates (S x S block of the Jacobian, the
    other coordinates as given, usually points); valid as a statement about y_S alone where M_S does not
    depend on the other coordinates (:mod:`~ers_exact.solve.closed_blocks`); K(Y) is returned on S, the
    other columns as given."""
    P = lo.shape[0]
    status = np.full(P, UNKNOWN)
    if P == 0:
        return status, lo.copy(), hi.copy()
    c = 0.5 * (lo + hi)
    _, dm = _enclose(coords, lo, hi, alpha, jacobian=True)
    mc, _ = _enclose(coords, c, c, alpha, jacobian=False)
    assert dm is not None
    jlo, jhi = dm.lo.transpose(2, 0, 1), dm.hi.transpose(2, 0, 1)  # [P, D, D]
    mlo, mhi = mc.lo.T, mc.hi.T
    if subset is not None:
        s = np.asarray(subset)
        jlo, jhi = jlo[:, s][:, :, s], jhi[:, s][:, :, s]
        st, klo_s, khi_s = _krawczyk_core(lo[:, s], hi[:, s], c[:, s], jlo, jhi, mlo[:, s], mhi[:, s])
        klo, khi = lo.copy(), hi.copy()
        klo[:, s], khi[:, s] = klo_s, khi_s
        return st, klo, khi
    return _krawczyk_core(lo, hi, c, jlo, jhi, mlo, mhi)


def _krawczyk_core(
    lo: np.ndarray,
    hi: np.ndarray,
    c: np.ndarray,
    jlo: np.ndarray,
    jhi: np.ndarray,
    mlo: np.ndarray,
    mhi: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The test from the enclosures of DM(Y) [P, D, D] and M(c) [P, D] (module docstring)."""
    P, D = lo.shape
    status = np.full(P, UNKNOWN)
    finite = (
        np.isfinite(jlo).all(axis=(1, 2))
        & np.isfinite(jhi).all(axis=(1, 2))
        & np.isfinite(mlo).all(axis=1)
        & np.isfinite(mhi).all(axis=1)
    )
    klo, khi = lo.copy(), hi.copy()
    if not finite.any():
        return status, klo, khi
    idx = np.flatnonzero(finite)
    eye = np.eye(D)[None]
    glo, ghi = eye - jhi[idx], eye - jlo[idx]  # Dg(Y) = I - DM(Y)
    mid = 0.5 * (glo + ghi)
    try:
        C = np.linalg.inv(mid)
    except np.linalg.LinAlgError:  # one singular midpoint matrix: invert the batch one by one
        C = np.stack([_inverse_or_nan(m) for m in mid])
    ok = np.isfinite(C).all(axis=(1, 2))
    cc, l0, h0 = c[idx], lo[idx], hi[idx]
    gclo, gchi = cc - mhi[idx], cc - mlo[idx]  # g(c) = c - M(c)
    gclo, gchi = gclo - 4 * _EPS * np.abs(gclo), gchi + 4 * _EPS * np.abs(gchi)
    cglo, cghi = _fmat_ivec(C, gclo, gchi)
    plo, phi = _fmat_ivec(C, glo, ghi)
    alo, ahi = eye - phi, eye - plo
    ylo = (l0 - cc) - 4 * _EPS * np.abs(l0)
    yhi = (h0 - cc) + 4 * _EPS * np.abs(h0)
    prods = np.stack([alo * ylo[:, None], alo * yhi[:, None], ahi * ylo[:, None], ahi * yhi[:, None]])
    margin = 4 * (D + 2) * _EPS * np.abs(prods).max(axis=0).sum(axis=2) + 1e-300
    aylo = prods.min(axis=0).sum(axis=2) - margin
    ayhi = prods.max(axis=0).sum(axis=2) + margin
    k_lo, k_hi = cc - cghi + aylo, cc - cglo + ayhi
    k_lo, k_hi = k_lo - 4 * _EPS * np.abs(k_lo), k_hi + 4 * _EPS * np.abs(k_hi)
    good = ok & np.isfinite(k_lo).all(axis=1) & np.isfinite(k_hi).all(axis=1)
    unique = good & np.all(k_lo > l0, axis=1) & np.all(k_hi < h0, axis=1)
    none = good & ~unique & (np.any(k_hi < l0, axis=1) | np.any(k_lo > h0, axis=1))
    status[idx[unique]] = UNIQUE
    status[idx[none]] = NONE
    klo[idx[good]], khi[idx[good]] = k_lo[good], k_hi[good]
    return status, klo, khi
