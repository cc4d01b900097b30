"""Other-play over deterministic policies, for :func:`ers_exact.zsc.other_play.train_other_play`.

* **Exact OP over deterministic policies** (:func:`deterministic_search`): every deterministic policy
  *tree* (one legal action at each local history the agent's own earlier actions reach; histories it never
  reaches play uniformly and enter no XP value) is enumerated, one shared tree or one per agent, and
  OP^Phi and J of every joint profile are computed exactly in batches (:class:`DeterministicProfiles`):
  the optimum over deterministic policies, when there are at most a budget of profiles.
* **Single-row local search** (:func:`row_search`): best-improvement moves that set one local history's
  row to a pure legal action while that raises OP^Phi, finishing a softmax-saturated gradient point.

Values come from :mod:`ers_exact.zsc.op_objective`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ers_exact.model.histories import HistoryTree, LocalHistories
from ers_exact.model.objectives import seat_assignments
from ers_exact.model.values import expected_return
from ers_exact.zsc.op_objective import SymmetryMaps, batch_op_values, policies_per_batch

__all__ = ["DeterministicProfiles", "deterministic_search", "row_search"]

_ROW_SEARCH_BUDGET = 20_000_000  # policy entries x |Phi| x seats evaluated per round of the row search


# --- exhaustive search over deterministic policies -----------------------------------------------------

_Children = dict[tuple[int, int], list[int]]  # (history, action) -> child histories


def _children(hist: LocalHistories) -> _Children:
    out: dict[tuple[int, int], list[int]] = {}
    for k in range(1, len(hist)):
        out.setdefault((int(hist.parent[k]), int(hist.action[k])), []).append(k)
    return out


def _count_trees(hist: LocalHistories, children: _Children, k: int = 0) -> int:
    """Deterministic policy trees below history k (exact integer)."""
    total = 0
    for a in np.flatnonzero(hist.legal[k]):
        prod = 1
        for c in children.get((k, int(a)), []):
            prod *= _count_trees(hist, children, c)
        total += prod
    return total


def _trees(hist: LocalHistories, children: _Children, k: int = 0) -> np.ndarray:
    """Every deterministic policy tree below history k: [N, K] chosen action, -1 where not reached."""
    K, blocks = len(hist), []
    for a in np.flatnonzero(hist.legal[k]):
        block = np.full((1, K), -1, dtype=np.int64)
        for c in children.get((k, int(a)), []):  # disjoint subtrees: the product of their choices
            sub = _trees(hist, children, c)
            block = np.maximum(block[:, None, :], sub[None, :, :]).reshape(-1, K)
        block[:, k] = a
        blocks.append(block)
    return np.concatenate(blocks)


def _as_policy(hist: LocalHistories, choice: np.ndarray) -> np.ndarray:
    """Choices [N, K] -> policies [N, K, A]: one-hot where chosen, uniform over legal actions elsewhere."""
    out = np.broadcast_to(
        hist.legal / hist.legal.sum(axis=1, keepdims=True), (*choice.shape, hist.legal.shape[1])
    ).copy()
    n, k = np.nonzero(choice >= 0)
    out[n, k] = 0.0
    out[n, k, choice[n, k]] = 1.0
    return out


@dataclass(frozen=True)
class DeterministicProfiles:
    """OP^Phi and J of every deterministic joint profile; profile p plays tree ``index[p, j]`` of slot j."""

    trees: tuple[np.ndarray, ...]  # per policy slot: [N_j, K] choices
    index: np.ndarray  # [P, slots] tree index per profile
    op: np.ndarray  # [P]
    J: np.ndarray  # [P]

    def policy(self, tree: HistoryTree, p: int, shared: bool) -> tuple[np.ndarray, ...]:
        """Profile p as a policy: per agent [K_i, A_i], one-hot where its tree chooses, uniform elsewhere."""
        slots = [0 if shared else i for i in range(len(tree.local))]
        return tuple(
            _as_policy(h, self.trees[j][self.index[p, j]][None])[0] for j, h in zip(slots, tree.local)
        )


def deterministic_search(
    tree: HistoryTree, maps: SymmetryMaps, shared: bool, budget: int
) -> tuple[int, DeterministicProfiles | None]:
    """OP and J of every deterministic joint profile (one shared tree, or one tree per agent), or None
    when there are more than ``budget``. Returns (number of profiles, search)."""
    slots = [tree.local[0]] if shared else list(tree.local)
    children = [_children(h) for h in slots]
    counts = [_count_trees(h, c) for h, c in zip(slots, children)]
    total = int(np.prod(np.array(counts, dtype=object)))
    if total > budget:
        return total, None
    trees = tuple(_trees(h, c) for h, c in zip(slots, children))
    index = np.stack(np.unravel_index(np.arange(total), counts), axis=1)
    chunk = policies_per_batch(tree, maps)
    op, J = np.empty(total), np.empty(total)
    for lo in range(0, total, chunk):
        idx = index[lo : lo + chunk]
        pols = tuple(
            _as_policy(h, trees[0 if shared else i][idx[:, 0 if shared else i]])
            for i, h in enumerate(tree.local)
        )
        op[lo : lo + len(idx)] = batch_op_values(tree, pols, maps)
        J[lo : lo + len(idx)] = expected_return(tree, pols)
    return total, DeterministicProfiles(trees=trees, index=index, op=op, J=J)


# --- local search over single rows ---------------------------------------------------------------------


def row_search(
    tree: HistoryTree, pols: tuple[np.ndarray, ...], maps: SymmetryMaps, shared: bool, rounds: int
) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Best-improvement local search over single rows: set one local history's row (of the shared policy,
    or of one agent) to a pure legal action when that raises OP, up to ``rounds`` times per policy. Takes a
    softmax-saturated gradient point (e.g. 0.98 on a wrong lever after a match) to the vertex it was
    heading for. Skipped (0 rounds) when one round would exceed the evaluation budget.  # (pols, OP [B])"""
    pols = tuple(p.copy() for p in pols)
    value = batch_op_values(tree, pols, maps)
    slots = [0] if shared else list(range(tree.game.n_agents))
    moves = [(j, k, a) for j in slots for k, a in zip(*np.nonzero(tree.local[j].legal))]
    entries = sum(p.shape[1] * p.shape[2] for p in pols)
    if (
        len(value) * len(moves) * len(maps) * len(seat_assignments(tree.game.n_agents)) * entries
        > _ROW_SEARCH_BUDGET
    ):
        return pols, value
    active = np.arange(len(value))
    for _ in range(rounds):
        if len(active) == 0:
            break
        B, C = len(active), len(moves)
        cand = [np.repeat(p[active], C, axis=0) for p in pols]  # [B * C, K, A], candidate-minor
        for c, (j, k, a) in enumerate(moves):
            for i in range(tree.game.n_agents):
                if i == j or shared:
                    cand[i][c::C, k] = 0.0
                    cand[i][c::C, k, a] = 1.0
        vals = batch_op_values(tree, tuple(cand), maps).reshape(B, C)
        best = vals.argmax(axis=1)
        gain = vals[np.arange(B), best] > value[active] + 1e-12
        for b in np.flatnonzero(gain):
            for i in range(tree.game.n_agents):
                pols[i][active[b]] = cand[i][b * C + best[b]]
            value[active[b]] = vals[b, best[b]]
        active = active[gain]
    return pols, value
