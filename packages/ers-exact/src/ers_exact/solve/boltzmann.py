"""The Boltzmann map and its coordinates (paper, Definition "Expected Return Symmetries"):

    F(pi)^i(a | tau^i) = exp(Q^i_pi(tau^i, a) / alpha) / sum_{b in A^i(tau^i)} exp(Q^i_pi(tau^i, b) / alpha).

Pi^alpha is the set of fixed points pi = F(pi). Fixed points have full support on legal actions, so they
live in *logit coordinates* y: for every agent i, local history tau^i and legal action a other than the
reference action r(tau^i) (the first legal one), y = log pi(a | tau) - log pi(r | tau). In these
coordinates the fixed-point equation is

    y = M(y),   M(y)_{(i, tau, a)} = (Q^i_{pi(y)}(tau, a) - Q^i_{pi(y)}(tau, r(tau))) / alpha,

and the Jacobian of M at a fixed point has the same spectrum as that of F (conjugate maps), so its
spectral radius decides local stability of the undamped iteration. Everything here is batched over P.
M and its exact Jacobian DM come from :class:`~ers_exact.solve.derivatives.LogitDerivatives` (one forward
and one backward pass, chunked under ``memory_budget`` bytes); central differences remain as
:meth:`LogitCoordinates.jacobian_fd`, for tests.
"""

from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.values import Policy, check_policy, local_q_values
from ers_exact.solve.dense import MAX_DENSE_BYTES, DenseLogitMap, dense_logit_map, dense_structure_bytes
from ers_exact.solve.derivatives import (
    DEFAULT_MEMORY_BUDGET,
    LogitDerivatives,
    LogitEvaluation,
    coordinate_index,
)
from ers_exact.util.errors import InputError

__all__ = [
    "LOGIT_LIMIT",
    "LogitCoordinates",
    "TemperatureError",
    "boltzmann_map",
    "boltzmann_residual",
    "check_temperature",
    "logit_bound",
    "reward_unit",
    "softmax_policy",
]


def softmax_policy(tree: HistoryTree, q: tuple[np.ndarray, ...], alpha: float) -> tuple[np.ndarray, ...]:
    """softmax(Q^i(tau, .) / alpha) over legal actions, per agent; batched [P, K, A] or single [K, A]."""
    out = []
    for qi, hist in zip(q, tree.local):
        z = np.where(hist.legal, qi / alpha, -np.inf)
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        out.append(e / e.sum(axis=-1, keepdims=True))
    return tuple(out)


def boltzmann_map(tree: HistoryTree, policy: Policy, alpha: float) -> tuple[np.ndarray, ...]:
    """F(pi) = softmax(Q_pi / alpha); needs Q finite (full-support policies)."""
    _check_alpha(alpha)
    return softmax_policy(tree, local_q_values(tree, policy), alpha)


def boltzmann_residual(tree: HistoryTree, policy: Policy, alpha: float) -> np.ndarray | float:
    """max |F(pi) - pi| over agents, histories and actions; [P] for a batch."""
    pols, batched = check_policy(tree, policy)
    image = boltzmann_map(tree, pols, alpha)
    res = np.max([np.abs(f - p).max(axis=(1, 2)) for f, p in zip(image, pols)], axis=0)
    return res if batched else float(res[0])


def logit_bound(tree: HistoryTree, alpha: float) -> float:
    """|y| <= B / alpha at every fixed point, B = max reward-to-go gap = sum_t gamma^t (R_max - R_min)."""
    game = tree.game
    spread = float(game.reward.max() - game.reward.min())
    return spread * _horizon_weight(tree) / alpha + 1.0


def reward_unit(tree: HistoryTree) -> float:
    """u = R_max - R_min, the game's reward spread (1 where every reward is equal). The fixed points of rewards R
    at temperature alpha are those of R / u at alpha / u (M depends on Q / alpha alone), so a step rule that
    compares lambda = 1 / alpha or J with absolute numbers is written for rewards in units of u."""
    spread = float(tree.game.reward.max() - tree.game.reward.min())
    return spread if spread > 0 and math.isfinite(spread) else 1.0


def _horizon_weight(tree: HistoryTree) -> float:
    """sum_t gamma^t over the horizon: a reward's largest weight in a return."""
    return float(sum(tree.game.discount**t for t in range(tree.game.horizon)))


#: the largest logit bound B / alpha the solver accepts (y, M(y), DM(y) and their intervals stay finite)
#: the largest logit scale (reward spread x horizon / alpha) the solver takes: a logit of size L carries an absolute
#: float64 rounding of ~L * 1e-16, which reaches the residual tests' tolerances near 1e10 (measured: random
#: 2-agent games gave fixed points up to 6e9 and none from 6e10 on; tests/test_cli_finite_results.py)
LOGIT_LIMIT = 1e9


class TemperatureError(InputError, ValueError):
    """A temperature alpha that is not a positive number, or too small for the game's rewards."""


def _check_alpha(alpha: float) -> None:
    real = isinstance(alpha, numbers.Real) and not isinstance(alpha, bool)
    if not (real and math.isfinite(alpha) and alpha > 0):  # a str failed in isfinite, naming no argument
        shown = alpha if real else repr(alpha)
        raise TemperatureError(f"temperature alpha must be a positive number, got {shown}")


def rounding_scale(tree: HistoryTree, alpha: float) -> float:
    """(max |R| x sum_t gamma^t) / alpha: the values' magnitude in logit units. Q-gaps are differences of values
    of that magnitude, so a logit carries float64 rounding of ~ this x 1e-16 even where the rewards' spread (and
    so ``logit_bound``) is small: rewards all 1e39 at alpha 1 left no fixed point to find."""
    return float(np.abs(tree.game.reward).max(initial=0.0)) * _horizon_weight(tree) / alpha


def _up3(x: float) -> str:
    """``x`` > 0 to three significant digits, rounded up: a suggested least alpha that is itself accepted
    (``.3g`` rounds to the nearest, which may fall below the limit)."""
    step = 10.0 ** (math.floor(math.log10(x)) - 2)
    text = f"{math.ceil(x / step) * step:.3g}"
    return text if float(text) >= x else f"{float(text) + step:.3g}"


def check_temperature(tree: HistoryTree, alpha: float) -> None:
    """Refuse an alpha at which the logits of fixed points, up to B / alpha, could leave floating point:
    every alpha > 0 works in log space unless (reward spread x horizon) / alpha exceeds :data:`LOGIT_LIMIT`,
    or the values' magnitude in logit units (:func:`rounding_scale`) does, whose rounding the logits carry."""
    _check_alpha(alpha)
    bound = logit_bound(tree, alpha)
    if not bound <= LOGIT_LIMIT:
        raise TemperatureError(
            f"alpha {alpha:g} is too small for {tree.game.name}'s rewards: logits could reach {bound:.3g}, "
            f"beyond {LOGIT_LIMIT:.0e}; use alpha >= {_up3((logit_bound(tree, 1.0) - 1.0) / (LOGIT_LIMIT - 1.0))}"
        )
    scale = rounding_scale(tree, alpha)
    if not scale <= LOGIT_LIMIT:
        raise TemperatureError(
            f"alpha {alpha:g} is too small for {tree.game.name}'s reward magnitude: values up to "
            f"{scale * alpha:.3g} carry float64 rounding of {scale:.3g} x 1e-16 in logit units, beyond "
            f"{LOGIT_LIMIT:.0e} x 1e-16; use alpha >= {_up3(rounding_scale(tree, 1.0) / LOGIT_LIMIT)}, or shift the "
            "rewards towards 0 (a constant added to every reward changes no Q-gap, so no fixed point)"
        )


@dataclass(frozen=True, eq=False)
class LogitCoordinates:
    """The free logit coordinates y of a game's policies (one per non-reference legal action)."""

    tree: HistoryTree
    memory_budget: int = DEFAULT_MEMORY_BUDGET  # bytes of working memory per batched evaluation
    dense: bool = True  # small two-agent games: M and DM from solve.dense (False: the reference alone)
    max_dense_bytes: int = MAX_DENSE_BYTES  # the largest dense evaluator used (solve raises it to its budget)

    @cached_property
    def _index(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        return coordinate_index(self.tree)

    @property
    def derivatives(self) -> LogitDerivatives:
        """The tree's exact evaluator of M and DM (built once per tree)."""
        return self.tree.derived("solve.derivatives", lambda: LogitDerivatives(self.tree))

    @cached_property
    def dense_map(self) -> DenseLogitMap | None:
        """The tree's dense evaluator (:mod:`ers_exact.solve.dense`) when ``dense`` and the game is a two-agent
        one whose dense arrays take at most ``max_dense_bytes``, else None."""
        # a map that a larger limit built stays in the tree, for the coordinates that allow it
        if not self.dense or (dense_structure_bytes(self.tree) or 0) > self.max_dense_bytes:
            return None
        return self.tree.derived("solve.dense", lambda: dense_logit_map(self.tree, self.max_dense_bytes))

    def release_dense(self) -> None:
        """Drop the dense evaluator here and from the tree (its memory is freed; it is rebuilt on next use)."""
        self.__dict__.pop("dense_map", None)
        self.__dict__.pop("_dense_chunk", None)
        self.tree.forget("solve.dense")

    @cached_property
    def _dense_chunk(self) -> dict[bool, int]:
        """Policies per dense evaluation under ``memory_budget`` (without and with the Jacobian)."""
        fast = self.dense_map
        assert fast is not None
        return {jac: max(1, self.memory_budget // fast.bytes_per_policy(jac)) for jac in (False, True)}

    @cached_property
    def dim(self) -> int:
        """D = sum_i sum_tau (|A^i(tau)| - 1)."""
        return int(sum(len(k) for k, _, _ in self._index))

    @cached_property
    def slices(self) -> list[slice]:
        """Where each agent's coordinates sit in y."""
        bounds = np.cumsum([0] + [len(k) for k, _, _ in self._index])
        return [slice(int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds)]

    @cached_property
    def labels(self) -> list[tuple[int, int, int]]:
        """(agent, local history, action) of each coordinate."""
        return [(i, int(k), int(a)) for i, (ks, acts, _) in enumerate(self._index) for k, a in zip(ks, acts)]

    def to_policy(self, y: np.ndarray) -> tuple[np.ndarray, ...]:
        """pi(y) for y [P, D] -> per agent [P, K_i, A_i]."""
        return tuple(np.exp(lp) for lp in self.to_log_policy(y))

    def to_log_policy(self, y: np.ndarray) -> tuple[np.ndarray, ...]:
        """log pi(y) for y [P, D] -> per agent [P, K_i, A_i] (shifted log-sum-exp: finite on legal actions at
        any temperature, where pi itself underflows to 0; -inf on illegal ones)."""
        y = np.atleast_2d(y)
        out = []
        for (k, a, _), sl, hist in zip(self._index, self.slices, self.tree.local):
            logits = np.where(hist.legal, 0.0, -np.inf)[None].repeat(y.shape[0], axis=0)
            logits[:, k, a] = y[:, sl]
            logits -= logits.max(axis=2, keepdims=True)
            out.append(logits - np.log(np.exp(logits).sum(axis=2, keepdims=True)))
        return tuple(out)

    def log_pool(self, y: np.ndarray) -> list[tuple[np.ndarray, ...]]:
        """:meth:`to_log_policy` of points y [P, D] as a list of P joint log-policies (per agent [K_i, A_i]):
        the ``log_pool`` the ER tests take (:mod:`ers_exact.symmetry.er_test`), e.g. of the solver's fixed
        points, exact where their probabilities underflow to 0."""
        y = np.atleast_2d(np.asarray(y, dtype=float))
        logs = self.to_log_policy(y)
        return [tuple(lp[k] for lp in logs) for k in range(y.shape[0])]

    def from_log_policy(self, log_policy: tuple[np.ndarray, ...]) -> np.ndarray:
        """y from per-agent log-probabilities [P, K_i, A_i] (finite on legal actions).  # [P, D]"""
        return np.concatenate(
            [lp[:, k, a] - lp[:, k, r] for lp, (k, a, r) in zip(log_policy, self._index)], axis=1
        )

    def from_policy(self, policy: Policy) -> np.ndarray:
        """y(pi) for a full-support policy -> [P, D] (or [D])."""
        pols, batched = check_policy(self.tree, policy)
        with np.errstate(divide="ignore"):
            parts = [np.log(p[:, k, a]) - np.log(p[:, k, r]) for p, (k, a, r) in zip(pols, self._index)]
        y = np.concatenate(parts, axis=1)
        return y if batched else y[0]

    def gaps(self, q: tuple[np.ndarray, ...], alpha: float) -> np.ndarray:
        """(Q(tau, a) - Q(tau, r(tau))) / alpha at every coordinate.  # [P, D]"""
        return np.concatenate(
            [(qi[:, k, a] - qi[:, k, r]) / alpha for qi, (k, a, r) in zip(q, self._index)], axis=1
        )

    def logit_map(self, y: np.ndarray, alpha: float) -> np.ndarray:
        """M(y) for a batch y [P, D]."""
        return self.evaluate(y, alpha, jacobian=False).values

    def evaluate(self, y: np.ndarray, alpha: float, jacobian: bool = True) -> LogitEvaluation:
        """M(y) [P, D], the exact DM(y) [P, D, D] when ``jacobian``, and J(pi(y)) [P], in one pass."""
        _check_alpha(alpha)
        fast = self.dense_map
        if fast is None:
            return self.derivatives.evaluate(y, alpha, jacobian=jacobian, budget=self.memory_budget)
        y = np.asarray(y, dtype=np.float64)
        y = y[None] if y.ndim == 1 else y
        step = self._dense_chunk[jacobian]
        if len(y) <= step:
            values, jac, J, ok = fast.evaluate(y, alpha, jacobian)
        else:
            parts = [fast.evaluate(y[lo : lo + step], alpha, jacobian) for lo in range(0, len(y), step)]
            values, J, ok = (np.concatenate([p[n] for p in parts]) for n in (0, 2, 3))
            jac = np.concatenate([p[1] for p in parts]) if jacobian else None
        if not ok.all():  # an underflowing denominator or a non-finite value: those rows from the reference
            bad = np.flatnonzero(~ok)
            ref = self.derivatives.evaluate(y[bad], alpha, jacobian=jacobian, budget=self.memory_budget)
            values[bad], J[bad] = ref.values, ref.J
            if jacobian:
                jac[bad] = ref.jacobian
        return LogitEvaluation(values, jac if jacobian else None, J)

    def jacobian(self, y: np.ndarray, alpha: float) -> np.ndarray:
        """The exact DM(y).  # [P, D, D]"""
        jac = self.evaluate(y, alpha).jacobian
        assert jac is not None
        return jac

    def residual(self, y: np.ndarray, alpha: float, image: np.ndarray | None = None) -> np.ndarray:
        """max |F(pi) - pi| of pi = pi(y), from M(y) (pass ``image`` = M(y) when known): on float64
        probabilities, so 0.0 where every logit error sits at a probability that is 0 or 1 to float64; the
        solver's convergence test is ||M(y) - y||_inf / max(1, ||y||_inf) in logits instead.  # [P]"""
        y = np.atleast_2d(y)
        image = self.logit_map(y, alpha) if image is None else np.atleast_2d(image)
        before, after = self.to_policy(y), self.to_policy(image)
        return np.max([np.abs(a - b).max(axis=(1, 2)) for a, b in zip(after, before)], axis=0)

    def reference_map(self, y: np.ndarray, alpha: float) -> np.ndarray:
        """M(y) through :func:`~ers_exact.model.values.local_q_values` (an independent path, for tests)."""
        _check_alpha(alpha)
        return self.gaps(local_q_values(self.tree, self.to_policy(y)), alpha)

    def jacobian_fd(self, y: np.ndarray, alpha: float, step: float = 1e-6) -> np.ndarray:
        """DM(y) by central differences, all 2D evaluations in one batched call.  # [P, D, D]"""
        y = np.atleast_2d(y)
        P, D = y.shape
        eye = np.eye(D) * step
        probes = np.concatenate([y[:, None, :] + eye[None], y[:, None, :] - eye[None]], axis=1)  # [P, 2D, D]
        vals = self.reference_map(probes.reshape(P * 2 * D, D), alpha).reshape(P, 2, D, D)
        return ((vals[:, 0] - vals[:, 1]) / (2 * step)).transpose(0, 2, 1)
