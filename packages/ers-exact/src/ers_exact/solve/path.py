"""The predictor-corrector machinery of :mod:`ers_exact.solve.continuation` on the curve

    H(y, lambda) = y - lambda Gamma(y) = 0,      z = (y, lambda),      H_z = [I - lambda DGamma, -Gamma]

(Allgower & Georg, *Numerical Continuation Methods*, ch. 2 and 6). A step from a curve point z with unit
tangent t: Euler predictor z + h t, then Newton's corrector on {H = 0, t . (w - z - h t) = 0} with the exact
Jacobian at every iterate (one evaluation of Gamma and DGamma per iterate, quadratic convergence), until the
correction is below ``corrector_tol`` (relative). The augmented matrix A = [H_z; t^T] of the last iterate
gives the new tangent (A t' = e_last, oriented along t) and the test functions of the branch-point search
(sign of det A, smallest singular value). Step control as in Gambit's path tracer (Allgower & Georg's
"steplength adaptation by asymptotic expansion"): a step is refused when its first correction is longer
than ``max_dist`` times the step, when the corrector stops contracting, or when the tangent turns by more
than ``max_turn``; otherwise the next step is scaled by sqrt(target / first correction), within
[1/2, ``max_growth``].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.config import ContinuationConfig

__all__ = ["Augmented", "Step", "Tracer"]


class Augmented:
    """The augmented matrix A = [H_z; t^T] of one curve point: solves with it, and (computed on first use)
    the sign of det A and A^-1 (the chord corrector and the inverse iteration apply it several times)."""

    def __init__(self, matrix: np.ndarray, inverse: np.ndarray | None = None) -> None:
        self.matrix = matrix
        if inverse is not None:
            self.__dict__["inverse"] = inverse  # (the cached_property's slot)

    @cached_property
    def det_sign(self) -> float:
        return float(np.linalg.slogdet(self.matrix)[0])

    @cached_property
    def inverse(self) -> np.ndarray:
        """A^-1, or the pseudo-inverse where A is singular."""
        try:
            inv = np.linalg.inv(self.matrix)
        except np.linalg.LinAlgError:
            return np.linalg.pinv(self.matrix)
        return inv if np.isfinite(inv.sum()) else np.linalg.pinv(self.matrix)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """A^-1 rhs (rhs [D + 1] or [D + 1, k]); least squares where A is singular."""
        if "inverse" in self.__dict__:
            return self.inverse @ rhs
        try:
            return np.linalg.solve(self.matrix, rhs)
        except np.linalg.LinAlgError:
            return self.inverse @ rhs


@dataclass(frozen=True)
class Step:
    """An accepted predictor-corrector step: the new point, its tangent and augmented matrix."""

    z: np.ndarray
    t: np.ndarray
    aug: Augmented
    first: float  # length of the first correction, in units of the step
    iterations: int
    order: int  # the predictor's order of accuracy + 1 (2: Euler, 4: Hermite)


class Tracer:
    """Evaluation of H, its Jacobian and the step machinery for one coordinate system."""

    def __init__(
        self, coords: LogitCoordinates, lam_star: float, cfg: ContinuationConfig, unit: float = 1.0
    ) -> None:
        self.coords, self.cfg, self.lam_star = coords, cfg, lam_star
        self.unit = unit  # the coordinates' rewards are the game's / unit: lambda here is unit x the game's
        self.D = coords.dim
        self.scale = 1.0 + lam_star  # arclength unit; rescaled by the size of Gamma(0) in continuation()
        self.evals = 0
        self.eye = np.eye(self.D)
        self.dense = coords.dense_map

    def lam(self, lam: float) -> float:
        """A lambda of the trace as the game's (its rewards in their own units), for reports."""
        return float(lam) / self.unit

    def gamma(self, y: np.ndarray, jacobian: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """Gamma(y) = M(y) at alpha = 1, and DGamma(y) when ``jacobian`` (the dense evaluator directly where
        the game has one; a policy it declines goes through ``LogitCoordinates.evaluate``)."""
        self.evals += 1
        if self.dense is not None:
            m, dm, _, ok = self.dense.evaluate(y[None], 1.0, jacobian)
            if ok[0]:
                return m[0], (dm[0] if jacobian else None)
        ev = self.coords.evaluate(y[None], 1.0, jacobian=jacobian)
        return ev.values[0], (ev.jacobian[0] if ev.jacobian is not None else None)

    def H(self, z: np.ndarray) -> np.ndarray:
        g, _ = self.gamma(z[:-1], False)
        return z[:-1] - z[-1] * g

    def Hz(self, z: np.ndarray) -> np.ndarray:
        """[I - lambda DGamma, -Gamma]  # [D, D + 1]"""
        return self._h_and_hz(z)[1]

    def _h_and_hz(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g, dg = self.gamma(z[:-1], True)
        assert dg is not None
        return z[:-1] - z[-1] * g, np.hstack([self.eye - z[-1] * dg, -g[:, None]])

    def tangent(self, hz: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, Augmented]:
        """Unit null vector of hz with row . t > 0, and the factored augmented matrix [hz; row]."""
        aug = Augmented(np.vstack([hz, row[None]]))
        e = np.zeros(len(row))
        e[-1] = 1.0
        t = aug.solve(e)  # A t = e_last
        return t / np.linalg.norm(t), aug

    @staticmethod
    def det_sign(aug: Augmented) -> float:
        return aug.det_sign

    @staticmethod
    def sigma_min(aug: Augmented, v: np.ndarray | None = None, iters: int = 6) -> tuple[float, np.ndarray]:
        """Smallest singular value of the factored square matrix by inverse iteration on A^T A."""
        inv = aug.inverse
        n = len(inv)
        x = np.ones(n) / np.sqrt(n) if v is None else v / np.linalg.norm(v)
        s = 0.0
        for _ in range(iters):
            w = inv @ (inv.T @ x)
            nw = float(np.linalg.norm(w))
            if not np.isfinite(nw) or nw == 0.0:
                return 0.0, x
            s = 1.0 / np.sqrt(nw)
            x = w / nw
        return s, x

    @staticmethod
    def _hermite(tau: float) -> tuple[float, float, float, float]:
        """The cubic Hermite basis (z0, s1 t0, z1, s1 t1) at tau = s / s1."""
        t2 = tau * tau
        t3 = t2 * tau
        return 2 * t3 - 3 * t2 + 1, t3 - 2 * t2 + tau, 3 * t2 - 2 * t3, t3 - t2

    @classmethod
    def predict(
        cls, z: np.ndarray, t: np.ndarray, h: float, prev: tuple[np.ndarray, np.ndarray] | None
    ) -> np.ndarray:
        """The point at arclength ~h beyond z: Euler z + h t, or with the previous curve point and tangent the
        cubic Hermite interpolant of both points extrapolated (its error is O(h^4) where Euler's is O(h^2))."""
        if prev is None:
            return z + h * t
        z0, t0 = prev
        dz = z - z0
        s1 = math.sqrt(float(dz @ dz))
        if s1 == 0.0:
            return z + h * t
        a, b, c, d = cls._hermite(1.0 + h / s1)
        return a * z0 + (b * s1) * t0 + c * z + (d * s1) * t

    def land(
        self, z: np.ndarray, t: np.ndarray, h: float, prev: tuple[np.ndarray, np.ndarray] | None
    ) -> tuple[np.ndarray, float] | None:
        """When the step of length h predicted from z crosses lambda*: Newton at lambda = lambda* (``polish``)
        from the predicted point on lambda = lambda*, accepted when it converges within ``max_dist`` times
        that step's length of the prediction. Returns (y, residual) of the crossing, or None (no crossing
        predicted, or not accepted: the caller steps on as usual)."""
        lam = self.lam_star
        s1 = math.sqrt(float((z - prev[0]) @ (z - prev[0]))) if prev is not None else 0.0
        coef = (prev[0][-1], prev[1][-1], z[-1], t[-1]) if prev is not None else (0.0, 0.0, z[-1], t[-1])

        def lam_at(step: float) -> float:  # the predictor's lambda, a scalar cubic in the step
            if s1 == 0.0:
                return z[-1] + step * t[-1]
            a, b, c, d = self._hermite(1.0 + step / s1)
            return a * coef[0] + b * s1 * coef[1] + c * coef[2] + d * s1 * coef[3]

        lo, hi, f_lo, f_hi = 0.0, h, z[-1] - lam, lam_at(h) - lam
        if f_lo * f_hi > 0 or f_hi == f_lo:
            return None
        mid = lo
        for _ in range(30):  # regula falsi (Illinois) on the scalar cubic
            mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
            f_mid = lam_at(mid) - lam
            if abs(f_mid) <= 1e-13 * max(1.0, lam):
                break
            if f_mid * f_hi < 0:
                lo, f_lo = hi, f_hi
            else:
                f_lo *= 0.5
            hi, f_hi = mid, f_mid
        y0 = self.predict(z, t, mid, prev)[:-1]
        y, res = self.polish(y0, lam)
        tol = 1e-9 * max(1.0, float(np.abs(y).max(initial=0.0)))
        if not (res < tol and float(np.abs(y - y0).max()) <= self.cfg.max_dist * max(mid, 1e-12)):
            return None
        return y, res

    def _augmented(self, w: np.ndarray, t: np.ndarray, zp: np.ndarray) -> tuple[Augmented, np.ndarray]:
        """[H_z(w); t] and the solutions of it x = (H(w), t . (w - zp)) and x = e_last (the correction and the
        tangent), from one evaluation of Gamma and DGamma at w (anything not finite comes out as a non-finite
        tangent, which the caller refuses)."""
        D = self.D
        g, dg = self.gamma(w[:-1], True)
        assert dg is not None
        mat = np.empty((D + 1, D + 1))
        np.multiply(dg, -w[-1], out=mat[:D, :D])
        mat[:D, :D] += self.eye
        mat[:D, D] = -g
        mat[D] = t
        rhs = np.zeros((D + 1, 2))
        rhs[:D, 0] = w[:-1] - w[-1] * g
        rhs[D] = (t @ (w - zp), 1.0)
        try:
            inv = np.linalg.inv(mat)
        except np.linalg.LinAlgError:  # singular: least squares (NaN where even that fails: refused)
            try:
                inv = np.linalg.pinv(mat)
            except np.linalg.LinAlgError:
                inv = np.full_like(mat, np.nan)
        return Augmented(mat, inv), inv @ rhs  # (the chord corrections apply the same inverse)

    def step(
        self, z: np.ndarray, t: np.ndarray, h: float, prev: tuple[np.ndarray, np.ndarray] | None = None
    ) -> Step | None:
        """One step of arclength ~h from the curve point z along its tangent t (module docstring), predicted
        from z alone or with the previous point and tangent ``prev``; None when refused (the caller shortens
        h). The Jacobian is evaluated at the predicted point and its augmented matrix serves the later
        corrections (a chord corrector, as Gambit's) while they contract by ``chord_rate`` or better; a slower
        one gets a fresh Jacobian (Newton). The last augmented matrix gives the new tangent; the tangent's turn
        is checked on the first one already (a refused step costs one evaluation)."""
        cfg, D = self.cfg, self.D
        zp = self.predict(z, t, h, prev)
        cos_turn = math.cos(cfg.max_turn) if h > 10 * cfg.min_step * self.scale else -math.inf
        w, size, last, first = zp, 0.0, np.inf, 0.0
        aug: Augmented | None = None
        tn, norm = t, 1.0
        res = np.empty(D + 1)
        tol = cfg.path_tol * max(1.0, float(np.abs(zp[:-1]).max(initial=0.0)))  # (the corrections are small)
        for k in range(cfg.corrector_steps + 1):
            if aug is None or size > cfg.chord_rate * last:
                aug, sol = self._augmented(w, t, zp)
                delta, tn = sol[:, 0], sol[:, 1]
                norm = math.sqrt(float(tn @ tn))
                if not (norm > 0.0 and math.isfinite(norm)) or float(t @ tn) / norm < cos_turn:
                    return None
            else:
                res[:D] = self.H(w)
                res[D] = t @ (w - zp)
                delta = aug.inverse @ res
            last, size = size if k else np.inf, float(np.abs(delta).max())
            if not math.isfinite(size):
                return None
            if k == 0:
                first = size / h
                if first > cfg.max_dist:
                    return None
            elif size > cfg.max_contraction * last:
                return None
            w = w - delta
            # converged when this correction, or the next one at the rate seen so far, is below tol
            if (size * size / last if last < np.inf else size) <= tol:
                return Step(w, tn / norm, aug, first, k + 1, 2 if prev is None else 4)
        return None

    def next_step(self, h: float, step: Step) -> float:
        """The step length after an accepted step (asymptotic expansion: the first correction grows like h^2
        after an Euler prediction, h^4 after a Hermite one)."""
        cfg = self.cfg
        growth = (cfg.target_dist / max(step.first, 1e-12)) ** (1.0 / step.order)
        cap = cfg.max_step if cfg.locate_branch_points else cfg.max_step_alone
        return min(h * min(max(growth, 0.5), cfg.max_growth), cap * self.scale)

    def correct(
        self, zp: np.ndarray, row: np.ndarray, lu: Augmented, target: float = 0.0
    ) -> tuple[np.ndarray | None, int]:
        """Chord Newton on {H(z) = 0, row . (z - zp) = target} with the factored [H_z; row] (for the
        branch-point searches, which move along an arc from one factored point)."""
        z = zp.copy()
        last = np.inf
        for k in range(self.cfg.corrector_steps):
            h = self.H(z)
            if not np.all(np.isfinite(h)):
                return None, k
            res = float(np.abs(h).max())
            if res < self.cfg.corrector_tol * max(1.0, float(np.abs(z[:-1]).max(initial=0.0))):
                return z, k
            delta = lu.inverse @ np.append(h, row @ (z - zp) - target)
            step = float(np.abs(delta).max())
            if k > 0 and step > 0.7 * last:
                return None, k
            last = step
            z = z - delta
        h = self.H(z)
        ok = np.all(np.isfinite(h)) and np.abs(h).max() < self.cfg.corrector_tol * max(
            1.0, np.abs(z[:-1]).max()
        )
        return (z if ok else None), self.cfg.corrector_steps

    def polish(self, y: np.ndarray, lam: float) -> tuple[np.ndarray, float]:
        """Newton on y - lam Gamma(y) = 0 at fixed lam; returns (y, ||.||_inf). Once the steps are small
        (quadratic convergence), the next point is checked by Gamma alone before its Jacobian is asked for."""
        tol = self.cfg.polish_tol
        g, dg = self.gamma(y, True)
        res, last = np.inf, np.inf
        for _ in range(20):
            r = y - lam * g
            res = float(np.abs(r).max())
            if res < tol * max(1.0, float(np.abs(y).max(initial=0.0))):
                return y, res
            if dg is None:
                g, dg = self.gamma(y, True)  # (the same Gamma: r stands)
            assert dg is not None
            try:
                dy = np.linalg.solve(self.eye - lam * dg, r)
            except np.linalg.LinAlgError:
                break
            y = y - dy
            size = float(np.abs(dy).max())
            ahead = size * size / last if last < np.inf else size  # the next step, at Newton's quadratic rate
            small = ahead <= tol * max(1.0, float(np.abs(y).max(initial=0.0)))
            last = size
            g, dg = self.gamma(y, not small)
        return y, float(np.abs(y - lam * g).max())
