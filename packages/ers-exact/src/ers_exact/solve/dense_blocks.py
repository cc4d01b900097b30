"""The Jacobian DM of the dense sequence-form evaluator (:mod:`ers_exact.solve.dense`) block by block: two
dense cross blocks d M_i / d y_o (o the other agent) and a sparse own block d M_i / d y_i.

With the notation of :mod:`ers_exact.solve.dense` (rho_i realization weights, T_o the path indicator of the
other agent's coordinates, Desc_i the discounted descendant sum, W_i and C_i agent i's rows of the reward
and chance matrices):

* cross block: d num_i = Desc_i W_i (rho_o T_o) and d den_i = C_i (rho_o T_o)^pre. These are [S_i, D_o]
  and [D_i, D_o] per policy: agent i's sequences against the other agent's coordinates only (the stacked
  layout of both agents carried the same products over [S, D] columns, half of them structural zeros).
* own block: d num_i(s) / d y_(i, sigma, c) = Rel_i[s, sigma] pi_i(c | sigma) (num_i(sigma, c) - V_i(sigma)),
  Rel_i = gamma Desc_i E_i, and den_i does not depend on agent i's own policy. Rel_i[s, sigma] is non-zero
  only where the history sigma lies strictly below the sequence s, and there it is the ratio of realization
  weights gamma^k rho_i(parent sequence of sigma) / rho_i(s) (k = t(sigma) - t(s)). So the own block has one
  entry per (coordinate, coordinate of a history below it) -- about D H of the D^2 -- evaluated from log rho
  directly instead of carrying Rel_i through Desc_i as |K| more columns.

Then DM = (d num(a) - d num(r) - alpha M d den) / (den alpha) as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = [
    "GROUPED_FROM",
    "AgentBlocks",
    "DenseArrays",
    "OwnPairs",
    "agent_blocks",
    "dense_jacobian",
    "own_pairs",
]

#: a Jacobian batch with more entries than this in the stacked Y = rho T [S, P, D] works on T's nonzero
#: pattern only
GROUPED_FROM = 50_000


class DenseArrays(Protocol):
    """What the block Jacobian reads of :class:`ers_exact.solve.dense.DenseLogitMap` (stacked sequences
    s = kg * A + a of both agents, coordinates agent 1's first)."""

    A: int  # the larger action count
    S: int  # stacked sequences
    K: int  # stacked histories
    D: int  # coordinates
    D1: int  # agent 1's coordinates
    H: int  # horizon
    gamma: float
    pos: np.ndarray  # [D] each coordinate's sequence (tau, a)
    seq_r: np.ndarray  # [D] its reference sequence (tau, r(tau))
    kglob: np.ndarray  # [D] its stacked history
    gE: np.ndarray  # [S, K] gamma where a history follows a sequence
    W: np.ndarray  # [S, S] stacked (symmetric) reward matrix
    cpre_S: np.ndarray  # [K, S] chance weights of the other agent's parent sequences
    sides: list[AgentBlocks]
    own: OwnPairs

    def work(self, name: str, shape: tuple[int, ...]) -> np.ndarray: ...


@dataclass(frozen=True)
class _Group:
    """The other agent's coordinates of one stage and its sequences below each (padded to L; ``hist`` is 1 on
    the real ones), with agent i's columns of W and C at those sequences."""

    cols: np.ndarray  # [D_t] the coordinates (within the other agent's)
    idx: (
        np.ndarray
    )  # [D_t, L] the other agent's sequences (local rows) with the coordinate's history on their path
    act: np.ndarray  # [D_t, L] 1 where the coordinate's action is on the path too
    hist: np.ndarray  # [D_t, L]
    W: np.ndarray  # [D_t, S_i, L] W_i's columns at those sequences
    C: np.ndarray  # [D_t, D_i, L] C_i's rows at agent i's coordinates' histories, columns at those sequences


@dataclass(frozen=True)
class AgentBlocks:
    """Agent i's rows of the cross block d M_i / d y_o: its sequences, coordinates and stages, and the other
    agent's path indicators and groups."""

    rows: np.ndarray  # [S_i] agent i's stacked sequences (ascending: stage by stage)
    cols: slice  # agent i's coordinates in y
    other: slice  # the other agent's coordinates in y
    pos: np.ndarray  # [D_i] local row of each coordinate's sequence (tau, a)
    ref: np.ndarray  # [D_i] local row of (tau, r(tau))
    stages: list[tuple[slice, slice, np.ndarray]]  # per t < H - 1: rows at t, rows at t + 1, gamma E between
    other_rows: np.ndarray  # [S_o] the other agent's stacked sequences
    W: np.ndarray  # [S_i, S_o] W_i
    C: np.ndarray  # [D_i, S_o] C_i at agent i's coordinates' histories (den less its constant part)
    act: np.ndarray  # [S_o, D_o] the other's coordinate (sigma, c) on the path of s
    hist: np.ndarray  # [S_o, D_o] the other's coordinate's history on the path of s
    groups: list[_Group]

    @property
    def nbytes(self) -> int:
        arrays = (
            [self.W, self.C, self.act, self.hist] + [g.W for g in self.groups] + [g.C for g in self.groups]
        )
        return int(sum(a.nbytes for a in arrays))


@dataclass(frozen=True)
class OwnPairs:
    """The own block's entries: DM[row, col] = scale exp(log rho[top] - log rho[bottom]) own[col] / den[row]
    / alpha, with own = pi (num - V) at the column's (sigma, c) and scale = +-gamma^k."""

    row: np.ndarray  # [n] coordinate (tau, a) whose gap is differentiated
    col: np.ndarray  # [n] coordinate (sigma, c) of the same agent, sigma strictly below tau
    top: np.ndarray  # [n] stacked parent sequence of sigma
    bottom: np.ndarray  # [n] stacked sequence (tau, a) or (tau, r(tau)) on sigma's path
    scale: np.ndarray  # [n] +gamma^k for (tau, a), -gamma^k for (tau, r(tau))


def agent_blocks(
    m: DenseArrays,
    hist_of: list[np.ndarray],
    stage_of: np.ndarray,
    anc: np.ndarray,
    hpath: np.ndarray,
) -> list[AgentBlocks]:
    """Both agents' cross-block structures. ``hist_of[i]``: agent i's stacked histories; ``stage_of``: the
    stage of every stacked history; ``anc`` / ``hpath``: [S, S] / [S, K] path indicators of sequences and
    histories."""
    A, S = m.A, m.S
    cols = [slice(0, m.D1), slice(m.D1, m.D)]
    rows, local, stage_rows = [], [], []
    for i in range(2):
        hk = np.sort(hist_of[i])
        rows.append((hk[:, None] * A + np.arange(A)).ravel())
        loc = np.full(S, -1, dtype=np.int64)
        loc[rows[i]] = np.arange(len(rows[i]))
        local.append(loc)
        c = np.searchsorted(stage_of[hk], np.arange(m.H + 1))
        stage_rows.append(
            [
                (
                    slice(c[t] * A, c[t + 1] * A),
                    slice(c[t + 1] * A, c[t + 2] * A),
                    np.ascontiguousarray(m.gE[rows[i][c[t] * A : c[t + 1] * A]][:, hk[c[t + 1] : c[t + 2]]]),
                )
                for t in range(m.H - 1)
            ]
        )
    out = []
    for i, o in ((0, 1), (1, 0)):
        W = np.ascontiguousarray(m.W[np.ix_(rows[i], rows[o])])
        C = np.ascontiguousarray(m.cpre_S[m.kglob[cols[i]]][:, rows[o]])
        act = np.ascontiguousarray(anc[np.ix_(rows[o], m.pos[cols[o]])])
        hist = np.ascontiguousarray(hpath[np.ix_(rows[o], m.kglob[cols[o]])])
        times = stage_of[m.kglob[cols[o]]]
        out.append(
            AgentBlocks(
                rows=rows[i],
                cols=cols[i],
                other=cols[o],
                pos=local[i][m.pos[cols[i]]],
                ref=local[i][m.seq_r[cols[i]]],
                stages=stage_rows[i],
                other_rows=rows[o],
                W=W,
                C=C,
                act=act,
                hist=hist,
                groups=_groups(W, C, act, hist, times),
            )
        )
    return out


def _groups(
    W: np.ndarray, C: np.ndarray, act: np.ndarray, hist: np.ndarray, times: np.ndarray
) -> list[_Group]:
    """The other agent's coordinates grouped by the stage of their history, each with the sequences below it
    (T's pattern)."""
    out = []
    for t in np.unique(times):
        cols = np.flatnonzero(times == t)
        below = [np.flatnonzero(hist[:, d]) for d in cols]
        L = max(len(b) for b in below)
        idx = np.zeros((len(cols), L), dtype=np.int64)
        mask = np.zeros((len(cols), L))
        for r, b in enumerate(below):
            idx[r, : len(b)], mask[r, : len(b)] = b, 1.0
        on_path = np.take_along_axis(act[:, cols].T, idx, axis=1) * mask
        Wg = np.ascontiguousarray(W[:, idx].transpose(1, 0, 2))  # [D_t, S_i, L]
        Cg = np.ascontiguousarray(C[:, idx].transpose(1, 0, 2))  # [D_t, D_i, L]
        out.append(_Group(cols, idx, on_path, mask, Wg, Cg))
    return out


def own_pairs(m: DenseArrays, parent_seq: np.ndarray) -> OwnPairs:
    """Every (coordinate, coordinate of a history strictly below it) of one agent, walking up each
    coordinate's history path (``parent_seq``: each stacked history's parent sequence, S at a root)."""
    A, S, gamma = m.A, m.S, m.gamma
    coord_at = np.full(S, -1, dtype=np.int64)
    coord_at[m.pos] = np.arange(m.D)
    at_ref: dict[int, list[int]] = {}  # a history's reference sequence -> its coordinates
    for d, s in enumerate(m.seq_r.tolist()):
        at_ref.setdefault(s, []).append(d)
    row, col, top, bottom, scale = [], [], [], [], []
    for d2, sigma in enumerate(m.kglob.tolist()):
        first = int(parent_seq[sigma])
        s, k = first, 1
        while s < S:
            if coord_at[s] >= 0:
                hits, sign = [int(coord_at[s])], 1.0
            else:
                hits, sign = at_ref.get(s, []), -1.0
            for d in hits:
                row.append(d)
                col.append(d2)
                top.append(first)
                bottom.append(s)
                scale.append(sign * gamma**k)
            s, k = int(parent_seq[s // A]), k + 1
    as_int = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return OwnPairs(
        as_int(row), as_int(col), as_int(top), as_int(bottom), np.asarray(scale, dtype=np.float64)
    )


def dense_jacobian(
    m: DenseArrays,
    pi: np.ndarray,
    log_rho: np.ndarray,
    rho: np.ndarray,
    num: np.ndarray,
    gap0: np.ndarray,
    d: np.ndarray,
    alpha: float,
) -> np.ndarray:
    """DM [D, D, P] of a batch from its forward pass: pi, log rho, rho, num [P, S], gap0 = (num(a) - num(r)) /
    den and den d [P, D] at the coordinates."""
    P, D, A, K = len(pi), m.D, m.A, m.K
    psel = pi[:, m.pos]  # [P, D]
    DM = np.zeros((D, D, P))
    for side in m.sides:
        D_i, D_o = side.pos.size, side.other.stop - side.other.start
        if D_i == 0 or D_o == 0:
            continue
        X, dden = _cross(m, side, rho, psel, P)
        piT = pi.T[side.rows][:, None, :]  # [S_i, 1, P]
        for here, below, G in reversed(side.stages):  # X = Desc_i X, from the last stage up, in place
            V = (piT[below] * X[below]).reshape(-1, A, D_o * P).sum(axis=1)
            X[here] += (G @ V).reshape(-1, D_o, P)
        blk = X[side.pos]
        blk -= X[side.ref]
        blk -= gap0.T[side.cols, None, :] * dden
        blk /= (d.T[side.cols] * alpha)[:, None, :]
        DM[side.cols, side.other] = blk
    own = m.own
    if own.row.size:
        Vn = (pi * num).reshape(P, K, A).sum(axis=2)  # [P, K]
        own_d = psel * (num[:, m.pos] - Vn[:, m.kglob])  # [P, D]
        vals = np.exp(log_rho[:, own.top] - log_rho[:, own.bottom])
        vals *= own.scale / alpha
        vals *= own_d[:, own.col] / d[:, own.row]
        DM[own.row, own.col] = vals.T
    return DM


def _cross(
    m: DenseArrays, side: AgentBlocks, rho: np.ndarray, psel: np.ndarray, P: int
) -> tuple[np.ndarray, np.ndarray]:
    """W_i (rho_o T_o) [S_i, D_o, P] and C_i (rho_o T_o) [D_i, D_o, P] (before Desc_i)."""
    rho_o, psel_o = rho[:, side.other_rows], psel[:, side.other]
    S_i, S_o = side.W.shape
    D_i, D_o = side.C.shape[0], side.act.shape[1]
    if P * m.S * m.D <= GROUPED_FROM:  # Y = rho T dense: fewest operations
        Y = rho_o.T[:, None, :] * (
            side.act[:, :, None] - side.hist[:, :, None] * psel_o.T[None]
        )  # [S_o, D_o, P]
        Y2 = Y.reshape(S_o, D_o * P)
        return (side.W @ Y2).reshape(S_i, D_o, P), (side.C @ Y2).reshape(D_i, D_o, P)
    # T on its nonzero pattern only, coordinates grouped by stage: a batch's work in O(nnz(T))
    X, dden = m.work("X", (S_i, D_o, P)), m.work("dden", (D_i, D_o, P))
    for g in side.groups:
        Yt = (rho_o[:, g.idx] * (g.act - g.hist * psel_o[:, g.cols, None])).transpose(1, 2, 0)  # [D_t, L, P]
        X[:, g.cols] = (g.W @ Yt).transpose(1, 0, 2)
        dden[:, g.cols] = (g.C @ Yt).transpose(1, 0, 2)
    return X, dden
