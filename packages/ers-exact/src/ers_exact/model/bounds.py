"""Upper bounds on the optimal value of a Dec-POMDP, as heuristic joint action values on the history tree.

Every quantity here is *unnormalised*: a value at a joint history node n of layer t is weighted by the
chance weight of the node, P(o_{1:t} | a_{0:t-1}) (the sum of its state weights w_n), so that the value
of a set of nodes reached by a deterministic joint policy is a plain sum. For a joint policy pi,

    J(pi) = sum_k gamma^k sum_{n in layer k reached by pi} R_k[n, pi(n)],  R_k[n, a] = sum_s w_n[s] E[R|s, a].

A heuristic Q_t[n, a] is an upper bound on the return-to-go from node n after joint action a of *any*
continuation, so gamma^t sum_{n reached at t} Q_t[n, pi_t(n)] bounds the future of a partial policy
(the GMAA* heuristic, Oliehoek, Spaan & Vlassis 2008). Three classical bounds, tightest last:

* ``Q_MDP``:   the underlying MDP (the state is observed) -- sum_s w_n[s] Q^MDP_{H-t}(s, a).
* ``Q_POMDP``: the underlying POMDP (one agent sees every joint observation): backward induction over the
  joint history tree, V_t(n) = max_{a legal} Q_t[n, a], Q_t[n, a] = R_t[n, a] + gamma sum_o V_{t+1}(child).
* ``Q_BG``:    one-step-delayed communication: at t + 1 the agents know the joint history up to t but only
  their own new observation, so Q_t[n, a] = R_t[n, a] + gamma max_beta sum_o Q_{t+1}[child(n, a, o),
  beta(o)] with beta = (beta^i: o^i -> a^i) -- a Bayesian game per (n, a), solved exactly here by
  enumerating the decision rules of all agents but the last and best-responding the last one.

Q_MDP >= Q_POMDP >= Q_BG >= Q* of every policy (each relaxes less information). Illegal joint actions
carry -inf. ``Q_BG`` falls back to ``Q_POMDP`` at a stage whose Bayesian games are too large to
enumerate (still an upper bound; :func:`upper_bound_q` reports which stages did).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ers_exact.model.config import HEURISTICS
from ers_exact.model.histories import HistoryTree

__all__ = [
    "HEURISTICS",
    "HeuristicQ",
    "child_table",
    "rule_table",
    "stage_rewards",
    "upper_bound_q",
]

_CHUNK_FLOATS = 4_000_000
DEFAULT_MAX_BG_RULES = 4096


@dataclass(frozen=True, eq=False)
class HeuristicQ:
    """Unnormalised upper-bound joint action values per decision layer, [N_t, A] (-inf where illegal)."""

    kind: str
    q: tuple[np.ndarray, ...]
    stages_as_pomdp: tuple[int, ...] = ()  # Q_BG stages computed as Q_POMDP (Bayesian games too large)

    @property
    def root_bound(self) -> float:
        """max_a Q_0[root, a]: an upper bound on the optimal value J*."""
        return float(np.max(self.q[0][0]))


def stage_rewards(tree: HistoryTree) -> tuple[np.ndarray, ...]:
    """R_t[n, a] = sum_s w_n[s] E[R | s, a] for every decision layer (undiscounted).  # [N_t, A] each"""

    def build() -> tuple[np.ndarray, ...]:
        out = []
        for layer in tree.layers:
            r = layer.weight @ tree.game.expected_reward
            r.setflags(write=False)
            out.append(r)
        return tuple(out)

    return tree.derived("bounds.rewards", build)


def child_table(tree: HistoryTree) -> tuple[np.ndarray, ...]:
    """For t < H-1, the index in layer t+1 of the child of node n after joint action a and joint
    observation o, or -1 where it has zero probability (or a is illegal).  # [N_t, A, O] int64 each"""

    def build() -> tuple[np.ndarray, ...]:
        A, O = tree.game.n_joint_actions, tree.game.n_joint_observations
        out = []
        for t in range(len(tree.layers) - 1):
            nxt = tree.layers[t + 1]
            table = np.full((len(tree.layers[t]), A, O), -1, dtype=np.int64)
            table[nxt.parent, nxt.action, nxt.observation] = np.arange(len(nxt))
            table.setflags(write=False)
            out.append(table)
        return tuple(out)

    return tree.derived("bounds.children", build)


def rule_table(options: list[np.ndarray]) -> np.ndarray:
    """Every choice of one entry from each option list, in mixed-radix order (first list fastest).
    ``options[k]`` are the allowed values at position k; returns [prod of lengths, len(options)]."""
    radix = [len(o) for o in options]
    count = int(np.prod(radix, dtype=np.int64)) if radix else 1
    idx = np.arange(count, dtype=np.int64)
    out = np.empty((count, len(options)), dtype=np.int64)
    for k, opts in enumerate(options):
        out[:, k] = opts[idx % radix[k]]
        idx //= radix[k]
    return out


def upper_bound_q(
    tree: HistoryTree, kind: str = "Q_BG", max_bg_rules: int = DEFAULT_MAX_BG_RULES
) -> HeuristicQ:
    """The heuristic ``kind`` (one of :data:`HEURISTICS`) on every decision layer; memoised on the tree.

    ``max_bg_rules`` caps the joint decision rules enumerated per Bayesian game of ``Q_BG`` (all agents but
    the last); a stage above it is computed as ``Q_POMDP``."""
    if kind not in HEURISTICS:
        raise ValueError(f"unknown heuristic {kind!r}; choose one of {', '.join(HEURISTICS)}")
    return tree.derived(f"bounds.{kind}.{max_bg_rules}", lambda: _build(tree, kind, max_bg_rules))


def _build(tree: HistoryTree, kind: str, max_bg_rules: int) -> HeuristicQ:
    game = tree.game
    H = len(tree.layers)
    rewards = stage_rewards(tree)
    if kind == "Q_MDP":
        q_state = _mdp_q(tree)  # [H][S, A]
        out = []
        for t, layer in enumerate(tree.layers):
            q = layer.weight @ q_state[t]
            out.append(np.where(layer.legal, q, -np.inf))
        return HeuristicQ(kind, tuple(out))
    children = child_table(tree)
    qs: list[np.ndarray] = [None] * H  # type: ignore[list-item]
    fallback = []
    qs[H - 1] = np.where(tree.layers[H - 1].legal, rewards[H - 1], -np.inf)
    for t in reversed(range(H - 1)):
        nxt = qs[t + 1]
        if kind == "Q_BG" and _bg_rule_count(tree, skip_last=True) <= max_bg_rules:
            cont = _bg_continuation(tree, children[t], nxt)
        else:
            if kind == "Q_BG":
                fallback.append(t)
            v = np.max(nxt, axis=1)  # every node has a legal joint action
            v = np.concatenate([v, [0.0]])
            cont = v[children[t]].sum(axis=2)  # index -1 -> the appended 0
        q = rewards[t] + game.discount * cont
        qs[t] = np.where(tree.layers[t].legal, q, -np.inf)
    for q in qs:
        q.setflags(write=False)
    return HeuristicQ(kind, tuple(qs), tuple(sorted(fallback)))


def _mdp_q(tree: HistoryTree) -> list[np.ndarray]:
    """Q^MDP with H - t stages to go, for t = 0..H-1 (max over all joint actions: a relaxation).  # [S, A]"""
    game = tree.game
    H = len(tree.layers)
    out: list[np.ndarray] = [None] * H  # type: ignore[list-item]
    v = np.zeros(game.n_states)
    for t in reversed(range(H)):
        q = game.expected_reward + game.discount * (game.transition @ v)
        out[t] = q
        v = q.max(axis=1)
    return out


def _bg_rule_count(tree: HistoryTree, skip_last: bool) -> int:
    """Joint one-step decision rules (o^i -> legal a^i) of agents 0..n-2 (or all agents)."""
    game = tree.game
    agents = range(game.n_agents - 1) if skip_last else range(game.n_agents)
    total = 1
    for i in agents:
        total *= int(np.prod(game.legal_mask(i)[1:].sum(axis=1), dtype=np.int64))
    return total


def _bg_continuation(tree: HistoryTree, children: np.ndarray, q_next: np.ndarray) -> np.ndarray:
    """max_beta sum_o q_next[child(n, a, o), beta(o)] for every (n, a): a Bayesian game per pair, types
    = local observations o^i, solved by enumerating beta^0..beta^{n-2} and best-responding agent n-1.
    # [N_t, A]"""
    game = tree.game
    n = game.n_agents
    N, A, O = children.shape
    last = n - 1
    A_last = game.n_actions[last]
    O_last = game.n_observations[last]
    # payoff per (pair, o, a') with rows of absent children zero; a' illegal at o -> -inf
    padded = np.concatenate([q_next, np.zeros((1, A))])
    stride = np.cumprod((1, *tuple(reversed(game.n_actions))))[:-1][::-1]  # joint action strides
    # rules of agents 0..n-2: actions per local observation, legal after that observation
    rules = [
        rule_table([np.flatnonzero(game.legal_mask(i)[1 + o]) for o in range(game.n_observations[i])])
        for i in range(last)
    ]
    jo = game.joint_observations  # [O, n]
    base_rules = np.zeros((1, O), dtype=np.int64)
    for i in range(last):  # joint offset of agents 0..n-2's actions at each joint observation
        per = rules[i][:, jo[:, i]] * stride[i]  # [R_i, O]
        base_rules = (base_rules[:, None, :] + per[None, :, :]).reshape(-1, O)
    n_rules = base_rules.shape[0]
    cols = base_rules[:, :, None] + np.arange(A_last)[None, None, :] * stride[last]  # [R, O, A_last]
    pairs = children.reshape(N * A, O)
    out = np.empty(N * A)
    chunk = max(1, _CHUNK_FLOATS // max(1, n_rules * O * A_last))
    for lo in range(0, N * A, chunk):
        kids = pairs[lo : lo + chunk]  # [C, O]
        pay = padded[kids]  # [C, O, A]
        # gathered[c, r, o, b] = pay[c, o, cols[r, o, b]]
        gathered = pay[:, np.arange(O)[None, :, None], cols]  # [C, R, O, A_last]
        # -inf only where agent n-1's action is illegal after its observation: zero it for the sum over the
        # others' observations (joint observations run with agent n-1's fastest) ...
        gathered[np.isneginf(gathered)] = 0.0
        summed = gathered.reshape(len(kids), n_rules, O // O_last, O_last, A_last).sum(axis=2)
        # ... and exclude it from the max
        legal_last = game.legal_mask(last)[1:]  # [O_last, A_last]
        summed = np.where(legal_last[None, None], summed, -np.inf)
        out[lo : lo + chunk] = summed.max(axis=3).sum(axis=2).max(axis=1)
    return out.reshape(N, A)
