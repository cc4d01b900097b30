"""GMAA*-ICE: exact optimal deterministic joint policies by heuristic search, without enumerating policies.

Generalized multi-agent A* (Oliehoek, Spaan & Vlassis 2008, JAIR 32; the MADP toolbox's method) searches
*partial* joint policies phi_t = (delta_0, ..., delta_{t-1}), where a decision rule delta_k maps every local
history an agent can reach at stage k under its own earlier rules to an action. A deterministic partial
policy reaches a set of joint history nodes at stage t (the Bayesian game of stage t: the types of agent
i are its reachable local histories). Its priority is an upper bound on every completion,

    f(phi_t o delta_t) = sum_{k<t} gamma^k sum_{n reached at k} R_k[n, phi(n)]
                         + gamma^t sum_{n reached at t} Q_t[n, delta_t(n)],

with Q_t an admissible heuristic from :mod:`ers_exact.model.bounds` (Q_BG by default; Q_POMDP, Q_MDP). The
children of phi_t are all joint decision rules delta_t; their f-values are computed at once (the rules of
every agent but the one with the most rules are enumerated -- for two agents as a Kronecker sum, one
addition per rule and responder entry -- and that agent's rules are combined last) but generated one at a
time in decreasing f order: *incremental expansion* (GMAA*-ICE, Spaan, Oliehoek & Amato 2011), so the open
list holds one entry per expanded parent, not all its children. A partial policy of the last stage H-1 is
completed exactly: the Bayesian game of immediate rewards is solved by enumerating the rules of all agents
but one and best-responding that one, which gives the value of its best completion (a lower bound L).
Types with the same legal actions and the same conditional distribution over states and the others' types
are *losslessly clustered* (Oliehoek, Whiteson & Spaan 2009) and share one action (:func:`_classes`).

Optimality: the heuristic never underestimates (Q_t >= the return-to-go of any continuation), so every
partial policy on the path to an optimal policy keeps f >= J*. The search stops when the largest priority
in the open list is <= L (within ``tol``): no unexplored completion can beat L, so L = J*.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ers_exact.model.bounds import child_table, stage_rewards, upper_bound_q
from ers_exact.model.histories import HistoryTree

__all__ = ["DEFAULT_MAX_CHILDREN", "GmaaOutcome", "PolicyBudgetError", "gmaa_search"]

DEFAULT_MAX_CHILDREN = 5_000_000
_CHUNK_FLOATS = 4_000_000


class PolicyBudgetError(RuntimeError):
    """An exact search would enumerate more (partial) policies than its budget allows."""


@dataclass(frozen=True)
class GmaaOutcome:
    """The optimum found by :func:`gmaa_search` and the search's statistics."""

    value: float
    policy: tuple[np.ndarray, ...] = field(repr=False)
    heuristic: str
    root_bound: float  # the heuristic's upper bound on J* at the empty policy
    nodes_expanded: int  # partial policies (stages < H-1) whose children were evaluated
    last_stage_solves: int  # partial policies of stage H-1 completed by solving their Bayesian game
    children_evaluated: int  # f-values computed
    children_generated: int  # partial policies created (pushed on the open list)
    max_open: int
    seconds: float
    heuristic_seconds: float
    stages_as_pomdp: tuple[int, ...] = ()

    def stats(self) -> dict[str, Any]:
        return {
            "heuristic": self.heuristic,
            "root_bound": self.root_bound,
            "nodes_expanded": self.nodes_expanded,
            "last_stage_solves": self.last_stage_solves,
            "children_evaluated": self.children_evaluated,
            "children_generated": self.children_generated,
            "max_open": self.max_open,
            "heuristic_seconds": round(self.heuristic_seconds, 4),
            "heuristic_stages_as_pomdp": list(self.stages_as_pomdp),
        }


class _Node:
    """A partial joint policy phi_t: the nodes it reaches at stage t and its decisions so far."""

    __slots__ = ("decisions", "f", "g", "kids_f", "kids_idx", "parent", "plan", "ptr", "reach", "t")

    def __init__(
        self,
        t: int,
        g: float,
        f: float,
        reach: np.ndarray,
        *,
        parent: _Node | None,
        decisions: list[tuple[np.ndarray, np.ndarray]] | None,
    ) -> None:
        self.t, self.g, self.f, self.reach, self.parent = t, g, f, reach, parent
        self.decisions = decisions  # per agent (local history ids at stage t-1, action of each)
        self.plan: _Plan | None = None
        self.kids_f: np.ndarray | None = None
        self.kids_idx: np.ndarray | None = None
        self.ptr = 0


class _Plan:
    """The Bayesian game of a partial policy's stage: each agent's types (its reachable local histories),
    grouped into classes that get one action (lossless clustering, see :func:`_classes`), the legal options
    of each class, and which agent best-responds (the one with the most rules)."""

    def __init__(self, tree: HistoryTree, t: int, reach: np.ndarray, cluster: bool = True) -> None:
        game = tree.game
        layer = tree.layers[t]
        self.types: list[np.ndarray] = []  # per agent: local history ids (sorted)
        self.member_class: list[np.ndarray] = []  # per agent: class of each type
        self.inv: list[np.ndarray] = []  # per agent: class of each reached node
        self.options: list[list[np.ndarray]] = []  # per agent, per class: legal actions
        type_inv = []
        for i in range(game.n_agents):
            uniq, inv = np.unique(layer.local[reach, i], return_inverse=True)
            self.types.append(uniq)
            type_inv.append(inv.reshape(-1))
        for i in range(game.n_agents):
            legal = tree.local[i].legal[self.types[i]]
            cls = _classes(layer.weight[reach], type_inv, i, legal) if cluster else np.arange(len(legal))
            first = np.unique(cls, return_index=True)[1]
            self.member_class.append(cls)
            self.inv.append(cls[type_inv[i]])
            self.options.append([np.flatnonzero(row) for row in legal[first]])
        log_rules = [sum(math.log(len(o)) for o in opts) for opts in self.options]
        self.responder = int(np.argmax(log_rules))
        self.enumerated = [i for i in range(game.n_agents) if i != self.responder]
        self.flat_options = [o for i in self.enumerated for o in self.options[i]]
        self.n_e = math.prod(len(o) for o in self.flat_options)
        self.n_r = math.prod(len(o) for o in self.options[self.responder])
        self.stride = np.cumprod((1, *tuple(reversed(game.n_actions))))[:-1][::-1]
        resp_options = self.options[self.responder]
        self.legal_r = np.zeros((len(resp_options), game.n_actions[self.responder]), dtype=bool)
        for k, opts in enumerate(resp_options):
            self.legal_r[k, opts] = True  # [classes of the responder, A_r]

    def sizes(self) -> str:
        return (
            f"types per agent {[len(t) for t in self.types]}, classes per agent "
            f"{[len(o) for o in self.options]}"
        )

    def decisions(self, actions: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(local history ids, action of each) per agent, for per-class actions."""
        return [(self.types[i], acts[self.member_class[i]]) for i, acts in enumerate(actions)]

    def decode(self, index: int) -> list[np.ndarray]:
        """Per agent, the action of each class under the joint rule ``index`` (= c_e * n_r + c_r)."""
        c_e, c_r = divmod(int(index), self.n_r)
        out: list[np.ndarray] = [None] * len(self.types)  # type: ignore[list-item]
        for i in self.enumerated:
            acts = []
            for opts in self.options[i]:
                c_e, d = divmod(c_e, len(opts))
                acts.append(opts[d])
            out[i] = np.array(acts, dtype=np.int64)
        acts = []
        for opts in self.options[self.responder]:
            c_r, d = divmod(c_r, len(opts))
            acts.append(opts[d])
        out[self.responder] = np.array(acts, dtype=np.int64)
        return out

    def joint_action(self, actions: list[np.ndarray]) -> np.ndarray:
        """The joint action at each reached node for per-agent class actions.  # [m]"""
        ja = np.zeros(len(self.inv[0]), dtype=np.int64)
        for i, acts in enumerate(actions):
            ja += acts[self.inv[i]] * self.stride[i]
        return ja

    def payoff_chunks(self, q: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """S[c, k, b] = sum over reached nodes of responder class k of q[node, (rule c of the others, b)]
        for every joint rule c of the enumerated agents, in chunks (lo, S[lo:lo + C]); -inf where b is
        illegal for k.  # [C, K_r, A_r]

        With one enumerated agent e (two agents), S is a Kronecker sum over e's classes,
        S[c] = sum_theta Z[theta, rule_c(theta)] with Z[theta, a, k, b] the payoff summed over the nodes of
        (theta, k): each entry costs one addition. Otherwise every rule gathers q at every node."""
        r = self.responder
        m, K_r, A_r = q.shape[0], self.legal_r.shape[0], self.legal_r.shape[1]
        proj = sp.csr_matrix((np.ones(m), (self.inv[r], np.arange(m))), shape=(K_r, m))
        if len(self.enumerated) != 1:
            rows = max(1, _CHUNK_FLOATS // max(1, m * A_r))
            for lo in range(0, self.n_e, rows):
                hi = min(self.n_e, lo + rows)
                yield lo, self._gathered_payoffs(q, proj, lo, hi)
            return
        e = self.enumerated[0]
        K_e, A_e = len(self.options[e]), q.shape[1] // A_r
        qn = q.reshape(m, A_e, A_r) if e < r else q.reshape(m, A_r, A_e).transpose(0, 2, 1)
        qn = np.where(np.isfinite(qn), qn, 0.0)  # -inf only at illegal actions, never chosen
        pair = sp.csr_matrix(
            (np.ones(m), (self.inv[e] * K_r + self.inv[r], np.arange(m))), shape=(K_e * K_r, m)
        )
        Z = (pair @ qn.reshape(m, -1)).reshape(K_e, K_r, A_e, A_r).transpose(0, 2, 1, 3)
        parts = [Z[theta, opts] for theta, opts in enumerate(self.options[e])]  # [|opts|, K_r, A_r]
        low = np.zeros((1, K_r, A_r))
        p = 0
        while p < K_e and low.shape[0] * len(parts[p]) * K_r * A_r <= _CHUNK_FLOATS:
            low = (parts[p][:, None] + low[None]).reshape(-1, K_r, A_r)  # position p varies slowest
            p += 1
        low = np.where(self.legal_r[None], low, -np.inf)
        high = parts[p:]
        for h in range(math.prod(len(x) for x in high)):
            offset = np.zeros((K_r, A_r))
            rest = h
            for x in high:
                rest, d = divmod(rest, len(x))
                offset += x[d]
            yield h * low.shape[0], low + offset[None]

    def _gathered_payoffs(self, q: np.ndarray, proj: sp.csr_matrix, lo: int, hi: int) -> np.ndarray:
        r = self.responder
        m, K_r, A_r = q.shape[0], self.legal_r.shape[0], self.legal_r.shape[1]
        rules = _rule_slice(self.flat_options, lo, hi)  # [C, P_e]
        base = np.zeros((hi - lo, m), dtype=np.int64)
        pos = 0
        for i in self.enumerated:
            k = len(self.options[i])
            base += rules[:, pos : pos + k][:, self.inv[i]] * self.stride[i]
            pos += k
        cols = base[:, :, None] + np.arange(A_r)[None, None, :] * self.stride[r]
        g = q[np.arange(m)[None, :, None], cols]  # [C, m, A_r]
        g[np.isneginf(g)] = 0.0  # only the responder's illegal actions (masked below)
        s = (proj @ g.transpose(1, 0, 2).reshape(m, -1)).reshape(K_r, hi - lo, A_r).transpose(1, 0, 2)
        return np.where(self.legal_r[None], s, -np.inf)


def _rule_slice(options: list[np.ndarray], lo: int, hi: int) -> np.ndarray:
    """Rows lo..hi-1 of ``rule_table(options)`` without building the rest.  # [hi - lo, len(options)]"""
    idx = np.arange(lo, hi, dtype=np.int64)
    out = np.empty((hi - lo, len(options)), dtype=np.int64)
    for k, opts in enumerate(options):
        out[:, k] = opts[idx % len(opts)]
        idx //= len(opts)
    return out


def _children_values(plan: _Plan, q: np.ndarray, max_children: int) -> np.ndarray:
    """sum over reached nodes of q[node, delta(node)] for every joint decision rule delta, flat index
    c_e * n_r + c_r.  # [n_e * n_r]"""
    total = plan.n_e * plan.n_r
    if total > max_children:
        raise PolicyBudgetError(
            f"expanding a partial policy needs {total:,} joint decision rules ({plan.sizes()}); the budget "
            f"is {max_children:,} (raise max_children)"
        )
    resp = _rule_slice(plan.options[plan.responder], 0, plan.n_r)  # [n_r, K_r]
    out = np.empty((plan.n_e, plan.n_r))
    for lo, s in plan.payoff_chunks(q):  # [C, K_r, A_r]; the responder's rules only pick legal actions
        acc = np.zeros((s.shape[0], plan.n_r))
        for k in range(s.shape[1]):
            acc += s[:, k, resp[:, k]]
        out[lo : lo + s.shape[0]] = acc
    return out.reshape(-1)


def _best_rule(plan: _Plan, q: np.ndarray, max_children: int) -> tuple[float, list[np.ndarray]]:
    """max over joint decision rules of sum over reached nodes of q[node, delta(node)] (a Bayesian game),
    by enumerating the others' rules and best-responding the responder; with one maximising rule."""
    if plan.n_e > max_children:
        raise PolicyBudgetError(
            f"solving the last-stage Bayesian game needs {plan.n_e:,} decision rules of agents "
            f"{plan.enumerated} ({plan.sizes()}); the budget is {max_children:,} (raise max_children)"
        )
    best, best_c, best_resp = -np.inf, 0, None
    for lo, s in plan.payoff_chunks(q):  # [C, K_r, A_r]
        values = s.max(axis=2).sum(axis=1)
        k = int(np.argmax(values))
        if values[k] > best:
            best, best_c, best_resp = float(values[k]), lo + k, np.argmax(s[k], axis=1)
    assert best_resp is not None
    c_r = 0
    for k in reversed(range(len(plan.options[plan.responder]))):
        opts = plan.options[plan.responder][k]
        c_r = c_r * len(opts) + int(np.flatnonzero(opts == best_resp[k])[0])
    return best, plan.decode(best_c * plan.n_r + c_r)


def _policy(tree: HistoryTree, node: _Node, last: list[np.ndarray], plan: _Plan) -> tuple[np.ndarray, ...]:
    """One-hot arrays [K_i, |A^i|] of the full policy: the decisions along the path to ``node`` plus the
    last-stage rule; histories the policy never reaches get their first legal action."""
    pols = []
    for hist in tree.local:
        pol = np.zeros(hist.legal.shape)
        pol[np.arange(len(hist)), np.argmax(hist.legal, axis=1)] = 1.0
        pols.append(pol)
    steps = [plan.decisions(last)]
    cur: _Node | None = node
    while cur is not None and cur.decisions is not None:
        steps.append(cur.decisions)
        cur = cur.parent
    for step in steps:
        for i, (ids, acts) in enumerate(step):
            pols[i][ids] = 0.0
            pols[i][ids, acts] = 1.0
    return tuple(pols)


def gmaa_search(
    tree: HistoryTree,
    heuristic: str = "Q_BG",
    max_children: int = DEFAULT_MAX_CHILDREN,
    tol: float = 1e-12,
    cluster: bool = True,
) -> GmaaOutcome:
    """The optimal value J* and an optimal deterministic joint policy by GMAA*-ICE (module docstring).

    ``heuristic``: ``"Q_BG"`` (tightest), ``"Q_POMDP"`` or ``"Q_MDP"``. ``max_children``: most joint
    decision rules evaluated in one expansion (or enumerated in one last-stage Bayesian game); beyond it
    :class:`PolicyBudgetError`. ``tol``: relative tolerance (times max(1, |bound|)) below which a
    priority counts as no better than the incumbent. ``cluster``: group probabilistically equivalent types
    (lossless; off only to test that it is)."""
    start = time.perf_counter()
    game = tree.game
    H = len(tree.layers)
    hq = upper_bound_q(tree, heuristic)
    heuristic_seconds = time.perf_counter() - start
    rewards = stage_rewards(tree)
    children = child_table(tree)
    gamma = game.discount
    slack = tol * max(1.0, abs(hq.root_bound))
    counter = itertools.count()
    root = _Node(0, 0.0, hq.root_bound, np.zeros(1, dtype=np.int64), parent=None, decisions=None)
    open_list: list[tuple[float, int, int, _Node]] = [(-root.f, 0, next(counter), root)]
    lower, incumbent = -np.inf, None
    expanded = solves = evaluated = generated = 0
    max_open = 1
    while open_list:
        key, _, _, node = heapq.heappop(open_list)
        if -key <= lower + slack:
            break
        if node.t == H - 1:
            plan = _Plan(tree, node.t, node.reach, cluster)
            best, last = _best_rule(plan, rewards[node.t][node.reach], max_children)
            solves += 1
            value = node.g + gamma**node.t * best
            if value > lower:
                lower, incumbent = value, (node, last, plan)
            continue
        if node.plan is None:  # expand: every child's priority at once, kept sorted on the parent
            node.plan = _Plan(tree, node.t, node.reach, cluster)
            f = node.g + gamma**node.t * _children_values(node.plan, hq.q[node.t][node.reach], max_children)
            evaluated += f.size
            expanded += 1
            keep = np.flatnonzero(f > lower + slack)
            order = keep[np.argsort(-f[keep], kind="stable")]
            node.kids_idx, node.kids_f, node.ptr = order, f[order], 0
        else:  # generate the next-best child
            assert node.kids_idx is not None and node.kids_f is not None
            k = node.ptr
            node.ptr += 1
            child = _make_child(
                node,
                int(node.kids_idx[k]),
                float(node.kids_f[k]),
                rewards=rewards,
                children=children,
                gamma=gamma,
            )
            generated += 1
            heapq.heappush(open_list, (-child.f, -child.t, next(counter), child))
        if node.ptr < len(node.kids_f) and node.kids_f[node.ptr] > lower + slack:
            heapq.heappush(open_list, (-float(node.kids_f[node.ptr]), -node.t, next(counter), node))
        else:
            node.kids_f = node.kids_idx = node.plan = None  # done with this parent (its decisions stay)
        max_open = max(max_open, len(open_list))
    assert incumbent is not None
    inc_node, last, plan = incumbent
    return GmaaOutcome(
        value=float(lower),
        policy=_policy(tree, inc_node, last, plan),
        heuristic=heuristic,
        root_bound=hq.root_bound,
        nodes_expanded=expanded,
        last_stage_solves=solves,
        children_evaluated=evaluated,
        children_generated=generated,
        max_open=max_open,
        seconds=time.perf_counter() - start,
        heuristic_seconds=heuristic_seconds,
        stages_as_pomdp=hq.stages_as_pomdp,
    )


def _make_child(
    node: _Node,
    index: int,
    f: float,
    *,
    rewards: tuple[np.ndarray, ...],
    children: tuple[np.ndarray, ...],
    gamma: float,
) -> _Node:
    plan = node.plan
    assert plan is not None
    actions = plan.decode(index)
    ja = plan.joint_action(actions)
    g = node.g + gamma**node.t * float(rewards[node.t][node.reach, ja].sum())
    reach = children[node.t][node.reach, ja].reshape(-1)
    reach = reach[reach >= 0]
    decisions = plan.decisions(actions)
    return _Node(node.t + 1, g, f, reach, parent=node, decisions=decisions)


def _classes(
    weight: np.ndarray, type_inv: list[np.ndarray], agent: int, legal: np.ndarray, max_floats: int = 4_000_000
) -> np.ndarray:
    """Lossless clustering (Oliehoek, Whiteson & Spaan 2009): two types of ``agent`` are equivalent when
    they have the same legal actions and the same conditional distribution P(s, theta^{-i} | theta^i)
    over states and the other agents' types (equal to 1e-12 after normalising); some optimal policy then
    gives both the same sub-policy, so a decision rule may treat each class as one type. ``weight``: the
    reached nodes' chance weights [m, S]; returns the class of each type [T_i] (all distinct when the
    table would exceed ``max_floats``)."""
    n_types = [int(inv.max()) + 1 for inv in type_inv]
    combo = np.zeros(len(weight), dtype=np.int64)
    for j, inv in enumerate(type_inv):
        if j != agent:
            combo = combo * n_types[j] + inv
    _, combo = np.unique(combo, return_inverse=True)
    n_combo = int(combo.max()) + 1
    T = n_types[agent]
    if T * n_combo * weight.shape[1] > max_floats:
        return np.arange(T)
    cube = np.zeros((T, n_combo, weight.shape[1]))
    cube[type_inv[agent], combo.reshape(-1)] = weight
    table = cube.reshape(T, -1)
    table /= table.sum(axis=1, keepdims=True)
    key = np.concatenate([np.round(table, 12), legal.astype(np.float64)], axis=1)
    return np.unique(key, axis=0, return_inverse=True)[1].reshape(-1)
