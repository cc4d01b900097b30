"""Continuation in the temperature: every branch of Boltzmann fixed points that can be traced from the
unique high-temperature point, as Gambit traces its logit QRE from lambda = 0, plus the branches that
split off at bifurcations.

In logit coordinates with lambda = 1 / alpha the fixed points at every temperature form the zero set of

    H(y, lambda) = y - lambda Gamma(y),      Gamma(y) = Q-gaps of pi(y)   (= M(y) at alpha = 1),

a curve through (0, 0) (at lambda = 0 the uniform policy is the unique fixed point). Branches are followed
by pseudo-arclength predictor-corrector steps in z = (y, lambda) (Allgower & Georg, *Numerical
Continuation Methods*, ch. 2): Euler predictor along the unit tangent t (the null vector of
H_z = [I - lambda DGamma, -Gamma], oriented), chord-Newton corrector on {H = 0, t . (z - z_pred) = 0} with
the exact Jacobian (:mod:`ers_exact.solve.derivatives`), step length adapted to the corrector's
contraction. Folds (lambda turning back) need nothing special; every crossing of the target
lambda* = 1 / alpha is polished by Newton at fixed lambda* and reported with its branch.

Bifurcations. At a simple fold the augmented matrix A = [H_z; t^T] stays regular; at a branch point H_z
loses rank and A is singular. Two test functions are watched on every accepted step: the sign of det A
(it changes at a branch point of odd multiplicity, e.g. a pitchfork) and the smallest singular value of A
(a local minimum near zero catches even multiplicities, as in games with a symmetry group acting by a 2-D
representation). The point is then located (bisection on the sign, golden section on the singular value),
the kernel of H_z there gives the directions of the new branches (every kernel vector orthogonal to the
tangent, both signs, and pairwise combinations), each is corrected onto the curve at distance eps from
the branch point and traced in turn. This is the logit-QRE analogue of the "proven" bifurcations of the
alpha sweep (:mod:`ers_exact.solve.sweep`), located here to solver precision rather than between grid
points.

What continuation cannot promise: a branch that is connected to nothing traced (an isolated loop of
fixed points) is never reached, nor is a fold beyond the overshoot ``lambda_stop``. The solver
(:mod:`ers_exact.solve.fixed_points`) therefore uses continuation together with multistart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ers_exact.solve.boltzmann import LogitCoordinates, logit_bound
from ers_exact.solve.config import ContinuationConfig
from ers_exact.solve.newton import NewtonSettings, flat_policies, newton
from ers_exact.util.progress import Progress

__all__ = ["Branch", "ContinuationConfig", "ContinuationResult", "continuation"]


@dataclass(frozen=True)
class Branch:
    """One traced branch: where it came from and why tracing stopped."""

    id: int
    parent: int | None  # the branch it split from (None: the principal branch from lambda = 0)
    origin_lambda: float  # lambda of the branch point it starts at (0 for the principal branch)
    steps: int
    crossings: int  # fixed points at lambda* found on it
    end: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ContinuationResult:
    """Fixed points at lambda* = 1 / alpha reached by continuation, with their branches."""

    alpha: float
    points: tuple[np.ndarray, ...] = field(repr=False)  # y of each crossing (polished)
    point_branch: tuple[int, ...]
    branches: tuple[Branch, ...]
    bifurcations: tuple[dict[str, Any], ...]
    steps: int
    seconds: float
    config: ContinuationConfig

    def to_json(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "lambda": 1.0 / self.alpha,
            "n_points": len(self.points),
            "point_branch": list(self.point_branch),
            "branches": [b.to_json() for b in self.branches],
            "bifurcations": list(self.bifurcations),
            "steps": self.steps,
            "seconds": round(self.seconds, 4),
            "config": self.config.to_json(),
        }


class _Augmented:
    """The augmented matrix A = [H_z; t^T] of one curve point, factored once: the sign of det A and A^-1
    (the chord corrector and the inverse iteration apply it several times; numpy alone, no scipy)."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix
        sign, _ = np.linalg.slogdet(matrix)
        self.det_sign = float(sign)
        try:
            self.inverse = np.linalg.inv(matrix) if sign != 0 else np.linalg.pinv(matrix)
        except np.linalg.LinAlgError:
            self.inverse = np.linalg.pinv(matrix)


class _Tracer:
    """Evaluation of H, its Jacobian and the step machinery for one coordinate system."""

    def __init__(self, coords: LogitCoordinates, lam_star: float, cfg: ContinuationConfig) -> None:
        self.coords, self.cfg, self.lam_star = coords, cfg, lam_star
        self.D = coords.dim
        self.scale = 1.0 + lam_star  # arclength unit; rescaled by the size of Gamma(0) in continuation()
        self.evals = 0

    def gamma(self, y: np.ndarray, jacobian: bool) -> tuple[np.ndarray, np.ndarray | None]:
        self.evals += 1
        ev = self.coords.evaluate(y[None], 1.0, jacobian=jacobian)
        return ev.values[0], (ev.jacobian[0] if ev.jacobian is not None else None)

    def H(self, z: np.ndarray) -> np.ndarray:
        g, _ = self.gamma(z[:-1], False)
        return z[:-1] - z[-1] * g

    def Hz(self, z: np.ndarray) -> np.ndarray:
        """[I - lambda DGamma, -Gamma]  # [D, D + 1]"""
        g, dg = self.gamma(z[:-1], True)
        assert dg is not None
        return np.hstack([np.eye(self.D) - z[-1] * dg, -g[:, None]])

    def tangent(self, hz: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, _Augmented]:
        """Unit null vector of hz with row . t > 0, and the factored augmented matrix [hz; row]."""
        aug = _Augmented(np.vstack([hz, row[None]]))
        t = aug.inverse[:, -1].copy()  # A t = e_last
        return t / np.linalg.norm(t), aug

    @staticmethod
    def det_sign(aug: _Augmented) -> float:
        return aug.det_sign

    @staticmethod
    def sigma_min(aug: _Augmented, v: np.ndarray | None = None, iters: int = 6) -> tuple[float, np.ndarray]:
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

    def correct(
        self, zp: np.ndarray, row: np.ndarray, lu: _Augmented, target: float = 0.0
    ) -> tuple[np.ndarray | None, int]:
        """Chord Newton on {H(z) = 0, row . (z - zp) = target} with the factored [H_z; row]."""
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
        """Newton on y - lam Gamma(y) = 0 at fixed lam; returns (y, ||.||_inf)."""
        res = np.inf
        for _ in range(20):
            g, dg = self.gamma(y, True)
            assert dg is not None
            r = y - lam * g
            res = float(np.abs(r).max())
            if res < self.cfg.polish_tol * max(1.0, float(np.abs(y).max(initial=0.0))):
                break
            try:
                y = y - np.linalg.solve(np.eye(self.D) - lam * dg, r)
            except np.linalg.LinAlgError:
                break
        g, _ = self.gamma(y, False)
        return y, float(np.abs(y - lam * g).max())


class _BranchProgress:
    """Progress of one branch: its lambda over lambda_stop (a bar per branch; more may be found on the way)."""

    def __init__(self, bar: Progress, lam_stop: float) -> None:
        self.bar, self.lam_stop, self.shown = bar, lam_stop, 0

    def __call__(self, lam: float) -> None:
        done = int(1000 * min(1.0, max(0.0, lam / self.lam_stop)))
        if done > self.shown:
            self.bar.update(done - self.shown)
            self.shown = done


@dataclass
class _Seed:
    z: np.ndarray
    t: np.ndarray
    parent: int | None
    origin: float
    origin_point: np.ndarray | None


def continuation(
    coords: LogitCoordinates,
    alpha: float,
    config: ContinuationConfig | None = None,
    progress: bool | None = None,
) -> ContinuationResult:
    """Trace the fixed-point branches from lambda = 0 to lambda* = 1 / alpha (see module docstring)."""
    cfg = config or ContinuationConfig()
    start = time.perf_counter()
    lam_star = 1.0 / alpha
    lam_stop = cfg.overshoot * lam_star + 0.05
    tr = _Tracer(coords, lam_star, cfg)
    D = coords.dim
    points: list[np.ndarray] = []
    point_branch: list[int] = []
    branches: list[Branch] = []
    bifurcations: list[dict[str, Any]] = []
    known_bif: list[np.ndarray] = []
    if D == 0:
        return ContinuationResult(
            alpha,
            (np.zeros(0),),
            (0,),
            (Branch(0, None, 0.0, 0, 1, "no coordinates"),),
            (),
            0,
            time.perf_counter() - start,
            cfg,
        )
    z0 = np.zeros(D + 1)
    hz0 = tr.Hz(z0)
    # y grows like lambda * Gamma: measure arclength in units of the path's size, not of lambda alone
    tr.scale = (1.0 + lam_star) * max(1.0, float(np.linalg.norm(hz0[:, -1])))
    e = np.zeros(D + 1)
    e[-1] = 1.0
    t0, _ = tr.tangent(hz0, e)  # oriented towards increasing lambda
    queue = [_Seed(z0, t0, None, 0.0, None)]
    total_steps = 0
    name = coords.tree.game.name
    while queue and len(branches) < cfg.max_branches and total_steps < cfg.max_steps:
        seed = queue.pop(0)
        bid = len(branches)
        desc = f"continuation {name} to lambda={lam_star:g}: branch {bid + 1} of {bid + 1 + len(queue)} known"
        with Progress(1000, desc, enabled=progress) as bar:
            report = _BranchProgress(bar, lam_stop)
            steps, crossings, end, new_bifs = _trace(
                tr,
                seed,
                lam_star,
                lam_stop,
                cfg,
                points,
                point_branch,
                bid,
                known_bif,
                cfg.max_steps - total_steps,
                report,
            )
            report(lam_stop)
        total_steps += steps
        branches.append(Branch(bid, seed.parent, float(seed.origin), steps, crossings, end))
        for bif in new_bifs:
            bif["branch"] = bid
            children = _switch(tr, bif, bid, progress)
            bif["new_branches"] = len(children)
            bifurcations.append({k: v for k, v in bif.items() if k not in ("z", "t", "kernel")})
            queue.extend(children)
    for k, b in enumerate(branches):
        if b.end == "running":
            branches[k] = Branch(b.id, b.parent, b.origin_lambda, b.steps, b.crossings, "step budget spent")
    if queue:
        branches.append(
            Branch(
                len(branches),
                None,
                float("nan"),
                0,
                0,
                f"{len(queue)} branch(es) left untraced (max_branches / max_steps reached)",
            )
        )
    return ContinuationResult(
        alpha=float(alpha),
        points=tuple(points),
        point_branch=tuple(point_branch),
        branches=tuple(branches),
        bifurcations=tuple(bifurcations),
        steps=total_steps,
        seconds=time.perf_counter() - start,
        config=cfg,
    )


def _trace(
    tr: _Tracer,
    seed: _Seed,
    lam_star: float,
    lam_stop: float,
    cfg: ContinuationConfig,
    points: list[np.ndarray],
    point_branch: list[int],
    bid: int,
    known_bif: list[np.ndarray],
    budget: int,
    report: Callable[[float], None] | None = None,
) -> tuple[int, int, str, list[dict[str, Any]]]:
    """Follow one branch from seed; append crossings of lambda*; return (steps, crossings, end, branch points)."""
    z, t = seed.z.copy(), seed.t.copy()
    h = cfg.initial_step * tr.scale
    hz = tr.Hz(z)
    t, lu = tr.tangent(hz, t)
    sign = tr.det_sign(lu)
    sig, vec = (
        tr.sigma_min(lu) if cfg.locate_branch_points else (1.0, None)
    )  # test functions (none: as Gambit)
    hist_sig: list[tuple[float, np.ndarray, np.ndarray]] = [(sig, z.copy(), t.copy())]
    steps, crossings = 0, 0
    found: list[dict[str, Any]] = []
    end = "running"
    while steps < budget:
        zp = z + h * t
        zn, iters = tr.correct(zp, t, lu)
        if zn is None:
            h *= 0.5
            if h < cfg.min_step * tr.scale:
                end = f"step size underflow at lambda={z[-1]:.6g}"
                break
            continue
        hzn = tr.Hz(zn)
        tn, lun = tr.tangent(hzn, t)
        if float(t @ tn) < np.cos(cfg.max_turn) and h > 10 * cfg.min_step * tr.scale:
            h *= 0.5
            continue
        steps += 1
        if report is not None:
            report(float(zn[-1]))
        # ----- crossings of lambda* -----
        if (z[-1] - lam_star) * (zn[-1] - lam_star) <= 0 and zn[-1] != z[-1] and z[-1] != lam_star:
            frac = (lam_star - z[-1]) / (zn[-1] - z[-1])
            y_guess = z[:-1] + frac * (zn[:-1] - z[:-1])
            y_fp, res = tr.polish(y_guess, lam_star)
            if res < 1e-9 * max(1.0, float(np.abs(y_fp).max(initial=0.0))):
                points.append(y_fp)
                point_branch.append(bid)
                crossings += 1
        # ----- branch points -----
        sign_n = tr.det_sign(lun)
        if cfg.locate_branch_points:
            sig_n, vec = tr.sigma_min(lun, vec)
            bif = None
            if sign_n != sign and z[-1] < lam_stop:
                bif = _locate_sign(tr, z, t, lu, h, sign, cfg)
            elif len(hist_sig) >= 2:
                s_prev, z_prev, _ = hist_sig[-1]
                s_pp = hist_sig[-2][0]
                if s_prev < cfg.singular_ratio * min(s_pp, sig_n) and z_prev[-1] < lam_stop:
                    bif = _locate_min(tr, hist_sig[-2][1], hist_sig[-2][2], zn, cfg)
            if bif is not None and not _near_known(bif["z"], known_bif, cfg.branch_eps):
                known_bif.append(bif["z"])
                found.append(bif)
            hist_sig.append((sig_n, zn.copy(), tn.copy()))
            if len(hist_sig) > 3:
                hist_sig.pop(0)
        # ----- step control -----
        z, t, lu, sign = zn, tn, lun, sign_n
        # the step doubles after an easy correction: <= 2 iterations while the test functions watch for
        # branch points (their minima must be sampled), <= 3 on the principal branch alone
        if iters <= (2 if cfg.locate_branch_points else 3):
            h = min(2.0 * h, cfg.max_step * tr.scale)
        elif iters >= 5:
            h *= 0.6
        if z[-1] > lam_stop:
            end = f"passed lambda={lam_stop:.6g}"
            break
        if z[-1] < -1e-9:
            end = "returned to lambda < 0"
            break
        if (
            seed.origin_point is not None
            and steps > 3
            and _near_known(z, [p for p in known_bif if p is not seed.origin_point], 0.5 * cfg.branch_eps)
        ):
            end = f"reached another branch point at lambda={z[-1]:.6g}"
            break
    return steps, crossings, end, found


def _near_known(z: np.ndarray, known: list[np.ndarray], eps: float) -> bool:
    return any(np.abs(z - k).max() < eps * max(1.0, float(np.abs(k).max())) for k in known)


def _point_on_arc(
    tr: _Tracer, z: np.ndarray, t: np.ndarray, lu: _Augmented, s: float
) -> tuple[np.ndarray, np.ndarray, _Augmented] | None:
    """The curve point at arclength ~ s along t from z, with its tangent and augmented LU."""
    zs, _ = tr.correct(z + s * t, t, lu)
    if zs is None:
        return None
    ts, lus = tr.tangent(tr.Hz(zs), t)
    return zs, ts, lus


def _locate_sign(
    tr: _Tracer, z: np.ndarray, t: np.ndarray, lu: _Augmented, h: float, sign: float, cfg: ContinuationConfig
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


def _locate_min(
    tr: _Tracer, z: np.ndarray, t: np.ndarray, z_end: np.ndarray, cfg: ContinuationConfig
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


def _describe_branch_point(tr: _Tracer, z: np.ndarray, t: np.ndarray, how: str) -> dict[str, Any]:
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
        "lambda": float(z[-1]),
        "alpha": float(1.0 / z[-1]) if z[-1] > 0 else float("inf"),
        "kernel_dim": len(kernel),
        "detected_by": how,
        "z": z.copy(),
        "t": t.copy(),
        "kernel": kernel,
    }


def _switch(tr: _Tracer, bif: dict[str, Any], parent: int, progress: bool | None = None) -> list[_Seed]:
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
    seeds: list[_Seed] = []
    for sign in (1.0, -1.0):
        lam = lam_b * (1.0 + sign * cfg.switch_delta)
        slope = t_b[:-1] / t_b[-1] if abs(t_b[-1]) > 1e-12 else np.zeros_like(y_b)
        y_par = y_b + (lam - lam_b) * slope
        size = max(1.0, float(np.abs(y_b).max(initial=0.0)))
        starts = [y_par] + [y_par + eps * size * d for eps in cfg.switch_eps for d in dirs]
        alpha = 1.0 / lam
        desc = f"branch switching at lambda={lam_b:.4g}: Newton at {lam:.4g} from {len(starts)} starts"
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
            seeds.append(_Seed(z1, t1, parent, lam_b, z_b))
    return seeds
