"""Branch points of the continuation curve (:mod:`ers_exact.solve.continuation`): locating them from the
test functions (bisection on the sign of det [H_z; t], golden section on its smallest singular value), the
kernel of H_z there, and branch switching (Newton at lambda_b (1 +- delta) from the parent's point pushed
along kernel directions; every root that is not the parent's point seeds a new branch), and the watch of
those test functions along one branch (:class:`BranchWatch`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ers_exact.solve.boltzmann import logit_bound
from ers_exact.solve.config import ContinuationConfig
from ers_exact.solve.newton import NewtonSettings, flat_policies, newton
from ers_exact.solve.path import Augmented, Tracer
from ers_exact.util.progress import Progress

__all__ = ["BranchWatch", "Seed", "locate_min", "locate_sign", "near_known", "switch"]


@dataclass
class Seed:
    """Where a branch starts: a curve point, its tangent, and the branch point it leaves (if any)."""

    z: np.ndarray
    t: np.ndarray
    parent: int | None
    origin: float
    origin_point: np.ndarray | None
    hz: np.ndarray | None = None  # H_z at z when already evaluated


def near_known(z: np.ndarray, known: list[np.ndarray], eps: float) -> bool:
    """Whether the curve point z = (y, lambda) lies within ``eps`` (relative, max norm) of one of ``known``."""
    return any(np.abs(z - k).max() < eps * max(1.0, float(np.abs(k).max())) for k in known)


def _point_on_arc(
    tr: Tracer, z: np.ndarray, t: np.ndarray, lu: Augmented, s: float
) -> tuple[np.ndarray, np.ndarray, Augmented] | None:
    """The curve point at arclength ~ s along t from z, with its tangent and augmented LU."""
    zs, _ = tr.correct(z + s * t, t, lu)
    if zs is None:
        return None
    ts, lus = tr.tangent(tr.Hz(zs), t)
    return zs, ts, lus


def locate_sign(
    tr: Tracer, z: np.ndarray, t: np.ndarray, lu: Augmented, h: float, sign: float, cfg: ContinuationConfig
) -> dict[str, Any] | None:
    """Bisection on the sign of det [H_z; t] between z (sign) and the next accepted point."""
    lo, hi = 0.0, h
    best = None
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        got = _point_on_arc(tr, z, t, lu, mid)
        if got is None:
            break
        best = got
        if tr.det_sign(got[2]) == sign:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10 * tr.scale:
            break
    return None if best is None else _describe_branch_point(tr, best[0], best[1], "det sign change")


def locate_min(
    tr: Tracer, z: np.ndarray, t: np.ndarray, z_end: np.ndarray, cfg: ContinuationConfig
) -> dict[str, Any] | None:
    """Golden-section search for the minimum of sigma_min [H_z; t] on the arc from z to z_end."""
    lu0 = tr.tangent(tr.Hz(z), t)[1]
    span = float(np.linalg.norm(z_end - z))
    gr = (np.sqrt(5) - 1) / 2
    a, b = 0.0, span

    def f(s: float) -> tuple[float, Any]:
        got = _point_on_arc(tr, z, t, lu0, s)
        if got is None:
            return np.inf, None
        return tr.sigma_min(got[2])[0], got

    c, d = b - gr * (b - a), a + gr * (b - a)
    fc, gc = f(c)
    fd, gd = f(d)
    for _ in range(40):
        if fc < fd:
            b, d, fd, gd = d, c, fc, gc
            c = b - gr * (b - a)
            fc, gc = f(c)
        else:
            a, c, fc, gc = c, d, fd, gd
            d = a + gr * (b - a)
            fd, gd = f(d)
        if b - a < 1e-10 * tr.scale:
            break
    best, got = (fc, gc) if fc < fd else (fd, gd)
    if got is None or best > cfg.singular_tol * max(1.0, float(np.abs(got[0]).max())):
        return None
    return _describe_branch_point(tr, got[0], got[1], "singular value minimum")


def _describe_branch_point(tr: Tracer, z: np.ndarray, t: np.ndarray, how: str) -> dict[str, Any]:
    """Kernel of H_z at a located branch point, less the tangent."""
    hz = tr.Hz(z)
    _, s, vt = np.linalg.svd(hz)
    s_full = np.concatenate([s, [0.0]])  # H_z is D x (D+1): one more right singular vector, value 0
    scale = max(float(s_full[0]), 1.0)
    small = np.flatnonzero(s_full < max(1e-5 * scale, 1e3 * float(s_full[-2])))
    basis = vt[small]
    basis = basis - np.outer(basis @ t, t)
    u, sv, _ = np.linalg.svd(basis.T, full_matrices=False)
    kernel = u[:, sv > 1e-6].T  # orthonormal directions off the tangent
    return {
        "lambda": tr.lam(z[-1]),
        "alpha": float(tr.unit / z[-1]) if z[-1] > 0 else float("inf"),
        "kernel_dim": len(kernel),
        "detected_by": how,
        "z": z.copy(),
        "t": t.copy(),
        "kernel": kernel,
    }


def switch(tr: Tracer, bif: dict[str, Any], parent: int, progress: bool | None = None) -> list[Seed]:
    """Pick up the branches leaving a branch point: batched Newton at fixed lambda = lambda_b (1 +- delta)
    from the parent's point pushed along kernel directions (each basis vector, both signs, pairwise
    combinations and a few seeded random combinations); every root that is not the parent's point starts a
    new branch, traced away from the branch point."""
    cfg = tr.cfg
    z_b, kernel, t_b = bif["z"], bif["kernel"], bif["t"]
    y_b, lam_b = z_b[:-1], float(z_b[-1])
    if len(kernel) == 0 or lam_b <= 0:
        return []
    V = kernel[:, :-1]
    V = V[np.linalg.norm(V, axis=1) > 1e-9]
    if len(V) == 0:
        return []
    V = V / np.linalg.norm(V, axis=1, keepdims=True)
    dirs = list(V) + list(-V)
    if len(V) <= 6:
        for a in range(len(V)):
            for b in range(a + 1, len(V)):
                dirs += [s_a * V[a] + s_b * V[b] for s_a in (1, -1) for s_b in (1, -1)]
    rng = np.random.default_rng(len(V))
    if len(V) > 1:
        combos = rng.normal(size=(min(cfg.switch_directions, 4 * len(V)), len(V))) @ V
        dirs += list(combos)
    dirs = [d / np.linalg.norm(d) for d in dirs][: cfg.switch_directions]
    settings = NewtonSettings(steps=40, tol=1e-12)
    seeds: list[Seed] = []
    for sign in (1.0, -1.0):
        lam = lam_b * (1.0 + sign * cfg.switch_delta)
        slope = t_b[:-1] / t_b[-1] if abs(t_b[-1]) > 1e-12 else np.zeros_like(y_b)
        y_par = y_b + (lam - lam_b) * slope
        size = max(1.0, float(np.abs(y_b).max(initial=0.0)))
        starts = [y_par] + [y_par + eps * size * d for eps in cfg.switch_eps for d in dirs]
        alpha = 1.0 / lam
        desc = f"branch switching at lambda={tr.lam(lam_b):.4g}: Newton at {tr.lam(lam):.4g} from {len(starts)} starts"
        with Progress(settings.steps, desc, enabled=progress) as bar:
            bound = logit_bound(tr.coords.tree, alpha)
            y, res = newton(tr.coords, np.array(starts), alpha, settings, bound, bar)
            bar.update(max(0, bar.total - bar.done))
        ok = np.flatnonzero(np.isfinite(res) & (res < settings.tol))
        if ok.size == 0:
            continue
        flat = flat_policies(tr.coords, y[ok])
        ref = flat[0] if ok[0] == 0 else None
        kept: list[np.ndarray] = []
        for k, f in zip(ok, flat):
            if k == 0 or (ref is not None and np.abs(f - ref).max() < 1e-6):
                continue
            if any(np.abs(f - g).max() < 1e-6 for g in kept):
                continue
            kept.append(f)
            z1 = np.append(y[k], lam)
            t1, _ = tr.tangent(tr.Hz(z1), z1 - z_b)
            seeds.append(Seed(z1, t1, parent, lam_b, z_b))
    return seeds


def _dip(sig: tuple[float, float, float], z: tuple[np.ndarray, ...], ratio: float) -> bool:
    """Whether sigma_min [H_z; t] sampled at three successive curve points z (values ``sig``) dips enough
    for a golden-section search between the outer two: the middle value is below ``ratio`` times both
    neighbours, or the steeper side, extended as a line, reaches zero within the longer step. The second
    catches a zero |s - s_b| sampled by long steps (a straight branch, e.g. the uniform policy of a
    symmetric game, grows its steps to the cap; a kernel of even dimension changes no determinant sign),
    which the ratio alone misses when s_b lies mid-step; a smooth minimum is left alone unless its
    linear extrapolation reaches zero (the search then finds sigma_min above ``singular_tol`` and
    reports nothing)."""
    s_pp, s_p, s_n = sig
    if not s_p < min(s_pp, s_n):
        return False
    if s_p < ratio * min(s_pp, s_n):
        return True
    d1, d2 = float(np.linalg.norm(z[1] - z[0])), float(np.linalg.norm(z[2] - z[1]))
    if d1 <= 0.0 or d2 <= 0.0:
        return False
    slope = max((s_pp - s_p) / d1, (s_n - s_p) / d2)
    return s_p <= slope * max(d1, d2)


class BranchWatch:
    """The test functions of one branch on the augmented matrix A = [H_z; t]: the sign of det A (it changes at
    a branch point of odd multiplicity) and sigma_min A at the last three curve points (a dip catches even
    multiplicities); the branch point between two steps is then located (``locate_sign`` / ``locate_min``).
    Off (``locate_branch_points=False``, as Gambit): sign 1, sigma 1."""

    def __init__(self, tr: Tracer, lu: Augmented, z: np.ndarray, t: np.ndarray, on: bool) -> None:
        self.sign = tr.det_sign(lu) if on else 1.0
        sig, vec = tr.sigma_min(lu) if on else (1.0, None)
        self.vec: np.ndarray | None = vec
        self.hist: list[tuple[float, np.ndarray, np.ndarray]] = [(sig, z.copy(), t.copy())]

    def step(
        self,
        tr: Tracer,
        here: tuple[np.ndarray, np.ndarray, Augmented, float],
        nxt: tuple[np.ndarray, np.ndarray, Augmented],
        lam_stop: float,
        cfg: ContinuationConfig,
    ) -> dict[str, Any] | None:
        """The branch point between the curve point ``here`` = (z, t, A, step h) and the next accepted one
        ``nxt`` = (zn, tn, An), if a test function reveals one before lambda_stop (else None)."""
        (z, t, lu, h), (zn, tn, lun) = here, nxt
        sign_n = tr.det_sign(lun)
        sig_n, self.vec = tr.sigma_min(lun, self.vec)
        bif = None
        if sign_n != self.sign and z[-1] < lam_stop:
            bif = locate_sign(tr, z, t, lu, h, self.sign, cfg)
        elif len(self.hist) >= 2:
            s_prev, z_prev, _ = self.hist[-1]
            s_pp, z_pp, t_pp = self.hist[-2]
            if _dip((s_pp, s_prev, sig_n), (z_pp, z_prev, zn), cfg.singular_ratio) and z_prev[-1] < lam_stop:
                bif = locate_min(tr, z_pp, t_pp, zn, cfg)
        self.hist.append((sig_n, zn.copy(), tn.copy()))
        if len(self.hist) > 3:
            self.hist.pop(0)
        self.sign = sign_n
        return bif
