"""Upper bounds of J over a box of policies that keep one agent to its own information, for the certified
branch-and-bound of :mod:`ers_exact.solve.optimal_set` (beside :class:`~ers_exact.solve.box_enclosure.BoxEnclosure`'s
per-node relaxation, which lets every agent act on the whole joint history, other agents' current actions
included).

*One-step delayed sharing.* Give every agent, at time t, the joint history up to t - 1 and its own
observation o^i_t (a relaxation: tau^i_t is a function of them, so every policy of the box is still available
and J can only rise). The value then follows by backward induction over joint nodes, and at the children of
one joint node m and joint action a (one per joint observation o), the stage problem is a small Bayesian game:
each agent's distribution depends on its own o^i only,

    U(m, a) = max sum_{o} prod_j pi^j(a'^j | o^j) G(n(m, a, o), a'),     G: upper values (reward + gamma U).

Its bound with agent i held: for each o^i, the best vertex v of the polytope Pi(tau^i) = {lo <= p <= hi,
sum p = 1} of its history, the others per child (greedy, :func:`~ers_exact.solve.greedy.greedy_max`):

    U(m, a) <= sum_{o^i} max_{v in vert Pi(tau^i)} sum_{n: o^i(n) = o^i} max_{others} sum_{a'} v(a'^i) p^-i(a'^-i) G(n, a'),

exact in v's vertices (the inner sum is convex in v) and sound for the others (a max over more choices). The
vertices are the greedy fills over the orders of the actions of ``fill_orders`` (agents with more than
:data:`MAX_VERTEX_ACTIONS` actions are not held). At t = 0 the same bound holds with m the root. Rounding: every
sum is widened by gamma_k sum |terms|, the float vertices' own error by a margin on max |G|.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import scipy.sparse as sp

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.greedy import expect_upper, greedy_max
from ers_exact.util.ulp import next_up

__all__ = ["MAX_VERTEX_ACTIONS", "HeldAgentBound", "fill_orders", "polytope_vertices"]

MAX_VERTEX_ACTIONS = 5
#: joint vertex choices x children of a layer enumerated at most by the exact two-agent stage bound
MAX_COMBINATIONS = 20_000
_EPS = np.finfo(float).eps
Bounds = tuple[np.ndarray, np.ndarray]


_up = next_up  # np.nextafter(x, +inf), the same bits, faster


@functools.cache
def fill_orders(A: int) -> np.ndarray:
    """Orders of A actions whose greedy fills reach every vertex of {lo <= p <= hi, sum p = 1}: all A! of them,
    or, where fewer, one per pair (k, S), S a set of the other actions: S first, then k, then the rest (a
    vertex has its mass run out at one action k, those before it at hi, those after at lo, whatever the order
    within them: A 2^(A - 1) orders, 80 instead of 120 at A = 5).  # [V, A]"""
    orders = np.array(list(itertools.permutations(range(A))), dtype=np.int64).reshape(-1, A)
    if len(orders) > A * 2 ** (A - 1):
        out = []
        for k in range(A):
            others = [j for j in range(A) if j != k]
            for mask in range(2 ** (A - 1)):
                first = [a for b, a in enumerate(others) if mask >> b & 1]
                out.append(first + [k] + [a for a in others if a not in first])
        orders = np.array(out, dtype=np.int64)
    orders.setflags(write=False)  # cached: shared by every caller
    return orders


def polytope_vertices(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Every vertex (with repeats) of {lo <= p <= hi, sum p = 1} along the last axis: for each order of
    :func:`fill_orders`, lo plus the remaining mass given out in that order up to hi.  # [..., V, A]"""
    A = lo.shape[-1]
    perms = fill_orders(A)  # [V, A]
    inv = np.argsort(perms, axis=1)
    lp, cap = lo[..., perms], np.maximum(hi - lo, 0.0)[..., perms]  # [..., V, A]
    mass = np.maximum(1.0 - lo.sum(axis=-1), 0.0)[..., None, None]
    alloc = np.clip(mass - (np.cumsum(cap, axis=-1) - cap), 0.0, cap)
    return np.take_along_axis(lp + alloc, np.broadcast_to(inv, lp.shape), axis=-1)


def _sum_matrix(rows: np.ndarray, n_rows: int) -> sp.csr_matrix:
    """[n_rows, len(rows)] with a 1 at (rows[k], k): sums of entries by row id."""
    k = len(rows)
    return sp.csr_matrix((np.ones(k), (rows, np.arange(k))), shape=(n_rows, k))


def _sum_up(matrix: sp.csr_matrix, x: np.ndarray) -> np.ndarray:
    """matrix @ x (0/1 matrix, x [N, R]) rounded up: plus gamma_k sum |terms|."""
    k = int(np.diff(matrix.indptr).max(initial=1))
    out = matrix @ x + 2 * (k + 2) * _EPS * (matrix @ np.abs(x))
    return _up(out)


class HeldAgentBound:
    """The tree's grouping for the held-agent bound (module docstring); build once per tree."""

    def __init__(self, tree: HistoryTree, n_actions: tuple[int, ...], n_joint: int) -> None:
        self.tree, self.na = tree, n_actions
        self.held = (
            [i for i, a in enumerate(n_actions) if a <= MAX_VERTEX_ACTIONS] if len(n_actions) > 1 else []
        )
        #: the most fill orders (``fill_orders``: A! up to 4 actions, 80 at 5) of a held agent's polytopes, the
        #: bound's cost per history (0: none held)
        self.orders = max((len(fill_orders(n_actions[i])) for i in self.held), default=0)
        # per t and held agent: (children -> key sums, keys -> (parent, joint action) sums)
        self.groups: list[dict[int, tuple[sp.csr_matrix, sp.csr_matrix]]] = []
        for t, layer in enumerate(tree.layers):
            pid = np.zeros(len(layer), dtype=np.int64) if t == 0 else layer.parent * n_joint + layer.action
            M = 1 if t == 0 else len(tree.layers[t - 1]) * n_joint
            per = {}
            for i in range(len(n_actions)) if self.held else []:
                keys, kid = np.unique(np.stack([pid, layer.local[:, i]], axis=1), axis=0, return_inverse=True)
                per[i] = (_sum_matrix(kid.reshape(-1), len(keys)), _sum_matrix(keys[:, 0], M))
            self.groups.append(per)
        # two agents: the position of each child's key among its parent's keys (for the exact enumeration)
        self.position: list[dict[int, np.ndarray]] = []
        for t in range(len(tree.layers)):
            pos = {}
            for i in self.held if len(n_actions) == 2 and len(self.held) == 2 else []:
                to_key, to_parent = self.groups[t][i]
                kid = to_key.T.tocsr().indices  # [N] key of each child
                parent_of_key = to_parent.T.tocsr().indices  # [Keys]
                rank = np.zeros(len(parent_of_key), dtype=np.int64)
                seen: dict[int, int] = {}
                for k, m in enumerate(parent_of_key):
                    rank[k] = seen.get(int(m), 0)
                    seen[int(m)] = rank[k] + 1
                pos[i] = rank[kid]
            self.position.append(pos)

    def __call__(
        self, t: int, ghi: np.ndarray, node_bounds: list[Bounds], pol: list[Bounds], exact_games: bool = True
    ) -> np.ndarray | None:
        """Upper bound of U(m, a) for every parent node m and joint action a of layer t (flattened [P, N_{t-1} A];
        [P, 1] at t = 0: the root's value), from the upper values ``ghi`` [P, N_t, *A] of layer t and the
        per-node policy bounds (shaped as in BoxEnclosure); None when no agent can be held."""
        if not self.held:
            return None
        layer, na, n = self.tree.layers[t], self.na, len(self.na)
        P, N = ghi.shape[:2]
        best = None
        for i in self.held:
            off = int(self.tree.local[i].offsets[t])
            K = int(self.tree.local[i].offsets[t + 1]) - off
            l, u = pol[i]
            vert = polytope_vertices(l[:, off : off + K], u[:, off : off + K])[:, layer.local[:, i] - off]
            V = vert.shape[2]  # vert [P, N, V, A_i]
            g = np.moveaxis(ghi, 2 + i, 2).reshape(P, N, na[i], -1)  # [P, N, A_i, rest]
            with np.errstate(invalid="ignore"):
                x = np.einsum("pnva,pnar->pnvr", vert, g)
                scale = np.abs(g).max(axis=(2, 3))  # [P, N]
            x = _up(x + (8 * (na[i] + 4) * _EPS * scale)[:, :, None, None])
            others = [j for j in range(n) if j != i]
            x = x.reshape(P, N, V, *[na[j] for j in others])
            bnds = []
            for k, j in enumerate(others):
                shape = [P, N, 1] + [1] * len(others)
                shape[3 + k] = na[j]
                bnds.append((node_bounds[j][0].reshape(shape), node_bounds[j][1].reshape(shape)))
            gv = expect_upper(x, bnds, [3 + k for k in range(len(others))])
            gv = np.where(np.isnan(gv), np.inf, gv).reshape(P, N, V)
            to_key, to_parent = self.groups[t][i]
            with np.errstate(invalid="ignore"):
                per_key = _sum_up(to_key, gv.transpose(1, 0, 2).reshape(N, P * V))  # [Keys, P V]
                top = per_key.reshape(-1, P, V).max(axis=2)  # [Keys, P]
                bound = _sum_up(to_parent, top).T  # [P, M]
            if exact_games and i in self.position[t]:
                exact = self._enumerate(t, i, x, node_bounds[others[0]])
                if exact is not None:
                    bound = np.minimum(bound, exact)
            bound = np.where(np.isnan(bound), np.inf, bound)
            best = bound if best is None else np.minimum(best, bound)
        return best

    def _enumerate(self, t: int, i: int, x: np.ndarray, other: Bounds) -> np.ndarray | None:
        """Two agents: the stage game's maximum itself, agent i's vertices enumerated jointly over its keys under
        each parent (one vertex per own observation), the other agent's best response per its own key (greedy);
        None when there are more than :data:`MAX_COMBINATIONS` x children of them.  # [P, M]"""
        P, N, V, A_j = x.shape
        pos = self.position[t][i]
        depth = int(pos.max(initial=0)) + 1
        C = V**depth
        if C * N > MAX_COMBINATIONS:
            return None
        j = 1 - i
        digit = (np.arange(C)[:, None] // (V ** pos[None])) % V  # [C, N] vertex of each child's key
        xc = x[:, np.arange(N)[None], digit]  # [P, C, N, A_j]
        to_key_j, to_parent_j = self.groups[t][j]
        K = to_key_j.shape[0]
        with np.errstate(invalid="ignore"):
            per_key = _sum_up(to_key_j, xc.transpose(2, 0, 1, 3).reshape(N, -1)).reshape(K, P, C, A_j)
        # the other agent's bounds per key: every child of a key shares its local history
        first = to_key_j.indices[to_key_j.indptr[:-1]]  # a child of each key
        l = other[0].reshape(P, N, A_j)[:, first][:, :, None]  # [P, K, 1, A_j]
        u = other[1].reshape(P, N, A_j)[:, first][:, :, None]
        g = greedy_max(per_key.transpose(1, 0, 2, 3), l, u)  # [P, K, C]
        g = np.where(np.isnan(g), np.inf, g)
        summed = _sum_up(to_parent_j, g.transpose(1, 0, 2).reshape(K, P * C))  # [M, P C]
        return summed.reshape(-1, P, C).max(axis=2).T
