"""J(pi) and dJ / d pi of a two-agent game in sequence form (von Stengel 1996; Koller, Megiddo & von Stengel
1996): one sparse matrix product per batch instead of a forward and a backward pass over the joint history
tree (:mod:`ers_exact.model.values` keeps that pass as the reference and for any number of agents).

A sequence of agent i is s = (tau, a), index tau * |A^i| + a; its realization weight rho_i(s) is the product
of agent i's own probabilities along tau times pi^i(a | tau), and rho_i^pre(tau) the weight of tau's parent
sequence (1 at the empty history). J is bilinear in the realization weights,

    J(pi) = rho_1^T W rho_2,   W[s_1, s_2] = sum_t gamma^t sum_{n = (tau_1, tau_2) at t} R_t[n, (a_1, a_2)],

with R_t[n, a] = sum_s w_n(s) E[r | s, a] the chance-weighted expected reward at joint node n. Every entry
of pi treated as a free variable (J is multilinear in them),

    dJ / d pi^1(a | tau) = rho_1^pre(tau) num_1(tau, a),   num_1 = Desc_1 (W rho_2),

where Desc_1 sums a sequence's value with its descendants' weighted by agent 1's probabilities strictly
below it: num(tau, a) = u(tau, a) + sum_o sum_b pi^1(b | tau a o) num(tau a o, b), one sparse product per
stage (and the same for agent 2 with W^T rho_1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ers_exact.model.histories import HistoryTree, check_tree
from ers_exact.util.sparse import SparseMatrix

__all__ = ["MAX_ENTRIES", "SequenceForm", "sequence_form"]


@dataclass(frozen=True, eq=False)
class _Agent:
    """One agent's sequences: where each history's parent sequence is, and the stages."""

    A: int  # |A^i|
    offsets: np.ndarray  # [H + 1] histories of stage t: [offsets[t], offsets[t+1])
    parent_seq: np.ndarray  # [K] the parent sequence of each history (0 at the root, never read there)
    legal: np.ndarray  # [K, A]
    to_parent: list[SparseMatrix]  # per t >= 1: [A K_{t-1}, K_t], 1 where a history follows a sequence


class SequenceForm:
    """W of a two-agent game and the per-agent sequence structure (build once per tree:
    :func:`sequence_form`)."""

    def __init__(self, tree: HistoryTree) -> None:
        game = tree.game
        if game.n_agents != 2:
            raise ValueError(f"the sequence form here is for two agents, {game.name} has {game.n_agents}")
        self.agents = [self._agent(tree, i) for i in range(2)]
        A1, A2 = game.n_actions
        ja = game.joint_actions
        rows, cols, data = [], [], []
        for t, layer in enumerate(tree.layers):
            R = (layer.weight @ game.expected_reward) * game.discount**t  # [N, A_joint]
            rows.append((layer.local[:, 0, None] * A1 + ja[None, :, 0]).ravel())
            cols.append((layer.local[:, 1, None] * A2 + ja[None, :, 1]).ravel())
            data.append(R.ravel())
        shape = (len(tree.local[0]) * A1, len(tree.local[1]) * A2)
        r, c, d = np.concatenate(rows), np.concatenate(cols), np.concatenate(data)
        self.W = SparseMatrix(d, r, c, shape)  # duplicates summed
        self.W_T = SparseMatrix(d, c, r, shape[::-1])
        k1 = np.concatenate([layer.local[:, 0] for layer in tree.layers])
        k2 = np.concatenate([layer.local[:, 1] for layer in tree.layers])
        prob = np.concatenate([layer.probability for layer in tree.layers])
        K1, K2 = len(tree.local[0]), len(tree.local[1])
        self.C = SparseMatrix(prob, k1, k2, (K1, K2))  # chance probability of each joint node (tau_1, tau_2)
        self.C_T = SparseMatrix(prob, k2, k1, (K2, K1))
        self.discount_at = [
            game.discount ** h.time.astype(np.float64) for h in tree.local
        ]  # gamma^t per history

    @staticmethod
    def _agent(tree: HistoryTree, i: int) -> _Agent:
        hist, A = tree.local[i], tree.game.n_actions[i]
        offsets = hist.offsets
        parent_seq = np.where(hist.parent >= 0, hist.parent * A + hist.action, 0)
        to_parent = []
        for t in range(1, len(offsets) - 1):
            lo, hi, plo = offsets[t], offsets[t + 1], offsets[t - 1]
            n_seq = (offsets[t] - plo) * A
            ones = np.ones(hi - lo)
            to_parent.append(
                SparseMatrix(ones, parent_seq[lo:hi] - plo * A, np.arange(hi - lo), (n_seq, hi - lo))
            )
        return _Agent(A, offsets, parent_seq, hist.legal, to_parent)

    @staticmethod
    def _realization(ag: _Agent, pol: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """rho^pre [K, P] and rho [K, A, P] of a batch pol [P, K, A] (sequence-major layout)."""
        P, K = pol.shape[0], pol.shape[1]
        piT = np.ascontiguousarray(pol.transpose(1, 2, 0))  # [K, A, P]
        pre = np.ones((K, P))
        rho = np.empty_like(piT)
        for t in range(len(ag.offsets) - 1):
            lo, hi = ag.offsets[t], ag.offsets[t + 1]
            if t > 0:
                pre[lo:hi] = rho.reshape(-1, P)[ag.parent_seq[lo:hi]]
            rho[lo:hi] = pre[lo:hi, None, :] * piT[lo:hi]
        return pre, rho

    def value(self, pols: tuple[np.ndarray, ...]) -> np.ndarray:
        """J of a batch (per agent [P, K_i, A_i]).  # [P]"""
        _, r1 = self._realization(self.agents[0], pols[0])
        _, r2 = self._realization(self.agents[1], pols[1])
        P = pols[0].shape[0]
        u1 = self.W.dot(r2.reshape(-1, P), finite=True)  # [S_1, P]
        return np.einsum("sp,sp->p", r1.reshape(-1, P), u1)

    def gradient(self, pols: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """dJ / d pi^i(a | tau) of a batch, every entry a free variable; 0 at illegal actions.  # per agent
        [P, K_i, A_i]"""
        return tuple(
            np.where(ag.legal[None], (pre[:, None, :] * num).transpose(2, 0, 1), 0.0)
            for ag, pre, num, _ in self._numerators(pols)
        )

    def local_q(self, pols: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """Q^i(tau, a) = num_i(tau, a) / (gamma^t den_i(tau)), den_i = C_i rho_other^pre (the chance-weighted
        probability of the other agent's actions into tau's joint nodes); NaN where den_i is 0 and at illegal
        actions, as :func:`ers_exact.model.values.local_q_values`.  # per agent [P, K_i, A_i]"""
        out = []
        for i, (ag, _, num, other_pre) in enumerate(self._numerators(pols)):
            den = (self.C, self.C_T)[i].dot(other_pre, finite=True)  # [K, P]
            scale = self.discount_at[i][:, None] * den
            with np.errstate(invalid="ignore", divide="ignore"):
                q = num / scale[:, None, :]
            q[np.broadcast_to((den <= 0)[:, None, :], q.shape)] = np.nan
            q[~ag.legal] = np.nan
            out.append(q.transpose(2, 0, 1))
        return tuple(out)

    def _numerators(
        self, pols: tuple[np.ndarray, ...]
    ) -> list[tuple[_Agent, np.ndarray, np.ndarray, np.ndarray]]:
        """Per agent i: (its sequences, rho_i^pre [K, P], num_i = Desc_i W_i rho_other [K, A, P], the other's
        rho^pre [K_o, P])."""
        P = pols[0].shape[0]
        pre1, r1 = self._realization(self.agents[0], pols[0])
        pre2, r2 = self._realization(self.agents[1], pols[1])
        out = []
        for ag, pol, pre, u, other_pre in (
            (self.agents[0], pols[0], pre1, self.W.dot(r2.reshape(-1, P), finite=True), pre2),
            (self.agents[1], pols[1], pre2, self.W_T.dot(r1.reshape(-1, P), finite=True), pre1),
        ):
            out.append((ag, pre, self._descendants(ag, pol, u.reshape(len(ag.legal), ag.A, P)), other_pre))
        return out

    @staticmethod
    def _descendants(ag: _Agent, pol: np.ndarray, u: np.ndarray) -> np.ndarray:
        """num = Desc u: each sequence's value plus its descendants', weighted by the agent's probabilities
        strictly below it; stage by stage from the last, in place.  # [K, A, P]"""
        P = u.shape[2]
        piT = pol.transpose(1, 2, 0)  # [K, A, P]
        for t in range(len(ag.offsets) - 2, 0, -1):
            lo, hi, plo = ag.offsets[t], ag.offsets[t + 1], ag.offsets[t - 1]
            v = (piT[lo:hi] * u[lo:hi]).sum(axis=1)  # [K_t, P] a history's value
            u[plo:lo] += ag.to_parent[t - 1].dot(v, finite=True).reshape(lo - plo, ag.A, P)
        return u


#: W's entries (joint nodes x joint actions) above which the tree pass is kept: building W sorts its
#: coordinates, a few times the memory of the tree pass's own [N, A] arrays for one policy
MAX_ENTRIES = 20_000_000


def sequence_form(tree: HistoryTree) -> SequenceForm | None:
    """The tree's sequence form when it is a two-agent game of at most :data:`MAX_ENTRIES` entries of W
    (built once per tree), else None. Also None when some gamma^t of the tree's histories is below the square
    root of the smallest normal float, ~1.5e-154 (gamma = 0, or a tiny gamma at depth): W carries gamma^t times
    a path's weight, and Q^i divides gamma^t out again, so there a weight far above the tree pass's own
    underflow (~1e-300) would reach subnormal floats and read as 0 (once: Q = [1, 0] for [1 - 1e-8, 1e-8] at
    gamma = 1e-150, H = 3); the tree pass has no such product."""
    check_tree(tree)
    if tree.game.n_agents != 2 or tree.n_joint_nodes * len(tree.game.joint_actions) > MAX_ENTRIES:
        return None
    deepest = max(int(h.time.max()) for h in tree.local if len(h.time))
    if tree.game.discount ** float(deepest) < np.sqrt(np.finfo(np.float64).tiny):
        return None
    return tree.derived("values.sequence_form", lambda: SequenceForm(tree))
