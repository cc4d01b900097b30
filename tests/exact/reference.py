"""A slow, independent reference for exact Dec-POMDP values, written from the definitions.

Everything here is plain recursive Python over explicit (state, joint history) paths: the game's numpy arrays
are turned into nested lists once, joint actions / observations are re-derived with :func:`itertools.product`
(row-major, last agent fastest) instead of using ``game.joint_actions``, and no quantity is vectorised. It
shares no code with :mod:`ers_exact.model.values` or :mod:`ers_exact.model.histories`; the only bridge is
:func:`policy_fn_from_arrays`, which reads a policy array through ``tree.local[i].index`` (so a history the
reference reaches but the tree pruned raises a clear error).

Definitions (paper, Background and Appendix eq. Q_pi_full), with transition-attached rewards
``R[s, a, s']`` received on the step s_t -> s_{t+1}:

* J(pi) = E_pi[ sum_{t=0}^{H-1} gamma^t r_{t+1} ].
* Joint action value Q(tau_t, a) = E[ sum_{k>=t} gamma^{k-t} r_{k+1} | tau_t, a_t = a, then pi ], where
  the conditional over s_t given tau_t uses only chance weights b_0 * T * U (the policy cancels).
* Local action value Q^i(tau^i_t, a^i) = E[ sum_{k>=t} gamma^{k-t} r_{k+1} | tau^i_t, a^i_t = a^i, the
  others follow pi^{-i} now and everyone follows pi afterwards ]. The conditioning weight of each path
  (s_0, ..., s_t, tau_t) consistent with tau^i_t is b_0 * prod T * prod U * prod pi^{-i}; agent i's own
  action probabilities are constant over those paths and are left out (they cancel after normalising).
  Q^i is NaN at illegal actions and where the conditioning weight is exactly zero.

A policy is given as ``policy_fn(agent, history_tuple) -> probability vector over the agent's actions``
with history tuples ``(a_0, o_1, ..., a_{t-1}, o_t)`` of local indices.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

from ers_exact.model.game import Game
from ers_exact.model.histories import HistoryTree

__all__ = [
    "History",
    "JointHistory",
    "PolicyFn",
    "joint_q_to_dict",
    "local_q_to_dict",
    "policy_fn_from_arrays",
    "ref_expected_return",
    "ref_joint_q",
    "ref_local_q",
    "ref_possible_histories",
    "ref_reachable_histories",
]

History = tuple[int, ...]
JointHistory = tuple[History, ...]
PolicyFn = Callable[[int, History], Sequence[float]]

NAN = float("nan")


class _Reference:
    """One game and one policy; memoised plain-Python recursions over (t, s, joint history)."""

    def __init__(self, game: Game, policy_fn: PolicyFn | None) -> None:
        self.n = game.n_agents
        self.S = game.n_states
        self.H = int(game.horizon)
        self.gamma = float(game.discount)
        self.n_actions = tuple(len(a) for a in game.action_names)
        self.n_obs = tuple(len(o) for o in game.observation_names)
        # Row-major, last agent fastest: exactly the order of itertools.product.
        self.joint_actions: list[tuple[int, ...]] = list(
            itertools.product(*[range(k) for k in self.n_actions])
        )
        self.joint_obs: list[tuple[int, ...]] = list(itertools.product(*[range(k) for k in self.n_obs]))
        self.T: list[list[list[float]]] = np.asarray(game.transition).tolist()
        self.U: list[list[list[float]]] = np.asarray(game.observation).tolist()
        self.R: list[list[list[float]]] = np.asarray(game.reward).tolist()
        self.b0: list[float] = np.asarray(game.initial_belief).tolist()
        if game.legal_actions is None:
            self.legal_rows = [[[True] * self.n_actions[i]] * (1 + self.n_obs[i]) for i in range(self.n)]
        else:
            self.legal_rows = [np.asarray(m, dtype=bool).tolist() for m in game.legal_actions]
        self.policy_fn = policy_fn
        self._pi: dict[tuple[int, History], list[float]] = {}
        self._value: dict[tuple[int, int, JointHistory], float] = {}
        self._action_value: dict[tuple[int, int, JointHistory, int], float] = {}

    # ----- primitives -----
    def legal(self, agent: int, hist: History) -> list[bool]:
        """A^i(tau^i): row 0 for the empty history, row 1 + o for a history ending in observation o."""
        return self.legal_rows[agent][0 if not hist else 1 + hist[-1]]

    def pi(self, agent: int, hist: History) -> list[float]:
        """pi^i(. | tau^i) as a list, checked for length and for mass on illegal actions."""
        key = (agent, hist)
        if key not in self._pi:
            assert self.policy_fn is not None, "this computation needs a policy"
            probs = [float(p) for p in self.policy_fn(agent, hist)]
            if len(probs) != self.n_actions[agent]:
                raise ValueError(
                    f"policy_fn({agent}, {hist}) has {len(probs)} entries, expected {self.n_actions[agent]}"
                )
            legal = self.legal(agent, hist)
            if any(p > 1e-12 and not ok for p, ok in zip(probs, legal)):
                raise ValueError(f"policy_fn({agent}, {hist}) puts mass on an illegal action: {probs}")
            self._pi[key] = probs
        return self._pi[key]

    def all_legal(self, hists: JointHistory, a: tuple[int, ...]) -> bool:
        return all(self.legal(i, hists[i])[a[i]] for i in range(self.n))

    def prob_of(self, hists: JointHistory, a: tuple[int, ...], skip: int | None = None) -> float:
        """prod_{i != skip} pi^i(a^i | tau^i)."""
        p = 1.0
        for i in range(self.n):
            if i != skip:
                p *= self.pi(i, hists[i])[a[i]]
        return p

    @staticmethod
    def extend(hists: JointHistory, a: tuple[int, ...], o: tuple[int, ...]) -> JointHistory:
        return tuple(h + (a[i], o[i]) for i, h in enumerate(hists))

    # ----- backward recursion: conditional expected return-to-go -----
    def action_value(self, t: int, s: int, hists: JointHistory, a_idx: int) -> float:
        """E[ r_{t+1} + gamma * V_{t+1} | s_t = s, tau_t = hists, a_t = a ] (then everyone follows pi)."""
        key = (t, s, hists, a_idx)
        if key in self._action_value:
            return self._action_value[key]
        a = self.joint_actions[a_idx]
        total = 0.0
        for s2 in range(self.S):
            p = self.T[s][a_idx][s2]
            if p == 0.0:
                continue
            inner = self.R[s][a_idx][s2]
            if t + 1 < self.H:
                cont = 0.0
                for o_idx, o in enumerate(self.joint_obs):
                    q = self.U[a_idx][s2][o_idx]
                    if q == 0.0:
                        continue
                    cont += q * self.value(t + 1, s2, self.extend(hists, a, o))
                inner += self.gamma * cont
            total += p * inner
        self._action_value[key] = total
        return total

    def value(self, t: int, s: int, hists: JointHistory) -> float:
        """V_t(s, tau_t) = sum_a pi(a | tau_t) * action_value(t, s, tau_t, a)."""
        key = (t, s, hists)
        if key in self._value:
            return self._value[key]
        total = 0.0
        for a_idx, a in enumerate(self.joint_actions):
            p = self.prob_of(hists, a)
            if p == 0.0:
                continue
            total += p * self.action_value(t, s, hists, a_idx)
        self._value[key] = total
        return total

    def root(self) -> JointHistory:
        return tuple(() for _ in range(self.n))

    # ----- forward enumeration of explicit paths (s_0, ..., s_t, tau_t) -----
    def walk(
        self,
        visit: Callable[[int, int, JointHistory, float], None],
        action_weight: Callable[[JointHistory, tuple[int, ...]], float | None],
    ) -> None:
        """Call ``visit(t, s_t, tau_t, w)`` once per explicit state path with positive chance weight.

        ``w`` is b_0(s_0) * prod T * prod U * prod action_weight along the path. ``action_weight`` returns
        None to drop a joint action (illegal); a zero weight keeps the branch (so every chance-possible
        history is visited) but with w = 0."""

        def rec(t: int, s: int, hists: JointHistory, w: float) -> None:
            visit(t, s, hists, w)
            if t + 1 >= self.H:
                return
            for a_idx, a in enumerate(self.joint_actions):
                aw = action_weight(hists, a)
                if aw is None:
                    continue
                for s2 in range(self.S):
                    p = self.T[s][a_idx][s2]
                    if p == 0.0:
                        continue
                    for o_idx, o in enumerate(self.joint_obs):
                        q = self.U[a_idx][s2][o_idx]
                        if q == 0.0:
                            continue
                        rec(t + 1, s2, self.extend(hists, a, o), w * aw * p * q)

        for s in range(self.S):
            if self.b0[s] != 0.0:
                rec(0, s, self.root(), self.b0[s])


def ref_expected_return(game: Game, policy_fn: PolicyFn) -> float:
    """J(pi) = sum_s b_0(s) V_0(s, empty joint history)."""
    ref = _Reference(game, policy_fn)
    return sum(ref.b0[s] * ref.value(0, s, ref.root()) for s in range(ref.S) if ref.b0[s] != 0.0)


def ref_local_q(game: Game, policy_fn: PolicyFn, agent: int) -> dict[History, list[float]]:
    """Q^i_pi(tau^i, a^i) for every chance-possible local history of ``agent`` (key set = the histories
    reached with positive b_0 * T * U weight under legal actions); NaN at illegal actions and where the
    conditioning weight b_0 * T * U * pi^{-i} sums to exactly zero."""
    ref = _Reference(game, policy_fn)
    num: dict[History, list[float]] = {}
    den: dict[History, float] = {}

    def visit(t: int, s: int, hists: JointHistory, w: float) -> None:
        h = hists[agent]
        if h not in den:
            den[h] = 0.0
            num[h] = [0.0] * ref.n_actions[agent]
        den[h] += w
        if w == 0.0:
            return
        own_legal = ref.legal(agent, h)
        for a_idx, a in enumerate(ref.joint_actions):
            if not own_legal[a[agent]]:
                continue
            p_others = ref.prob_of(hists, a, skip=agent)
            if p_others == 0.0:
                continue
            num[h][a[agent]] += w * p_others * ref.action_value(t, s, hists, a_idx)

    def action_weight(hists: JointHistory, a: tuple[int, ...]) -> float | None:
        # agent i's own action is fixed by tau^i (weight 1); the others weigh by their policy.
        if not ref.all_legal(hists, a):
            return None
        return ref.prob_of(hists, a, skip=agent)

    ref.walk(visit, action_weight)
    out: dict[History, list[float]] = {}
    for h, d in den.items():
        legal = ref.legal(agent, h)
        out[h] = [num[h][k] / d if (d > 0.0 and legal[k]) else NAN for k in range(ref.n_actions[agent])]
    return out


def ref_joint_q(game: Game, policy_fn: PolicyFn) -> dict[JointHistory, list[float]]:
    """Q_pi(tau_t, a) for every chance-possible joint history (keyed by the tuple of local histories);
    the state posterior given tau_t uses chance weights only. NaN at illegal joint actions."""
    ref = _Reference(game, policy_fn)
    num: dict[JointHistory, list[float]] = {}
    den: dict[JointHistory, float] = {}
    n_joint = len(ref.joint_actions)

    def visit(t: int, s: int, hists: JointHistory, w: float) -> None:
        if hists not in den:
            den[hists] = 0.0
            num[hists] = [0.0] * n_joint
        den[hists] += w
        for a_idx, a in enumerate(ref.joint_actions):
            if ref.all_legal(hists, a):
                num[hists][a_idx] += w * ref.action_value(t, s, hists, a_idx)

    ref.walk(visit, lambda hists, a: 1.0 if ref.all_legal(hists, a) else None)
    return {
        h: [num[h][k] / den[h] if ref.all_legal(h, ref.joint_actions[k]) else NAN for k in range(n_joint)]
        for h in den
    }


def ref_reachable_histories(game: Game, policy_fn: PolicyFn) -> tuple[set[History], ...]:
    """Local histories of each agent reached with positive probability under the joint policy pi."""
    ref = _Reference(game, policy_fn)
    seen: tuple[set[History], ...] = tuple(set() for _ in range(ref.n))

    def visit(t: int, s: int, hists: JointHistory, w: float) -> None:
        if w > 0.0:
            for i, h in enumerate(hists):
                seen[i].add(h)

    def action_weight(hists: JointHistory, a: tuple[int, ...]) -> float | None:
        p = ref.prob_of(hists, a)
        return p if p > 0.0 else None

    ref.walk(visit, action_weight)
    return seen


def ref_possible_histories(game: Game) -> tuple[set[History], ...]:
    """Local histories of each agent with positive chance weight for some sequence of legal actions
    (no policy involved)."""
    ref = _Reference(game, None)
    seen: tuple[set[History], ...] = tuple(set() for _ in range(ref.n))

    def visit(t: int, s: int, hists: JointHistory, w: float) -> None:
        for i, h in enumerate(hists):
            seen[i].add(h)

    ref.walk(visit, lambda hists, a: 1.0 if ref.all_legal(hists, a) else None)
    return seen


# ----- bridges to ers arrays -----
def policy_fn_from_arrays(tree: HistoryTree, policy: Sequence[np.ndarray]) -> PolicyFn:
    """Adapter: an ers policy (per-agent arrays [K_i, |A^i|]) as ``policy_fn(agent, history_tuple)``.

    Raises KeyError naming the history when the reference asks for one the tree does not hold."""
    arrays = [np.asarray(p, dtype=np.float64) for p in policy]
    for i, arr in enumerate(arrays):
        if arr.ndim != 2:
            raise ValueError(f"policy of agent {i} must be [K_i, |A^i|] (not batched), got {arr.shape}")

    def policy_fn(agent: int, hist: History) -> list[float]:
        try:
            k = tree.local[agent].index[hist]
        except KeyError:
            raise KeyError(
                f"agent {agent}: history {hist} is reached by the reference but is not in the enumerated tree"
            ) from None
        return arrays[agent][k].tolist()

    return policy_fn


def local_q_to_dict(tree: HistoryTree, q: np.ndarray, agent: int) -> dict[History, list[float]]:
    """ers local Q array [K_i, |A^i|] of one agent as {history tuple: row}."""
    hist = tree.local[agent]
    return {hist.as_tuple(k): [float(x) for x in q[k]] for k in range(len(hist))}


def joint_q_to_dict(tree: HistoryTree, q_layers: Sequence[np.ndarray]) -> dict[JointHistory, list[float]]:
    """ers joint action values (list over t of [N_t, A]) as {tuple of local history tuples: row}."""
    out: dict[JointHistory, list[float]] = {}
    for layer, q in zip(tree.layers, q_layers):
        for node in range(len(layer)):
            key = tuple(tree.local[i].as_tuple(int(layer.local[node, i])) for i in range(tree.game.n_agents))
            if key in out:
                raise AssertionError(f"two joint nodes project onto the same joint history {key}")
            out[key] = [float(x) for x in q[node]]
    return out


def is_nan(x: float) -> bool:
    return isinstance(x, float) and math.isnan(x)
