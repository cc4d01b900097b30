"""Three-lever's self-play optimum at a Boltzmann temperature alpha, derived by hand (a second method beside the
certified branch-and-bound), and a Boltzmann map written from tests/exact/reference.py.

The game (ers_exact.games.lever): two agents, levers {0, 1, 2}, two rounds, reward 1 on a match, each sees
the partner's lever. The optimum plays lever f in round one with probability p (the others (1 - p) / 2 each),
on its path (f, f) a second-round convention c with probability x (the others (1 - x) / 2), and uniformly at
every other history. Its equations, with Q^i(tau, a) the local action values under that policy:

* round two on the path: Q((f, f), b) = P(partner plays b), so x = softmax((x, y, y) / alpha)_0, y = (1 - x) / 2;
  the match probability there is V = x^2 + 2 y^2.
* round two off the path: uniform is a fixed point (equal Q) with match probability 1/3.
* round one: Q(f) = p (1 + V) + (1 - p) / 3 and Q(g) = (1 - p) / 2 + 1/3 for g != f, so
  p = softmax((Q(f), Q(g), Q(g)) / alpha)_0.
* J = P(match in round one) + P(match in round two) = p^2 + 2 ((1 - p) / 2)^2 + p^2 V + (1 - p^2) / 3.

Both scalar equations are solved with scipy's brentq (the upper root of each). Nothing here calls ers_exact
beyond the tree's history index (through reference.py's adapter)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from ers_exact.model.histories import HistoryTree
from tests.exact.reference import policy_fn_from_arrays, ref_local_q

__all__ = ["ThreeLeverOptimum", "ref_boltzmann_residual", "three_lever_optimum"]


def _softmax0(values: Sequence[float], alpha: float) -> float:
    """softmax(values / alpha)[0] in plain floats."""
    top = max(values)
    w = [math.exp((v - top) / alpha) for v in values]
    return w[0] / sum(w)


@dataclass(frozen=True)
class ThreeLeverOptimum:
    alpha: float
    p: float  # round one: probability of the first lever f
    x: float  # round two on the path (f, f): probability of the convention c
    J: float

    def policy(self, first: int, convention: int, agent: int, hist: tuple[int, ...]) -> list[float]:
        """pi(. | hist) of either agent (the optimum is symmetric between them) for lever f and convention c."""
        if hist == ():
            return [self.p if a == first else (1 - self.p) / 2 for a in range(3)]
        if hist == (first, first):
            return [self.x if a == convention else (1 - self.x) / 2 for a in range(3)]
        return [1 / 3] * 3


def three_lever_optimum(alpha: float) -> ThreeLeverOptimum:
    def on_path(x: float) -> float:
        return x - _softmax0((x, (1 - x) / 2, (1 - x) / 2), alpha)

    x = brentq(on_path, 0.5, 1.0, xtol=1e-15, rtol=1e-15)
    V = x * x + 2 * ((1 - x) / 2) ** 2

    def first_round(p: float) -> float:
        q_f = p * (1 + V) + (1 - p) / 3
        q_g = (1 - p) / 2 + 1 / 3
        return p - _softmax0((q_f, q_g, q_g), alpha)

    p = brentq(first_round, 0.5, 1.0, xtol=1e-15, rtol=1e-15)
    J = p * p + 2 * ((1 - p) / 2) ** 2 + p * p * V + (1 - p * p) / 3
    return ThreeLeverOptimum(alpha, p, x, J)


def ref_boltzmann_residual(tree: HistoryTree, policy: Sequence[np.ndarray], alpha: float) -> float:
    """max |softmax(Q^i / alpha) - pi| over agents, histories and legal actions, with Q^i from reference.py's
    plain recursion (not the package's Boltzmann map); illegal actions (NaN Q) are left out."""
    game, fn = tree.game, policy_fn_from_arrays(tree, policy)
    worst = 0.0
    for i in range(game.n_agents):
        for hist, q in ref_local_q(game, fn, i).items():
            legal = [k for k, v in enumerate(q) if not math.isnan(v)]
            top = max(q[k] for k in legal)
            w = {k: math.exp((q[k] - top) / alpha) for k in legal}
            total = sum(w.values())
            pi = fn(i, hist)
            worst = max(worst, *(abs(w[k] / total - pi[k]) for k in legal))
    return worst
