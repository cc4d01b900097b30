"""Interval-mode parts of the logit map's evaluator (:mod:`ers_exact.solve.derivatives`) that keep the
dependency problem out of its enclosures at low temperature: :func:`own_log_softmax` (log pi(a) in which the
own logit cancels), and the per-history quotients Q = num / den below.

Both num^i(tau, .) and den^i(tau) are sums over the joint nodes n of tau of terms proportional to the reach
p^{-i}(n) of the other agents, and the quotient does not change when every term of a history is divided by
one common factor. The evaluator divides by the reach of a *pivot* node n* of the history:
w_n = p^{-i}(n) / p^{-i}(n*). On floats the log difference is a plain subtraction; on intervals
log p^{-i}(n) and log p^{-i}(n*) hold the same factors pi^j(b | h) wherever the other agents' histories of n
and n* share a prefix, and subtracting two enclosures of the same factor does not cancel it: a box of width
delta in a partner's logits gave every w_n a relative width of ~delta even for a history with one node
(w = 1 exactly), and M = gap / alpha a width of ~delta |gap| / alpha. :class:`RelativeReach` sums only the
factors after the other agents' histories of n and n* part (their last common ancestor in each agent's
tree of local histories), so w_{n*} = 1 and common factors cancel symbolically.

:func:`reference_difference` forms G[n, (a, b)] - G[n, (r, b)] before the other agents' policies are
contracted in (the same pi^{-i} factors otherwise enter num(a) and num(r) as independent intervals), and
:func:`hull_of_ratios` encloses the gap by the hull of the per-node ratios d_n / c(n) (the gap is their
convex combination with weights w_n c(n)), independent of the weights altogether.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.interval_array import IArray

__all__ = ["LIMIT", "RelativeReach", "hull_of_ratios", "own_log_softmax", "reference_difference"]

#: largest upper end of a relative log weight used (exp(200) ~ 7e86: products with rewards stay finite)
LIMIT = 200.0


def _gather(x: IArray, rows: np.ndarray, depth: np.ndarray) -> IArray:
    """x [K, H, P] at (rows, depth, p) for index arrays [N, P] (rows may be [N, 1]).  # [N, P]"""
    p = np.arange(x.shape[2])[None, :]
    return IArray(x.lo[rows, depth, p], x.hi[rows, depth, p])


class RelativeReach:
    """Log reach of the other agents at every joint node relative to a pivot node of its local history, with
    the factors shared with the pivot cancelled (module docstring). Index tables are built once per tree."""

    def __init__(self, tree: HistoryTree, node_local: np.ndarray) -> None:
        self.node_local = node_local  # [N, n] local history of each agent at each flat node
        self.H = len(tree.layers)
        self.anc: list[
            np.ndarray
        ] = []  # per agent [K_j, H]: the ancestor at each time, -1 after the history's
        for hist in tree.local:
            anc = np.full((len(hist), self.H), -1, dtype=np.int64)
            anc[np.arange(len(hist)), hist.time] = np.arange(len(hist))
            for u in range(self.H - 1, 0, -1):
                has = anc[:, u] >= 0
                anc[has, u - 1] = hist.parent[anc[has, u]]
            self.anc.append(anc)
        self.local = tree.local

    def last_factor(self, j: int, logpi_j: IArray) -> IArray:
        """log pi^j of agent j's last action, per local history (0 at the empty one).  # [K_j, P]"""
        hist = self.local[j]
        par, act = np.maximum(hist.parent, 0), np.maximum(hist.action, 0)
        root = (hist.parent < 0)[:, None]
        f = logpi_j[par, act]  # [K_j, P]
        return IArray(np.where(root, 0.0, f.lo), np.where(root, 0.0, f.hi))

    def suffix(self, j: int, fac: IArray) -> IArray:
        """suffix[h, s]: the sum of agent j's log-probabilities along h after time s (its factors at times
        s, ..., t(h) - 1), exactly 0 for s >= t(h).  # [K_j, H, P]"""
        anc = self.anc[j]
        K, P = anc.shape[0], fac.shape[1]
        lo, hi = np.zeros((K, self.H, P)), np.zeros((K, self.H, P))
        for s in range(self.H - 2, -1, -1):
            nxt = anc[:, s + 1]
            ok = (nxt >= 0)[:, None]
            f = fac[np.maximum(nxt, 0)]
            acc = IArray(lo[:, s + 1], hi[:, s + 1]) + f
            lo[:, s] = np.where(ok, acc.lo, lo[:, s + 1])
            hi[:, s] = np.where(ok, acc.hi, hi[:, s + 1])
        return IArray(lo, hi)

    def relative(
        self,
        i: int,
        suffixes: list[IArray],
        top: np.ndarray,
        order: np.ndarray,
        starts: np.ndarray,
        group: np.ndarray,
    ) -> IArray:
        """log p^{-i}(n) - log p^{-i}(n*) at every flat node n, n* the node of n's local history of agent i
        with the highest upper bound ``top`` [N, P] of log p^{-i} (the first such): exactly 0 at the pivot,
        and only the factors after the other agents' histories of n and n* part otherwise. ``suffixes``: every
        agent's :meth:`suffix`; ``order``, ``starts``, ``group``: the nodes grouped by agent i's local
        history.  # [N, P]"""
        N, P = top.shape
        srt = top[order]
        gmax = np.maximum.reduceat(srt, starts, axis=0)  # [G, P]
        first = np.where(srt == gmax[group[order]], np.arange(N)[:, None], N)
        pivot = order[np.minimum.reduceat(first, starts, axis=0)][
            group
        ]  # [N, P] the pivot of each node's group
        lo, hi = np.zeros((N, P)), np.zeros((N, P))
        for j in range(len(self.anc)):
            if j == i:
                continue
            anc = self.anc[j]
            hn = self.node_local[:, j][:, None]  # [N, 1]
            hp = self.node_local[pivot, j]  # [N, P]
            depth = np.full((N, P), -1, dtype=np.int64)  # the time of the last common ancestor
            for u in range(self.H):
                a = anc[hn, u]
                depth += (a >= 0) & (a == anc[hp, u])
            diff = _gather(suffixes[j], hn, depth) - _gather(suffixes[j], hp, depth)
            same = hn == hp  # the same history: no factor at all (not [-ulp, ulp])
            d = IArray(lo, hi) + IArray(np.where(same, 0.0, diff.lo), np.where(same, 0.0, diff.hi))
            any_diff = ~same
            lo, hi = np.where(any_diff, d.lo, lo), np.where(any_diff, d.hi, hi)
        return IArray(lo, hi)

    def others_last(self, i: int, facs: list[IArray]) -> Any:
        """sum_{j != i} of agent j's :meth:`last_factor` at every flat node: log p^{-i}(n) - log p^{-i}(parent).
        # [N, P]"""
        parts = [facs[j][self.node_local[:, j]] for j in range(len(facs)) if j != i]
        out: Any = parts[0] if parts else np.zeros((len(self.node_local), facs[i].shape[1]))
        for x in parts[1:]:
            out = out + x
        return out

    def log_weights(
        self,
        i: int,
        shifted: IArray,
        top: np.ndarray,
        suffixes: list[IArray],
        order: np.ndarray,
        starts: np.ndarray,
        group: np.ndarray,
    ) -> IArray:
        """Log weights of agent i's per-history rescaling: :meth:`relative` where every node of the history has
        an upper end <= :data:`LIMIT` (a product with it stays finite), else ``shifted`` (log p^{-i} minus the
        history's largest upper end ``top``: wide boxes, where the pivot's reach may be far below the others').
        One choice per history and box, so num and den share the factor.  # [N, P]"""
        rel, shifted = self.relative(i, suffixes, top, order, starts, group), IArray.lift(shifted)
        bad = ~(rel.hi <= LIMIT) | np.isnan(rel.lo)
        bad = np.logical_or.reduceat(bad[order], starts, axis=0)[group]
        return IArray(np.where(bad, shifted.lo, rel.lo), np.where(bad, shifted.hi, rel.hi))


def own_log_softmax(lp: IArray, zlo: np.ndarray, zhi: np.ndarray, legal: np.ndarray) -> IArray:
    """Tighten the enclosure ``lp`` of log pi(a | tau) over a box of logits z in [zlo, zhi] ([K, A, P]; legal
    [K, A]) by log pi(a) = -log(1 + sum_{b != a} exp(z_b - z_a)): the own logit cancels, so the enclosure
    no longer grows with the box's width where a dominates. (z_a - lse(z) over the box holds z_a's own
    interval twice: its width stayed about the width of the box, so an action saturated at probability 1
    off the reference kept a range [e^-w, 1] and M, DM ranges of ~ w / alpha, which no Krawczyk box could
    contract at low temperature.) Both are enclosures; their intersection is returned, <= 0."""
    K, A, P = zlo.shape
    ok = legal[:, :, None]
    zl, zh = np.where(ok, zlo, 0.0), np.where(ok, zhi, 0.0)  # illegal actions: no term (no inf - inf)
    s = IArray(np.zeros((K, A, P)))
    with np.errstate(over="ignore"):  # a sum overflowing to +inf is an outward bound (log pi >= -inf)
        for b in range(A):
            d = IArray(zl[:, b : b + 1], zh[:, b : b + 1]) - IArray(zl, zh)  # z_b - z_a, [K, A, P]
            e = d.exp()
            term = (np.arange(A) != b)[None, :, None] & ok[:, b : b + 1]
            s = s + IArray(np.where(term, e.lo, 0.0), np.where(term, e.hi, 0.0))
        own = -(s + 1.0).log()
    lo = np.where(ok, np.maximum(lp.lo, own.lo), lp.lo)
    hi = np.minimum(np.where(ok, np.minimum(lp.hi, own.hi), lp.hi), 0.0)  # a log-probability is <= 0
    return IArray(lo, hi)


def reference_difference(G: IArray, i: int, n_actions: tuple[int, ...], ref: np.ndarray) -> IArray:
    """G[n, a] - G[n, a'] where a' is a with agent i's action replaced by ``ref`` [N] (its reference action at
    n's local history): exactly 0 where agent i plays the reference.  # [N, A, P]"""
    N, P = G.shape[0], G.shape[-1]
    lo = np.moveaxis(G.lo.reshape(N, *n_actions, P), 1 + i, 1)  # [N, A_i, rest..., P]
    hi = np.moveaxis(G.hi.reshape(N, *n_actions, P), 1 + i, 1)
    rows = np.arange(N)
    d = IArray(lo, hi) - IArray(lo[rows, ref][:, None], hi[rows, ref][:, None])
    own = (np.arange(n_actions[i])[None, :] == ref[:, None]).reshape(N, n_actions[i], *[1] * (lo.ndim - 2))
    out_lo = np.moveaxis(np.where(own, 0.0, d.lo), 1, 1 + i).reshape(G.shape)
    out_hi = np.moveaxis(np.where(own, 0.0, d.hi), 1, 1 + i).reshape(G.shape)
    return IArray(out_lo, out_hi)


def hull_of_ratios(d: IArray, prob: Any, order: np.ndarray, starts: np.ndarray) -> IArray:
    """Per group of nodes (a local history), the hull of d_n / c_n ([N, A, P] over chance probabilities [N]);
    nodes with c_n = 0 (d_n = 0 there) do not count.  # [G, A, P]"""
    c = IArray.lift(prob).reshape(-1, 1, 1)
    zero = (c.hi <= 0) & np.ones(d.shape, dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = d / IArray(np.where(c.hi > 0, c.lo, 1.0), np.where(c.hi > 0, c.hi, 1.0))
    rlo = np.where(zero, np.inf, r.lo)[order]
    rhi = np.where(zero, -np.inf, r.hi)[order]
    return IArray(np.minimum.reduceat(rlo, starts, axis=0), np.maximum.reduceat(rhi, starts, axis=0))
