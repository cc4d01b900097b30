"""The logit map M(y) and its exact Jacobian DM(y) of a SMALL two-agent game in sequence form: a handful of
dense numpy products per evaluation, where :class:`~ers_exact.solve.derivatives.LogitDerivatives` (the
reference, any number of agents, any size, interval boxes too) walks the joint history tree with ~100 small
sparse operations.

Sequence form (von Stengel 1996; Koller, Megiddo & von Stengel 1996). A sequence of agent i is s = (tau, a),
a local history and an action there (index tau * A_i + a); its realization weight is
rho_i(s) = prod pi_i along tau's own actions, times pi_i(a | tau), and rho_i^pre(tau) = rho_i(parent sequence
of tau) (1 at the empty history). With o the other agent, the quantities of
:mod:`ers_exact.solve.derivatives` are, per agent,

    u_i = W_i rho_o                          immediate chance-weighted rewards  [S_i]
    num_i = Desc_i u_i,   Desc_i = sum_m N_i^m,   N_i[s, s'] = gamma pi_i(s') [s' is a child sequence of s]
    den_i = C_i rho_o^pre                    [K_i]
    M_(i, tau, a) = (num_i(tau, a) - num_i(tau, r)) / den_i(tau) / alpha,     J = sum_a pi_1(a | root) num_1(root, a)

where W_1[s_1, s_2] = R[n, (a_1, a_2)] and C_1[tau_1, tau_2] = c(n) sum over the joint nodes n = (tau_1, tau_2)
(W_2, C_2 the transposes). N_i is nilpotent (N^H = 0), so Desc_i applies as H - 1 products. The Jacobian:

* own block: d num_i(s) / d y_(i, sigma, c) = Rel_i[s, sigma] pi_i(c | sigma) (num_i(sigma, c) - V_i(sigma)),
  Rel_i = gamma Desc_i E_i (E_i[s, sigma] = 1 where s is sigma's parent sequence), V_i(sigma) = sum_b pi num_i;
* cross block: d rho_o(s) / d y_(o, sigma, c) = rho_o(s) T_o[s, (sigma, c)],
  T_o = [(sigma, c) on the path of s] - [sigma on the path of s] pi_o(c | sigma), so
  d num_i = Desc_i W_i (rho_o T_o) and d den_i = C_i (rho_o^pre T_o^pre) (T_o^pre: T_o of the parent sequence);

and d M = ((d num(a) - d num(r)) - alpha M d den) / (den alpha). Products of probabilities are not rescaled
(the reference carries p^{-i} in logs): a policy whose den falls below :data:`TINY` (or any non-finite
value) is re-evaluated by the reference path, so the result never depends on underflow.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.dense_blocks import GROUPED_FROM, agent_blocks, dense_jacobian, own_pairs

__all__ = [
    "GROUPED_FROM",
    "MAX_DENSE_BYTES",
    "NEG",
    "TINY",
    "DenseLogitMap",
    "dense_logit_map",
    "dense_structure_bytes",
]

#: the dense path is built for two-agent games whose arrays (:func:`dense_structure_bytes`) take at most this
MAX_DENSE_BYTES = 400 * 2**20
#: a denominator below this (the probability of an agent's own observations, < 1e-250) goes to the reference
TINY = 1e-250


def dense_logit_map(tree: HistoryTree, max_bytes: int = MAX_DENSE_BYTES) -> DenseLogitMap | None:
    """The dense evaluator of ``tree`` when it is a two-agent game whose arrays (:func:`dense_structure_bytes`)
    take at most ``max_bytes`` (else None: the reference)."""
    size = dense_structure_bytes(tree)
    if size is None or size > max_bytes:
        return None
    return DenseLogitMap(tree)


def dense_structure_bytes(tree: HistoryTree) -> int | None:
    """Estimated bytes of the arrays a :class:`DenseLogitMap` of ``tree`` holds (None: not a two-agent game):
    the [S, S] matrices of both agents' S stacked sequences, and per agent the Jacobian's cross-block groups
    (the other agent's coordinates of a stage against the sequences below each)."""
    game = tree.game
    if game.n_agents != 2:
        return None
    A, H = int(max(game.n_actions)), len(tree.layers)
    K = [len(h) for h in tree.local]
    S, Kt = A * sum(K), sum(K)
    Dk = [int((h.legal.sum(axis=1) - 1).sum()) for h in tree.local]
    D = sum(Dk)
    floats = 4 * S * S + S * (S + Kt) + 3 * S * Kt + D * S  # anc, B, W, W_cpre, gE, cpre, Rg_T
    if H == 2:
        floats += 4 * S * D + D * D + D * S  # act, hist, Rg, rel_k, [W; C_k]
    for i, o in ((0, 1), (1, 0)):
        hist = tree.local[o]
        desc = np.ones(K[o], dtype=np.int64)  # histories in each subtree (itself included)
        for t in range(H - 1, 0, -1):
            at = np.flatnonzero(hist.time == t)
            np.add.at(desc, hist.parent[at], desc[at])
        coords = hist.legal.sum(axis=1) - 1
        for t in range(H):
            at = hist.time == t
            L = A * int(desc[at].max(initial=0))
            floats += int(coords[at].sum()) * L * (A * K[i] + Dk[i] + 3)  # W, C columns; idx, act, hist
        floats += A * K[i] * A * K[o] + Dk[i] * A * K[o] + 2 * A * K[o] * Dk[o]  # W_i, C_i, act, hist
    return 8 * floats


#: the logit of an illegal (or padding) action: exp underflows to exactly 0, and 0 x NEG stays finite in products
NEG = -1e30


class DenseLogitMap:
    """M, DM and J of a two-agent game from dense sequence-form arrays (module docstring), batched [P, ...].

    Both agents are stacked: histories k of agent i become kg = offset_i + k (agent 1 first), sequences
    kg * A + a with A the larger action count (padding actions are illegal), so that one product serves both
    agents: W and C become the symmetric block matrices [[0, W_1], [W_2, 0]], Desc, E and the path matrices
    block diagonal."""

    def __init__(self, tree: HistoryTree) -> None:
        game = tree.game
        self.tree, self.gamma, self.H = tree, float(game.discount), len(tree.layers)
        self._buffers: dict[str, np.ndarray] = {}
        self.A = int(max(game.n_actions))
        glob, stage, place = self._stack(tree)
        par = self._coordinates(tree, glob)
        anc, hpath = self._paths(par)
        Rg = self._sequence_matrices(par, anc)
        self._rewards_and_chance(tree, glob, par)
        stage_of = np.empty(self.K, dtype=np.int64)
        stage_of[place] = stage
        self.sides = agent_blocks(self, list(glob), stage_of, anc, hpath)  # the Jacobian's cross blocks
        self.own = own_pairs(self, par)  # and its own blocks' entries
        if self.H == 2:
            self._two_stage(Rg, anc, hpath)

    def _stack(self, tree: HistoryTree) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, np.ndarray]:
        """Both agents' histories stacked in time-major order (stage, agent, history), so that a stage's
        sequences are contiguous: (agent i's history k -> stacked index kg, per agent; the stage of each history,
        agent 1's first; the stacked place of each). Sets K, S = K A and the stages' bounds."""
        K = [len(h) for h in tree.local]
        Kt = self.K = K[0] + K[1]
        stage = np.concatenate([h.time for h in tree.local])
        order = np.lexsort((np.arange(Kt), stage))
        place = np.empty(Kt, dtype=np.int64)
        place[order] = np.arange(Kt)
        glob = (place[: K[0]], place[K[0] :])  # agent i's history k -> stacked index
        self.stage_bounds = np.searchsorted(stage[order], np.arange(self.H + 1))  # stage t: [b_t, b_t+1)
        self.S = Kt * self.A
        return glob, stage, place

    def _coordinates(self, tree: HistoryTree, glob: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """The logit coordinates y_(i, tau, a) on the stacked sequences (every legal a but tau's reference action
        r): sets ``base`` (0 on legal, NEG on illegal and padding actions), ``pos``, ``seq_r``, ``kglob``, D and
        D1 (agent 1's coordinates); returns each history's parent sequence (S, a constant 1 appended to rho,
        at the roots)."""
        A, S = self.A, self.S
        base = np.full((self.K, A), NEG)
        par = np.full(
            self.K, S
        )  # each history's parent sequence; S (a constant 1 appended to rho) at the roots
        pos, seq_r, kglob = [], [], []
        for i, hist in enumerate(tree.local):
            kg = glob[i]
            base[kg, : hist.legal.shape[1]] = np.where(hist.legal, 0.0, NEG)
            nonroot = hist.parent >= 0
            par[kg[nonroot]] = kg[hist.parent[nonroot]] * A + hist.action[nonroot]
            ref = np.argmax(hist.legal, axis=1)
            k, a = np.nonzero(hist.legal)
            keep = a != ref[k]
            k, a = k[keep], a[keep]
            pos.append(kg[k] * A + a)
            seq_r.append(kg[k] * A + ref[k])
            kglob.append(kg[k])
        self.base = base.ravel()
        self.pos = np.concatenate(pos)  # [D] sequence (kg, a) of each coordinate, = its place in z
        self.seq_r = np.concatenate(seq_r)  # [D] sequence of the coordinate's reference action
        self.kglob = np.concatenate(kglob)  # [D] stacked history of each coordinate
        self.D = len(self.pos)
        self.D1 = len(pos[0])
        return par

    def _paths(self, par: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The path matrices: anc [S, S] (sequence s' on the path of s, s itself included) and hpath [S, K]
        (history on the path of s): rows of a history's sequences are the identity plus the parent sequence's
        row (parents come first)."""
        A, S, Kt = self.A, self.S, self.K
        anc, hpath = np.eye(S), np.zeros((S, Kt))
        for h in range(Kt):
            rows = slice(h * A, (h + 1) * A)
            hpath[rows, h] = 1.0
            if par[h] < S:
                anc[rows] += anc[par[h]]
                hpath[rows] += hpath[par[h]]
        return anc, hpath

    def _sequence_matrices(self, par: np.ndarray, anc: np.ndarray) -> np.ndarray:
        """log rho = log pi anc^T, gamma E (E[s, sigma] = 1 where s is sigma's parent sequence), the child
        sequences B = gamma E expanded to sequences (num = u + (pi num) B^T per stage) and the gaps' rows
        Rg = (a) - (r) [D, S] (returned; ``Rg_T`` kept)."""
        A, S, Kt, D = self.A, self.S, self.K, self.D
        self.anc_T = np.ascontiguousarray(anc.T)  # log rho = log pi @ anc_T
        E = np.zeros((S, Kt))
        E[par[par < S], np.flatnonzero(par < S)] = 1.0
        self.gE = self.gamma * E  # [S, K]
        self.B_T = np.ascontiguousarray(
            (self.gE @ np.repeat(np.eye(Kt), A, axis=1)).T
        )  # [S, S] child sequences
        Rg = np.zeros((D, S))
        Rg[np.arange(D), self.pos] += 1.0
        Rg[np.arange(D), self.seq_r] -= 1.0
        self.Rg_T = np.ascontiguousarray(Rg.T)  # [S, D] the gaps' rows (a) - (r)
        return Rg

    def _rewards_and_chance(
        self, tree: HistoryTree, glob: tuple[np.ndarray, np.ndarray], par: np.ndarray
    ) -> None:
        """W (u = rho W: W_1[s_1, s_2] = R[n, (a_1, a_2)] summed over the joint nodes, symmetric) and C
        (C_1[tau_1, tau_2] = c(n)) as den = [rho, 1] cpre^T with cpre = C gathered at the parent sequences:
        sets ``W``, ``cpre_S``, ``c_root`` and ``W_cpre`` = [W, cpre_S^T]."""
        game, A, S, Kt = tree.game, self.A, self.S, self.K
        W, C = np.zeros((S, S)), np.zeros((Kt, Kt))
        ja = game.joint_actions  # [A_joint, 2]
        for layer in tree.layers:
            R = layer.weight @ game.expected_reward  # [N, A_joint]
            k1, k2 = glob[0][layer.local[:, 0]], glob[1][layer.local[:, 1]]
            rows = (k1[:, None] * A + ja[None, :, 0]).ravel()
            cols = (k2[:, None] * A + ja[None, :, 1]).ravel()
            np.add.at(W, (rows, cols), R.ravel())
            np.add.at(C, (k1, k2), layer.probability)
        self.W = W + W.T  # symmetric: u = rho @ W
        gather = np.zeros((Kt, S + 1))
        gather[np.arange(Kt), par] = 1.0
        cpre = (C + C.T) @ gather  # den = [rho, 1] @ cpre.T
        self.cpre_S = np.ascontiguousarray(cpre[:, :S])  # [K, S]
        self.c_root = cpre[:, S].copy()  # [K]
        self.W_cpre = np.ascontiguousarray(np.hstack([self.W, cpre[:, :S].T]))  # [S, S + K]

    def _two_stage(self, Rg: np.ndarray, anc: np.ndarray, hpath: np.ndarray) -> None:
        """The stacked arrays of one policy of a two-stage game (:meth:`_one`), where Rel = gamma E."""
        A, b = (
            self.A,
            self.stage_bounds,
        )  # (sequences at 0, sequences at 1, gamma E from histories at 1 to them)
        self.stage0 = (slice(0, b[1] * A), slice(b[1] * A, b[2] * A), self.gE[: b[1] * A, b[1] : b[2]])
        self.Rg = Rg  # [D, S]
        self.act = anc[:, self.pos]  # [S, D] coordinate (sigma, c) on the path of s
        self.hist = hpath[:, self.kglob]  # [S, D] coordinate's history on the path of s
        self.rel_k = (Rg @ self.gE)[:, self.kglob]  # [D, D]
        self.WCk = np.ascontiguousarray(np.vstack([self.W, self.cpre_S[self.kglob]]))  # [S + D, S]
        self.c_k = self.c_root[self.kglob]  # [D]

    def _J(self, pi: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        """J = sum_a pi_1(a | root) num_1(root, a) / den_1(root) (agent 1's root is stacked history 0).  # [P]"""
        A = self.A
        if len(pi) == 1:
            return np.array([float(pi[0, :A] @ num[0, :A]) / float(den[0, 0])])
        return (pi[:, :A] * num[:, :A]).sum(axis=1) / den[:, 0]

    @staticmethod
    def _ok(M: np.ndarray, den: np.ndarray) -> np.ndarray:
        """Rows with M finite and every denominator >= TINY (finite y, M and den leave DM finite too)."""
        if len(M) == 1:
            return np.array([math.isfinite(float(M.sum())) and float(den.min()) >= TINY])
        return np.isfinite(M.sum(axis=1)) & (den.min(axis=1) >= TINY)

    def work(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A working array of this shape, reused across calls (fresh pages cost more than the arithmetic on a
        batch: measured 1.6x on GridSmall at 70 policies). Never returned to the caller."""
        size = int(np.prod(shape))
        buf = self._buffers.get(name)
        if buf is None or buf.size < size:
            buf = self._buffers[name] = np.empty(size)
        return buf[:size].reshape(shape)

    def bytes_per_policy(self, jacobian: bool) -> int:
        """Peak working bytes of one policy's evaluation (the arrays alive together, x 2)."""
        S, D = self.S, self.D
        floats = 8 * S
        if jacobian:  # a side's X, Y and d den, its block and temporaries; DM; the own block's entries
            floats += 3 * S * D + 4 * D * D + 4 * self.own.row.size
        return 2 * 8 * floats

    def log_policy(self, y: np.ndarray) -> np.ndarray:
        """log pi(y) on the stacked sequences (log-sum-exp; NEG-scale on illegal and padding actions).  # [P, S]"""
        P, A, K = len(y), self.A, self.K
        z = np.repeat(self.base[None], P, axis=0)
        z[:, self.pos] = y
        z = z.reshape(P, K, A)
        z -= z.max(axis=2, keepdims=True)
        z -= np.log(np.exp(z).sum(axis=2, keepdims=True))
        return z.reshape(P, K * A)

    def evaluate(self, y: np.ndarray, alpha: float, jacobian: bool) -> tuple[Any, Any, Any, np.ndarray]:
        """(M [P, D], DM [P, D, D] | None, J [P], ok [P]) for y [P, D]: rows where ``ok`` is False had a
        denominator under :data:`TINY` or a non-finite value and must be taken from the reference.

        The Jacobian's arrays are laid out [S, columns, P] (sequence first, batch last), so that every product
        with a constant matrix is one 2-D product over the whole batch and column blocks are contiguous."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            if jacobian and len(y) == 1 and self.H == 2:
                return self._one(y[0], alpha)
            return self._evaluate(y, alpha, jacobian)

    def _one(self, y: np.ndarray, alpha: float) -> tuple[Any, Any, Any, np.ndarray]:
        """M, DM, J of one policy of a two-stage game, the same formulas in fewer operations: u, the cross
        block W Y, den at the coordinates' histories and their derivatives in one product [W; C_k] [rho, Y]
        (C_k: cpre's rows at the coordinates' histories), Desc = I + N as one stage (a path tracer asks for
        this evaluation at every step)."""
        A, K, S, D = self.A, self.K, self.S, self.D
        flat = self.base.copy()
        flat[self.pos] = y
        z = flat.reshape(K, A)
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        ssum = e.sum(axis=1, keepdims=True)
        pi = (e / ssum).ravel()
        z -= np.log(ssum)
        rho = np.exp(z.ravel() @ self.anc_T)  # [S]
        psel = pi[self.pos]
        Z = np.empty((S, 1 + D))
        Z[:, 0] = rho
        np.multiply(self.hist, psel, out=Z[:, 1:])
        np.subtract(self.act, Z[:, 1:], out=Z[:, 1:])
        Z[:, 1:] *= rho[:, None]  # Y = rho T
        R = self.WCk @ Z  # [S + D, 1 + D]: X = [u, W Y] and [den_k - c, d den_k]
        X, d, dden = R[:S], R[S:, 0] + self.c_k, R[S:, 1:]
        here, below, G = self.stage0
        X[here] += G @ (pi[below, None] * X[below]).reshape(-1, A, 1 + D).sum(axis=1)  # Desc X
        RA = self.Rg @ X  # [D, 1 + D]
        gap0 = RA[:, 0] / d
        num = X[:, 0]
        own = psel * (num[self.pos] - (pi * num).reshape(K, A).sum(axis=1)[self.kglob])
        DM = RA[:, 1:] + self.rel_k * own
        DM -= gap0[:, None] * dden
        DM /= (d * alpha)[:, None]
        M = gap0 / alpha
        J = float(pi[:A] @ num[:A]) / float(self.c_root[0])  # den at agent 1's root is its constant part
        ok = math.isfinite(float(M.sum())) and float(d.min(initial=np.inf)) >= TINY  # D = 0: no denominators
        return M[None], DM[None], np.array([J]), np.array([ok])

    def _evaluate(self, y: np.ndarray, alpha: float, jacobian: bool) -> tuple[Any, Any, Any, np.ndarray]:
        P, A, K, S = len(y), self.A, self.K, self.S
        z = self.base[None].copy() if P == 1 else np.repeat(self.base[None], P, axis=0)
        z[:, self.pos] = y
        z = z.reshape(P, K, A)
        z -= z.max(axis=2, keepdims=True)
        e = np.exp(z)
        ssum = e.sum(axis=2, keepdims=True)
        pi = (e / ssum).reshape(P, S)
        z -= np.log(ssum)
        log_rho = z.reshape(P, S) @ self.anc_T  # [P, S] log realization weights
        rho = np.exp(log_rho)
        both = rho @ self.W_cpre  # [P, S + K]: u = rho W, and den less its constant part
        u = both[:, :S]
        den = both[:, S:] + self.c_root  # [P, K]
        d = den[:, self.kglob]  # [P, D]
        num = u
        for _ in range(self.H - 1):
            num = u + (pi * num) @ self.B_T
        gap0 = (num @ self.Rg_T) / d
        M = gap0 / alpha
        J, ok = self._J(pi, num, den), self._ok(M, den)
        if not jacobian:
            return M, None, J, ok
        # finite y, M and den >= TINY leave every product finite: the Jacobian needs no check of its own
        DM = dense_jacobian(self, pi, log_rho, rho, num, gap0, d, alpha)  # [D, D, P]
        return M, DM.transpose(2, 0, 1), J, ok
