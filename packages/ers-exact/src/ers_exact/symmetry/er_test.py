"""The exact ER test on log-policies (paper, Definition "Expected Return Symmetries").

phi is in Phi_ER when phi(pi) is in Pi*_alpha for every pi in Pi*_alpha: phi(pi) is a Boltzmann fixed point
pi' = F(pi'), F(pi)^i(a | tau^i) = softmax_a(Q^i_pi(tau^i, a) / alpha), and it is self-play optimal,
|J(phi(pi)) - J*| <= tol. Both are evaluated here from log pi, never from pi: phi(pi) is taken on
log-probabilities (:func:`~ers_exact.model.transformation.apply_to_log_policy`, the same relabelling), read as
logit coordinates y, and M(y) = (Q(tau, a) - Q(tau, r(tau))) / alpha and J(pi(y)) come from the solver's
log-space evaluator (:class:`~ers_exact.solve.boltzmann.LogitCoordinates`: Q-gaps relative to each history's
own reach, nothing divided by a probability), so they stay defined at a temperature where an action's
probability underflows to 0 (a logit gap beyond ~745; the toy game at alpha <= 0.0013), where Q on
probabilities is undefined at the histories after that action. The fixed-point test is the solver's own
measure, relative in logits (``SolverConfig.tol`` is 1e-11 of it, so every point the solver lists passes):

    ||M(y) - y||_inf <= tol * max(1, ||y||_inf).

On probabilities (max |F(pi) - pi| <= tol, before) a point the solver accepted at alpha 1e-4, logits up to
1.7e4 and an error of 5e-8 at a logit near 0, had residual 1.4e-8 and failed, the identity with it (three-lever:
|Phi_ER| = 0); and a residual on probabilities cannot see an error in the logit of an action of probability
1e-300, which a relative logit residual does.

What log space cannot decide is refused with :class:`~ers_exact.solve.boltzmann.TemperatureError`, in one
line: a pool given as probabilities with a legal action at exactly 0 (its logits are lost; pass the
log-policies, e.g. from the solver's y), or a pool point whose M(y) or J is not finite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.boltzmann import LogitCoordinates, TemperatureError

__all__ = ["ERTest", "log_pool_of"]


def log_pool_of(
    tree: HistoryTree,
    pool: Sequence[Sequence[np.ndarray]] | None,
    log_pool: Sequence[Sequence[np.ndarray]] | None,
) -> tuple[np.ndarray, ...]:
    """log pi of every pool point, stacked per agent [P, K_i, |A^i|] (-inf on illegal actions), from exactly
    one of ``pool`` (probabilities: their log) and ``log_pool`` (log-policies, kept); both or neither raise
    ValueError. A legal action of probability 0 (underflow) is refused: its logit is lost, and with it Q at
    the histories after it."""
    if pool is not None and log_pool is None:
        with np.errstate(divide="ignore"):
            logs = tuple(
                np.log(np.stack([np.asarray(p[i], float) for p in pool])) for i in range(len(pool[0]))
            )
    elif log_pool is not None and pool is None:
        logs = tuple(np.stack([np.asarray(p[i], float) for p in log_pool]) for i in range(len(log_pool[0])))
    else:
        raise ValueError(
            f"{tree.game.name}: the ER test takes exactly one of pool and log_pool (log-policies, e.g. from the "
            f"solver's logits y), {'both' if pool is not None else 'neither'} given"
        )
    for i, (lp, hist) in enumerate(zip(logs, tree.local)):
        bad = ~np.isfinite(lp) & hist.legal[None]
        if bad.any():
            p = int(np.flatnonzero(bad.any(axis=(1, 2)))[0])
            raise TemperatureError(
                f"{tree.game.name}: pool point {p} gives a legal action of agent {i} probability exactly 0 "
                "(underflow at this alpha): its logits are lost, so the ER test cannot be evaluated; give the "
                "pool's log-policies instead (log_pool, e.g. from the solver's logits y) or use a larger alpha"
            )
    return logs


@dataclass(frozen=True, eq=False)
class ERTest:
    """phi(pi) in Pi*_alpha, tested on log-policies (module docstring)."""

    tree: HistoryTree
    alpha: float
    J_star: float
    tol: float

    @cached_property
    def coords(self) -> LogitCoordinates:
        return LogitCoordinates(self.tree)

    def values(self, log_batch: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(||M(y) - y||_inf / max(1, ||y||_inf), J(pi)) of each policy of a batch of log-policies
        [N, K_i, |A^i|] (NaN residual where M is not finite).  # [N], [N]"""
        y = self.coords.from_log_policy(tuple(np.asarray(lp, float) for lp in log_batch))
        ev = self.coords.evaluate(y, self.alpha, jacobian=False)
        with np.errstate(invalid="ignore", over="ignore"):
            res = np.abs(ev.values - y).max(axis=1, initial=0.0) / np.maximum(
                1.0, np.abs(y).max(axis=1, initial=0.0)
            )
        return np.where(np.isfinite(ev.values).all(axis=1), res, np.nan), np.asarray(ev.J, dtype=float)

    def members(self, log_batch: Sequence[np.ndarray], C: int, P: int) -> np.ndarray:
        """For C candidates' images of P pool points (c-major, [C * P, K_i, |A^i|] per agent): every image a
        self-play-optimal Boltzmann fixed point. Pool point 0's images are tested first and the other points'
        only for the candidates that pass (the same verdict: a member needs every image).  # [C] bool"""
        per = [np.asarray(lp).reshape(C, P, *np.shape(lp)[1:]) for lp in log_batch]
        alive = self._passes([p[:, 0] for p in per])
        idx = np.flatnonzero(alive)
        if P > 1 and len(idx):
            rest = self._passes([p[idx, 1:].reshape(-1, *p.shape[2:]) for p in per])
            alive[idx] = rest.reshape(len(idx), P - 1).all(axis=1)
        return alive

    def _passes(self, log_batch: Sequence[np.ndarray]) -> np.ndarray:
        res, J = self.values(log_batch)
        return np.asarray((res <= self.tol) & (np.abs(J - self.J_star) <= self.tol))  # NaN: False

    def pool_values(self, logs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`values` of the pool itself; :class:`TemperatureError` where log space cannot decide."""
        res, J = self.values(logs)
        bad = np.flatnonzero(~(np.isfinite(res) & np.isfinite(J)))
        if len(bad):
            raise TemperatureError(
                f"{self.tree.game.name}: at alpha {self.alpha:g} the Boltzmann map of pool point {int(bad[0])} is "
                "not finite even in log space (its Q-gaps / alpha overflow), so the ER test is undefined there"
            )
        return res, J
