"""Exact values of tabular joint policies: J(pi), joint action values and every agent's local action
values Q^i_pi(tau^i, a^i), vectorised over joint history nodes and over a batch of policies.

A joint policy is a tuple with one array per agent, [K_i, |A^i|] or batched [P, K_i, |A^i|], rows on the
simplex over the legal actions A^i(tau^i), indexed by :class:`~ers_exact.model.histories.LocalHistories`.

Q^i is the reward-to-go action value of the paper's Appendix (eq. Q_pi_full):

    Q^i_pi(tau^i_t, a^i) = sum_{s_t, tau_t} B_pi(s_t, tau_t | tau^i_t) sum_{a^{-i}} pi^{-i}(a^{-i} | tau^{-i}_t)
                           E[ sum_{k >= t} gamma^{k-t} r_{k+1} | s_t, tau_t, a_t, then pi ],

where the belief B_pi weighs joint histories consistent with tau^i_t by their chance weight times the
other agents' action probabilities (agent i's own probabilities are constant on them and cancel).
Q^i is NaN where tau^i_t has probability zero under pi^{-i} and at illegal actions. "Zero" is a
floating-point zero: with near-deterministic partners (probabilities ~1e-170 multiplied along a path) a
history of tiny positive probability can underflow and read as NaN too.

Algorithm: one forward pass (per-agent path probabilities), one backward pass (unnormalised joint
action values G_t[n, a] = E[return-to-go; s_t, tau_t] via sparse child aggregation), then a sparse
projection of joint nodes onto local histories. No Python loop over histories.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ers_exact.model.histories import HistoryTree, check_tree
from ers_exact.model.sequence_form import SequenceForm, sequence_form
from ers_exact.util.errors import InputError

__all__ = [
    "Policy",
    "PolicyError",
    "best_response",
    "check_policy",
    "expected_return",
    "joint_action_values",
    "local_history_reach",
    "local_q_values",
    "multilinear_return",
    "return_gradient",
    "uniform_policy",
]

Policy = tuple[np.ndarray, ...] | Sequence[np.ndarray]
POLICY_TOL = 1e-9


class PolicyError(InputError, ValueError):
    """A policy does not fit the game's histories (shape, simplex rows, mass on illegal actions)."""


def uniform_policy(tree: HistoryTree) -> tuple[np.ndarray, ...]:
    """The uniform joint policy over legal actions, [K_i, |A^i|] per agent."""
    return tuple(h.legal / h.legal.sum(axis=1, keepdims=True) for h in check_tree(tree).local)


def _agent_array(p: object, agent: int) -> np.ndarray:
    try:
        arr = np.asarray(p)
        real = np.asarray(arr, dtype=np.float64) if not np.iscomplexobj(arr) else None
    except (TypeError, ValueError):
        raise PolicyError(
            f"policy of agent {agent} is not a rectangular array of numbers (histories x actions)"
        ) from None
    if real is None:  # a cast to float64 would drop the imaginary part with only a warning
        raise PolicyError(f"policy of agent {agent} has complex entries: give real probabilities")
    return real


def check_policy(tree: HistoryTree, policy: Policy) -> tuple[tuple[np.ndarray, ...], bool]:
    """Validate a (possibly batched) joint policy; return it as [P, K_i, |A^i|] arrays and whether batched."""
    check_tree(tree)
    if isinstance(policy, (str, bytes, dict)) or not hasattr(policy, "__len__"):
        raise PolicyError(f"a joint policy is a sequence of one array per agent, got {type(policy).__name__}")
    if len(policy) != tree.game.n_agents:
        raise PolicyError(f"policy has {len(policy)} agents, the game has {tree.game.n_agents}")
    arrays = [_agent_array(p, i) for i, p in enumerate(policy)]
    batched = arrays[0].ndim == 3
    if len({a.ndim for a in arrays}) > 1:  # one agent a table, another a batch: say so, never use a part
        dims = ", ".join(f"agent {i}: {np.shape(a)}" for i, a in enumerate(arrays))
        raise PolicyError(f"the agents' policies mix one table and a batch of tables ({dims}); give one kind")
    if batched and any(len(a) == 0 for a in arrays):
        raise PolicyError("the batch holds no joint policy (P = 0): give at least one")
    out = []
    for i, (arr, hist) in enumerate(zip(arrays, tree.local)):
        if arr.ndim == 2:
            arr = arr[None]
        shape = (len(hist), tree.game.n_actions[i])
        if arr.ndim != 3 or arr.shape[1:] != shape or (batched and arr.shape[0] != arrays[0].shape[0]):
            raise PolicyError(
                f"policy of agent {i} has shape {np.shape(policy[i])}, expected "
                f"{'[P, ' if batched else '['}{shape[0]}, {shape[1]}] (histories x actions)"
            )
        if np.any(arr < -POLICY_TOL) or not np.all(np.isfinite(arr)):
            raise PolicyError(f"policy of agent {i} has negative or non-finite entries")
        sums = arr.sum(axis=2)
        bad = np.argwhere(np.abs(sums - 1.0) > 1e-6)
        if bad.size:
            p, k = bad[0]
            raise PolicyError(f"policy of agent {i}, history {k} (batch {p}) sums to {sums[p, k]}, not 1")
        illegal = np.argwhere((arr > POLICY_TOL) & ~hist.legal[None])
        if illegal.size:
            p, k, a = illegal[0]
            raise PolicyError(f"policy of agent {i} puts mass on illegal action {a} at history {k}")
        out.append(arr)
    return tuple(out), batched


@dataclass(frozen=True)
class _Pass:
    """Forward/backward quantities of a batch of P joint policies."""

    act: list[list[np.ndarray]]  # [t][i] -> [P, N_t, |A^i|] pi^i at each joint node
    path: list[list[np.ndarray]]  # [t][i] -> [P, N_t] product of agent i's own probabilities so far
    gain: list[np.ndarray]  # [t] -> [P, N_t, A] unnormalised joint action values G_t


def _joint_probs(tree: HistoryTree, act_t: list[np.ndarray]) -> np.ndarray:
    """pi(a | tau) = prod_i pi^i(a^i | tau^i) at every node.  # [P, N, A]"""
    ja = tree.game.joint_actions
    out = act_t[0][:, :, ja[:, 0]]
    for i in range(1, len(act_t)):
        out = out * act_t[i][:, :, ja[:, i]]
    return out


def _forward(tree: HistoryTree, pols: tuple[np.ndarray, ...]) -> tuple[list, list]:
    P = pols[0].shape[0]
    act: list[list[np.ndarray]] = []
    path: list[list[np.ndarray]] = []
    for t, layer in enumerate(tree.layers):
        act.append([pol[:, layer.local[:, i], :] for i, pol in enumerate(pols)])
        if t == 0:
            path.append([np.ones((P, len(layer))) for _ in pols])
            continue
        prev_act, prev_path = act[t - 1], path[t - 1]
        a_i = tree.game.joint_actions[layer.action]
        path.append(
            [
                prev_path[i][:, layer.parent] * prev_act[i][:, layer.parent, a_i[:, i]]
                for i in range(len(pols))
            ]
        )
    return act, path


def _other_contraction(
    tree: HistoryTree, gain: np.ndarray, act_t: list[np.ndarray], agent: int
) -> np.ndarray:
    """sum_{a^{-i}} pi^{-i}(a^{-i} | tau^{-i}) G[n, a]  # [P, N, |A^i|]"""
    P, N, _ = gain.shape
    m = gain.reshape(P, N, *tree.game.n_actions)
    for j in reversed(range(tree.game.n_agents)):
        if j == agent:
            continue
        shape = [P, N] + [1] * tree.game.n_agents
        shape[2 + j] = tree.game.n_actions[j]
        m = (m * act_t[j].reshape(shape)).sum(axis=2 + j, keepdims=True)
    return m.reshape(P, N, tree.game.n_actions[agent])


def _local_numerator(
    tree: HistoryTree, t: int, agent: int, gain: np.ndarray, act_t: list[np.ndarray], path_t: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """sum over joint nodes projecting on tau^i of p^{-i}(n) sum_{a^{-i}} pi^{-i} G_t[n, (a, a^{-i})]
    (the unnormalised Q^i), and p^{-i} itself.  # ([P, K^i_t, |A^i|], [P, N_t])"""
    others = np.ones_like(path_t[0])
    for j, p in enumerate(path_t):
        if j != agent:
            others = others * p
    P, N = others.shape
    contrib = others[:, :, None] * _other_contraction(tree, gain, act_t, agent)  # [P, N, A_i]
    A_i = contrib.shape[2]
    L = tree.local_matrix(t, agent)  # [K_t, N]
    num = (L @ contrib.transpose(1, 0, 2).reshape(N, P * A_i)).reshape(-1, P, A_i).transpose(1, 0, 2)
    return num, others


def _local_q_layer(
    tree: HistoryTree, t: int, agent: int, gain: np.ndarray, act_t: list[np.ndarray], path_t: list[np.ndarray]
) -> np.ndarray:
    """Q^i at the local histories of time t.  # [P, K^i_t, |A^i|]"""
    num, others = _local_numerator(tree, t, agent, gain, act_t, path_t)
    den = (tree.local_matrix(t, agent) @ (others * tree.layers[t].probability[None]).T).T  # [P, K_t]
    with np.errstate(invalid="ignore", divide="ignore"):
        q = num / den[:, :, None]
    q[np.broadcast_to(den[:, :, None] <= 0, q.shape)] = np.nan
    hist = tree.local[agent]
    legal = hist.legal[hist.offsets[t] : hist.offsets[t + 1]]
    q[:, ~legal] = np.nan
    return q


def _backward(
    tree: HistoryTree, act: list, path: list, responder: int | None = None
) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Backward pass; with ``responder`` = j, agent j's actions are replaced by a deterministic best
    response chosen layer by layer (ties -> lowest action index). Returns G and the responder's policy."""
    game = tree.game
    H = len(tree.layers)
    gain: list[np.ndarray] = [None] * H  # type: ignore[list-item]
    value_next: np.ndarray | None = None
    br: np.ndarray | None = None
    if responder is not None:
        P = act[0][0].shape[0]
        br = np.zeros((P, len(tree.local[responder]), game.n_actions[responder]))
    for t in reversed(range(H)):
        layer = tree.layers[t]
        g = (layer.weight @ game.expected_reward)[None]  # [1, N, A]
        if value_next is not None:
            P = value_next.shape[0]
            cont = (tree.child_matrix(t) @ value_next.T).T.reshape(P, len(layer), -1)
            g = g + game.discount * cont
        else:
            g = np.broadcast_to(g, (act[t][0].shape[0],) + g.shape[1:])
        gain[t] = g
        if responder is not None and br is not None:
            act[t][responder] = _best_response_layer(tree, t, responder, g, act[t], path[t], br)
        value_next = (_joint_probs(tree, act[t]) * g).sum(axis=2)
    return gain, br


#: relative tolerance within which ``best_response`` counts two actions' values as tied (the first one wins)
BR_TIE = 1e-12


def _best_response_layer(
    tree: HistoryTree, t: int, j: int, g: np.ndarray, act_t: list, path_t: list, br: np.ndarray
) -> np.ndarray:
    q = _local_q_layer(tree, t, j, g, act_t, path_t)
    hist = tree.local[j]
    lo, hi = hist.offsets[t], hist.offsets[t + 1]
    scored = np.where(np.isfinite(q), q, -np.inf)
    best = scored.max(axis=2, keepdims=True)
    # ties go to the first action within BR_TIE of the best: a raw argmax let float rounding pick among tied
    # actions, so a batch and its single calls answered differently (--hypothesis-profile explore, 2026-12-08)
    with np.errstate(invalid="ignore"):
        choice = np.argmax(scored >= best - BR_TIE * (1.0 + np.abs(best)), axis=2)
    fallback = np.argmax(hist.legal[lo:hi], axis=1)
    unreachable = ~np.isfinite(best[..., 0])
    choice = np.where(unreachable, fallback[None], choice)
    table = np.zeros_like(q)
    np.put_along_axis(table, choice[:, :, None], 1.0, axis=2)
    br[:, lo:hi] = table
    return table[:, tree.layers[t].local[:, j] - lo]


def _run(
    tree: HistoryTree, policy: Policy, responder: int | None = None
) -> tuple[_Pass, bool, np.ndarray | None]:
    pols, batched = check_policy(tree, policy)
    act, path = _forward(tree, pols)
    gain, br = _backward(tree, act, path, responder)
    return _Pass(act=act, path=path, gain=gain), batched, br


def expected_return(tree: HistoryTree, policy: Policy, sequence: bool = True) -> np.ndarray | float:
    """J(pi) = E_pi[sum_t gamma^t r_{t+1}]; a float, or [P] for a batch. Two-agent games go through the
    sequence form (:mod:`ers_exact.model.sequence_form`, one sparse product) unless ``sequence`` is False
    (the pass over the joint history tree, the reference)."""
    form = sequence_form(tree) if sequence else None
    if form is not None:
        pols, batched = check_policy(tree, policy)
        J = form.value(pols)
        return J if batched else float(J[0])
    res, batched, _ = _run(tree, policy)
    root = (_joint_probs(tree, res.act[0]) * res.gain[0]).sum(axis=2)[:, 0]
    return root if batched else float(root[0])


def _per_agent(
    form: SequenceForm, tree: HistoryTree, policy: Policy, quantity: str
) -> tuple[np.ndarray, ...]:
    """A per-agent quantity of the sequence form (``"local_q"`` or ``"gradient"``) of a checked policy,
    unbatched for one policy."""
    pols, batched = check_policy(tree, policy)
    out = form.local_q(pols) if quantity == "local_q" else form.gradient(pols)
    return out if batched else tuple(x[0] for x in out)


def multilinear_return(tree: HistoryTree, policy: Policy) -> np.ndarray | float:
    """J as the multilinear polynomial in the policy entries that :func:`return_gradient` differentiates,
    evaluated on any arrays of the policy's shape (rows need not be on the simplex; nothing is checked).
    Equals :func:`expected_return` on valid policies; for finite-difference checks.  # float or [P]"""
    pols = tuple(np.asarray(p, dtype=np.float64) for p in policy)
    batched = pols[0].ndim == 3
    if not batched:
        pols = tuple(p[None] for p in pols)
    act, path = _forward(tree, pols)
    gain, _ = _backward(tree, act, path)
    root = (_joint_probs(tree, act[0]) * gain[0]).sum(axis=2)[:, 0]
    return root if batched else float(root[0])


def joint_action_values(tree: HistoryTree, policy: Policy) -> list[np.ndarray]:
    """Q_pi(tau_t, a) = E[return-to-go | tau_t, a] for every joint history node: a list over t of
    [N_t, A] (or [P, N_t, A] for a batch); NaN at illegal joint actions."""
    res, batched, _ = _run(tree, policy)
    out = [
        np.where(layer.legal[None], g / layer.probability[None, :, None], np.nan)
        for g, layer in zip(res.gain, tree.layers)
    ]
    return out if batched else [q[0] for q in out]


def local_q_values(tree: HistoryTree, policy: Policy, sequence: bool = True) -> tuple[np.ndarray, ...]:
    """Q^i_pi(tau^i, a^i) for every agent: [K_i, |A^i|] (or [P, K_i, |A^i|]); NaN where undefined. Two-agent
    games go through the sequence form unless ``sequence`` is False (as :func:`expected_return`)."""
    form = sequence_form(tree) if sequence else None
    if form is not None:
        return _per_agent(form, tree, policy, "local_q")
    res, batched, _ = _run(tree, policy)
    out = []
    for i in range(tree.game.n_agents):
        q = np.concatenate(
            [
                _local_q_layer(tree, t, i, res.gain[t], res.act[t], res.path[t])
                for t in range(len(tree.layers))
            ],
            axis=1,
        )
        out.append(q if batched else q[0])
    return tuple(out)


def best_response(tree: HistoryTree, policy: Policy, agent: int) -> tuple[np.ndarray, np.ndarray | float]:
    """A deterministic exact best response of ``agent`` to the others' parts of ``policy`` (its own part
    is ignored), by backward induction over its local histories. Returns (its policy, J of the profile)."""
    res, batched, br = _run(tree, policy, responder=agent)
    root = (_joint_probs(tree, res.act[0]) * res.gain[0]).sum(axis=2)[:, 0]
    assert br is not None
    return (br, root) if batched else (br[0], float(root[0]))


def local_history_reach(tree: HistoryTree, policy: Policy) -> tuple[np.ndarray, ...]:
    """P_pi(tau^i_t): the probability that agent i's local history at time t is tau^i (all agents' action
    probabilities and chance included); per agent [K_i] (or [P, K_i]). Sums to 1 within each t."""
    pols, batched = check_policy(tree, policy)
    _, path = _forward(tree, pols)
    out = []
    for i in range(tree.game.n_agents):
        parts = []
        for t, layer in enumerate(tree.layers):
            reach = layer.probability[None] * np.prod(list(path[t]), axis=0)  # [P, N]
            parts.append((tree.local_matrix(t, i) @ reach.T).T)
        r = np.concatenate(parts, axis=1)
        out.append(r if batched else r[0])
    return tuple(out)


def return_gradient(tree: HistoryTree, policy: Policy, sequence: bool = True) -> tuple[np.ndarray, ...]:
    """dJ / d pi^i(a | tau^i), every entry treated as a free variable (J is multilinear in them):

        dJ / d pi^i(a | tau_t) = gamma^t * rho^i(tau_t) * sum_{n in tau_t} p^{-i}(n) sum_{a^{-i}} pi^{-i} G_t[n, (a, a^{-i})],

    where rho^i is agent i's own probability of its past actions along tau. Per agent [K_i, A_i] (or
    [P, K_i, A_i]); illegal actions get 0. Checked against finite differences in the tests. Two-agent
    games go through the sequence form unless ``sequence`` is False (as :func:`expected_return`)."""
    form = sequence_form(tree) if sequence else None
    if form is not None:
        return _per_agent(form, tree, policy, "gradient")
    res, batched, _ = _run(tree, policy)
    pols, _ = check_policy(tree, policy)
    out = []
    for i, hist in enumerate(tree.local):
        own = np.ones((pols[i].shape[0], len(hist)))
        for t in range(1, len(tree.layers)):
            lo, hi = hist.offsets[t], hist.offsets[t + 1]
            own[:, lo:hi] = own[:, hist.parent[lo:hi]] * pols[i][:, hist.parent[lo:hi], hist.action[lo:hi]]
        parts = []
        for t in range(len(tree.layers)):
            num, _ = _local_numerator(tree, t, i, res.gain[t], res.act[t], res.path[t])
            lo, hi = hist.offsets[t], hist.offsets[t + 1]
            parts.append(tree.game.discount**t * own[:, lo:hi, None] * num)
        g = np.where(hist.legal[None], np.concatenate(parts, axis=1), 0.0)
        out.append(g if batched else g[0])
    return tuple(out)
