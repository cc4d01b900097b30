"""The model layer: a finite Dec-POMDP G = (S, n, A^i, O^i, T, R, U^i, H, gamma) as a frozen, validated
spec (``game``); its possible local histories tau^i_t and joint history tree, enumerated once as flat
arrays (``histories``); exact values J(pi), Q^i_pi(tau^i, a^i) and dJ/dpi of tabular joint policies
(``values``); transformations phi = (phi_S, phi_A^i, phi_O^i) acting on games, histories and policies
(``transformation``); the objectives XP, OP^Phi and the symmetriser S(pi) (``objectives``); and the exact
self-play optimum J* over deterministic joint policies (``optimal``: the exhaustive reference of
``exhaustive`` and GMAA*, with the upper bounds of ``bounds`` and the search of ``gmaa``; the result type in
``optimal_result``); its default budgets and budget errors in ``config`` (light, for the command line). It
imports only ``util``; every name here is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ers_exact.util.lazy import lazy_exports

if TYPE_CHECKING:  # the names, for mypy and IDEs; at run time each is imported on first use
    from ers_exact.model.game import Game, GameError, make_game
    from ers_exact.model.histories import HistoryTree, enumerate_histories
    from ers_exact.model.objectives import cross_play, other_play, symmetrise
    from ers_exact.model.optimal import optimal_value, self_play_optimum
    from ers_exact.model.transformation import Transformation, apply_to_policy, is_decpomdp_symmetry
    from ers_exact.model.values import Policy, expected_return, local_q_values, uniform_policy

__all__ = [
    "Game",
    "GameError",
    "HistoryTree",
    "Policy",
    "Transformation",
    "apply_to_policy",
    "cross_play",
    "enumerate_histories",
    "expected_return",
    "is_decpomdp_symmetry",
    "local_q_values",
    "make_game",
    "optimal_value",
    "other_play",
    "self_play_optimum",
    "symmetrise",
    "uniform_policy",
]

if not TYPE_CHECKING:  # hidden from mypy, so that a name missing above is an error, not Any
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Game": "game",
            "GameError": "game",
            "make_game": "game",
            "HistoryTree": "histories",
            "enumerate_histories": "histories",
            "cross_play": "objectives",
            "other_play": "objectives",
            "symmetrise": "objectives",
            "optimal_value": "optimal",
            "self_play_optimum": "optimal",
            "Transformation": "transformation",
            "apply_to_policy": "transformation",
            "is_decpomdp_symmetry": "transformation",
            "Policy": "values",
            "expected_return": "values",
            "local_q_values": "values",
            "uniform_policy": "values",
        },
    )
