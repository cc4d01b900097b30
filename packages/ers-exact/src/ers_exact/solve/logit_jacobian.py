"""DM(y), the EXACT Jacobian of the logit map, from the forward and backward pass of
:class:`~ers_exact.solve.derivatives.LogitDerivatives` (floats, or interval arrays over a box): the terms (A)
a factor of another agent at a strict ancestor, (B) a factor of another agent at the node itself and (C) a
factor of any agent at a strict descendant (the module docstring of :mod:`ers_exact.solve.derivatives`),
scattered into the [D_i x D_j] blocks by the composed matrices of
:class:`~ers_exact.solve.logit_structure.LogitStructure`. :class:`LogitJacobian` derives from it; the
evaluator derives from :class:`LogitJacobian`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ers_exact.solve.interval_array import IArray, concat, exp, spmm
from ers_exact.solve.logit_structure import LogitStructure
from ers_exact.solve.reach import reference_difference

__all__ = ["LogitJacobian"]


class LogitJacobian(LogitStructure):
    """The Jacobian DM of the logit map from one evaluation pass over the index structure of a tree."""

    def _contract(self, g: Any, act: Sequence[Any], keep: Sequence[int]) -> Any:
        """sum over the agents not in ``keep`` of their probabilities times g [N, A, P]; axes of ``keep``
        in the order given.  # [N, A_keep..., P]"""
        N, P = g.shape[0], g.shape[-1]
        n, na = self.n, self.n_actions
        m = g.reshape(N, *na, P)
        drop = [a for a in range(n) if a not in keep]
        if drop and not isinstance(g, IArray) and n <= 20:  # floats: one einsum (2x the products and sums)
            ax = "abcdefghijklmopqrstu"
            sub = f"n{ax[:n]}z," + ",".join(f"n{ax[a]}z" for a in drop)
            return np.einsum(f"{sub}->n{''.join(ax[a] for a in keep)}z", m, *[act[a] for a in drop])
        for agent in reversed(range(n)):
            if agent in keep:
                continue
            shape = [N] + [1] * n + [P]
            shape[1 + agent] = na[agent]
            m = (m * act[agent].reshape(*shape)).sum(axis=1 + agent, keepdims=True)
        ordered = sorted(keep)
        m = m.reshape(N, *[na[a] for a in ordered], P)
        perm = [ordered.index(a) for a in keep]
        if perm != sorted(perm):
            m = m.transpose(0, *[1 + p for p in perm], len(keep) + 1)
        return m

    def _jacobian(
        self,
        alpha: float,
        P: int,
        pi: list,
        act: list,
        jp: Any,
        G: Any,
        V: Any,
        keep: dict[str, list[Any]],
        gap_all: list,
        den_all: list,
        interval: bool,
    ) -> Any:
        """DM [D, D, P] from the forward and backward pass of ``LogitDerivatives._run`` (all arrays over the flat nodes;
        ``interval``: the pass enclosed a box, its weights relative to each history's pivot node)."""
        n, na, K = self.n, self.n_actions, self.K
        mats, pair_node = self.mats, self.flat["pair_node"]
        N_all = len(self.node_local)
        # S^j_m[c] = pi^j(c|m) (Gbar^j_m[c] - V_m) at every node  # [N, A_j, P]
        S = [act[j] * (keep["gbar"][j] - V.reshape(N_all, 1, P)) for j in range(n)]
        pi_sel = [pi[j][k, a] for j, (k, a, _) in enumerate(self.index)]  # pi^j(c | sigma)  # [D_j, P]
        blocks: list[list[Any]] = [[None] * n for _ in range(n)]
        for i in range(n):
            k_i = self.index[i][0]
            D_i = len(k_i)
            den, gap0 = den_all[i], gap_all[i]  # [K_i, P], [D_i, P]
            if interval and n > 1:  # intervals: (B) on G[n, (a, .)] - G[n, (r, .)] too
                Gi = reference_difference(G, i, na, self.reference[i])
            else:
                Gi = G
            if self.n_pairs:
                Xg = self._ancestor_weights(i, jp, keep, interval) * self.pair_gamma[:, None]  # [n_pairs, P]
                numn_pairs = keep["numn"][i][pair_node].reshape(self.n_pairs * na[i], P)
                denn_pairs = keep["denn"][i][pair_node]  # [n_pairs, P]
            for j in range(n):
                k_j = self.index[j][0]
                D_j = len(k_j)
                if D_i == 0 or D_j == 0:
                    blocks[i][j] = np.zeros((D_i, D_j, P))
                    continue
                out: Any = np.zeros((D_i * D_j, P))
                if self.n_pairs:
                    vals = Xg.reshape(self.n_pairs, 1, P) * S[j][pair_node]  # [n_pairs, A_j, P]
                    out = out + spmm(mats[("C", i, j)], vals.reshape(self.n_pairs * na[j], P))
                dd = None
                if j != i:
                    if self.n_pairs:
                        out = out + spmm(mats[("A1", i, j)], numn_pairs)
                        t2 = spmm(mats[("A2", i, j)], numn_pairs).reshape(D_i, K[j], P)[:, k_j]
                        out = out - (t2 * pi_sel[j].reshape(1, D_j, P)).reshape(D_i * D_j, P)
                        d2 = spmm(mats[("D2", i, j)], denn_pairs).reshape(D_i, K[j], P)[:, k_j]
                        dd = spmm(mats[("D1", i, j)], denn_pairs).reshape(D_i, D_j, P) - d2 * pi_sel[
                            j
                        ].reshape(1, D_j, P)
                    # (B): the factor of agent j at the node itself
                    gij = self._contract(Gi, act, [i, j])  # [N, A_i, A_j, P]
                    gi = keep["gi"][i].reshape(N_all, na[i], 1, P)
                    w = keep["w"][i].reshape(N_all, 1, 1, P)
                    vb = w * act[j].reshape(N_all, 1, na[j], P) * (gij - gi)
                    out = out + spmm(mats[("B", i, j)], vb.reshape(N_all * na[i] * na[j], P))
                out = out.reshape(D_i, D_j, P)
                if dd is not None:
                    out = out - gap0.reshape(D_i, 1, P) * dd
                blocks[i][j] = out / den[k_i].reshape(D_i, 1, P) / alpha
        rows = [concat(blocks[i], axis=1) for i in range(n)]
        return concat(rows, axis=0)  # [D, D, P]

    def _ancestor_weights(self, i: int, jp: Any, keep: dict[str, list[Any]], interval: bool) -> Any:
        """X^i(anc -> desc) of every ancestor pair (module docstring, term (C)), rescaled by the ancestor's
        local-history shift, in the pairs' (t, d, node) order.  # [n_pairs, P]"""
        tree, bounds = self.tree, self.flat["bounds"]
        lpm, shift, lastf = keep["logpm"][i], keep["shift"], keep["lastf"]
        X: list[Any] = []
        x_prev: list[Any] = []  # per depth d at layer t - 1
        for t in range(1, self.H):
            layer = tree.layers[t]
            par = layer.parent + bounds[t - 1]  # flat index of each node's parent
            if interval:  # intervals: the parent's log weight (relative to its pivot) plus the last factors
                x1 = exp(lpm[par] + lastf[i][bounds[t] : bounds[t + 1]])
            else:
                x1 = exp(lpm[bounds[t] : bounds[t + 1]] - shift[i][par])
            edge = jp[par, layer.action]  # [N_t, P]
            x_t = [x1] + [x_prev[d - 1][layer.parent] * edge for d in range(1, t)]
            X += x_t
            x_prev = x_t
        return concat(X, axis=0)
