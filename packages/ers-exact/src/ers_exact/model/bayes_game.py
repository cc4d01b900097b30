"""Identical-payoff Bayesian games as GMAA* meets them: the stage-t game of a partial joint policy.

Each agent has *classes* of types (local histories, or clusters of probabilistically equivalent ones), each
with its legal actions; the game lists its joint type rows (a joint history node, or a clustered joint type)
and for each row the class of every agent. A joint decision rule delta gives every class one legal action;
its payoff is sum over rows of q[row, delta(row)] for a payoff table q [m, A].

The rules of every agent but the one with the most rules (the *responder*) are enumerated; the responder is
combined last, either as every rule (:func:`children_values`, GMAA*'s expansion) or as a best response
(:func:`best_rule`, the exact solution of a last-stage game). Rule index = c_e * n_r + c_r, with c_e the
mixed-radix index of the enumerated agents' choices (their classes in order, first fastest) and c_r the
responder's.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

from ers_exact.model.config import PolicyBudgetError

__all__ = [
    "BayesGame",
    "LazyChildren",
    "PolicyBudgetError",
    "RuleSource",
    "SortedRules",
    "best_rule",
    "children_values",
    "rule_slice",
]

_CHUNK_FLOATS = 4_000_000


class BayesGame:
    """``inv[i]``: the class of agent i at each joint row [m]; ``options[i][k]``: legal actions of class k."""

    def __init__(
        self, inv: list[np.ndarray], options: list[list[np.ndarray]], n_actions: tuple[int, ...]
    ) -> None:
        self.inv = inv
        self.options = options
        log_rules = [sum(math.log(len(o)) for o in opts) for opts in options]
        self.responder = int(np.argmax(log_rules))
        self.enumerated = [i for i in range(len(options)) if i != self.responder]
        self.flat_options = [o for i in self.enumerated for o in options[i]]
        self.n_e = math.prod(len(o) for o in self.flat_options)
        self.n_r = math.prod(len(o) for o in options[self.responder])
        self.stride = np.cumprod((1, *tuple(reversed(n_actions))))[:-1][::-1]
        resp_options = options[self.responder]
        self.legal_r = np.zeros((len(resp_options), n_actions[self.responder]), dtype=bool)
        for k, opts in enumerate(resp_options):
            self.legal_r[k, opts] = True  # [classes of the responder, A_r]

    @property
    def n_rules(self) -> int:
        return self.n_e * self.n_r

    def sizes(self) -> str:
        return f"classes per agent {[len(o) for o in self.options]}"

    def decode(self, index: int) -> list[np.ndarray]:
        """Per agent, the action of each class under the joint rule ``index`` (= c_e * n_r + c_r)."""
        c_e, c_r = divmod(int(index), self.n_r)
        out: list[np.ndarray] = [None] * len(self.options)  # type: ignore[list-item]
        for i in self.enumerated:
            acts = []
            for opts in self.options[i]:
                c_e, d = divmod(c_e, len(opts))
                acts.append(opts[d])
            out[i] = np.array(acts, dtype=np.int64)
        acts = []
        for opts in self.options[self.responder]:
            c_r, d = divmod(c_r, len(opts))
            acts.append(opts[d])
        out[self.responder] = np.array(acts, dtype=np.int64)
        return out

    def joint_action(self, actions: list[np.ndarray]) -> np.ndarray:
        """The joint action at each row for per-agent class actions.  # [m]"""
        ja = np.zeros(len(self.inv[0]), dtype=np.int64)
        for i, acts in enumerate(actions):
            ja += acts[self.inv[i]] * self.stride[i]
        return ja

    def payoff_chunks(self, q: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """S[c, k, b] = sum over rows of responder class k of q[row, (rule c of the others, b)] for every
        joint rule c of the enumerated agents, in chunks (lo, S[lo:lo + C]); -inf where b is illegal for k.
        # [C, K_r, A_r]

        With one enumerated agent e (two agents), S is a Kronecker sum over e's classes,
        S[c] = sum_theta Z[theta, rule_c(theta)] with Z[theta, a, k, b] the payoff summed over the rows of
        (theta, k): each entry costs one addition. Otherwise every rule gathers q at every row."""
        r = self.responder
        m, K_r, A_r = q.shape[0], self.legal_r.shape[0], self.legal_r.shape[1]
        if len(self.enumerated) != 1:
            import scipy.sparse as sp  # lazy: only GMAA* / ICE multiply by it (0.3 s of import)

            proj = sp.csr_matrix((np.ones(m), (self.inv[r], np.arange(m))), shape=(K_r, m))
            rows = max(1, _CHUNK_FLOATS // max(1, m * A_r))
            for lo in range(0, self.n_e, rows):
                hi = min(self.n_e, lo + rows)
                yield lo, self._gathered_payoffs(q, proj, lo, hi)
            return
        e = self.enumerated[0]
        K_e = len(self.options[e])
        Z = self.pair_payoffs(q).transpose(0, 2, 1, 3)  # [K_e, A_e, K_r, A_r]
        parts = [Z[theta, opts] for theta, opts in enumerate(self.options[e])]  # [|opts|, K_r, A_r]
        low = np.zeros((1, K_r, A_r))
        p = 0
        while p < K_e and low.shape[0] * len(parts[p]) * K_r * A_r <= _CHUNK_FLOATS:
            low = (parts[p][:, None] + low[None]).reshape(-1, K_r, A_r)  # position p varies slowest
            p += 1
        low = np.where(self.legal_r[None], low, -np.inf)
        high = parts[p:]
        for h in range(math.prod(len(x) for x in high)):
            offset = np.zeros((K_r, A_r))
            rest = h
            for x in high:
                rest, d = divmod(rest, len(x))
                offset += x[d]
            yield h * low.shape[0], low + offset[None]

    def pair_payoffs(self, q: np.ndarray) -> np.ndarray:
        """Two agents: Z[theta, k, a, b], the payoff table q [m, A] summed over the rows of the enumerated
        agent's class theta and the responder's class k, at its action a and the responder's b; -inf entries
        (illegal joint actions, never chosen) count as 0.  # [K_e, K_r, A_e, A_r]"""
        e, r = self.enumerated[0], self.responder
        m, K_r, A_r = q.shape[0], self.legal_r.shape[0], self.legal_r.shape[1]
        K_e, A_e = len(self.options[e]), q.shape[1] // A_r
        qn = q.reshape(m, A_e, A_r) if e < r else q.reshape(m, A_r, A_e).transpose(0, 2, 1)
        flat = np.zeros((K_e * K_r, A_e * A_r))
        np.add.at(flat, self.inv[e] * K_r + self.inv[r], np.where(np.isfinite(qn), qn, 0.0).reshape(m, -1))
        return flat.reshape(K_e, K_r, A_e, A_r)

    def _gathered_payoffs(self, q: np.ndarray, proj: sp.csr_matrix, lo: int, hi: int) -> np.ndarray:
        r = self.responder
        m, K_r, A_r = q.shape[0], self.legal_r.shape[0], self.legal_r.shape[1]
        rules = rule_slice(self.flat_options, lo, hi)  # [C, P_e]
        base = np.zeros((hi - lo, m), dtype=np.int64)
        pos = 0
        for i in self.enumerated:
            k = len(self.options[i])
            base += rules[:, pos : pos + k][:, self.inv[i]] * self.stride[i]
            pos += k
        cols = base[:, :, None] + np.arange(A_r)[None, None, :] * self.stride[r]
        g = q[np.arange(m)[None, :, None], cols]  # [C, m, A_r]
        g[np.isneginf(g)] = 0.0  # only the responder's illegal actions (masked below)
        s = (proj @ g.transpose(1, 0, 2).reshape(m, -1)).reshape(K_r, hi - lo, A_r).transpose(1, 0, 2)
        return np.where(self.legal_r[None], s, -np.inf)


class SortedRules:
    """Every rule c of the enumerated agents with F(c) = sum_k max_b S[c, k, b], sorted once: the source of
    :class:`LazyChildren` for games whose rules can all be enumerated (``peek``, ``resolve``, ``pop``)."""

    def __init__(self, S: np.ndarray) -> None:  # [n_e, K_r, A_r]
        self.S = S
        F = S.max(axis=2).sum(axis=1)
        self.rules = np.argsort(-F, kind="stable")
        self.best = F[self.rules]
        self.ptr = 0
        self.evaluated = len(F)  # rules whose F was computed

    @property
    def nbytes(self) -> int:
        return self.S.nbytes + self.rules.nbytes + self.best.nbytes

    def peek(self) -> float:
        """F of the next rule (-inf when none is left)."""
        return float(self.best[self.ptr]) if self.ptr < len(self.best) else -np.inf

    def resolve(self) -> None:
        """Nothing to do: :meth:`peek` is exact."""

    def pop(self) -> tuple[float, int, np.ndarray]:
        """(F, rule index, S[c]) of the next rule.  # [K_r, A_r]"""
        c = int(self.rules[self.ptr])
        self.ptr += 1
        return float(self.best[self.ptr - 1]), c, self.S[c]


class RuleSource(Protocol):
    """The enumerated agents' rules in decreasing F, one at a time (:class:`SortedRules`,
    :class:`~ers_exact.model.bayes_bnb.BestFirstRules`)."""

    evaluated: int  # rules whose F was computed so far

    @property
    def nbytes(self) -> int: ...

    def peek(self) -> float: ...

    def resolve(self) -> None: ...

    def pop(self) -> tuple[float, int, np.ndarray]: ...


class LazyChildren:
    """The children of an expanded partial policy, generated one at a time in decreasing priority without
    evaluating all n_e * n_r of them (incremental expansion).

    For rule c of the enumerated agents, the priority of (c, responder rule) is g + scale * sum_k
    S[c, k, b_k]: separable over the responder's classes k. So the children of c come in decreasing order
    from a heap over rank vectors (r_k: the r_k-th best action of class k), each vector generated once from
    the vector with its last nonzero rank lowered; the best child of every c (rank vector 0) comes from the
    ``source``, which yields the rules c in decreasing F(c) = sum_k max_b S[c, k, b]."""

    def __init__(self, bg: BayesGame, source: RuleSource, g: float, scale: float) -> None:
        self.bg, self.source, self.g, self.scale = bg, source, g, scale
        self.rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # c -> (order [K_r, A_r], sorted S[c])
        self.row_bytes = 0
        self.heap: list[tuple[float, int, int, tuple[int, ...], int]] = []
        self.counter = itertools.count()
        opts = bg.options[bg.responder]
        self.radix = np.cumprod([1] + [len(o) for o in opts])[:-1]
        self.position = np.zeros((len(opts), bg.legal_r.shape[1]), dtype=np.int64)  # action -> option index
        for k, o in enumerate(opts):
            self.position[k, o] = np.arange(len(o))

    @property
    def nbytes(self) -> int:
        return self.source.nbytes + self.row_bytes + 120 * len(self.heap)

    def _source_priority(self) -> float:
        top = self.source.peek()
        return self.g + self.scale * top if top > -np.inf else -np.inf

    def peek(self) -> float:
        """An upper bound on the priority of the next child, exact for :class:`SortedRules` (-inf when none
        is left)."""
        b = -self.heap[0][0] if self.heap else -np.inf
        return float(max(self._source_priority(), b))

    def pop(self) -> tuple[float, int]:
        """(priority, rule index c * n_r + c_r) of the next child."""
        self.source.resolve()
        a = self._source_priority()
        if self.heap and -self.heap[0][0] > a:
            neg_f, _, c, ranks, last = heapq.heappop(self.heap)
            f = -neg_f
        else:
            F, c, s = self.source.pop()
            order = np.argsort(-s, axis=1, kind="stable")
            self.rows[c] = (order.astype(np.int16), np.take_along_axis(s, order, axis=1))
            self.row_bytes += 100 + s.size * 10
            ranks, last, f = (0,) * s.shape[0], 0, self.g + self.scale * F
        order_c, vals = self.rows[c]
        for j in range(last, len(ranks)):
            nxt = ranks[j] + 1
            if nxt < vals.shape[1] and np.isfinite(vals[j, nxt]):
                new = (*ranks[:j], nxt, *ranks[j + 1 :])
                value = self.g + self.scale * float(vals[np.arange(len(new)), new].sum())
                heapq.heappush(self.heap, (-value, next(self.counter), c, new, j))
        acts = order_c[np.arange(len(ranks)), ranks].astype(np.int64)
        c_r = int((self.position[np.arange(len(ranks)), acts] * self.radix).sum())
        return f, c * self.bg.n_r + c_r


def rule_slice(options: list[np.ndarray], lo: int, hi: int) -> np.ndarray:
    """Rows lo..hi-1 of every choice of one entry per option list (mixed radix, first list fastest), without
    building the rest.  # [hi - lo, len(options)]"""
    idx = np.arange(lo, hi, dtype=np.int64)
    out = np.empty((hi - lo, len(options)), dtype=np.int64)
    for k, opts in enumerate(options):
        out[:, k] = opts[idx % len(opts)]
        idx //= len(opts)
    return out


def children_values(game: BayesGame, q: np.ndarray, max_children: int) -> np.ndarray:
    """sum over rows of q[row, delta(row)] for every joint decision rule delta, flat index
    c_e * n_r + c_r; :class:`PolicyBudgetError` beyond ``max_children`` rules.  # [n_e * n_r]"""
    total = game.n_e * game.n_r
    if total > max_children:
        raise PolicyBudgetError(
            f"expanding a partial policy needs {total:,} joint decision rules ({game.sizes()}); the budget "
            f"is {max_children:,} (raise max_children)"
        )
    resp = rule_slice(game.options[game.responder], 0, game.n_r)  # [n_r, K_r]
    out = np.empty((game.n_e, game.n_r))
    for lo, s in game.payoff_chunks(q):  # [C, K_r, A_r]; the responder's rules only pick legal actions
        acc = np.zeros((s.shape[0], game.n_r))
        for k in range(s.shape[1]):
            acc += s[:, k, resp[:, k]]
        out[lo : lo + s.shape[0]] = acc
    return out.reshape(-1)


def best_rule(game: BayesGame, q: np.ndarray, max_children: int) -> tuple[float, list[np.ndarray]]:
    """max over joint decision rules of sum over rows of q[row, delta(row)] (a Bayesian game), by
    enumerating the others' rules and best-responding the responder; with one maximising rule."""
    if game.n_e > max_children:
        raise PolicyBudgetError(
            f"solving the last-stage Bayesian game needs {game.n_e:,} decision rules of agents "
            f"{game.enumerated} ({game.sizes()}); the budget is {max_children:,} (raise max_children)"
        )
    best, best_c, best_resp = -np.inf, 0, None
    for lo, s in game.payoff_chunks(q):  # [C, K_r, A_r]
        values = s.max(axis=2).sum(axis=1)
        k = int(np.argmax(values))
        if values[k] > best:
            best, best_c, best_resp = float(values[k]), lo + k, np.argmax(s[k], axis=1)
    assert best_resp is not None
    c_r = 0
    for k in reversed(range(len(game.options[game.responder]))):
        opts = game.options[game.responder][k]
        c_r = c_r * len(opts) + int(np.flatnonzero(opts == best_resp[k])[0])
    return best, game.decode(best_c * game.n_r + c_r)
