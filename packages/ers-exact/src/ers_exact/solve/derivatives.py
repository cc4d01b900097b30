"""The logit map M(y) = Q-gaps(y) / alpha and its EXACT Jacobian DM(y), from one forward and one backward
pass over the joint history tree, batched over policies and chunked under a memory budget.

Coordinates (as in :class:`ers_exact.solve.boltzmann.LogitCoordinates`): for agent i, local history tau and
legal action a other than the reference r(tau) (the first legal one), y = log pi(a|tau) - log pi(r|tau).
The gap is (Q^i(tau, a) - Q^i(tau, r)) / alpha with Q^i = num^i / den^i (:mod:`ers_exact.model.values`):

    num^i(tau, a) = sum_{n in tau} p^{-i}(n) sum_{a^{-i}} pi^{-i}(a^{-i} | n) G[n, (a, a^{-i})],
    den^i(tau)    = sum_{n in tau} p^{-i}(n) c(n),

where n runs over the joint nodes projecting on tau, p^{-i}(n) is the product of the other agents'
probabilities of their past actions, c(n) the chance probability and G[n, a] the chance-weighted expected
reward-to-go after joint action a (it holds every policy factor strictly below n). Every term is a
product of policy entries pi^j(b | m), and d log pi^j(b | m) / dy_{(j, m, c)} = [b = c] - pi^j(c | m) (the
softmax), so the derivative of a term by the factor at node m is the term times ([b = c] - pi^j(c|m)) --
no division by a probability, nothing underflows. Three kinds of factor remain:

* (A) a factor of agent j != i at a strict ancestor m of n (in p^{-i}(n)): num_n(a) ([b = c] - pi^j(c|m)),
  and the same with c(n) p^{-i}(n) for den;
* (B) a factor of agent j != i at n itself: p^{-i}(n) pi^j(c|n) (Gbar^{ij}_n[a, c] - Gbar^i_n[a]), where
  Gbar^{ij} contracts G over the agents other than i and j;
* (C) a factor of any agent j at a strict descendant m of n (in G): X^i(n -> m) gamma^d S^j_m[c], where
  S^j_m[c] = pi^j(c|m) (Gbar^j_m[c] - V_m) is the derivative of the value V_m by the logit, d = t_m - t_n,
  and X^i(n -> m) = p^{-i}(n) pi^{-i}(a_0^{-i} | n) times the joint probabilities of the actions strictly
  between n and m (a_0 = the joint action at n towards m; the row is (tau^i_n, a_0^i)).

Ancestor/descendant pairs number sum_n depth(n) <= H N, so a whole Jacobian costs a few evaluations of M,
not the 2D of central differences. Then d gap = (d num(a) - d num(r) - alpha gap d den) / (den alpha).
For robustness at low temperature p^{-i} is carried in logs and rescaled per local history (the ratio
num / den does not change), so Q stays finite where the plain product would underflow.

The same code runs on :class:`~ers_exact.solve.interval_array.IArray` boxes, which gives the interval
enclosures of M and DM over a box that the Krawczyk test needs (chance weights and rewards enclosed too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.config import DEFAULT_MEMORY_BUDGET
from ers_exact.solve.interval_array import IArray, concat, exp, log, spmm
from ers_exact.util.budget import format_bytes
from ers_exact.util.errors import InputError

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "LogitDerivatives",
    "LogitEvaluation",
    "MemoryBudgetError",
    "coordinate_index",
]


class MemoryBudgetError(InputError, RuntimeError):
    """A single policy's evaluation needs more working memory than the budget allows."""


def coordinate_index(tree: HistoryTree) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per agent (history k, action a, reference action r) of every logit coordinate, in y's order."""
    out = []
    for hist in tree.local:
        ref = np.argmax(hist.legal, axis=1)
        k, a = np.nonzero(hist.legal)
        keep = a != ref[k]
        out.append((k[keep], a[keep], ref[k[keep]]))
    return out


@dataclass(frozen=True)
class LogitEvaluation:
    """M(y), optionally DM(y), and J(pi(y)) for a batch."""

    values: np.ndarray  # [P, D] M(y) (an IArray [D, P] in interval mode, see LogitDerivatives.enclose)
    jacobian: np.ndarray | None  # [P, D, D] DM(y)
    J: np.ndarray  # [P] expected return of pi(y)


def _segment_max(x: np.ndarray, order: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Max of rows of ``x`` [N, P] grouped by local history (groups given by a sort order and starts)."""
    return np.maximum.reduceat(x[order], starts, axis=0)


class LogitDerivatives:
    """Pre-built index structure of a tree for :meth:`evaluate` (build once per tree; see module doc)."""

    def __init__(self, tree: HistoryTree) -> None:
        self.tree = tree
        game = tree.game
        self.n = game.n_agents
        self.n_actions = tuple(int(a) for a in game.n_actions)
        self.K = tuple(len(h) for h in tree.local)
        self.index = coordinate_index(tree)
        self.dims = tuple(len(k) for k, _, _ in self.index)
        self.D = int(sum(self.dims))
        self.H = len(tree.layers)
        self.gamma = float(game.discount)
        ja = game.joint_actions
        self.ja = ja
        self.rewards = [layer.weight @ game.expected_reward for layer in tree.layers]  # [N_t, A]
        self.prob = [layer.probability for layer in tree.layers]
        self.sizes = [len(layer) for layer in tree.layers]
        # per (t, i): grouping of the nodes by local history for the rescaling
        self.groups: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = []
        for t, layer in enumerate(tree.layers):
            per = []
            for i, hist in enumerate(tree.local):
                rel = layer.local[:, i] - hist.offsets[t]
                order = np.argsort(rel, kind="stable")
                starts = np.flatnonzero(np.r_[True, np.diff(rel[order]) != 0])
                per.append((rel, order, starts))
            self.groups.append(per)
        # ancestor/descendant pairs, ordered by (t, d, node)
        pt, pd, pn, panc, pa0 = [], [], [], [], []
        for t in range(1, self.H):
            layer = tree.layers[t]
            anc = np.arange(len(layer))
            for d in range(1, t + 1):
                first = tree.layers[t - d + 1].action[anc]
                anc = tree.layers[t - d + 1].parent[anc]
                pt.append(np.full(len(layer), t))
                pd.append(np.full(len(layer), d))
                pn.append(np.arange(len(layer)))
                panc.append(anc.copy())
                pa0.append(first)

        def cat(xs: list[np.ndarray]) -> np.ndarray:
            return np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, dtype=np.int64)

        self.pair_t, self.pair_d, self.pair_n, self.pair_anc, self.pair_a0 = (
            cat(pt),
            cat(pd),
            cat(pn),
            cat(panc),
            cat(pa0),
        )
        self.n_pairs = len(self.pair_t)
        # local history (global index per agent) of each pair's descendant and ancestor
        local_desc = np.zeros((self.n_pairs, self.n), dtype=np.int64)
        local_anc = np.zeros((self.n_pairs, self.n), dtype=np.int64)
        for t in range(1, self.H):
            for d in range(1, t + 1):
                sel = (self.pair_t == t) & (self.pair_d == d)
                local_desc[sel] = tree.layers[t].local[self.pair_n[sel]]
                local_anc[sel] = tree.layers[t - d].local[self.pair_anc[sel]]
        self.local_desc, self.local_anc = local_desc, local_anc
        self.node_local = np.concatenate([layer.local for layer in tree.layers]).astype(np.int64)  # [Ntot, n]
        self.pair_gamma = self.gamma ** self.pair_d.astype(float)

    # ----- sparse scatter matrices: contributions straight into [D_i x D_j] Jacobian blocks -----
    @cached_property
    def _rows(self) -> list[tuple[sp.csc_matrix, sp.csc_matrix]]:
        """Per agent i: R_i [D_i, K_i A_i] (+1 at (k, a), -1 at (k, r) of each coordinate: the gap's rows)
        and Rk_i [D_i, K_i] (1 at k: which history's den a coordinate divides by)."""
        out = []
        for i, (k, a, r) in enumerate(self.index):
            A, d = self.n_actions[i], np.arange(len(k))
            R = sp.csc_matrix(
                (np.r_[np.ones(len(k)), -np.ones(len(k))], (np.r_[d, d], np.r_[k * A + a, k * A + r])),
                shape=(len(k), self.K[i] * A),
            )
            Rk = sp.csc_matrix((np.ones(len(k)), (d, k)), shape=(len(k), self.K[i]))
            out.append((R, Rk))
        return out

    @cached_property
    def _cols(self) -> list[np.ndarray]:
        """Per agent j: [K_j, A_j] -> coordinate index of (history, action), -1 where none (reference, illegal)."""
        out = []
        for j, (k, a, _) in enumerate(self.index):
            table = np.full((self.K[j], self.n_actions[j]), -1, dtype=np.int64)
            table[k, a] = np.arange(len(k))
            out.append(table)
        return out

    @staticmethod
    def _compose(R: sp.csc_matrix, entry: np.ndarray, out_col: np.ndarray, n_cols: int) -> sp.csr_matrix:
        """[R.shape[0] * n_cols, len(entry)]: input m goes to rows (d, out_col[m]) with weight R[d, entry[m]]."""
        valid = np.flatnonzero(out_col >= 0)
        start = R.indptr[entry[valid]]
        count = R.indptr[entry[valid] + 1] - start
        total = int(count.sum())
        offset = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
        pos = np.repeat(start, count) + offset
        rows = R.indices[pos] * n_cols + np.repeat(out_col[valid], count)
        cols = np.repeat(valid, count)
        return sp.csr_matrix((R.data[pos], (rows, cols)), shape=(R.shape[0] * n_cols, len(entry)))

    @cached_property
    def _mats(self) -> dict[tuple[str, int, int], sp.csr_matrix]:
        """The composed scatter matrices of the terms (A), (B), (C) of the module docstring, per (i, j)."""
        out: dict[tuple[str, int, int], sp.csr_matrix] = {}
        n, K, na = self.n, self.K, self.n_actions
        for i in range(n):
            R, Rk = self._rows[i]
            A_i = na[i]
            a0 = self.ja[self.pair_a0, i]
            for j in range(n):
                A_j, col = na[j], self._cols[j]
                D_j = self.dims[j]
                # (C): input (pair, c) -> row entry (k_i(anc), a0_i), column (k_j(desc), c)
                entry = np.repeat(self.local_anc[:, i] * A_i + a0, A_j)
                c = np.tile(np.arange(A_j), self.n_pairs)
                out[("C", i, j)] = self._compose(R, entry, col[np.repeat(self.local_desc[:, j], A_j), c], D_j)
                if i == j:
                    continue
                b = self.ja[self.pair_a0, j]
                # (A) first part: input (pair, a) -> row entry (k_i(desc), a), column (k_j(anc), b_j)
                entry = (self.local_desc[:, i, None] * A_i + np.arange(A_i)[None]).ravel()
                out[("A1", i, j)] = self._compose(R, entry, np.repeat(col[self.local_anc[:, j], b], A_i), D_j)
                # (A) second part, before the factor pi^j(c | sigma): column = history k_j(anc)
                out[("A2", i, j)] = self._compose(R, entry, np.repeat(self.local_anc[:, j], A_i), K[j])
                # den: input pair -> row k_i(desc) (every coordinate of that history)
                out[("D1", i, j)] = self._compose(
                    Rk, self.local_desc[:, i], col[self.local_anc[:, j], b], D_j
                )
                out[("D2", i, j)] = self._compose(Rk, self.local_desc[:, i], self.local_anc[:, j], K[j])
                # (B): input (node, a, c) -> row entry (k_i(n), a), column (k_j(n), c)
                N = len(self.node_local)
                entry = np.repeat((self.node_local[:, i, None] * A_i + np.arange(A_i)[None]).ravel(), A_j)
                c = np.tile(np.arange(A_j), N * A_i)
                out[("B", i, j)] = self._compose(
                    R, entry, col[np.repeat(self.node_local[:, j], A_i * A_j), c], D_j
                )
        return out

    # ----- memory -----
    def bytes_per_policy(self, jacobian: bool) -> int:
        """Estimated peak working memory of one policy's evaluation (bytes)."""
        A = int(self.ja.shape[0])
        n_nodes = int(sum(self.sizes))
        amax = max(self.n_actions)
        floats = 8 * n_nodes * A + 4 * n_nodes * self.n * amax + 4 * sum(self.K) * amax
        if jacobian:
            floats += 6 * self.D * self.D + 2 * self.D * max(self.K)
            floats += 4 * self.n_pairs * amax * self.n + 3 * n_nodes * amax * amax * self.n
        return 8 * floats

    def chunk_size(self, jacobian: bool, budget: int) -> int:
        """Policies per chunk under ``budget`` bytes; raises :class:`MemoryBudgetError` if not even one fits."""
        per = self.bytes_per_policy(jacobian)
        if per > budget:
            what = "the logit map and its Jacobian" if jacobian else "the logit map"
            raise MemoryBudgetError(
                f"{self.tree.game.name} H={self.tree.game.horizon}: one evaluation of {what} needs about "
                f"{format_bytes(per)} (D = {self.D} coordinates, {sum(self.sizes):,} joint nodes, "
                f"{self.n_pairs:,} ancestor pairs); the memory budget is {format_bytes(budget)}. Raise "
                f"memory_budget_bytes (--memory-budget) or lower the horizon."
            )
        return max(1, budget // per)

    # ----- evaluation -----
    def evaluate(
        self, y: np.ndarray, alpha: float, jacobian: bool = True, budget: int = DEFAULT_MEMORY_BUDGET
    ) -> LogitEvaluation:
        """M(y) [P, D], DM(y) [P, D, D] (when ``jacobian``) and J [P] for y [P, D], in chunks."""
        y = np.atleast_2d(np.asarray(y, dtype=np.float64))
        P = y.shape[0]
        step = self.chunk_size(jacobian, budget)
        vals = np.empty((P, self.D))
        jac = np.empty((P, self.D, self.D)) if jacobian else None
        J = np.empty(P)
        for lo in range(0, P, step):
            m, dm, j = self._run(y[lo : lo + step].T, alpha, jacobian, None)
            vals[lo : lo + step] = m.T
            J[lo : lo + step] = j
            if jacobian:
                assert jac is not None
                jac[lo : lo + step] = dm.transpose(2, 0, 1)
        return LogitEvaluation(vals, jac, J)

    def enclose(
        self, lo: np.ndarray, hi: np.ndarray, alpha: float, jacobian: bool = True
    ) -> tuple[IArray, IArray | None]:
        """Interval enclosures of M and DM over the box [lo, hi] (one box; vectors [D]):
        (M [D, 1], DM [D, D, 1]), rigorous up to the libm accuracy assumption of ``interval_array``."""
        box = IArray(np.asarray(lo, float)[:, None], np.asarray(hi, float)[:, None])
        m, dm, _ = self._run(box, alpha, jacobian, self._interval_chance)
        return IArray.lift(m), (IArray.lift(dm) if jacobian else None)

    @cached_property
    def _interval_chance(self) -> tuple[list[IArray], list[IArray]]:
        """Enclosures of the chance-weighted rewards [N_t, A] and chance probabilities [N_t] (b_0 T U)."""
        game, tree = self.tree.game, self.tree
        T, U, R = game.transition, game.observation, game.reward
        er = (IArray(T) * IArray(R)).sum(axis=2)  # [S, A]
        S = game.n_states
        weights = [IArray(game.initial_belief[None, :])]
        for t in range(1, self.H):
            layer, prev = tree.layers[t], weights[-1]
            parts = []
            chunk = max(1, 2_000_000 // max(1, S * S))
            for lo in range(0, len(layer), chunk):
                par = layer.parent[lo : lo + chunk]
                act = layer.action[lo : lo + chunk]
                obs = layer.observation[lo : lo + chunk]
                w = (prev[par].reshape(len(par), S, 1) * T[:, act, :].transpose(1, 0, 2)).sum(axis=1)
                parts.append(w * U[act, :, obs])
            weights.append(concat(parts, axis=0))
        rewards, prob = [], []
        for w in weights:
            N = w.shape[0]
            rewards.append((w.reshape(N, S, 1) * er.reshape(1, S, -1)).sum(axis=1))
            prob.append(w.sum(axis=1))
        return rewards, prob

    def _contract(self, g: Any, act: Sequence[Any], keep: Sequence[int]) -> Any:
        """sum over the agents not in ``keep`` of their probabilities times g [N, A, P]; axes of ``keep``
        in the order given.  # [N, A_keep..., P]"""
        N, P = g.shape[0], g.shape[-1]
        n, na = self.n, self.n_actions
        m = g.reshape(N, *na, P)
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

    def _run(self, yT: Any, alpha: float, jacobian: bool, chance: Any) -> tuple[Any, Any, Any]:
        """One chunk: yT [D, P] floats or an IArray. Returns (M [D, P], DM [D, D, P] | None, J [P])."""
        tree, n, na = self.tree, self.n, self.n_actions
        interval = isinstance(yT, IArray)
        P = yT.shape[1]
        rewards, prob = (chance() if callable(chance) else chance) if interval else (self.rewards, self.prob)
        # ----- policies: logits, log-softmax -----
        pi, logpi = [], []
        offset = 0
        for hist, (k, a, _) in zip(tree.local, self.index):
            legal = hist.legal
            base = np.where(legal, 0.0, -np.inf)[:, :, None]
            if interval:
                zlo = np.repeat(base, P, axis=2)
                zhi = zlo.copy()
                zlo[k, a] = yT.lo[offset : offset + len(k)]
                zhi[k, a] = yT.hi[offset : offset + len(k)]
                z = IArray(zlo, zhi)
                shift = zhi.max(axis=1, keepdims=True)
                lse = log((z - shift).exp().sum(axis=1, keepdims=True)) + shift
                lp = z - lse
                p = lp.exp()
                p = IArray(np.where(legal[:, :, None], p.lo, 0.0), np.where(legal[:, :, None], p.hi, 0.0))
            else:
                zf = np.repeat(base, P, axis=2)
                zf[k, a] = yT[offset : offset + len(k)]
                zmax = zf.max(axis=1, keepdims=True)
                lp = zf - (zmax + np.log(np.exp(zf - zmax).sum(axis=1, keepdims=True)))
                p = np.exp(lp)
            offset += len(k)
            pi.append(p)  # [K_j, A_j, P]
            logpi.append(lp)
        # ----- forward -----
        act: list[list[Any]] = []
        logpath: list[list[Any]] = []
        for t, layer in enumerate(tree.layers):
            act.append([pi[j][layer.local[:, j]] for j in range(n)])  # [N_t, A_j, P]
            if t == 0:
                logpath.append([np.zeros((1, P)) for _ in range(n)])
                continue
            prev = tree.layers[t - 1]
            par = layer.parent
            a_loc = self.ja[layer.action]
            logpath.append(
                [logpath[t - 1][j][par] + logpi[j][prev.local[par, j], a_loc[:, j]] for j in range(n)]
            )
        # ----- backward -----
        jp: list[Any] = [None] * self.H
        G: list[Any] = [None] * self.H
        V: list[Any] = [None] * self.H
        nxt = None
        for t in reversed(range(self.H)):
            N = self.sizes[t]
            r = rewards[t]
            if nxt is None:
                g = (
                    (r.reshape(N, -1, 1) * np.ones((1, 1, P)))
                    if interval
                    else np.repeat(r[:, :, None], P, axis=2)
                )
            else:
                cont = spmm(tree.child_matrix(t), nxt).reshape(N, -1, P)
                g = r.reshape(N, -1, 1) + self.gamma * cont if interval else r[:, :, None] + self.gamma * cont
            p_joint = act[t][0][:, self.ja[:, 0]]
            for j in range(1, n):
                p_joint = p_joint * act[t][j][:, self.ja[:, j]]
            jp[t], G[t] = p_joint, g
            V[t] = (p_joint * g).sum(axis=1)  # [N_t, P]
            nxt = V[t]
        J = V[0][0]
        # ----- local Q as num / den, with p^{-i} rescaled per local history -----
        values = []
        keep: dict[str, list[list[Any]]] = {
            "w": [],
            "gbar": [],
            "numn": [],
            "denn": [],
            "logpm": [],
            "shift": [],
        }
        num_all, den_all = [], []
        for i in range(n):
            w_l, gbar_l, numn_l, denn_l, lpm_l, sh_l, nums, dens = [], [], [], [], [], [], [], []
            for t in range(len(tree.layers)):
                N = self.sizes[t]
                lpm = np.zeros((N, P))
                for j in range(n):
                    if j != i:
                        lpm = lpm + logpath[t][j]
                rel, order, starts = self.groups[t][i]
                top = lpm.hi if isinstance(lpm, IArray) else lpm
                shift = _segment_max(top, order, starts)  # [K_t, P] (a constant)
                w = exp(lpm - shift[rel])
                gbar = self._contract(G[t], act[t], [i])  # [N_t, A_i, P]
                numn = w.reshape(N, 1, P) * gbar
                pr = prob[t].reshape(N, 1) if interval else prob[t][:, None]
                denn = w * pr
                L = tree.local_matrix(t, i)
                nums.append(spmm(L, numn.reshape(N, -1)).reshape(L.shape[0], na[i], P))
                dens.append(spmm(L, denn))
                w_l.append(w)
                gbar_l.append(gbar)
                numn_l.append(numn)
                denn_l.append(denn)
                lpm_l.append(lpm)
                sh_l.append(shift)
            for key, lst in zip(keep, (w_l, gbar_l, numn_l, denn_l, lpm_l, sh_l)):
                keep[key].append(lst)
            num, den = concat(nums, axis=0), concat(dens, axis=0)  # [K_i, A_i, P], [K_i, P]
            num_all.append(num)
            den_all.append(den)
            k, a, r = self.index[i]
            values.append((num[k, a] - num[k, r]) / den[k] / alpha)  # [D_i, P]
        M = concat(values, axis=0)
        if not jacobian:
            return M, None, J
        DM = self._jacobian(alpha, P, pi, act, jp, G, V, keep, num_all, den_all, interval)
        return M, DM, J

    def _jacobian(
        self,
        alpha: float,
        P: int,
        pi: list,
        act: list,
        jp: list,
        G: list,
        V: list,
        keep: dict[str, list[list[Any]]],
        num_all: list,
        den_all: list,
        interval: bool,
    ) -> Any:
        tree, n, na, K = self.tree, self.n, self.n_actions, self.K
        H = self.H
        mats = self._mats
        # S^j_m[c] = pi^j(c|m) (Gbar^j_m[c] - V_m), per layer; concatenated over the pairs' descendants
        S = [
            [act[t][j] * (keep["gbar"][j][t] - V[t].reshape(self.sizes[t], 1, P)) for t in range(H)]
            for j in range(n)
        ]

        def by_pairs(per_layer: list[Any]) -> Any:
            """Concatenate a per-layer node array along the pairs (t, d, node) order."""
            return concat([per_layer[t] for t in range(1, H) for _ in range(1, t + 1)], axis=0)

        pi_sel = []  # pi^j(c | sigma) at each coordinate (sigma, c) of agent j  # [D_j, P]
        for j, (k, a, _) in enumerate(self.index):
            pi_sel.append(pi[j][k, a])
        blocks: list[list[Any]] = [[None] * n for _ in range(n)]
        for i in range(n):
            k_i, a_i, r_i = self.index[i]
            D_i = len(k_i)
            num, den = num_all[i], den_all[i]
            gap0 = (num[k_i, a_i] - num[k_i, r_i]) / den[k_i]  # [D_i, P]
            if self.n_pairs:
                # X^i(anc -> desc) for every pair, rescaled by the ancestor's local-history shift
                X: list[Any] = []
                x_prev: list[Any] = []  # per depth d at layer t - 1
                for t in range(1, H):
                    layer = tree.layers[t]
                    par = layer.parent
                    rel_prev = self.groups[t - 1][i][0]
                    x1 = exp(keep["logpm"][i][t] - keep["shift"][i][t - 1][rel_prev[par]])
                    edge = jp[t - 1][par, layer.action]  # [N_t, P]
                    x_t = [x1] + [x_prev[d - 1][par] * edge for d in range(1, t)]
                    X += x_t
                    x_prev = x_t
                Xg = concat(X, axis=0) * self.pair_gamma[:, None]  # [n_pairs, P]
                numn_pairs = by_pairs(keep["numn"][i]).reshape(self.n_pairs * na[i], P)
                denn_pairs = by_pairs(keep["denn"][i])  # [n_pairs, P]
            for j in range(n):
                k_j = self.index[j][0]
                D_j = len(k_j)
                if D_i == 0 or D_j == 0:
                    blocks[i][j] = np.zeros((D_i, D_j, P))
                    continue
                out: Any = np.zeros((D_i * D_j, P))
                if self.n_pairs:
                    vals = Xg.reshape(self.n_pairs, 1, P) * by_pairs(S[j])  # [n_pairs, A_j, P]
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
                    parts = []
                    for t in range(H):
                        N = self.sizes[t]
                        gij = self._contract(G[t], act[t], [i, j])  # [N, A_i, A_j, P]
                        gi = keep["gbar"][i][t].reshape(N, na[i], 1, P)
                        w = keep["w"][i][t].reshape(N, 1, 1, P)
                        parts.append(w * act[t][j].reshape(N, 1, na[j], P) * (gij - gi))
                    vb = concat(parts, axis=0)
                    out = out + spmm(mats[("B", i, j)], vb.reshape(vb.shape[0] * na[i] * na[j], P))
                out = out.reshape(D_i, D_j, P)
                if dd is not None:
                    out = out - gap0.reshape(D_i, 1, P) * dd
                blocks[i][j] = out / den[k_i].reshape(D_i, 1, P) / alpha
        rows = [concat(blocks[i], axis=1) for i in range(n)]
        return concat(rows, axis=0)  # [D, D, P]
