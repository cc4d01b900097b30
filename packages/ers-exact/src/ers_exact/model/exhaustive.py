"""The exhaustive reference for J* = max_pi J(pi) over deterministic joint policies (slow, exact): every
deterministic policy of agents 0..n-2 is enumerated as a policy *tree* (one action per observation sequence
o_1..o_t, the only histories a deterministic agent can reach), by mixed-radix index over the legal actions
of each sequence; agent n-1 answers each with an exact best response by backward induction over its local
histories tau^{n-1}_t, restricted to the subtree the enumerated policies reach: template nodes (joint
observation sequence, agent n-1's actions), (|O| |A^{n-1}|)^t of them at stage t instead of the whole joint
tree. Candidates are evaluated in chunks; :func:`self_play_optimum` refuses beyond a policy budget or
:data:`MAX_TEMPLATE_NODES` template nodes (:class:`PolicyBudgetError`). :mod:`ers_exact.model.optimal`
re-exports :func:`self_play_optimum` and :func:`count_policy_trees`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ers_exact.model.bounds import child_table, stage_rewards
from ers_exact.model.config import DEFAULT_MAX_POLICIES, PolicyBudgetError
from ers_exact.model.histories import HistoryTree, check_tree
from ers_exact.model.optimal_result import OptimalResult
from ers_exact.util.progress import Progress
from ers_exact.util.sparse import SparseMatrix

__all__ = ["MAX_TEMPLATE_NODES", "count_policy_trees", "count_template_nodes", "self_play_optimum"]

_CHUNK_FLOATS = 8_000_000
MAX_TEMPLATE_NODES = 2_000_000  # reached-subtree nodes (joint observations x last agent's actions)^t


def count_template_nodes(tree: HistoryTree) -> int:
    """Nodes of the exhaustive search's reached-subtree template: sum_t (|O| |A^{n-1}|)^t."""
    game = tree.game
    return sum((game.n_joint_observations * game.n_actions[-1]) ** t for t in range(len(tree.layers)))


def _observation_sequences(tree: HistoryTree, agent: int) -> tuple[np.ndarray, np.ndarray]:
    """For each local history, the id of its observation sequence (o_1..o_t); and for each sequence the
    legal-action row it uses. Returns (seq_of_history [K], legal_of_seq [Q, |A^i|])."""
    hist = tree.local[agent]
    n_o = tree.game.n_observations[agent]
    seq = np.zeros(len(hist), dtype=np.int64)
    legal = [hist.legal[:1]]
    count = 1
    for t in range(1, len(hist.offsets) - 1):
        lo, hi = hist.offsets[t], hist.offsets[t + 1]
        key = seq[hist.parent[lo:hi]] * n_o + hist.observation[lo:hi]
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        seq[lo:hi] = count + inv
        legal.append(hist.legal[lo + first])
        count += len(uniq)
    return seq, np.concatenate(legal)


def count_policy_trees(tree: HistoryTree, agents: list[int]) -> int:
    """Number of deterministic policy trees of the given agents (product of legal counts per sequence)."""
    total = 1
    for i in agents:
        _, legal = _observation_sequences(tree, i)
        total *= int(np.prod(legal.sum(axis=1).astype(object)))
    return total


def _digits(tree: HistoryTree, agent: int, indices: np.ndarray) -> np.ndarray:
    """Actions per observation sequence of ``agent``'s policy trees with mixed-radix ``indices``.  # [P, Q]"""
    _, legal = _observation_sequences(tree, agent)
    radix = legal.sum(axis=1)
    legal_ids = np.argsort(~legal, axis=1, kind="stable")  # legal actions first, in index order
    out = np.empty((len(indices), len(radix)), dtype=np.int64)
    rest = indices.copy()
    for q, r in enumerate(radix):
        out[:, q] = legal_ids[q, rest % r]
        rest //= r
    return out


def _decode(tree: HistoryTree, agent: int, indices: np.ndarray) -> np.ndarray:
    """Deterministic policies of ``agent`` for mixed-radix indices [P] -> one-hot [P, K, |A^i|]."""
    seq, _ = _observation_sequences(tree, agent)
    chosen = _digits(tree, agent, indices)
    out = np.zeros((len(indices), len(seq), tree.game.n_actions[agent]))
    np.put_along_axis(out, chosen[:, seq][:, :, None], 1.0, axis=2)
    return out


@dataclass(frozen=True, eq=False)
class _Template:
    """The subtree reached when agents 0..n-2 play deterministic policy trees, with agent r = n-1 free:
    node m at stage t <-> (joint observations o_1..o_t, actions b_0..b_{t-1} of agent r), in the order
    m_t = (m_{t-1} |A^r| + b) |O| + o. Per stage: each enumerated agent's observation-sequence id at m
    (its number of sequences where the sequence is impossible), agent r's local history at m (-1 where
    impossible) and the sparse projection of template nodes onto agent r's local histories."""

    seq: tuple[tuple[np.ndarray, ...], ...]  # [agent][t] -> [M_t]
    local: tuple[np.ndarray, ...]  # [t] -> [M_t]
    project: tuple[SparseMatrix, ...]  # [t] -> [K^r_t, M_t]


def _template(tree: HistoryTree) -> _Template:
    def build() -> _Template:
        game = tree.game
        _n, r = game.n_agents, game.n_agents - 1
        A_r, O = game.n_actions[r], game.n_joint_observations
        H = len(tree.layers)
        jo = game.joint_observations
        seqs = []
        for i in range(r):  # sequence id of each full O_i-ary observation code, per stage
            hist = tree.local[i]
            seq_of_hist, legal = _observation_sequences(tree, i)
            code = np.zeros(len(hist), dtype=np.int64)
            per_t = [np.zeros(1, dtype=np.int64)]  # template stage 0: the empty sequence, id 0
            n_o = game.n_observations[i]
            for t in range(1, H):
                lo, hi = hist.offsets[t], hist.offsets[t + 1]
                code[lo:hi] = code[hist.parent[lo:hi]] * n_o + hist.observation[lo:hi]
                lookup = np.full(n_o**t, len(legal), dtype=np.int64)
                lookup[code[lo:hi]] = seq_of_hist[lo:hi]
                # code of each template node at t: parent's code * n_o + o_i
                m = np.arange((O * A_r) ** t)
                codes = np.zeros(len(m), dtype=np.int64)
                rest, mult = m, 1
                for _ in range(t):  # digits o of stages t, t-1, ..., 1 (least significant first)
                    codes += jo[rest % O, i] * mult
                    mult *= n_o
                    rest = rest // (O * A_r)
                per_t.append(lookup[codes])
            seqs.append(tuple(per_t))
        hist = tree.local[r]
        locals_ = [np.zeros(1, dtype=np.int64)]
        projections = []
        for t in range(1, H):
            lo, hi = hist.offsets[t], hist.offsets[t + 1]
            k_prev = hist.offsets[t] - hist.offsets[t - 1]
            table = np.full((k_prev + 1, A_r, game.n_observations[r]), -1, dtype=np.int64)
            table[hist.parent[lo:hi] - hist.offsets[t - 1], hist.action[lo:hi], hist.observation[lo:hi]] = (
                np.arange(lo, hi)
            )
            prev = locals_[-1]
            prev_rows = np.where(prev >= 0, prev - hist.offsets[t - 1], k_prev)
            m = np.arange(len(prev) * A_r * O)
            parent, b, o = m // (A_r * O), (m // O) % A_r, m % O
            locals_.append(table[prev_rows[parent], b, jo[o, r]])
        for t in range(H):
            lo, hi = hist.offsets[t], hist.offsets[t + 1]
            loc = locals_[t]
            cols = np.flatnonzero(loc >= 0)
            projections.append(SparseMatrix(1.0, loc[cols] - lo, cols, (hi - lo, len(loc))))
        return _Template(seq=tuple(seqs), local=tuple(locals_), project=tuple(projections))

    return tree.derived("optimal.template", build)


def _restricted_best_response(
    tree: HistoryTree, actions: list[np.ndarray]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Exact best response of agent n-1 to policy trees of agents 0..n-2 (``actions[i]``: [P, Q_i], the
    action per observation sequence), by backward induction on the reached subtree only.
    Returns (J of each profile [P], per stage the responder's action per local history [P, K^r_t])."""
    game = tree.game
    r = game.n_agents - 1
    A_r, O, H = game.n_actions[r], game.n_joint_observations, len(tree.layers)
    stride = np.cumprod((1, *tuple(reversed(game.n_actions))))[:-1][::-1]
    tmpl = _template(tree)
    rewards = stage_rewards(tree)
    kids = child_table(tree)
    P = actions[0].shape[0] if actions else 1
    padded = [np.concatenate([a, np.zeros((P, 1), dtype=np.int64)], axis=1) for a in actions]  # sentinel
    node = [np.zeros((P, 1), dtype=np.int64)]  # tree node of every template node, len(layer) = absent
    joint = []  # joint action of every (template node, b)
    for t in range(H):
        base = np.zeros((P, len(tmpl.local[t])), dtype=np.int64)
        for i in range(r):
            base += padded[i][:, tmpl.seq[i][t]] * stride[i]
        joint.append(base[:, :, None] + np.arange(A_r) * stride[r])  # [P, M_t, A_r]
        if t + 1 < H:
            n_next = len(tree.layers[t + 1])
            table = np.concatenate(
                [np.where(kids[t] >= 0, kids[t], n_next), np.full((1, *kids[t].shape[1:]), n_next)]
            )
            node.append(table[node[t][:, :, None], joint[t]].reshape(P, -1))  # [P, M_t * A_r * O]
    value = None
    choices: list[np.ndarray] = [None] * H  # type: ignore[list-item]
    for t in reversed(range(H)):
        reward = np.concatenate([rewards[t], np.zeros((1, rewards[t].shape[1]))])
        g = reward[node[t][:, :, None], joint[t]]  # [P, M_t, A_r]
        if value is not None:
            g = g + game.discount * value.reshape(P, -1, A_r, O).sum(axis=3)
        M = g.shape[1]
        proj = tmpl.project[t]
        q = (proj @ g.transpose(1, 0, 2).reshape(M, P * A_r)).reshape(-1, P, A_r)  # [K_t, P, A_r]
        hist = tree.local[r]
        legal = hist.legal[hist.offsets[t] : hist.offsets[t + 1]]
        choice = np.argmax(np.where(legal[:, None, :], q, -np.inf), axis=2)  # [K_t, P]
        choices[t] = choice.T
        loc = tmpl.local[t]
        pick = np.where(loc >= 0, loc - hist.offsets[t], 0)
        chosen = choice.T[:, pick]  # [P, M_t]
        value = np.where(loc[None] >= 0, np.take_along_axis(g, chosen[:, :, None], axis=2)[:, :, 0], 0.0)
    assert value is not None
    return value[:, 0], choices


def self_play_optimum(
    tree: HistoryTree, max_policies: int = DEFAULT_MAX_POLICIES, progress: bool | None = None
) -> OptimalResult:
    """max_pi J(pi) over deterministic joint policies by exhaustive search (the reference of
    :func:`optimal_value`). Raises :class:`PolicyBudgetError` (with the count) when agents 0..n-2 have more
    than ``max_policies`` policy trees."""
    start = time.perf_counter()
    game = check_tree(tree).game
    n = game.n_agents
    enumerated = list(range(n - 1))
    sizes = [count_policy_trees(tree, [i]) for i in enumerated]
    total = int(np.prod(np.array(sizes, dtype=object))) if sizes else 1
    if total > max_policies:
        raise PolicyBudgetError(
            f"{game.name} (H={game.horizon}): exhaustive search needs {total:,} deterministic policy trees "
            f"of agents {enumerated}; the budget is {max_policies:,} (raise max_policies, lower H, or use "
            f"the gmaa method)"
        )
    branching = game.n_joint_observations * game.n_actions[-1]
    template_nodes = count_template_nodes(tree)
    if template_nodes > MAX_TEMPLATE_NODES:
        raise PolicyBudgetError(
            f"{game.name} (H={game.horizon}): the exhaustive best response runs on {template_nodes:,} "
            f"template nodes (|O| |A^{n - 1}| = {branching} per stage); the limit is "
            f"{MAX_TEMPLATE_NODES:,} (use the gmaa method)"
        )
    tmpl = _template(tree)
    width = sum(len(loc) for loc in tmpl.local) * game.n_actions[-1] * 6
    chunk = int(max(1, _CHUNK_FLOATS // max(width, 1)))
    best_value, best_index = -np.inf, 0
    with Progress(total, f"optimal {game.name} H={game.horizon}", enabled=progress) as bar:
        for lo in range(0, total, chunk):
            idx = np.arange(lo, min(total, lo + chunk), dtype=np.int64)
            values, _ = _restricted_best_response(tree, _candidate_actions(tree, sizes, idx))
            k = int(np.argmax(values))
            if values[k] > best_value + 1e-12:
                best_value, best_index = float(values[k]), int(idx[k])
            bar.update(len(idx))
    idx = np.array([best_index], dtype=np.int64)
    policy = []
    rest = idx
    for i, size in zip(enumerated, sizes):
        policy.append(_decode(tree, i, rest % size)[0])
        rest = rest // size
    value, choices = _restricted_best_response(tree, _candidate_actions(tree, sizes, idx))
    hist = tree.local[n - 1]
    response = np.zeros(hist.legal.shape)
    response[np.arange(len(hist)), np.concatenate([c[0] for c in choices])] = 1.0
    policy.append(response)
    return OptimalResult(
        game=game.name,
        horizon=game.horizon,
        discount=game.discount,
        value=float(value[0]),
        policy=tuple(policy),
        n_candidates=total,
        seconds=time.perf_counter() - start,
        method="exhaustive",
    )


def _candidate_actions(tree: HistoryTree, sizes: list[int], idx: np.ndarray) -> list[np.ndarray]:
    """Actions per observation sequence of agents 0..n-2 for joint mixed-radix candidate indices."""
    out = []
    rest = idx
    for i, size in enumerate(sizes):
        out.append(_digits(tree, i, rest % size))
        rest = rest // size
    return out
