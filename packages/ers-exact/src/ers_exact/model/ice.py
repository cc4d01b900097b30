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
"""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ers_exact.model.bayes_bnb import BestFirstRules, best_rule_bnb
from ers_exact.model.bayes_game import BayesGame, LazyChildren, RuleSource, SortedRules, best_rule
from ers_exact.model.belief_dag import BeliefDag, belief_dag, dag_heuristic
from ers_exact.model.game import Game
from ers_exact.model.gmaa import search_stats
from ers_exact.model.ice_clustering import cluster_types
from ers_exact.util.budget import format_bytes, memory_budget, resident_bytes

__all__ = ["IceOutcome", "ice_search"]

DEFAULT_MAX_CHILDREN = 5_000_000
DEFAULT_SORT_RULES = 0  # two-agent expansions with more enumerated rules are generated best first
_BYTES_PER_ENTRY = (
    40  # per (enumerated rule, responder class, action): payoff, sorted payoff and order, temporaries
)
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


class _Node:
    """A partial joint policy phi_t: its clustered Bayesian game of stage t and how it was reached."""

    __slots__ = ("bg", "bid", "f", "g", "jt", "kids", "legal_row", "parent", "prev_acts", "step", "t", "w")

    def __init__(self, t: int, g: float, f: float, jt: np.ndarray, bid: np.ndarray, w: np.ndarray) -> None:
        self.t, self.g, self.f = t, g, f
        self.jt, self.bid, self.w = jt, bid, w  # joint types [m, n], belief index [m], chance weight [m]
        self.legal_row: list[np.ndarray] = []  # per agent, per type: row of legal_mask (0: t = 0, 1 + o^i)
        self.step: list[np.ndarray] | None = None  # per agent [K_{t-1}, |O^i|]: type after (type, o^i)
        self.prev_acts: list[np.ndarray] | None = None  # per agent: the parent's action per parent type
        self.parent: _Node | None = None
        self.bg: BayesGame | None = None
        self.kids: LazyChildren | None = None

    @property
    def nbytes(self) -> int:
        live = sum(a.nbytes for a in (self.jt, self.bid, self.w) if a is not None)
        return live + (0 if self.kids is None else self.kids.nbytes) + 200


class _Stop(Exception):
    """The search must stop before the next step (the reason is the message)."""


class _Search:
    def __init__(self, game: Game, dag: BeliefDag, q: tuple[np.ndarray, ...], cfg: dict[str, Any]) -> None:
        self.game, self.dag, self.q = game, dag, q
        self.cluster: bool = cfg["cluster"]
        self.max_children: int = cfg["max_children"]
        self.sort_rules: int = cfg["sort_rules"]
        self.budget: float = cfg["budget_bytes"]
        self.deadline: float = cfg["deadline"]
        self.fixed = dag.nbytes + sum(a.nbytes for a in q)
        self.tracked = self.fixed
        self.rss0 = (
            resident_bytes()
        )  # the process before the search: imports and the caller's data are not ours
        self.peak = self.tracked
        self.max_types = [1] * game.n_agents
        self.jo = game.joint_observations
        self.masks = [game.legal_mask(i) for i in range(game.n_agents)]

    # ----- memory -----
    def charge(self, n_bytes: int, what: str) -> None:
        if self.tracked + n_bytes > self.budget:
            raise _Stop(
                f"memory budget: {what} needs {format_bytes(n_bytes)} more, the search holds "
                f"{format_bytes(self.tracked)} of {format_bytes(self.budget)}"
            )
        self.tracked += n_bytes
        self.peak = max(self.peak, self.tracked)

    def check_process(self) -> None:
        grown = resident_bytes() - self.rss0 + self.fixed
        if grown > self.budget:
            raise _Stop(
                f"memory budget: the search holds {format_bytes(grown)} of {format_bytes(self.budget)}"
            )
        if time.perf_counter() > self.deadline:
            raise _Stop("time limit reached")

    # ----- Bayesian games -----
    def bayes_game(self, node: _Node) -> BayesGame:
        options = [[np.flatnonzero(self.masks[i][r]) for r in rows] for i, rows in enumerate(node.legal_row)]
        for i, opts in enumerate(options):
            self.max_types[i] = max(self.max_types[i], len(opts))
        return BayesGame([node.jt[:, i] for i in range(self.game.n_agents)], options, self.game.n_actions)

    def rule_source(self, node: _Node, bg: BayesGame) -> RuleSource:
        """The enumerated agents' rules of ``node``'s game best first: all sorted at once when there are at
        most ``sort_rules`` (or more than two agents, up to ``max_children``), else by best-first branch and
        bound (two agents; memory follows the rules generated)."""
        if len(bg.enumerated) == 1 and bg.n_e > self.sort_rules:
            return BestFirstRules(bg, self.payoffs(node))
        if bg.n_e > self.max_children:
            raise _Stop(
                f"an expansion needs {bg.n_e:,} rules of agents {bg.enumerated} ({bg.sizes()}); "
                f"max_children is {self.max_children:,}"
            )
        entries = bg.n_e * bg.legal_r.size
        self.charge(entries * _BYTES_PER_ENTRY, f"expanding a stage-{node.t} policy ({bg.sizes()})")
        S = np.concatenate([c for _, c in bg.payoff_chunks(self.payoffs(node))])
        self.tracked -= entries * _BYTES_PER_ENTRY
        return SortedRules(S)

    def payoffs(self, node: _Node) -> np.ndarray:
        return node.w[:, None] * self.q[node.t][node.bid]  # [m, A]

    def child(self, node: _Node, index: int, f: float) -> _Node:
        """The partial policy phi_t o delta for the rule ``index`` of ``node``'s game, clustered."""
        game, t = self.game, node.t
        assert node.bg is not None
        actions = node.bg.decode(index)
        ja = node.bg.joint_action(actions)
        g = node.g + game.discount**t * float(node.w @ self.dag.reward[t][node.bid, ja])
        prob = self.dag.prob[t][node.bid, ja]  # [m, O]
        e, o = np.nonzero(prob > 0)
        w = node.w[e] * prob[e, o]
        bid = self.dag.child[t][node.bid, ja][e, o]
        jt = np.empty((len(e), game.n_agents), dtype=np.int64)
        codes = []
        for i in range(game.n_agents):
            n_o = game.n_observations[i]
            uniq, inv = np.unique(node.jt[e, i] * n_o + self.jo[o, i], return_inverse=True)
            jt[:, i] = inv.reshape(-1)
            codes.append(uniq)
        legal_row = [1 + c % game.n_observations[i] for i, c in enumerate(codes)]
        jt, bid, w, maps, legal_row = cluster_types(jt, bid, w, legal_row, self.cluster)
        kid = _Node(t + 1, g, f, jt, bid, w)
        kid.legal_row, kid.prev_acts, kid.parent = legal_row, actions, node
        kid.step = []
        for i, c in enumerate(codes):
            n_o = game.n_observations[i]
            step = np.full((len(node.legal_row[i]), n_o), -1, dtype=np.int64)
            step[c // n_o, c % n_o] = maps[i]
            kid.step.append(step)
        return kid


def _policy_trees(game: Game, leaf: _Node, last: list[np.ndarray]) -> tuple[tuple[np.ndarray, ...], ...]:
    """Per agent and stage, the action after every observation sequence (-1: never reached)."""
    chain = []
    node: _Node | None = leaf
    while node is not None:
        chain.append(node)
        node = node.parent
    chain.reverse()  # stage 0 .. H-1
    acts: list[list[np.ndarray]] = []
    for c in chain[1:]:
        assert c.prev_acts is not None
        acts.append(c.prev_acts)
    acts.append(last)
    out = []
    for i in range(game.n_agents):
        n_o = game.n_observations[i]
        types = np.zeros(1, dtype=np.int64)
        stages = []
        for t, node in enumerate(chain):
            if t > 0:
                assert node.step is not None
                prev = np.repeat(types, n_o)
                obs = np.tile(np.arange(n_o), len(types))
                types = np.where(prev >= 0, node.step[i][np.maximum(prev, 0), obs], -1)
            a = acts[t][i]
            stages.append(np.where(types >= 0, a[np.maximum(types, 0)], -1))
        out.append(tuple(stages))
    return tuple(out)


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
    s = _Search(game, dag, q, cfg)
    H, gamma = game.horizon, game.discount
    root_legal = np.ones(game.n_joint_actions, dtype=bool)
    for i in range(game.n_agents):
        root_legal &= game.legal_mask(i)[0][game.joint_actions[:, i]]
    root_bound = float(q[0][0][root_legal].max())
    zero = np.zeros(1, dtype=np.int64)
    root = _Node(0, 0.0, root_bound, np.zeros((1, game.n_agents), dtype=np.int64), zero, np.ones(1))
    root.legal_row = [np.zeros(1, dtype=np.int64) for _ in range(game.n_agents)]
    slack = tol * max(1.0, abs(root.f))
    counter = itertools.count()
    open_list: list[tuple[float, int, int, _Node]] = [(-root.f, 0, next(counter), root)]
    lower, incumbent = -np.inf, None
    counts = {"expanded": 0, "solves": 0, "evaluated": 0, "generated": 0, "max_open": 1}
    stopped = None
    top = root.f  # priority of the node being worked on (an upper bound on what is left)
    try:
        s.charge(root.nbytes, "the root")
        forced: _Node | None = None
        if dive:  # follow the best child down to a complete policy first: a lower bound from the start
            forced = heapq.heappop(open_list)[3]
        for it in itertools.count():
            if it % _RSS_EVERY == 0:
                s.check_process()
            if forced is not None:
                node, forced = forced, None
            else:
                if not open_list:
                    break
                key, _, _, node = open_list[0]
                if -key <= lower + slack:
                    break
                top = -key
                heapq.heappop(open_list)
            if node.t == H - 1:
                dive = False
                bg = s.bayes_game(node)
                scale = gamma**node.t
                if len(bg.enumerated) == 1:
                    need = (lower - node.g) / scale if scale > 0 and lower > -np.inf else -np.inf
                    best, last = best_rule_bnb(bg, s.payoffs(node), need)
                else:
                    if bg.n_e > max_children:
                        raise _Stop(
                            f"a last-stage Bayesian game needs {bg.n_e:,} rules (max_children {max_children:,})"
                        )
                    best, last = best_rule(bg, s.payoffs(node), max_children)
                counts["solves"] += 1
                value = node.g + scale * best
                if last is not None and value > lower:
                    lower, incumbent = value, (node, last)
                s.tracked -= node.nbytes
                node.jt = node.bid = node.w = None  # type: ignore[assignment]
                continue
            if node.kids is None:  # expand: the rules' priorities, children generated lazily
                bg = s.bayes_game(node)
                node.bg, node.kids = bg, LazyChildren(bg, s.rule_source(node, bg), node.g, gamma**node.t)
                s.charge(node.kids.nbytes, "the children's priorities")
                counts["evaluated"] += node.kids.source.evaluated
                counts["expanded"] += 1
                if dive:  # its best child next, then the parent goes back with its next priority
                    forced = node
                    continue
            else:  # generate the next-best child
                assert node.kids is not None
                before, evaluated = node.kids.nbytes, node.kids.source.evaluated
                f, index = node.kids.pop()
                counts["evaluated"] += node.kids.source.evaluated - evaluated
                kid = s.child(node, index, f)
                s.charge(kid.nbytes + node.kids.nbytes - before, "a new partial policy")
                counts["generated"] += 1
                if dive:
                    forced = kid
                else:
                    heapq.heappush(open_list, (-kid.f, -kid.t, next(counter), kid))
            assert node.kids is not None
            nxt = node.kids.peek()
            if nxt > lower + slack:
                heapq.heappush(open_list, (-nxt, -node.t, next(counter), node))
            else:  # done with this parent: keep only what the policy of a descendant needs
                s.tracked -= node.nbytes
                node.kids = node.bg = None
                node.jt = node.bid = node.w = None  # type: ignore[assignment]
                s.tracked += node.nbytes
            counts["max_open"] = max(counts["max_open"], len(open_list))
    except _Stop as err:
        stopped = str(err)
    upper = lower
    if stopped is not None:
        upper = max(lower, top, -open_list[0][0] if open_list else -np.inf)
    trees = None if incumbent is None else _policy_trees(game, incumbent[0], incumbent[1])
    return IceOutcome(
        value=float(lower),
        upper_bound=float(upper),
        optimal=stopped is None,
        stopped=stopped,
        policy_trees=trees,
        heuristic=heuristic,
        root_bound=root_bound,
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
