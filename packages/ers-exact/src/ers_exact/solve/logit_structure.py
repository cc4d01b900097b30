"""The index structure of the logit map's evaluator, built once per joint history tree: the logit
coordinates (:func:`coordinate_index`), the ancestor/descendant pairs of the joint nodes, the flat index of
every node of every layer, and the composed sparse scatter matrices that send the terms (A), (B), (C) of
:mod:`ers_exact.solve.derivatives` straight into the Jacobian's [D_i x D_j] blocks; with the memory
estimates that chunk a batch of policies under a budget (:class:`MemoryBudgetError` when one does not fit).

:class:`~ers_exact.solve.derivatives.LogitDerivatives` derives from :class:`LogitStructure` and adds the
evaluation over batches of policies.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.reach import RelativeReach
from ers_exact.util.budget import format_bytes
from ers_exact.util.errors import InputError
from ers_exact.util.sparse import DENSE_ENTRIES, SparseMatrix

__all__ = ["LogitStructure", "MemoryBudgetError", "coordinate_index"]


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
class _Columns:
    """A sparse matrix by columns (CSC): column c holds rows ``indices[indptr[c]:indptr[c + 1]]``."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    n_rows: int

    @classmethod
    def build(cls, data: np.ndarray, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> _Columns:
        order = np.argsort(cols, kind="stable")
        indptr = np.searchsorted(cols[order], np.arange(shape[1] + 1))
        return cls(indptr, rows[order], data[order], shape[0])


class LogitStructure:
    """Pre-built index structure of a tree for the evaluator (build once per tree; see module doc)."""

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
    def _rows(self) -> list[tuple[_Columns, _Columns]]:
        """Per agent i, by columns: R_i [D_i, K_i A_i] (+1 at (k, a), -1 at (k, r) of each coordinate: the
        gap's rows) and Rk_i [D_i, K_i] (1 at k: which history's den a coordinate divides by)."""
        out = []
        for i, (k, a, r) in enumerate(self.index):
            A, d = self.n_actions[i], np.arange(len(k))
            R = _Columns.build(
                np.r_[np.ones(len(k)), -np.ones(len(k))],
                np.r_[d, d],
                np.r_[k * A + a, k * A + r],
                (len(k), self.K[i] * A),
            )
            out.append((R, _Columns.build(np.ones(len(k)), d, k, (len(k), self.K[i]))))
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
    def _compose(R: _Columns, entry: np.ndarray, out_col: np.ndarray, n_cols: int) -> SparseMatrix:
        """[R.n_rows * n_cols, len(entry)]: input m goes to rows (d, out_col[m]) with weight R[d, entry[m]]."""
        valid = np.flatnonzero(out_col >= 0)
        start = R.indptr[entry[valid]]
        count = R.indptr[entry[valid] + 1] - start
        total = int(count.sum())
        offset = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
        pos = np.repeat(start, count) + offset
        rows = R.indices[pos] * n_cols + np.repeat(out_col[valid], count)
        cols = np.repeat(valid, count)
        return SparseMatrix(R.data[pos], rows, cols, (R.n_rows * n_cols, len(entry)))

    @cached_property
    def base(self) -> list[np.ndarray]:
        """Per agent, the logits before y is filled in: 0 on legal actions, -inf on illegal ones.  # [K, A, 1]"""
        return [np.where(h.legal, 0.0, -np.inf)[:, :, None] for h in self.tree.local]

    @cached_property
    def child(self) -> list[SparseMatrix]:
        """Per layer t < H - 1, the tree's child matrix of layer t (:meth:`HistoryTree.child_matrix`)."""
        return [self.tree.child_matrix(t) for t in range(self.H - 1)]

    def _terms(self) -> Iterator[tuple[tuple[str, int, int], _Columns, np.ndarray, np.ndarray, int]]:
        """(key, R, entry, out_col, n_cols) of each composed scatter matrix of :attr:`mats`
        (:meth:`_compose`'s arguments), one at a time."""
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
                yield ("C", i, j), R, entry, col[np.repeat(self.local_desc[:, j], A_j), c], D_j
                if i == j:
                    continue
                b = self.ja[self.pair_a0, j]
                # (A) first part: input (pair, a) -> row entry (k_i(desc), a), column (k_j(anc), b_j)
                entry = (self.local_desc[:, i, None] * A_i + np.arange(A_i)[None]).ravel()
                yield ("A1", i, j), R, entry, np.repeat(col[self.local_anc[:, j], b], A_i), D_j
                # (A) second part, before the factor pi^j(c | sigma): column = history k_j(anc)
                yield ("A2", i, j), R, entry, np.repeat(self.local_anc[:, j], A_i), K[j]
                # den: input pair -> row k_i(desc) (every coordinate of that history)
                yield ("D1", i, j), Rk, self.local_desc[:, i], col[self.local_anc[:, j], b], D_j
                yield ("D2", i, j), Rk, self.local_desc[:, i], self.local_anc[:, j], K[j]
                # (B): input (node, a, c) -> row entry (k_i(n), a), column (k_j(n), c)
                N = len(self.node_local)
                entry = np.repeat((self.node_local[:, i, None] * A_i + np.arange(A_i)[None]).ravel(), A_j)
                c = np.tile(np.arange(A_j), N * A_i)
                yield ("B", i, j), R, entry, col[np.repeat(self.node_local[:, j], A_i * A_j), c], D_j

    @cached_property
    def mats(self) -> dict[tuple[str, int, int], SparseMatrix]:
        """The composed scatter matrices of the terms (A), (B), (C) of :mod:`ers_exact.solve.derivatives`'s
        docstring, per (i, j)."""
        return {key: self._compose(R, entry, out, n_cols) for key, R, entry, out, n_cols in self._terms()}

    @functools.cache  # noqa: B019  (one evaluator per tree, kept as long as the tree)
    def scatter_sizes(self) -> tuple[int, int, int]:
        """(entries, rows, dense cells) of :attr:`mats` before duplicates are summed (an upper bound of the
        nonzeros), counted without building them: each valid input adds the entries of its row's column of
        R; the cells of the matrices small enough to be multiplied as dense arrays (:data:`DENSE_ENTRIES`)."""
        entries = rows = cells = 0
        for _, R, entry, out, n_cols in self._terms():
            count = int(np.diff(R.indptr)[entry[out >= 0]].sum())
            size = R.n_rows * n_cols * len(entry)
            entries, rows = entries + count, rows + R.n_rows * n_cols
            cells += size if size <= max(DENSE_ENTRIES, 16 * count) else 0
        return entries, rows, cells

    # ----- flat index structure: every joint node of every layer in one array (layer t at bounds[t]) -----
    @cached_property
    def flat(self) -> dict[str, Any]:
        """Per agent: the projection L_i [K_i, N] of all nodes onto local histories, each node's group for the
        per-history rescaling, and the path matrix [N, K_i A_i] (1 at the (history, action) of each strict
        ancestor's move towards the node: sum_t log pi along the path is one product); the global node
        index of each ancestor pair's descendant and ancestor."""
        n_all = len(self.node_local)
        bounds = np.r_[0, np.cumsum(self.sizes)]
        node_of_pair = bounds[self.pair_t] + self.pair_n
        anc_of_pair = bounds[self.pair_t - self.pair_d] + self.pair_anc
        proj, group, path = [], [], []
        for i in range(self.n):
            loc = self.node_local[:, i]
            proj.append(SparseMatrix(1.0, loc, np.arange(n_all), (self.K[i], n_all)))
            group.append(np.searchsorted(np.unique(loc), loc))
            col = self.local_anc[:, i] * self.n_actions[i] + self.ja[self.pair_a0, i]
            path.append(
                SparseMatrix(1.0, node_of_pair, col, (n_all, self.K[i] * self.n_actions[i]), dense=False)
            )
        order = [np.argsort(g, kind="stable") for g in group]
        starts = [np.flatnonzero(np.r_[True, np.diff(g[o]) != 0]) for g, o in zip(group, order)]
        return {
            "bounds": bounds,
            "proj": proj,
            "group": group,
            "order": order,
            "starts": starts,
            "path": path,
            "pair_node": node_of_pair,
            "pair_anc": anc_of_pair,
            "prob": np.concatenate(self.prob),
        }

    @cached_property
    def reach(self) -> RelativeReach:
        """The relative reach weights of the evaluator's interval mode (:mod:`ers_exact.solve.reach`)."""
        return RelativeReach(self.tree, self.node_local)

    @cached_property
    def reference(self) -> list[np.ndarray]:
        """Per agent, the reference action (first legal) of its local history at each flat node.  # [N]"""
        return [np.argmax(h.legal, axis=1)[self.node_local[:, i]] for i, h in enumerate(self.tree.local)]

    @cached_property
    def coord_group(self) -> list[np.ndarray]:
        """Per agent, the node group (``flat["group"]``) of each coordinate's history.  # [D_i]"""
        return [
            np.searchsorted(np.unique(self.node_local[:, i]), k) for i, (k, _, _) in enumerate(self.index)
        ]

    # ----- memory -----
    @functools.cache  # noqa: B019  (one evaluator per tree, kept as long as the tree)
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

    def structure_bytes(self) -> int:
        """Estimated bytes of the index structures that :meth:`prepare` builds and of their interval parts
        (:meth:`interval_bytes`), from the exact count of the scatter matrices' entries E and rows R
        (:meth:`scatter_sizes`): per entry 8 bytes of value and two int32 indices, per nonempty row its place in
        the row index; the flat node index and path matrices per node and layer. Bounds the arrays held
        (Dec-Tiger H=4: 359 MB for 268 MB held; a test keeps it within 1.5x)."""
        entries, rows, cells = self.scatter_sizes()
        held = 16 * entries + 8 * min(rows, entries) + 8 * cells + 64 * len(self.node_local) * self.H * self.n
        return held + self.interval_bytes()

    def interval_bytes(self) -> int:
        """Estimated bytes of the parts built on the first interval product (the certificates): the positive
        and negative parts (16 bytes per entry between them, with their row indexes), |M| (8 per entry, the
        index shared) and scipy's row pointers of all four (4 bytes per row each); small matrices as dense arrays."""
        entries, rows, cells = self.scatter_sizes()
        return 24 * entries + 16 * rows + 16 * min(rows, entries) + 24 * cells

    def prepare(self) -> None:
        """Build the index structures of :meth:`evaluate` now (else on the first evaluation)."""
        _ = self.mats, self.flat, self.child

    @property
    def prepared(self) -> bool:
        """Whether the index structures are built (they are resident then)."""
        return "mats" in self.__dict__

    @property
    def interval_built(self) -> bool:
        """Whether the interval parts (:meth:`interval_bytes`) are built (by a first interval product)."""
        return self.prepared and all(m.parts_built for m in self.mats.values())

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
