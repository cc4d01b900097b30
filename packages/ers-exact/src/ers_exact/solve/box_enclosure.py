"""Enclosures of the logit map M and of the expected return J over *batches of wide boxes* in logit
coordinates, for the certified branch-and-bound of :mod:`ers_exact.solve.optimal_set`.

The evaluator of :mod:`ers_exact.solve.derivatives` on interval arrays is exact in form but carries the
dependency problem through logs and products, so on a wide box (|y| up to B / alpha) its enclosures are
useless (widths of 1e16 or inf). This module works in *probability space*, one box Y of logits at a time
over a batch [P, D]:

* policies: pi^i(a | tau) = 1 / sum_b exp(z_b - z_a) is monotone in each logit, so its exact range over Y is
  [1 / sum_b exp(hi_b - lo_a), 1 / sum_b exp(lo_b - hi_a)] (b = a contributes 1); outward rounded;
* values: G[n, a] (chance-weighted reward-to-go after joint action a at node n, as in ``derivatives``)
  backwards, with the expectation V_n = sum_a pi(a | n) G[n, a] bounded by a *simplex-aware* greedy: for one
  agent, max_{l <= p <= u, sum p = 1} sum_a p_a v_a fills the lower bounds and gives the remaining mass to
  the largest v first; several agents are contracted one at a time (a relaxation: valid, and tight for
  the last agent); J = V at the root;
* gaps: (Q^i(tau, a) - Q^i(tau, r)) is a convex combination, over the joint nodes n projecting on tau, of
  the per-node conditional gaps sum_{a^-i} pi^-i(a^-i | n) (G[n, (a, a^-i)] - G[n, (r, a^-i)]) / c(n)
  (weights p^-i(n) c(n) > 0), so the hull of the per-node enclosures encloses it for any past play.

Rounding: every float result is widened by a bound on its rounding error (sums: gamma_k sum |terms|;
exp/log: a few ulps relative to the magnitude of the argument), with the chance weights b_0 T U enclosed by
:mod:`ers_exact.solve.interval_array`. All arrays are [P, ...] (P boxes).
"""

from __future__ import annotations

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.greedy import expect_bounds, greedy_max
from ers_exact.solve.interval_array import IArray, spmm
from ers_exact.solve.stage_bound import HeldAgentBound
from ers_exact.util.ulp import next_down, next_up

__all__ = ["BoxEnclosure", "greedy_max", "weighted_mean_max"]

_EPS = np.finfo(float).eps
_TINY = np.finfo(float).tiny


_dn = next_down  # np.nextafter(x, -inf), the same bits, faster


_up = next_up  # np.nextafter(x, +inf), the same bits, faster


def weighted_mean_max(x: np.ndarray, wlo: np.ndarray, whi: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """An upper bound of sum_n W_n x_n / sum_n W_n over wlo <= W <= whi (W_n > 0 somewhere), along axis -2
    (x [..., G, A], W [..., G, 1], ``mask`` [G, 1] the entries that exist): the linear-fractional optimum takes
    whi where x_n exceeds the optimum and wlo elsewhere (so one of the G + 1 splits of x sorted descending); the
    float optimum lam is then *verified*: lam is an upper bound iff max_W sum_n W_n (x_n - lam) <= 0, summed with
    its rounding error; +inf where the check fails (the caller keeps the hull).  # [..., A]"""
    G = x.shape[-2]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        key = np.where(mask, x, -np.inf)
        order = np.argsort(-key, axis=-2)
        xs = np.take_along_axis(np.where(mask, x, 0.0), order, axis=-2)
        wl = np.take_along_axis(np.broadcast_to(np.where(mask, wlo, 0.0), x.shape), order, axis=-2)
        wu = np.take_along_axis(np.broadcast_to(np.where(mask, whi, 0.0), x.shape), order, axis=-2)
        zero = np.zeros(x.shape[:-2] + (1,) + x.shape[-1:])
        top_num = np.concatenate([zero, np.cumsum(wu * xs, axis=-2)], axis=-2)  # [..., G + 1, A]
        top_den = np.concatenate([zero, np.cumsum(wu, axis=-2)], axis=-2)
        low_num = np.concatenate([zero, np.cumsum(wl * xs, axis=-2)], axis=-2)
        low_den = np.concatenate([zero, np.cumsum(wl, axis=-2)], axis=-2)
        num = top_num + (low_num[..., -1:, :] - low_num)
        den = top_den + (low_den[..., -1:, :] - low_den)
        lam = np.where(den > 0, num / den, -np.inf).max(axis=-2)  # [..., A]
        scale = np.abs(np.where(mask, x, 0.0)).max(axis=-2)
        lam = lam + 1e-9 * (np.abs(lam) + scale) + _TINY
        d = np.where(mask, x - lam[..., None, :], 0.0)
        terms = np.where(d > 0, np.where(mask, whi, 0.0), np.where(mask, wlo, 0.0)) * d
        total = terms.sum(axis=-2) + 4 * (G + 4) * _EPS * np.abs(terms).sum(axis=-2)
    ok = np.isfinite(lam) & np.isfinite(total) & (total <= 0) & np.all(np.isfinite(xs), axis=-2)
    return np.where(ok, lam, np.inf)


def local_groups(tree: HistoryTree) -> list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Per layer t and agent i, the layer's nodes grouped by agent i's local history: (local index relative to
    the layer's first, a stable sort order of the nodes by it, the start of each group in that order)."""
    out = []
    for t, layer in enumerate(tree.layers):
        per = []
        for i, hist in enumerate(tree.local):
            rel = layer.local[:, i] - hist.offsets[t]
            order = np.argsort(rel, kind="stable")
            starts = np.flatnonzero(np.r_[True, np.diff(rel[order]) != 0])
            per.append((rel, order, starts))
        out.append(per)
    return out


def _pad_groups(order: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nodes of each local history as a padded table [K, G] (node index, 0 where padded) and its mask."""
    ends = np.r_[starts[1:], len(order)]
    G = int((ends - starts).max(initial=1))
    col = np.arange(G)[None]
    mask = col < (ends - starts)[:, None]
    return np.where(mask, order[np.minimum(starts[:, None] + col, len(order) - 1)], 0), mask


class BoxEnclosure:
    """Pre-built structure of a tree for :meth:`__call__` (build once per tree)."""

    def __init__(self, coords: LogitCoordinates) -> None:
        self.coords = coords
        tree = coords.tree
        self.tree = tree
        game = tree.game
        self.n = game.n_agents
        self.na = tuple(int(a) for a in game.n_actions)
        self.gamma = float(game.discount)
        der = coords.derivatives
        self.index = der.index
        rewards, prob = der.interval_chance  # IArray [N_t, A] and [N_t]
        self.rewards = [(r.lo, r.hi) for r in rewards]
        self.prob = [(p.lo, p.hi) for p in prob]
        self.groups = local_groups(tree)  # [t][i] = (relative local index, sort order, group starts)
        self.refs = [np.argmax(h.legal, axis=1) for h in tree.local]
        self.legal = [h.legal for h in tree.local]
        self.offsets = [h.offsets for h in tree.local]
        self.ja = np.asarray(game.joint_actions)  # [A, n] each agent's action in a joint action
        self.held = HeldAgentBound(tree, self.na, game.n_joint_actions)
        self.padded = [[_pad_groups(order, starts) for _, order, starts in per] for per in self.groups]

    def reach(self, pol: list[tuple[np.ndarray, np.ndarray]]) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Per layer t and agent j: enclosure of prod_{s < t} pi^j(a^j_s | tau^j_s) along each node's history
        (outward rounded; [P, N_t] lo and hi)."""
        P = pol[0][0].shape[0]
        layers = self.tree.layers
        out = [[(np.ones((P, len(layers[0]))), np.ones((P, len(layers[0])))) for _ in range(self.n)]]
        for t in range(1, len(layers)):
            layer, prev = layers[t], layers[t - 1]
            per = []
            for j in range(self.n):
                loc = prev.local[layer.parent, j]
                act = self.ja[layer.action, j]
                plo, phi = out[-1][j]
                per.append(
                    (
                        _dn(plo[:, layer.parent] * pol[j][0][:, loc, act]),
                        _up(phi[:, layer.parent] * pol[j][1][:, loc, act]),
                    )
                )
            out.append(per)
        return out

    def policy_bounds(self, lo: np.ndarray, hi: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Exact ranges (outward rounded) of pi^i(a | tau) over each box, per agent ([P, K_i, A_i] twice)."""
        P = lo.shape[0]
        out = []
        for sl, (k, a, _), legal in zip(self.coords.slices, self.index, self.legal):
            base = np.where(legal, 0.0, -np.inf)[None].repeat(P, axis=0)
            zlo, zhi = base.copy(), base.copy()
            zlo[:, k, a], zhi[:, k, a] = lo[:, sl], hi[:, sl]
            A = legal.shape[1]
            plo, phi = np.zeros(zlo.shape), np.zeros(zlo.shape)
            for b in range(A):
                for target, z_own, z_other in ((plo, zlo, zhi), (phi, zhi, zlo)):
                    own = z_own[:, :, b : b + 1]
                    with np.errstate(invalid="ignore", over="ignore"):
                        d = np.where(np.arange(A) == b, 0.0, z_other - own)  # z_c - z_b, own term 0
                        m = d.max(axis=2, keepdims=True)
                        lse = m[..., 0] + np.log(np.exp(d - m).sum(axis=2))
                        mag = np.abs(own[..., 0]) + np.abs(z_other).max(axis=2, initial=0.0, where=legal)
                    rel = (8 * A + 8) * _EPS * (1.0 + mag)
                    # pi_b = exp(-lse); enclose with the rounding of the logits' differences and of exp/log
                    target[:, :, b] = np.exp(-lse) * (np.exp(-rel) if target is plo else np.exp(rel))
            ok = legal[None]
            out.append(
                (
                    np.where(ok, np.clip(_dn(plo), 0.0, 1.0), 0.0),
                    np.where(ok, np.clip(_up(phi), 0.0, 1.0), 0.0),
                )
            )
        return out

    def history_weight(self, pol: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        """Per agent, an upper bound of the probability that play reaches each local history tau^i (the largest
        c(n) prod_j reach^j(n) over the nodes n on tau^i; 1 where the tree has one agent).  # [P, K_i]"""
        P = pol[0][0].shape[0]
        if self.n == 1:
            return [np.ones((P, len(h))) for h in self.tree.local]
        reach = self.reach(pol)
        out: list[list[np.ndarray]] = [[] for _ in range(self.n)]
        for t in range(len(self.tree.layers)):
            w = np.broadcast_to(self.prob[t][1][None], reach[t][0][1].shape)
            for j in range(self.n):
                w = w * reach[t][j][1]
            for i in range(self.n):
                idx, mask = self.padded[t][i]
                out[i].append(np.where(mask[None], w[:, idx], 0.0).max(axis=2))
        return [np.concatenate(parts, axis=1) for parts in out]

    def _belief_weights(
        self, reach: list[tuple[np.ndarray, np.ndarray]], i: int, plo: np.ndarray, phi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """W(n) = c(n) prod_{j != i} (reach of agent j), the unnormalised belief of agent i in node n.  # [P, N]"""
        wlo, whi = (
            np.broadcast_to(plo[None], reach[0][0].shape),
            np.broadcast_to(phi[None], reach[0][0].shape),
        )
        for j in range(self.n):
            if j != i:
                wlo, whi = _dn(wlo * reach[j][0]), _up(whi * reach[j][1])
        return wlo, whi

    def __call__(
        self, lo: np.ndarray, hi: np.ndarray, alpha: float, exact: bool = True, held: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Enclosures of M(Y) ([P, D] lo and hi) and of J(pi(Y)) ([P] lo and hi) for boxes [lo, hi] [P, D];
        ``exact=False`` skips the exact two-agent stage games, ``held=False`` the whole decentralised stage
        bound (looser, cheaper; still sound; the last stage's M does not use it)."""
        pol = self.policy_bounds(lo, hi)
        reach = self.reach(pol) if self.n > 1 else None
        G, node_bounds, Jlo, Jhi = self._backward(pol, lo.shape[0], exact, held)
        mlo, mhi = [], []
        for i in range(self.n):
            hulls = [self._gap_hull(i, t, G[t], node_bounds[t], reach) for t in range(len(self.tree.layers))]
            hull_lo, hull_hi = (
                np.concatenate([h[0] for h in hulls], axis=1),
                np.concatenate([h[1] for h in hulls], axis=1),
            )
            k, a, _ = self.index[i]
            mlo.append(_dn(hull_lo[:, k, a] / alpha))
            mhi.append(_up(hull_hi[:, k, a] / alpha))
        return np.concatenate(mlo, axis=1), np.concatenate(mhi, axis=1), Jlo, Jhi

    def _backward(
        self, pol: list[tuple[np.ndarray, np.ndarray]], P: int, exact: bool, held: bool
    ) -> tuple[
        list[tuple[np.ndarray, np.ndarray]], list[list[tuple[np.ndarray, np.ndarray]]], np.ndarray, np.ndarray
    ]:
        """The values backwards from the last stage: per stage t, G[n, a] = R[n, a] + gamma sum_child V (lo and
        hi, [P, N_t, A_1, ..., A_n], the continuation tightened by the held-agent bound of the stage after),
        each agent's policy bounds at the stage's nodes (broadcast along its action axis) and J = V at the root
        (lo and hi [P], the upper one tightened by the root's held-agent bound)."""
        tree, n, na = self.tree, self.n, self.na
        H = len(tree.layers)
        G: list[tuple[np.ndarray, np.ndarray]] = [(np.empty(0), np.empty(0))] * H
        node_bounds: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(H)]
        v_next: tuple[np.ndarray, np.ndarray] | None = None
        held_next: np.ndarray | None = None  # [P, N_t A] the held-agent bound of the continuation
        for t in reversed(range(H)):
            layer = tree.layers[t]
            N = len(layer)
            rlo, rhi = self.rewards[t]
            if v_next is None:
                glo = np.broadcast_to(rlo[None], (P, N, rlo.shape[1])).copy()
                ghi = np.broadcast_to(rhi[None], (P, N, rhi.shape[1])).copy()
            else:
                cont = spmm(tree.child_matrix(t), IArray(v_next[0].T, v_next[1].T))  # [N A, P]
                s = IArray(rlo.reshape(-1, 1), rhi.reshape(-1, 1)) + self.gamma * cont
                glo, ghi = s.lo.T.reshape(P, N, -1), s.hi.T.reshape(P, N, -1)
                if held_next is not None:
                    tight = _up(rhi.reshape(-1)[None] + _up(self.gamma * held_next)).reshape(P, N, -1)
                    ghi = np.minimum(ghi, tight)
            glo, ghi = glo.reshape(P, N, *na), ghi.reshape(P, N, *na)
            bnds = []
            for j in range(n):
                shape = [P, N] + [1] * n
                shape[2 + j] = na[j]
                l, u = pol[j]
                loc = layer.local[:, j]
                bnds.append((l[:, loc].reshape(shape), u[:, loc].reshape(shape)))
            node_bounds[t] = bnds
            G[t] = (glo, ghi)
            vlo, vhi = expect_bounds(glo, ghi, bnds, [2 + j for j in range(n)])
            v_next = (vlo.reshape(P, N), vhi.reshape(P, N))
            held_next = self.held(t, ghi, bnds, pol, exact) if held else None
        assert v_next is not None
        Jlo, Jhi = v_next[0][:, 0], v_next[1][:, 0]
        if held_next is not None:
            Jhi = np.minimum(Jhi, held_next[:, 0])
        return G, node_bounds, Jlo, Jhi

    def _gap_hull(
        self,
        i: int,
        t: int,
        G: tuple[np.ndarray, np.ndarray],
        node_bounds: list[tuple[np.ndarray, np.ndarray]],
        reach: list[list[tuple[np.ndarray, np.ndarray]]] | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Enclosure of agent i's gaps Q^i(tau, a) - Q^i(tau, r) at the local histories tau of stage t
        ([P, K_t, A_i] lo and hi): per node n the conditional gap sum_{a^-i} pi^-i(a^-i | n) (G[n, (a, a^-i)] -
        G[n, (r, a^-i)]) / c(n), then its hull over the nodes on tau, narrowed (with more than one agent) to the
        belief-weighted mean of the per-node gaps (:func:`weighted_mean_max`)."""
        n, na = self.n, self.na
        layer = self.tree.layers[t]
        glo, ghi = G
        P, N = glo.shape[0], len(layer)
        ref = self.refs[i][layer.local[:, i]]  # [N] reference action of each node's local history
        g_lo = np.moveaxis(glo, 2 + i, 2)  # [P, N, A_i, rest...]
        g_hi = np.moveaxis(ghi, 2 + i, 2)
        r_lo = np.take_along_axis(g_lo, ref.reshape(1, N, 1, *[1] * (n - 1)), axis=2)
        r_hi = np.take_along_axis(g_hi, ref.reshape(1, N, 1, *[1] * (n - 1)), axis=2)
        d_lo, d_hi = _dn(g_lo - r_hi), _up(g_hi - r_lo)
        others = [j for j in range(n) if j != i]
        bnds = [
            (np.moveaxis(node_bounds[j][0], 2 + i, 2), np.moveaxis(node_bounds[j][1], 2 + i, 2))
            for j in others
        ]
        axes = [3 + others.index(j) for j in others]
        inner_lo, inner_hi = expect_bounds(d_lo, d_hi, bnds, axes)  # [P, N, A_i]
        inner_lo, inner_hi = inner_lo.reshape(P, N, na[i]), inner_hi.reshape(P, N, na[i])
        plo, phi = self.prob[t]
        with np.errstate(divide="ignore", invalid="ignore"):
            q_lo = np.where(inner_lo >= 0, inner_lo / phi[None, :, None], inner_lo / plo[None, :, None])
            q_hi = np.where(inner_hi >= 0, inner_hi / plo[None, :, None], inner_hi / phi[None, :, None])
        q_lo = np.where(np.isnan(q_lo), -np.inf, _dn(q_lo))
        q_hi = np.where(np.isnan(q_hi), np.inf, _up(q_hi))
        _, order, starts = self.groups[t][i]
        hull_lo = np.minimum.reduceat(q_lo[:, order], starts, axis=1)  # [P, K_t, A_i]
        hull_hi = np.maximum.reduceat(q_hi[:, order], starts, axis=1)
        if reach is not None:  # the belief-weighted mean of the per-node gaps, within the hull
            w_lo, w_hi = self._belief_weights(reach[t], i, plo, phi)
            idx, mask = self.padded[t][i]
            wl, wh, m = w_lo[:, idx][..., None], w_hi[:, idx][..., None], mask[..., None]
            hull_hi = np.minimum(hull_hi, weighted_mean_max(q_hi[:, idx], wl, wh, m))
            hull_lo = np.maximum(hull_lo, -weighted_mean_max(-q_lo[:, idx], wl, wh, m))
        return hull_lo, hull_hi
