"""Probabilistically equivalent last-stage histories, proven, and the logit ties they imply.

Two local histories tau, tau' of agent i at the last decision stage t = H - 1 are *equivalent* when their
chance weights over (state, the other agents' local histories) are proportional:

    w(s, h^{-i} | tau) = c * w(s, h^{-i} | tau')   for every (s, h^{-i}),  c > 0,

with the same legal actions. The weight of a joint node under a policy is w times a factor of agent i's own
actions along tau (common to every node of tau) times the others' factors along h^{-i} (common to tau and
tau'), so the beliefs b(s, h^{-i} | tau) of the two are equal under *every* policy of the others, and so are
the last-stage Q-values Q^i(tau, a) = E_b[R] (no continuation): M_{(i, tau, a)}(y) = M_{(i, tau', a)}(y) for
every y, hence y_{(i, tau, a)} = y_{(i, tau', a)} at every fixed point y = M(y).

Proof obligations, both in exact rational arithmetic (``fractions.Fraction``):

1. the game as written: b_0, T and U read as the shortest decimals that round to the stored float64 values
   (the numbers in a ``.dpomdp`` file), the weights multiplied out exactly along the history tree, are
   proportional: equivalence in the decimal game;
2. the game the search evaluates (the float64 weights of :class:`~ers_exact.model.histories.HistoryTree`,
   each an exact binary rational): w(k | tau) = c (1 + e_k) w(k | tau') with |e_k| <= eta exactly. The
   normalised beliefs then differ by ||b - b'||_1 <= 2 eta / (1 - eta), and with per-entry Q-gaps within
   +-g (g = (R_max - R_min) * max(1, gamma)^t), |M_tau - M_tau'| <= delta = 2 g eta / ((1 - eta) alpha). The
   search contracts with that slack, |y_tau - y_tau'| <= delta (a few 1e-16 on recycling), so it stays a
   proof about the float64 game too.

Histories are tied only when both hold; otherwise (support mismatch, non-proportional weights, too many
nodes for rationals) nothing is tied."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.derivatives import coordinate_index

__all__ = ["MAX_EXACT_ENTRIES", "LogitTies", "equivalent_histories", "logit_ties"]

#: the exact check multiplies out at most this many (node, state) weights per layer (else: no ties)
MAX_EXACT_ENTRIES = 200_000


def _decimal(x: float) -> Fraction:
    """The shortest decimal that rounds to x (what a model file writes), exactly."""
    return Fraction(repr(float(x)))


def _exact_weights(tree: HistoryTree) -> list[list[Fraction]] | None:
    """Chance weights of the last layer in the decimal game, [N][S] as Fractions (None: too large)."""
    game = tree.game
    S = game.n_states
    if any(len(layer) * S * S > MAX_EXACT_ENTRIES for layer in tree.layers):
        return None
    T = [[[_decimal(v) for v in row] for row in mat] for mat in game.transition]
    U = [[[_decimal(v) for v in row] for row in mat] for mat in game.observation]
    w = [[_decimal(b) for b in game.initial_belief] for _ in range(len(tree.layers[0]))]
    for layer in tree.layers[1:]:
        nxt = []
        for n in range(len(layer)):
            p, a, o = int(layer.parent[n]), int(layer.action[n]), int(layer.observation[n])
            nxt.append(
                [sum((w[p][s] * T[s][a][s2] for s in range(S)), Fraction(0)) * U[a][s2][o] for s2 in range(S)]
            )
        w = nxt
    return w


def _rows(tree: HistoryTree, agent: int, weights: list[list[Fraction]] | np.ndarray) -> dict[int, dict]:
    """Per last-stage history of ``agent``: {(others' histories, state): weight} over nonzero weights."""
    layer = tree.layers[-1]
    rows: dict[int, dict] = {}
    for n in range(len(layer)):
        tau = int(layer.local[n, agent])
        others = tuple(int(h) for j, h in enumerate(layer.local[n]) if j != agent)
        for s, v in enumerate(weights[n]):
            if v != 0:
                rows.setdefault(tau, {})[(others, s)] = v
    return rows


def _ratio_spread(a: dict, b: dict) -> Fraction | None:
    """eta = max_k |a_k / (c b_k) - 1| with c = a_0 / b_0, exactly (None: different supports)."""
    if a.keys() != b.keys():
        return None
    keys = list(a)
    c = Fraction(a[keys[0]]) / Fraction(b[keys[0]])
    return max(abs(Fraction(a[k]) / (c * Fraction(b[k])) - 1) for k in keys)


def equivalent_histories(tree: HistoryTree, agent: int) -> list[tuple[int, int, float]]:
    """Pairs (representative tau, tau', eta) of ``agent``'s last-stage histories proven equivalent: exactly
    proportional in the decimal game and within eta (exact, rounded up) in the float64 weights."""
    exact = _exact_weights(tree)
    if exact is None:
        return []
    hist = tree.local[agent]
    exact_rows, float_rows = _rows(tree, agent, exact), _rows(tree, agent, tree.layers[-1].weight)
    reps: list[int] = []
    out = []
    for tau in sorted(exact_rows):
        for rep in reps:
            if not np.array_equal(hist.legal[rep], hist.legal[tau]):
                continue
            if _ratio_spread(exact_rows[tau], exact_rows[rep]) != 0:
                continue
            eta = _ratio_spread(float_rows[tau], float_rows[rep])
            if eta is not None and eta < Fraction(1, 10**6):
                out.append((rep, tau, float(eta) * (1 + 1e-12) + 1e-300))
                break
        else:
            reps.append(tau)
    return out


@dataclass(frozen=True)
class LogitTies:
    """Coordinate pairs (p, q) with |y_p - y_q| <= slack at every fixed point, as arrays [T]."""

    p: np.ndarray
    q: np.ndarray
    eta: np.ndarray  # [T] the float64 weights' proven spread
    gap: float  # g: bound of |per-entry Q-gap| (times the discount)

    @classmethod
    def none(cls) -> LogitTies:
        """No ties (the reduction switched off, or nothing proven)."""
        empty = np.zeros(0, dtype=np.int64)
        return cls(empty, empty, np.zeros(0), 0.0)

    def __len__(self) -> int:
        return int(self.p.shape[0])

    def slack(self, alpha: float) -> np.ndarray:
        """delta = 2 g eta / ((1 - eta) alpha), rounded up.  # [T]"""
        return (2.0 * self.gap * self.eta / ((1.0 - self.eta) * alpha)) * (1 + 1e-9) + 1e-300

    def contract(self, lo: np.ndarray, hi: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """Intersect boxes [P, D] with |y_p - y_q| <= delta (both ways; a box may become empty)."""
        if not len(self):
            return lo, hi
        d = self.slack(alpha)
        lo, hi = lo.copy(), hi.copy()
        for _ in range(2):  # a representative tied to several histories: propagate through it
            lo[:, self.p] = np.maximum(lo[:, self.p], lo[:, self.q] - d)
            hi[:, self.p] = np.minimum(hi[:, self.p], hi[:, self.q] + d)
            lo[:, self.q] = np.maximum(lo[:, self.q], lo[:, self.p] - d)
            hi[:, self.q] = np.minimum(hi[:, self.q], hi[:, self.p] + d)
        return lo, hi


def logit_ties(tree: HistoryTree) -> LogitTies:
    """The ties of every agent's equivalent last-stage histories, in the search's logit coordinates."""
    index = coordinate_index(tree)
    game = tree.game
    t = len(tree.layers) - 1
    gap = float(np.ptp(game.reward)) * max(1.0, game.discount) ** t
    offset = 0
    p: list[int] = []
    q: list[int] = []
    eta: list[float] = []
    for i, (ks, acts, _) in enumerate(index):
        where = {(int(k), int(a)): offset + n for n, (k, a) in enumerate(zip(ks, acts))}
        for rep, tau, e in equivalent_histories(tree, i):
            for a in np.flatnonzero(tree.local[i].legal[tau]):
                if (tau, int(a)) in where:
                    p.append(where[(rep, int(a))])
                    q.append(where[(tau, int(a))])
                    eta.append(e)
        offset += len(ks)
    return LogitTies(np.array(p, dtype=np.int64), np.array(q, dtype=np.int64), np.array(eta), gap)
