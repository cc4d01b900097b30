"""Joint beliefs instead of joint histories: the heuristic of GMAA* on the graph of distinct joint beliefs.

Every joint history tau_t induces a joint belief b(s) = P(s | tau_t) and a chance weight P(o_{1:t} | a_{0:t-1});
the classical upper bounds of :mod:`ers_exact.model.bounds` depend on tau_t only through b (and, for the
legal actions, through the last joint observation, which the search applies itself). So they are computed
once per *distinct* reachable belief of each stage: a belief DAG whose layer t holds the distinct
normalised beliefs reachable at t under any joint actions (rounded to 12 decimals to merge equal ones),
with, per (belief, joint action a, joint observation o), P(o | b, a) and the child belief's index.

The last stage H-1 needs only the immediate rewards, so its layer holds the distinct normalised reward rows
R(b', .) = sum_s b'(s) E[R | s, .] of the children of layer H-2 (never the beliefs). Sizes measured here:
dectiger H=6 25 beliefs at t=4 (62 million joint histories); GridSmall t=3 7,811; fireFighting t=3 5,259;
Mars t=2 57. Values per belief are *normalised* (the search multiplies by the chance weight):

    Q_{H-1}(b, a) = R(b, a);   Q_t(b, a) = R(b, a) + gamma * C_t(b, a)
    C_t(b, a) = max_beta sum_o P(o | b, a) Q_{t+1}(b^{a,o}, beta(o))      (Q_BG, beta = (beta^i: o^i -> a^i))
              = sum_o P(o | b, a) max_{a'} Q_{t+1}(b^{a,o}, a')            (Q_POMDP)
    Q_t(b, a) = sum_s b(s) Q^MDP_t(s, a)                                   (Q_MDP)

with a' restricted to the actions legal after o. Q_BG falls back to Q_POMDP at a stage whose one-step
Bayesian games have more than ``max_bg_rules`` rules of agents 0..n-2 (still an upper bound).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ers_exact.model.bounds import HEURISTICS, rule_table
from ers_exact.model.game import Game
from ers_exact.model.row_index import RowIndex
from ers_exact.util.budget import BudgetError, format_bytes

__all__ = ["BeliefDag", "belief_dag", "dag_heuristic"]

_CHUNK_FLOATS = 4_000_000
_DECIMALS = 12
DEFAULT_MAX_BG_RULES = 4096


@dataclass(frozen=True, eq=False)
class BeliefDag:
    """Distinct joint beliefs per stage, t = 0..H-2, and the distinct last-stage reward rows.

    ``beliefs[t]`` [N_t, S] (t <= H-2); ``prob[t]``, ``child[t]`` [N_t, A, O] for t <= H-2: P(o | b, a) and
    the index of b^{a,o} in layer t+1 (-1 where P = 0); ``reward[t]`` [N_t, A] R(b, a) for every t (layer
    H-1: the distinct reward rows)."""

    game: Game
    beliefs: tuple[np.ndarray, ...]
    prob: tuple[np.ndarray, ...]
    child: tuple[np.ndarray, ...]
    reward: tuple[np.ndarray, ...]

    @property
    def sizes(self) -> list[int]:
        return [len(r) for r in self.reward]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for part in (self.beliefs, self.prob, self.child, self.reward) for a in part)


def _key(rows: np.ndarray) -> np.ndarray:
    return np.round(rows, _DECIMALS) + 0.0  # + 0.0: -0.0 -> 0.0, so equal rows have equal bytes


def belief_dag(game: Game, budget_bytes: float = float("inf")) -> BeliefDag:
    """The belief DAG of ``game`` up to its horizon; :class:`BudgetError` as soon as the layers built so far
    (and the next layer's work arrays) would exceed ``budget_bytes``."""
    H, S, A, O = game.horizon, game.n_states, game.n_joint_actions, game.n_joint_observations
    import scipy.sparse as sp  # lazy: importing ICE's modules never loads scipy

    trans = sp.csr_matrix(game.transition.reshape(S, A * S))  # [S, A S']
    obs = game.observation  # [A, S', O]
    obs_by_o = np.ascontiguousarray(obs.transpose(0, 2, 1))  # [A, O, S']
    R = game.expected_reward  # [S, A]
    # P(o | s', a) R(s', .) for every (a, s', o) at once, where it fits in a chunk's memory
    small = A * S * O * A <= _CHUNK_FLOATS
    obs_reward = (obs[:, :, :, None] * R[None, :, None, :]).reshape(A, S, O * A) if small else None
    scale = max(1.0, float(np.max(np.abs(R))))
    layer = game.initial_belief[None].copy()
    beliefs, probs, children, rewards = [], [], [], []
    used = 0.0
    for t in range(H - 1):
        last = t + 1 == H - 1
        beliefs.append(layer)
        rewards.append(layer @ R)
        n = len(layer)
        used += layer.nbytes + rewards[-1].nbytes + 2 * n * A * O * 8
        if used > budget_bytes:
            raise BudgetError(
                f"{game.name} H={H}: the joint beliefs of stages 0..{t} take {format_bytes(used)} "
                f"({n:,} distinct beliefs at t={t}), over the budget of {format_bytes(budget_bytes)}"
            )
        prob = np.zeros((n, A, O))
        child = np.full((n, A, O), -1, dtype=np.int64)
        width = A if last else S
        index = RowIndex(width, (lambda v: _key(v / scale)) if last else _key)
        chunk = max(1, _CHUNK_FLOATS // (A * (S + 2 * O * width)))
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            bt = np.asarray((trans.T @ layer[lo:hi].T).T).reshape(hi - lo, A, S)  # [C, A, S']
            p = np.matmul(bt.transpose(1, 0, 2), obs).transpose(1, 0, 2)  # P(o | b, a)  [C, A, O]
            prob[lo:hi] = p
            c, a, o = np.nonzero(p > 0)  # the live (b, a, o): one child each
            if last and obs_reward is not None:  # sum_s' P(s', o | b, a) R(s', .): one product per a
                w = np.matmul(bt.transpose(1, 0, 2), obs_reward).reshape(A, hi - lo, O, A)[a, c, o]
            else:
                w = bt[c, a] * obs_by_o[a, o]  # P(s', o | b, a)  [L, S']
                w = w @ R if last else w
            vec = w / p[c, a, o, None]  # b^{a,o}, or its reward row R(b^{a,o}, .)
            child[c + lo, a, o] = index.add(vec)  # equal rows (to 12 decimals) merged
            if used + index.n * (width * 8 * 2 + 100) > budget_bytes:
                raise BudgetError(
                    f"{game.name} H={H}: stage {t + 1} has more than {index.n:,} distinct joint "
                    f"{'reward rows' if last else 'beliefs'}, over the memory budget of "
                    f"{format_bytes(budget_bytes)}"
                )
        probs.append(prob)
        children.append(child)
        layer = index.rows.copy()
        used += layer.nbytes
    if H == 1:
        rewards.append(layer @ R)
    else:
        rewards.append(layer)  # the last stage's distinct reward rows
    for arr in (*beliefs, *probs, *children, *rewards):
        arr.setflags(write=False)
    return BeliefDag(game, tuple(beliefs), tuple(probs), tuple(children), tuple(rewards))


def dag_heuristic(
    dag: BeliefDag, kind: str = "Q_BG", max_bg_rules: int = DEFAULT_MAX_BG_RULES
) -> tuple[tuple[np.ndarray, ...], tuple[int, ...]]:
    """Normalised upper-bound Q_t(b, a) per belief of every layer (module docstring), and the stages where
    Q_BG fell back to Q_POMDP.  # [N_t, A] each"""
    if kind not in HEURISTICS:
        raise ValueError(f"unknown heuristic {kind!r}; choose one of {', '.join(HEURISTICS)}")
    game = dag.game
    H = game.horizon
    qs: list[np.ndarray] = [None] * H  # type: ignore[list-item]
    qs[H - 1] = dag.reward[H - 1]
    if kind == "Q_MDP":
        v = np.zeros(game.n_states)
        for t in reversed(range(H)):
            q_state = game.expected_reward + game.discount * (game.transition @ v)  # [S, A]
            v = q_state.max(axis=1)
            if t < H - 1:
                qs[t] = dag.beliefs[t] @ q_state
        # the last layer holds reward rows, which are Q_MDP's last stage already
        return tuple(qs), ()
    legal_next = _joint_legal_after(game)  # [O, A]
    bg = kind == "Q_BG" and _bg_rule_count(game) <= max_bg_rules
    fallback = [] if bg or kind != "Q_BG" else list(range(H - 1))
    for t in reversed(range(H - 1)):
        nxt = np.concatenate([qs[t + 1], np.zeros((1, qs[t + 1].shape[1]))])  # row -1: absent child
        cont = np.empty(dag.prob[t].shape[:2])  # [N, A]
        n, A, O = dag.prob[t].shape
        chunk = max(1, _CHUNK_FLOATS // (A * O * A))
        for lo in range(0, n, chunk):
            p = dag.prob[t][lo : lo + chunk]
            pay = p[..., None] * nxt[dag.child[t][lo : lo + chunk]]  # [C, A, O, A']
            pay = np.where(legal_next[None, None] | (p[..., None] == 0), pay, -np.inf)
            flat = pay.reshape(-1, O, A)
            val = _bg_max(game, flat) if bg else flat.max(axis=2).sum(axis=1)
            cont[lo : lo + chunk] = val.reshape(-1, A)
        qs[t] = dag.reward[t] + game.discount * cont
    for q in qs:
        q.setflags(write=False)
    return tuple(qs), tuple(fallback)


def _joint_legal_after(game: Game) -> np.ndarray:
    """legal[o, a]: joint action a is legal after joint observation o.  # [O, A]"""
    ja, jo = game.joint_actions, game.joint_observations
    legal = np.ones((game.n_joint_observations, game.n_joint_actions), dtype=bool)
    for i in range(game.n_agents):
        legal &= game.legal_mask(i)[1 + jo[:, i]][:, ja[:, i]]
    return legal


def _bg_rule_count(game: Game) -> int:
    total = 1
    for i in range(game.n_agents - 1):
        total *= int(np.prod(game.legal_mask(i)[1:].sum(axis=1), dtype=np.int64))
    return total


def _bg_max(game: Game, pay: np.ndarray) -> np.ndarray:
    """max_beta sum_o pay[c, o, beta(o)] per row c, beta = (beta^i: o^i -> legal a^i), by enumerating the
    rules of agents 0..n-2 and best-responding agent n-1 (-inf entries: illegal for agent n-1).  # [C]"""
    n = game.n_agents
    C, O, _ = pay.shape
    last = n - 1
    A_last, O_last = game.n_actions[last], game.n_observations[last]
    stride = np.cumprod((1, *tuple(reversed(game.n_actions))))[:-1][::-1]
    jo = game.joint_observations
    base = np.zeros((1, O), dtype=np.int64)
    for i in range(last):
        rules = rule_table([np.flatnonzero(game.legal_mask(i)[1 + o]) for o in range(game.n_observations[i])])
        per = rules[:, jo[:, i]] * stride[i]  # [R_i, O]
        base = (base[:, None, :] + per[None, :, :]).reshape(-1, O)
    cols = base[:, :, None] + np.arange(A_last)[None, None, :] * stride[last]  # [R, O, A_last]
    n_rules = cols.shape[0]
    legal_last = game.legal_mask(last)[1:]  # [O_last, A_last]
    out = np.empty(C)
    chunk = max(1, _CHUNK_FLOATS // max(1, n_rules * O * A_last))
    for lo in range(0, C, chunk):
        # -inf entries (illegal joint actions) can only be picked with an illegal action of agent n-1 (the
        # rules pick legal actions): their sums are -inf and masked below anyway, so no clean-up is needed
        g = pay[lo : lo + chunk][:, np.arange(O)[None, :, None], cols]  # [c, R, O, A_last]
        summed = g.reshape(len(g), n_rules, O // O_last, O_last, A_last).sum(axis=2)
        summed = np.where(legal_last[None, None], summed, -np.inf)
        out[lo : lo + chunk] = summed.max(axis=3).sum(axis=2).max(axis=1)
    return out
