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
num / den does not change), so Q stays finite where the plain product would underflow; on intervals relative
to a pivot node, with the factors it shares cancelled (:mod:`~ers_exact.solve.reach`).

The same code runs on :class:`~ers_exact.solve.interval_array.IArray` boxes, which gives the interval
enclosures of M and DM over a box that the Krawczyk test needs (chance weights and rewards enclosed too).

The index structure this evaluator needs (coordinates, ancestor pairs, flat node index, the composed scatter
matrices of (A), (B), (C), memory estimates) is built once per tree by
:class:`~ers_exact.solve.logit_structure.LogitStructure`; DM from the pass by its subclass
:class:`~ers_exact.solve.logit_jacobian.LogitJacobian`, which :class:`LogitDerivatives` derives from.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.config import DEFAULT_MEMORY_BUDGET
from ers_exact.solve.interval_array import IArray, concat, exp, log, spmm
from ers_exact.solve.logit_jacobian import LogitJacobian
from ers_exact.solve.logit_structure import MemoryBudgetError, coordinate_index
from ers_exact.solve.reach import hull_of_ratios, own_log_softmax, reference_difference

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "LogitDerivatives",
    "LogitEvaluation",
    "MemoryBudgetError",
    "coordinate_index",
]


@dataclass(frozen=True)
class LogitEvaluation:
    """M(y), optionally DM(y), and J(pi(y)) for a batch."""

    values: np.ndarray  # [P, D] M(y) (an IArray [D, P] in interval mode, see LogitDerivatives.enclose)
    jacobian: np.ndarray | None  # [P, D, D] DM(y)
    J: np.ndarray  # [P] expected return of pi(y)


def _segment_max(x: np.ndarray, order: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Max of rows of ``x`` [N, P] grouped by local history (groups given by a sort order and starts)."""
    return np.maximum.reduceat(x[order], starts, axis=0)


class LogitDerivatives(LogitJacobian):
    """Evaluator of M, DM and J over batches of policies on the pre-built index structure of a tree (build once
    per tree; see module doc)."""

    def __init__(self, tree: HistoryTree) -> None:
        super().__init__(tree)
        self._last: tuple[Any, Any] | None = None  # the last single float policy's pass (see _run)

    # ----- evaluation -----
    def evaluate(
        self, y: np.ndarray, alpha: float, jacobian: bool = True, budget: int = DEFAULT_MEMORY_BUDGET
    ) -> LogitEvaluation:
        """M(y) [P, D], DM(y) [P, D, D] (when ``jacobian``) and J [P] for y [P, D], in chunks."""
        y = np.atleast_2d(np.asarray(y, dtype=np.float64))
        P = y.shape[0]
        step = self.chunk_size(jacobian, budget)
        if step >= P:  # one chunk (the common case)
            m, dm, j = self._run(y.T, alpha, jacobian, None)
            jac1 = np.ascontiguousarray(dm.transpose(2, 0, 1)) if jacobian else None
            return LogitEvaluation(np.ascontiguousarray(m.T), jac1, j)
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
        """Interval enclosures of M and DM over the box [lo, hi] (vectors [D], or [D, P] for P boxes in one
        batched pass): (M [D, P], DM [D, D, P]), rigorous up to the libm accuracy assumption of
        ``interval_array``."""
        lo, hi = np.asarray(lo, float), np.asarray(hi, float)
        box = IArray(lo.reshape(len(lo), -1), hi.reshape(len(hi), -1))
        m, dm, _ = self._run(box, alpha, jacobian, self.interval_chance)
        return IArray.lift(m), (IArray.lift(dm) if jacobian else None)

    @cached_property
    def interval_chance(self) -> tuple[list[IArray], list[IArray]]:
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
        A = er.shape[1]
        chunk = max(1, 2_000_000 // max(1, S * A))  # [chunk, S, A] interval products at a time (Mars: 2.4 GB)
        for w in weights:
            N = w.shape[0]
            parts = [
                (w[lo : lo + chunk].reshape(-1, S, 1) * er.reshape(1, S, A)).sum(axis=1)
                for lo in range(0, N, chunk)
            ]
            rewards.append(concat(parts, axis=0))
            prob.append(w.sum(axis=1))
        return rewards, prob

    def _run(self, yT: Any, alpha: float, jacobian: bool, chance: Any) -> tuple[Any, Any, Any]:
        """One chunk: yT [D, P] floats or an IArray. Returns (M [D, P], DM [D, D, P] | None, J [P]).

        The forward and backward pass of the last single float policy is kept: a path follower asks for DM
        at the point whose M it has just checked, and then only the Jacobian's own pass runs."""
        n, flat = self.n, self.flat
        interval = isinstance(yT, IArray)
        P = yT.shape[1]
        cache_key = None if interval or P != 1 else (float(alpha), np.asarray(yT, dtype=np.float64).tobytes())
        if jacobian and cache_key is not None and self._last is not None and self._last[0] == cache_key:
            M_last, J_last, state = self._last[1]
            return M_last.copy(), self._jacobian(alpha, P, *state), J_last.copy()
        if interval:
            rewards, prob_t = chance() if callable(chance) else chance
            prob = concat(prob_t, axis=0)
        else:
            rewards, prob = self.rewards, flat["prob"]
        pi, logpi = self._policies(yT, P, interval)
        # ----- forward, all nodes at once: each agent's action probabilities and log path probability -----
        act = [pi[j][self.node_local[:, j]] for j in range(n)]  # [N, A_j, P]
        logpath = [spmm(flat["path"][j], logpi[j].reshape(-1, P)) for j in range(n)]  # [N, P]
        p_joint = act[0][:, self.ja[:, 0]]
        for j in range(1, n):
            p_joint = p_joint * act[j][:, self.ja[:, j]]  # [N, A, P]
        G_all, V_all, J = self._backward(p_joint, rewards, P, interval)
        M, keep, gap_all, den_all = self._gaps(alpha, P, logpi, logpath, act, G_all, prob, interval)
        state = (pi, act, p_joint, G_all, V_all, keep, gap_all, den_all, bool(interval))
        if cache_key is not None:
            self._last = (cache_key, (M.copy(), np.array(J, copy=True), state))
        if not jacobian:
            return M, None, J
        return M, self._jacobian(alpha, P, *state), J

    def _policies(self, yT: Any, P: int, interval: bool) -> tuple[list[Any], list[Any]]:
        """The policies of the logits yT: per agent pi and log pi [K_j, A_j, P] (the log-softmax of the logits,
        the reference action's logit 0, illegal actions at the base's -inf)."""
        pi: list[Any] = []
        logpi: list[Any] = []
        offset = 0
        for hist, (k, a, _) in zip(self.tree.local, self.index):
            base = self.base[len(pi)]
            if interval:
                p, lp = _interval_log_softmax(
                    base,
                    k,
                    a,
                    yT.lo[offset : offset + len(k)],
                    yT.hi[offset : offset + len(k)],
                    hist.legal,
                    P,
                )
            else:
                zf = np.repeat(base, P, axis=2)
                zf[k, a] = yT[offset : offset + len(k)]
                zmax = zf.max(axis=1, keepdims=True)
                lp = zf - (zmax + np.log(np.exp(zf - zmax).sum(axis=1, keepdims=True)))
                p = np.exp(lp)
            offset += len(k)
            pi.append(p)
            logpi.append(lp)
        return pi, logpi

    def _backward(self, p_joint: Any, rewards: Any, P: int, interval: bool) -> tuple[Any, Any, Any]:
        """Layer by layer from the last: G [N, A, P] (the reward-to-go after each joint action), V [N, P] over
        the flat nodes, and J [P] = V at the root."""
        bounds = self.flat["bounds"]
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
                cont = spmm(self.child[t], nxt).reshape(N, -1, P)
                g = r.reshape(N, -1, 1) + self.gamma * cont if interval else r[:, :, None] + self.gamma * cont
            G[t] = g
            V[t] = (p_joint[bounds[t] : bounds[t + 1]] * g).sum(axis=1)
            nxt = V[t]
        return concat(G, axis=0), concat(V, axis=0), V[0][0]

    def _gaps(
        self,
        alpha: float,
        P: int,
        logpi: list[Any],
        logpath: list[Any],
        act: list[Any],
        G_all: Any,
        prob: Any,
        interval: bool,
    ) -> tuple[Any, dict[str, list[Any]], list[Any], list[Any]]:
        """M [D, P]: per agent the local Q gaps num / den / alpha, with p^{-i} rescaled per local history; and
        what the Jacobian reuses (``keep``: weights, contractions, node terms; the gaps and denominators)."""
        n, na, flat = self.n, self.n_actions, self.flat
        values = []
        keep: dict[str, list[Any]] = {
            k: [] for k in ("w", "gbar", "numn", "denn", "logpm", "shift", "gi", "lastf")
        }
        gap_all, den_all = [], []
        N_all = len(self.node_local)
        if interval:  # reach relative to a pivot node of each history, shared factors cancelled (reach.py)
            facs = [self.reach.last_factor(j, logpi[j]) for j in range(n)]
            suffixes = [self.reach.suffix(j, facs[j]) for j in range(n)]
        for i in range(n):
            others = [logpath[j] for j in range(n) if j != i]
            lpm: Any = others[0] if others else np.zeros((N_all, P))
            for x in others[1:]:
                lpm = lpm + x
            order, starts, group = flat["order"][i], flat["starts"][i], flat["group"][i]
            top = lpm.hi if isinstance(lpm, IArray) else lpm
            shift = _segment_max(top, order, starts)[group]  # [N, P]
            gbar = self._contract(G_all, act, [i])  # [N, A_i, P]
            k, a, r = self.index[i]
            # intervals: relative log weights; gi = Gbar(a) - Gbar(r), so pi^{-i} enters num(a) - num(r) once
            if interval:
                lw = self.reach.log_weights(i, lpm - shift, top, suffixes, order, starts, group)
                gi = self._contract(reference_difference(G_all, i, na, self.reference[i]), act, [i])
                keep["logpm"].append(lw)
                keep["lastf"].append(self.reach.others_last(i, facs))
            else:
                lw, gi = lpm - shift, gbar
                keep["logpm"].append(lpm)
                keep["shift"].append(shift)
            w = exp(lw)
            numn = w.reshape(N_all, 1, P) * gi
            denn = w * prob.reshape(N_all, 1)
            both = spmm(flat["proj"][i], concat([numn.reshape(N_all, -1), denn], axis=1))  # one projection
            num = both[:, : na[i] * P].reshape(self.K[i], na[i], P)
            den = both[:, na[i] * P :]  # [K_i, P]
            for name, x in zip(("w", "gbar", "numn", "denn", "gi"), (w, gbar, numn, denn, gi)):
                keep[name].append(x)
            if interval:  # num holds num(a) - num(r) already; the gap is also in the hull of gi_n / c(n)
                gap = num[k, a] / den[k]
                hull = hull_of_ratios(gi, prob, order, starts)[self.coord_group[i], a]
                gap = IArray(np.maximum(gap.lo, hull.lo), np.minimum(gap.hi, hull.hi))
            else:
                gap = (num[k, a] - num[k, r]) / den[k]  # [D_i, P]
            gap_all.append(gap)
            den_all.append(den)
            values.append(gap / alpha)
        return concat(values, axis=0), keep, gap_all, den_all


def _interval_log_softmax(
    base: np.ndarray,
    k: np.ndarray,
    a: np.ndarray,
    ylo: np.ndarray,
    yhi: np.ndarray,
    legal: np.ndarray,
    P: int,
) -> tuple[IArray, IArray]:
    """One agent's pi and log pi [K, A, P] enclosed over a box of its logits [ylo, yhi] [D_j, P]."""
    zlo = np.repeat(base, P, axis=2)
    zhi = zlo.copy()
    zlo[k, a] = ylo
    zhi[k, a] = yhi
    z = IArray(zlo, zhi)
    shift = zhi.max(axis=1, keepdims=True)
    terms = (z - shift).exp()
    tot = terms.sum(axis=1, keepdims=True)  # >= its largest term (all >= 0), kept above 0
    tot = IArray(np.maximum(tot.lo, terms.lo.max(axis=1, keepdims=True)), tot.hi)
    lse = log(tot) + shift
    # lse >= max_b z_b >= max_b zlo_b exactly: a floor where the sum's lower end underflows to 0
    # on a wide box (log 0 = -inf, and then -inf - -inf at the illegal actions)
    lse = IArray(np.maximum(lse.lo, zlo.max(axis=1, keepdims=True)), lse.hi)
    lp = own_log_softmax(z - lse, zlo, zhi, legal)
    p = lp.exp()
    p = IArray(
        np.where(legal[:, :, None], p.lo, 0.0),
        np.where(legal[:, :, None], np.minimum(p.hi, 1.0), 0.0),  # a probability is <= 1
    )
    return p, lp
