"""The nodes of GMAA*-ICE (:mod:`ers_exact.model.ice`): a partial joint policy phi_t with its clustered
stage-t Bayesian game (``IceNode``), the context one search shares (``IceContext``: the nodes' Bayesian games,
their rules best first, their children phi_t o delta with the types clustered, the memory they are charged),
the stop a budget raises (``IceStop``) and the policy trees of a complete policy read back along its chain of
nodes (``node_policy_trees``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ers_exact.model.bayes_bnb import BestFirstRules
from ers_exact.model.bayes_game import BayesGame, LazyChildren, RuleSource, SortedRules
from ers_exact.model.belief_dag import BeliefDag
from ers_exact.model.game import Game
from ers_exact.model.ice_clustering import cluster_types
from ers_exact.util.budget import format_bytes, resident_bytes

__all__ = ["BYTES_PER_ENTRY", "IceContext", "IceNode", "IceStop", "node_policy_trees"]

#: bytes per (enumerated rule, responder class, action): payoff, sorted payoff and order, temporaries
BYTES_PER_ENTRY = 40


class IceNode:
    """A partial joint policy phi_t: its clustered Bayesian game of stage t and how it was reached."""

    __slots__ = ("bg", "bid", "f", "g", "jt", "kids", "legal_row", "parent", "prev_acts", "step", "t", "w")

    def __init__(self, t: int, g: float, f: float, jt: np.ndarray, bid: np.ndarray, w: np.ndarray) -> None:
        self.t, self.g, self.f = t, g, f
        self.jt, self.bid, self.w = jt, bid, w  # joint types [m, n], belief index [m], chance weight [m]
        self.legal_row: list[np.ndarray] = []  # per agent, per type: row of legal_mask (0: t = 0, 1 + o^i)
        self.step: list[np.ndarray] | None = None  # per agent [K_{t-1}, |O^i|]: type after (type, o^i)
        self.prev_acts: list[np.ndarray] | None = None  # per agent: the parent's action per parent type
        self.parent: IceNode | None = None
        self.bg: BayesGame | None = None
        self.kids: LazyChildren | None = None

    @property
    def nbytes(self) -> int:
        live = sum(a.nbytes for a in (self.jt, self.bid, self.w) if a is not None)
        return live + (0 if self.kids is None else self.kids.nbytes) + 200


class IceStop(Exception):
    """The search must stop before the next step (the reason is the message)."""


class IceContext:
    """What one search shares: the game, the belief DAG and its heuristic Q, the settings and the memory
    tracked against the budget; builds the clustered Bayesian game and the children of a node."""

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
            raise IceStop(
                f"memory budget: {what} needs {format_bytes(n_bytes)} more, the search holds "
                f"{format_bytes(self.tracked)} of {format_bytes(self.budget)}"
            )
        self.tracked += n_bytes
        self.peak = max(self.peak, self.tracked)

    def check_process(self) -> None:
        grown = resident_bytes() - self.rss0 + self.fixed
        if grown > self.budget:
            raise IceStop(
                f"memory budget: the search holds {format_bytes(grown)} of {format_bytes(self.budget)}"
            )
        if time.perf_counter() > self.deadline:
            raise IceStop("time limit reached")

    # ----- Bayesian games -----
    def bayes_game(self, node: IceNode) -> BayesGame:
        options = [[np.flatnonzero(self.masks[i][r]) for r in rows] for i, rows in enumerate(node.legal_row)]
        for i, opts in enumerate(options):
            self.max_types[i] = max(self.max_types[i], len(opts))
        return BayesGame([node.jt[:, i] for i in range(self.game.n_agents)], options, self.game.n_actions)

    def rule_source(self, node: IceNode, bg: BayesGame) -> RuleSource:
        """The enumerated agents' rules of ``node``'s game best first: all sorted at once when there are at
        most ``sort_rules`` (or more than two agents, up to ``max_children``), else by best-first branch and
        bound (two agents; memory follows the rules generated)."""
        if len(bg.enumerated) == 1 and bg.n_e > self.sort_rules:
            return BestFirstRules(bg, self.payoffs(node))
        if bg.n_e > self.max_children:
            raise IceStop(
                f"an expansion needs {bg.n_e:,} rules of agents {bg.enumerated} ({bg.sizes()}); "
                f"max_children is {self.max_children:,}"
            )
        entries = bg.n_e * bg.legal_r.size
        self.charge(entries * BYTES_PER_ENTRY, f"expanding a stage-{node.t} policy ({bg.sizes()})")
        S = np.concatenate([c for _, c in bg.payoff_chunks(self.payoffs(node))])
        self.tracked -= entries * BYTES_PER_ENTRY
        return SortedRules(S)

    def payoffs(self, node: IceNode) -> np.ndarray:
        return node.w[:, None] * self.q[node.t][node.bid]  # [m, A]

    def child(self, node: IceNode, index: int, f: float) -> IceNode:
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
        kid = IceNode(t + 1, g, f, jt, bid, w)
        kid.legal_row, kid.prev_acts, kid.parent = legal_row, actions, node
        kid.step = []
        for i, c in enumerate(codes):
            n_o = game.n_observations[i]
            step = np.full((len(node.legal_row[i]), n_o), -1, dtype=np.int64)
            step[c // n_o, c % n_o] = maps[i]
            kid.step.append(step)
        return kid


def node_policy_trees(
    game: Game, leaf: IceNode, last: list[np.ndarray]
) -> tuple[tuple[np.ndarray, ...], ...]:
    """Per agent and stage, the action after every observation sequence (-1: never reached)."""
    chain = []
    node: IceNode | None = leaf
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
