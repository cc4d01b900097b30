"""Exact self-play optimum J* = max_pi J(pi) over deterministic joint policies (an optimal deterministic
joint policy exists for finite-horizon Dec-POMDPs), by two searches that must agree:

* ``exhaustive`` (the slow reference): every deterministic policy of agents 0..n-2 is enumerated as a
  policy *tree* (one action per observation sequence o_1..o_t, the only histories a deterministic agent
  can reach); agent n-1 answers each with an exact best response by backward induction over its local
  histories, restricted to the subtree the enumerated policies reach: template nodes (joint observation
  sequence, agent n-1's actions), (|O| |A^{n-1}|)^t of them at stage t instead of the whole joint tree.
* ``gmaa``: GMAA*-ICE on the enumerated joint history tree, heuristic search over partial joint policies
  stage by stage with an admissible upper bound (Q_BG by default), see :mod:`ers_exact.model.gmaa`.
  Optimality is proven by the search's termination; it enumerates no policy set.
* ``ice`` (the fast path): the same search as MADP runs it, with incremental clustering of the types of
  each partial policy's Bayesian game and the heuristic on the distinct joint beliefs, never on the joint
  history tree (:mod:`ers_exact.model.ice`); its memory follows the search, under a byte budget.

:func:`optimal_value` picks one for an enumerated tree, :func:`optimal_for_game` for a game, without
enumerating its histories unless the method needs them (``auto``: exhaustive when the game and its policy
count are small, else ice); the result records the method, its work (candidates, nodes expanded), time and
whether optimality was proven. :func:`self_play_optimum` is the exhaustive reference under its historical
name.
The exhaustive reference lives in :mod:`ers_exact.model.exhaustive` and the result type in
:mod:`ers_exact.model.optimal_result`; both are re-exported here.
"""

from __future__ import annotations

import numpy as np

from ers_exact.model.config import AUTO_EXHAUSTIVE_MAX, DEFAULT_MAX_POLICIES, METHODS
from ers_exact.model.exhaustive import (
    MAX_TEMPLATE_NODES,
    count_policy_trees,
    count_template_nodes,
    self_play_optimum,
)
from ers_exact.model.game import Game
from ers_exact.model.gmaa import DEFAULT_MAX_CHILDREN, PolicyBudgetError, gmaa_search
from ers_exact.model.histories import (
    DEFAULT_MAX_NODES,
    HistoryTree,
    enumerate_histories,
    estimate_history_count,
)
from ers_exact.model.ice import IceOutcome, ice_search
from ers_exact.model.optimal_result import OptimalResult
from ers_exact.model.policy_trees import policy_trees_to_local

__all__ = [
    "AUTO_EXHAUSTIVE_MAX",
    "DEFAULT_MAX_POLICIES",
    "METHODS",
    "OptimalResult",
    "PolicyBudgetError",
    "count_policy_trees",
    "optimal_for_game",
    "optimal_value",
    "self_play_optimum",
]

AUTO_TREE_NODES = 20_000  # ``auto`` on a game enumerates its histories only below this many joint nodes


def optimal_value(
    tree: HistoryTree,
    method: str = "auto",
    *,
    max_policies: int = DEFAULT_MAX_POLICIES,
    heuristic: str = "Q_BG",
    max_children: int = DEFAULT_MAX_CHILDREN,
    cluster: bool = True,
    progress: bool | None = None,
    budget_bytes: float | None = None,
    max_seconds: float = float("inf"),
) -> OptimalResult:
    """J* and an optimal deterministic joint policy.

    Args:
        method: ``"exhaustive"`` (reference; refuses beyond ``max_policies`` policy trees), ``"gmaa"``
            (GMAA*-ICE on the tree; refuses when one expansion exceeds ``max_children`` decision rules),
            ``"ice"`` (:func:`~ers_exact.model.ice.ice_search`, the policy converted to the tree's local
            histories), or ``"auto"`` (exhaustive when agents 0..n-2 have at most
            :data:`AUTO_EXHAUSTIVE_MAX` policy trees, else ice).
        heuristic: GMAA*'s upper bound, ``"Q_BG"``, ``"Q_POMDP"`` or ``"Q_MDP"``.
        cluster: GMAA* treats probabilistically equivalent local histories as one type (lossless).
        progress: progress bar of the exhaustive search (default: when stderr is a terminal).
        budget_bytes, max_seconds: ice's memory budget and time limit (as :func:`optimal_for_game`).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if method == "auto":
        few = count_policy_trees(tree, list(range(tree.game.n_agents - 1))) <= AUTO_EXHAUSTIVE_MAX
        method = "exhaustive" if few and count_template_nodes(tree) <= MAX_TEMPLATE_NODES else "ice"
    if method == "exhaustive":
        return self_play_optimum(tree, max_policies=max_policies, progress=progress)
    game = tree.game
    if method == "ice":
        outcome = ice_search(
            game,
            heuristic,
            max_children=max_children,
            cluster=cluster,
            budget_bytes=budget_bytes,
            max_seconds=max_seconds,
        )
        return _ice_result(game, outcome, tree)
    out = gmaa_search(tree, heuristic=heuristic, max_children=max_children, cluster=cluster)
    return OptimalResult(
        game=game.name,
        horizon=game.horizon,
        discount=game.discount,
        value=out.value,
        policy=out.policy,
        n_candidates=out.children_evaluated,
        seconds=out.seconds,
        method="gmaa",
        nodes_expanded=out.nodes_expanded,
        upper_bound=out.value,  # GMAA* ends only with the bound closed: J* = value (the root's is search's)
        search=out.stats(),
    )


def optimal_for_game(
    game: Game,
    method: str = "auto",
    *,
    max_nodes: int = DEFAULT_MAX_NODES,
    max_policies: int = DEFAULT_MAX_POLICIES,
    heuristic: str = "Q_BG",
    max_children: int = DEFAULT_MAX_CHILDREN,
    budget_bytes: float | None = None,
    max_seconds: float = float("inf"),
    progress: bool | None = None,
) -> OptimalResult:
    """J* of ``game``: ``ice`` runs on the game itself (no history tree; ``budget_bytes`` defaults to
    :func:`~ers_exact.util.budget.memory_budget`, ``max_seconds`` stops it with bounds); ``exhaustive`` and
    ``gmaa`` enumerate the histories first (refused beyond ``max_nodes``); ``auto`` enumerates them only
    when the game has at most :data:`AUTO_TREE_NODES` joint nodes (then as :func:`optimal_value`), else ice."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if method == "auto" and estimate_history_count(game, AUTO_TREE_NODES + 1) > AUTO_TREE_NODES:
        method = "ice"
    if method == "ice":
        outcome = ice_search(
            game, heuristic, max_children=max_children, budget_bytes=budget_bytes, max_seconds=max_seconds
        )
        return _ice_result(game, outcome, None)
    tree = enumerate_histories(game, max_nodes=max_nodes)
    return optimal_value(  # ``auto`` may still pick ice on the tree: it keeps the budget and time limit
        tree,
        method,
        max_policies=max_policies,
        heuristic=heuristic,
        max_children=max_children,
        progress=progress,
        budget_bytes=budget_bytes,
        max_seconds=max_seconds,
    )


def _ice_result(game: Game, out: IceOutcome, tree: HistoryTree | None) -> OptimalResult:
    policy: tuple[np.ndarray, ...] = ()
    if tree is not None and out.policy_trees is not None:
        policy = policy_trees_to_local(tree, out.policy_trees)
    return OptimalResult(
        game=game.name,
        horizon=game.horizon,
        discount=game.discount,
        value=out.value,
        policy=policy,
        n_candidates=out.children_evaluated,
        seconds=out.seconds,
        method="ice",
        nodes_expanded=out.nodes_expanded,
        upper_bound=out.upper_bound,  # the search's final bound (stopped: above the value)
        search=out.stats(),
        optimal=out.optimal,
        stopped=out.stopped,
        policy_trees=out.policy_trees,
    )
