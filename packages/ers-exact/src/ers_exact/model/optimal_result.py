"""The result of the exact self-play optimum J* = max_pi J(pi) over deterministic joint policies: J*, one
optimal deterministic joint policy (per agent i, one action per local history tau^i), and how the search
found it (method, candidates evaluated, partial policies expanded, the search's final upper bound on J*,
whether optimality was proven). Built by :mod:`ers_exact.model.exhaustive` and
:mod:`ers_exact.model.optimal`, which re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["OptimalResult"]

_DESCRIPTIONS = {
    "exhaustive": "exhaustive policy trees of agents 0..n-2 + exact best response of agent n-1 on the "
    "reached subtree",
    "gmaa": "GMAA*-ICE: A* over partial joint policies stage by stage, admissible heuristic {heuristic}, "
    "incremental expansion; last stage solved exactly as a Bayesian game",
    "ice": "GMAA*-ICE with incremental clustering (Oliehoek et al. 2013): A* over partial joint policies, each "
    "with its clustered Bayesian game; admissible heuristic {heuristic} per distinct joint belief; incremental "
    "expansion; last stage solved exactly by branch and bound",
}


@dataclass(frozen=True)
class OptimalResult:
    """The optimal value J* with one optimal deterministic joint policy and how it was found.

    ``method`` is ``"exhaustive"`` or ``"gmaa"``; ``n_candidates`` counts the policy trees enumerated
    (exhaustive) or the children whose priority GMAA* evaluated; ``nodes_expanded`` the partial policies
    GMAA* expanded (None for exhaustive); ``upper_bound`` the search's final bound, value <= J* <= upper_bound
    (equal to the value when optimality is proven; None for exhaustive, whose value is J*); ``search`` the
    search's other statistics (``root_bound``: the heuristic's bound at the empty policy)."""

    game: str
    horizon: int
    discount: float
    value: float
    policy: tuple[np.ndarray, ...] = field(repr=False)
    n_candidates: int
    seconds: float
    method: str = "exhaustive"
    nodes_expanded: int | None = None
    upper_bound: float | None = None
    search: dict[str, Any] = field(default_factory=dict, repr=False)
    optimal: bool = True
    stopped: str | None = None
    policy_trees: tuple[tuple[np.ndarray, ...], ...] | None = field(default=None, repr=False)

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self.method].format(heuristic=self.search.get("heuristic", ""))

    def to_json(self) -> dict[str, Any]:
        return {
            "game": self.game,
            "horizon": self.horizon,
            "discount": self.discount,
            "value": self.value if np.isfinite(self.value) else None,  # None: stopped before any policy
            "method": self.method,
            "description": self.description,
            "n_candidates": self.n_candidates,
            "nodes_expanded": self.nodes_expanded,
            "upper_bound": self.upper_bound,
            "seconds": round(self.seconds, 4),
            "optimal": self.optimal,
            "stopped": self.stopped,
            "search": self.search,
            **self._policy_json(),
        }

    def _policy_json(self) -> dict[str, Any]:
        """``policy``: per agent its [histories x actions] table (one-hot rows), the policy-file format that
        ``value --policy`` reads and ``--save-policy`` writes; ``actions``: the same as one action index per
        local history; ``policy_trees`` (ice): one action per observation sequence, without the history tree."""
        out: dict[str, Any] = {}
        if self.policy:
            out["policy"] = [np.asarray(p, dtype=float).tolist() for p in self.policy]
            out["actions"] = [np.argmax(p, axis=1).tolist() for p in self.policy]
        if self.policy_trees is not None:
            out["policy_trees"] = [[stage.tolist() for stage in agent] for agent in self.policy_trees]
        return out
