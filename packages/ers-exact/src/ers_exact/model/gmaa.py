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
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ers_exact.model.bayes_game import BayesGame, PolicyBudgetError, best_rule, children_values
from ers_exact.model.bounds import HeuristicQ, child_table, stage_rewards, upper_bound_q
from ers_exact.model.config import DEFAULT_MAX_CHILDREN
from ers_exact.model.histories import HistoryTree

__all__ = ["DEFAULT_MAX_CHILDREN", "GmaaOutcome", "PolicyBudgetError", "gmaa_search", "search_stats"]


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
        return search_stats(self)


def search_stats(out: Any) -> dict[str, Any]:
    """The statistics every GMAA* search reports (this one and ``ice.IceOutcome``, which adds its own)."""
    return {
        "heuristic": out.heuristic,
        "root_bound": out.root_bound,
        "nodes_expanded": out.nodes_expanded,
        "last_stage_solves": out.last_stage_solves,
        "children_evaluated": out.children_evaluated,
        "children_generated": out.children_generated,
        "max_open": out.max_open,
        "heuristic_seconds": round(out.heuristic_seconds, 4),
        "heuristic_stages_as_pomdp": list(out.stages_as_pomdp),
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


class _Plan(BayesGame):
    """The Bayesian game of a partial policy's stage: each agent's types (its reachable local histories),
    grouped into classes that get one action (lossless clustering, see :func:`_classes`), the legal options
    of each class, and which agent best-responds (the one with the most rules)."""

    def __init__(self, tree: HistoryTree, t: int, reach: np.ndarray, cluster: bool = True) -> None:
        game = tree.game
        layer = tree.layers[t]
        self.types: list[np.ndarray] = []  # per agent: local history ids (sorted)
        self.member_class: list[np.ndarray] = []  # per agent: class of each type
        inv: list[np.ndarray] = []  # per agent: class of each reached node
        options: list[list[np.ndarray]] = []  # per agent, per class: legal actions
        type_inv = []
        for i in range(game.n_agents):
            uniq, t_inv = np.unique(layer.local[reach, i], return_inverse=True)
            self.types.append(uniq)
            type_inv.append(t_inv.reshape(-1))
        for i in range(game.n_agents):
            legal = tree.local[i].legal[self.types[i]]
            cls = _classes(layer.weight[reach], type_inv, i, legal) if cluster else np.arange(len(legal))
            first = np.unique(cls, return_index=True)[1]
            self.member_class.append(cls)
            inv.append(cls[type_inv[i]])
            options.append([np.flatnonzero(row) for row in legal[first]])
        super().__init__(inv, options, game.n_actions)

    def sizes(self) -> str:
        return (
            f"types per agent {[len(t) for t in self.types]}, classes per agent "
            f"{[len(o) for o in self.options]}"
        )

    def decisions(self, actions: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(local history ids, action of each) per agent, for per-class actions."""
        return [(self.types[i], acts[self.member_class[i]]) for i, acts in enumerate(actions)]


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
    hq = upper_bound_q(tree, heuristic)
    heuristic_seconds = time.perf_counter() - start
    search = _Search(tree, hq, max_children, tol * max(1.0, abs(hq.root_bound)), cluster)
    search.run()
    assert search.incumbent is not None
    inc_node, last, plan = search.incumbent
    return GmaaOutcome(
        value=float(search.lower),
        policy=_policy(tree, inc_node, last, plan),
        heuristic=heuristic,
        root_bound=hq.root_bound,
        nodes_expanded=search.expanded,
        last_stage_solves=search.solves,
        children_evaluated=search.evaluated,
        children_generated=search.generated,
        max_open=search.max_open,
        seconds=time.perf_counter() - start,
        heuristic_seconds=heuristic_seconds,
        stages_as_pomdp=hq.stages_as_pomdp,
    )


class _Search:
    """One GMAA*-ICE search: the open list of partial policies phi_t by priority f (ties: deeper first, then
    older), the incumbent's value L (``lower``: the best completion found) and the search's counts."""

    def __init__(
        self, tree: HistoryTree, hq: HeuristicQ, max_children: int, slack: float, cluster: bool
    ) -> None:
        self.tree, self.hq, self.max_children, self.slack, self.cluster = (
            tree,
            hq,
            max_children,
            slack,
            cluster,
        )
        self.H = len(tree.layers)
        self.rewards = stage_rewards(tree)
        self.children = child_table(tree)
        self.gamma = tree.game.discount
        self.counter = itertools.count()
        root = _Node(0, 0.0, hq.root_bound, np.zeros(1, dtype=np.int64), parent=None, decisions=None)
        self.open_list: list[tuple[float, int, int, _Node]] = [(-root.f, 0, next(self.counter), root)]
        self.lower: float = -np.inf
        self.incumbent: tuple[_Node, list[np.ndarray], _Plan] | None = None
        self.expanded = self.solves = self.evaluated = self.generated = 0
        self.max_open = 1

    def run(self) -> None:
        """Pop the best priority until it is no better than L (within ``slack``): a last-stage policy is
        completed exactly, a parent is expanded (every child's f at once) and then yields its children one
        at a time, best first, staying on the open list while its next child can beat L."""
        while self.open_list:
            key, _, _, node = heapq.heappop(self.open_list)
            if -key <= self.lower + self.slack:
                break
            if node.t == self.H - 1:
                self._complete(node)
                continue
            if node.plan is None:  # expand: every child's priority at once, kept sorted on the parent
                self._expand(node)
            else:  # generate the next-best child
                child = self._next_child(node)
                heapq.heappush(self.open_list, (-child.f, -child.t, next(self.counter), child))
            kids_f = node.kids_f  # set by the expansion
            assert kids_f is not None
            if node.ptr < len(kids_f) and kids_f[node.ptr] > self.lower + self.slack:
                heapq.heappush(self.open_list, (-float(kids_f[node.ptr]), -node.t, next(self.counter), node))
            else:
                node.kids_f = node.kids_idx = node.plan = None  # done with this parent (its decisions stay)
            self.max_open = max(self.max_open, len(self.open_list))

    def _complete(self, node: _Node) -> None:
        """A policy of the last stage H-1: its best completion (the Bayesian game of immediate rewards solved
        exactly) is a lower bound L on J*; it becomes the incumbent where it beats the last."""
        plan = _Plan(self.tree, node.t, node.reach, self.cluster)
        best, last = best_rule(plan, self.rewards[node.t][node.reach], self.max_children)
        self.solves += 1
        value = node.g + self.gamma**node.t * best
        if value > self.lower:
            self.lower, self.incumbent = value, (node, last, plan)

    def _expand(self, node: _Node) -> None:
        """f(phi_t o delta_t) = g + gamma^t sum_n Q_t[n, delta_t(n)] of every joint decision rule delta_t; the
        children that can beat L are kept on the parent, sorted by f (best first)."""
        node.plan = _Plan(self.tree, node.t, node.reach, self.cluster)
        q = self.hq.q[node.t][node.reach]
        f = node.g + self.gamma**node.t * children_values(node.plan, q, self.max_children)
        self.evaluated += f.size
        self.expanded += 1
        keep = np.flatnonzero(f > self.lower + self.slack)
        order = keep[np.argsort(-f[keep], kind="stable")]
        node.kids_idx, node.kids_f, node.ptr = order, f[order], 0

    def _next_child(self, node: _Node) -> _Node:
        """The parent's next-best child (incremental expansion), as a partial policy of stage t + 1."""
        assert node.kids_idx is not None and node.kids_f is not None
        k = node.ptr
        node.ptr += 1
        child = _make_child(
            node,
            int(node.kids_idx[k]),
            float(node.kids_f[k]),
            rewards=self.rewards,
            children=self.children,
            gamma=self.gamma,
        )
        self.generated += 1
        return child


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
