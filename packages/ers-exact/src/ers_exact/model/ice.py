"""GMAA*-ICE with incremental clustering: exact planning whose memory follows the search, not the history tree.

The search of :mod:`ers_exact.model.gmaa` (Oliehoek, Spaan & Vlassis 2008; incremental expansion, Spaan,
Oliehoek & Amato 2011) run as the MADP toolbox runs it for large horizons (Oliehoek, Spaan, Amato & Whiteson,
"Incremental clustering and expansion for faster optimal planning in Dec-POMDPs", JAIR 46, 2013): a partial
joint policy phi_t carries its own stage-t Bayesian game instead of a set of nodes of an enumerated joint
history tree. Its *types* are clusters of local histories; a *joint type* theta has a chance weight
P(theta) (unnormalised: the probability of the joint history set it stands for) and a joint belief b_theta,
stored as the index of b_theta in the :class:`~ers_exact.model.belief_dag.BeliefDag` of distinct beliefs.

* Priority f(phi_t o delta) = g(phi_t) + gamma^t sum_theta P(theta) Q_t(b_theta, delta(theta)), with Q_t the
  DAG's admissible heuristic (Q_BG by default); children are generated one at a time in decreasing f
  (incremental expansion): the enumerated agent's rules best first by branch and bound
  (:class:`~ers_exact.model.bayes_bnb.BestFirstRules`, two agents; all sorted at once with more agents or
  up to ``sort_rules``), the responder's combined by a k-best over its separable sum.
* Extending phi_t by delta: the types of agent i at t+1 are pairs (type at t, o^i); a joint type (theta, o)
  has weight P(theta) P(o | b_theta, delta(theta)) and belief b_theta^{delta(theta), o} (the DAG's child).
* Incremental clustering: two types of agent i are merged when they have the same legal actions and the same
  P(s, theta^{-i} | theta^i) -- here: the same conditional distribution over (the others' joint type, belief
  index). Lossless (Oliehoek, Whiteson & Spaan 2009; JAIR 2013, Thm. 1): some optimal policy acts alike on
  both. Agents are clustered in turn until nothing merges. At stage H-1 the belief index is the index of the
  normalised reward row R(b, .), all that a last stage needs.
* A node of stage H-1 is completed exactly (its Bayesian game of immediate rewards is solved), which gives a
  lower bound L; the search stops when the largest priority left is <= L: L = J*.

Budgets: ``budget_bytes`` bounds the DAG (refused while it is built, :class:`BudgetError`) and the search
(tracked bytes of live nodes and their children's priorities, and the process's resident memory): when the
next step would pass it, the search stops cleanly and reports the best policy found (its value L, a lower
bound) and the largest open priority (an upper bound on J*). ``max_children`` and ``max_seconds`` stop it
the same way.

The nodes and what a search shares (their Bayesian games, children and memory) are in
:mod:`ers_exact.model.ice_nodes`; here the best-first loop over them.
"""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ers_exact.model.bayes_bnb import best_rule_bnb
from ers_exact.model.bayes_game import LazyChildren, best_rule
from ers_exact.model.belief_dag import belief_dag, dag_heuristic
from ers_exact.model.game import Game
from ers_exact.model.gmaa import search_stats
from ers_exact.model.ice_nodes import IceContext, IceNode, IceStop, node_policy_trees
from ers_exact.util.budget import memory_budget

__all__ = ["IceOutcome", "ice_search"]

DEFAULT_MAX_CHILDREN = 5_000_000
DEFAULT_SORT_RULES = 0  # two-agent expansions with more enumerated rules are generated best first
_RSS_EVERY = 64  # check the resident memory every so many iterations


@dataclass(frozen=True)
class IceOutcome:
    """The best joint policy :func:`ice_search` found, its bounds and the search's statistics.

    ``policy_trees[i][t]``: agent i's action after each observation sequence o^i_1..o^i_t (mixed radix, the
    last observation fastest), -1 where the policy never reaches it.  # [|O^i|^t]"""

    value: float  # the best policy's J (J* when ``optimal``)
    upper_bound: float  # J* <= upper_bound (== value up to tol when optimal)
    optimal: bool
    stopped: str | None  # why the search stopped before proving optimality
    policy_trees: tuple[tuple[np.ndarray, ...], ...] | None = field(repr=False)
    heuristic: str
    root_bound: float
    nodes_expanded: int
    last_stage_solves: int
    children_evaluated: int
    children_generated: int
    max_open: int
    seconds: float
    heuristic_seconds: float
    stages_as_pomdp: tuple[int, ...]
    beliefs_per_stage: tuple[int, ...]
    max_types: tuple[int, ...]  # most clustered types of each agent in any Bayesian game
    peak_tracked_bytes: int
    budget_bytes: float

    def stats(self) -> dict[str, Any]:
        return {
            **search_stats(self),
            "optimal": self.optimal,
            "stopped": self.stopped,
            "upper_bound": self.upper_bound,
            "beliefs_per_stage": list(self.beliefs_per_stage),
            "max_types_per_agent": list(self.max_types),
            "peak_tracked_bytes": self.peak_tracked_bytes,
            "budget_bytes": self.budget_bytes,
        }


def ice_search(
    game: Game,
    heuristic: str = "Q_BG",
    *,
    max_children: int = DEFAULT_MAX_CHILDREN,
    sort_rules: int = DEFAULT_SORT_RULES,
    dive: bool = True,
    budget_bytes: float | None = None,
    max_seconds: float = float("inf"),
    tol: float = 1e-12,
    cluster: bool = True,
) -> IceOutcome:
    """J* and an optimal deterministic joint policy by GMAA*-ICE with incremental clustering (module
    docstring), or the best bounds found when a budget stops it. ``budget_bytes`` defaults to
    :func:`~ers_exact.util.budget.memory_budget`; the DAG's refusal raises
    :class:`~ers_exact.util.budget.BudgetError`. ``sort_rules``: two-agent expansions with at most this many
    rules of the enumerated agent sort them all at once (the default 0: every one is generated best first);
    ``max_children`` bounds the sorted ones. ``dive``: before the best-first order, follow each partial
    policy's best child from the root down to one complete policy, so a search stopped by a budget reports
    a policy and a lower bound (the search stays exact: every node it passes stays open)."""
    start = time.perf_counter()
    budget = memory_budget() if budget_bytes is None else float(budget_bytes)
    dag = belief_dag(game, budget)
    q, fallback = dag_heuristic(dag, heuristic)
    heuristic_seconds = time.perf_counter() - start
    cfg = {
        "cluster": cluster,
        "max_children": max_children,
        "sort_rules": sort_rules,
        "budget_bytes": budget,
        "deadline": start + max_seconds,
    }
    s = IceContext(game, dag, q, cfg)
    root = _root(game, q)
    search = _BestFirst(s, root, tol, dive)
    stopped = search.run(root)
    upper = search.lower
    if stopped is not None:
        upper = max(search.lower, search.top, -search.open[0][0] if search.open else -np.inf)
    incumbent, counts = search.incumbent, search.counts
    trees = None if incumbent is None else node_policy_trees(game, incumbent[0], incumbent[1])
    return IceOutcome(
        value=float(search.lower),
        upper_bound=float(upper),
        optimal=stopped is None,
        stopped=stopped,
        policy_trees=trees,
        heuristic=heuristic,
        root_bound=root.f,
        nodes_expanded=counts["expanded"],
        last_stage_solves=counts["solves"],
        children_evaluated=counts["evaluated"],
        children_generated=counts["generated"],
        max_open=counts["max_open"],
        seconds=time.perf_counter() - start,
        heuristic_seconds=heuristic_seconds,
        stages_as_pomdp=fallback,
        beliefs_per_stage=tuple(dag.sizes),
        max_types=tuple(s.max_types),
        peak_tracked_bytes=int(s.peak),
        budget_bytes=budget,
    )


def _root(game: Game, q: tuple[np.ndarray, ...]) -> IceNode:
    """The empty policy phi_0: one joint type of weight 1 at the initial belief; its priority, the root bound,
    is the heuristic's best legal joint action there."""
    root_legal = np.ones(game.n_joint_actions, dtype=bool)
    for i in range(game.n_agents):
        root_legal &= game.legal_mask(i)[0][game.joint_actions[:, i]]
    root_bound = float(q[0][0][root_legal].max())
    zero = np.zeros(1, dtype=np.int64)
    root = IceNode(0, 0.0, root_bound, np.zeros((1, game.n_agents), dtype=np.int64), zero, np.ones(1))
    root.legal_row = [np.zeros(1, dtype=np.int64) for _ in range(game.n_agents)]
    return root


class _BestFirst:
    """The best-first loop of :func:`ice_search`: the open list (by priority, deeper first, then first come),
    the incumbent (the best complete policy, its value the lower bound L), the node a dive works on next, the
    priority being worked on (``top``, an upper bound on what is left) and the counts."""

    def __init__(self, s: IceContext, root: IceNode, tol: float, dive: bool) -> None:
        self.s, self.dive = s, dive
        self.slack = tol * max(1.0, abs(root.f))
        self.counter = itertools.count()
        self.open: list[tuple[float, int, int, IceNode]] = [(-root.f, 0, next(self.counter), root)]
        self.lower: float = -np.inf
        self.incumbent: tuple[IceNode, list[np.ndarray]] | None = None
        self.counts = {"expanded": 0, "solves": 0, "evaluated": 0, "generated": 0, "max_open": 1}
        self.top = root.f
        self.forced: IceNode | None = None

    def run(self, root: IceNode) -> str | None:
        """Search until the largest priority left is <= L (None: L = J*) or a budget stops it (the reason)."""
        try:
            self.s.charge(root.nbytes, "the root")
            if (
                self.dive
            ):  # follow the best child down to a complete policy first: a lower bound from the start
                self.forced = heapq.heappop(self.open)[3]
            for it in itertools.count():
                if it % _RSS_EVERY == 0:
                    self.s.check_process()
                node = self.next_node()
                if node is None:
                    break
                if node.t == self.s.game.horizon - 1:
                    self.complete(node)
                    continue
                if node.kids is None:
                    if self.expand(node):
                        continue
                else:
                    self.generate(node)
                self.requeue(node)
        except IceStop as err:
            return str(err)
        return None

    def next_node(self) -> IceNode | None:
        """The node a dive forces, else the open node of largest priority; None when that priority is <= L."""
        if self.forced is not None:
            node, self.forced = self.forced, None
            return node
        if not self.open:
            return None
        key, _, _, node = self.open[0]
        if -key <= self.lower + self.slack:
            return None
        self.top = -key
        heapq.heappop(self.open)
        return node

    def complete(self, node: IceNode) -> None:
        """A stage H-1 node: solve its Bayesian game of immediate rewards exactly (a better policy is the new
        incumbent) and release its arrays."""
        s = self.s
        self.dive = False
        bg = s.bayes_game(node)
        scale = s.game.discount**node.t
        if len(bg.enumerated) == 1:
            need = (self.lower - node.g) / scale if scale > 0 and self.lower > -np.inf else -np.inf
            best, last = best_rule_bnb(bg, s.payoffs(node), need)
        else:
            if bg.n_e > s.max_children:
                raise IceStop(
                    f"a last-stage Bayesian game needs {bg.n_e:,} rules (max_children {s.max_children:,})"
                )
            best, last = best_rule(bg, s.payoffs(node), s.max_children)
        self.counts["solves"] += 1
        value = node.g + scale * best
        if last is not None and value > self.lower:
            self.lower, self.incumbent = value, (node, last)
        s.tracked -= node.nbytes
        node.jt = node.bid = node.w = None  # type: ignore[assignment]

    def expand(self, node: IceNode) -> bool:
        """The rules' priorities of ``node``, its children generated lazily; True when a dive goes on to its
        best child (the parent goes back to the open list with its next priority after)."""
        s = self.s
        bg = s.bayes_game(node)
        node.bg, node.kids = bg, LazyChildren(bg, s.rule_source(node, bg), node.g, s.game.discount**node.t)
        s.charge(node.kids.nbytes, "the children's priorities")
        self.counts["evaluated"] += node.kids.source.evaluated
        self.counts["expanded"] += 1
        if self.dive:
            self.forced = node
        return self.dive

    def generate(self, node: IceNode) -> None:
        """The next-best child of an expanded ``node``: into the open list, or next when diving."""
        assert node.kids is not None
        before, evaluated = node.kids.nbytes, node.kids.source.evaluated
        f, index = node.kids.pop()
        self.counts["evaluated"] += node.kids.source.evaluated - evaluated
        kid = self.s.child(node, index, f)
        self.s.charge(kid.nbytes + node.kids.nbytes - before, "a new partial policy")
        self.counts["generated"] += 1
        if self.dive:
            self.forced = kid
        else:
            heapq.heappush(self.open, (-kid.f, -kid.t, next(self.counter), kid))

    def requeue(self, node: IceNode) -> None:
        """``node`` back into the open list at its next child's priority while that passes L, else done with
        it: keep only what the policy of a descendant needs."""
        assert node.kids is not None
        nxt = node.kids.peek()
        if nxt > self.lower + self.slack:
            heapq.heappush(self.open, (-nxt, -node.t, next(self.counter), node))
        else:
            self.s.tracked -= node.nbytes
            node.kids = node.bg = None
            node.jt = node.bid = node.w = None  # type: ignore[assignment]
            self.s.tracked += node.nbytes
        self.counts["max_open"] = max(self.counts["max_open"], len(self.open))
