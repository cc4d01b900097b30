"""The model layer's settings that the command line reads without loading the model (numpy, scipy): the
default budgets of the history enumeration and of the exact searches, the optimum's method and heuristic
names, and the errors raised when a budget is exceeded. The modules that use them re-export them
(:mod:`~ers_exact.model.histories`, :mod:`~ers_exact.model.optimal`, ...)."""

from __future__ import annotations

from ers_exact.util.errors import InputError

__all__ = [
    "AUTO_EXHAUSTIVE_MAX",
    "DEFAULT_MAX_CHILDREN",
    "DEFAULT_MAX_NODES",
    "DEFAULT_MAX_POLICIES",
    "HEURISTICS",
    "METHODS",
    "HistoryBudgetError",
    "PolicyBudgetError",
]

#: Joint history nodes enumerated at most (``--max-nodes``).
DEFAULT_MAX_NODES = 5_000_000
#: Deterministic policies an exhaustive search enumerates at most (``--max-policies``).
DEFAULT_MAX_POLICIES = 2_000_000
#: Joint decision rules of one GMAA* expansion at most (``--max-children``).
DEFAULT_MAX_CHILDREN = 5_000_000
#: ``auto`` enumerates at most this many policy trees, else runs GMAA*-ICE (``ice``, not ``gmaa``).
AUTO_EXHAUSTIVE_MAX = 256
#: How J* is searched (:func:`~ers_exact.model.optimal.optimal_value`).
METHODS = ("auto", "exhaustive", "gmaa", "ice")
#: GMAA*'s admissible upper bounds (:mod:`~ers_exact.model.bounds`).
HEURISTICS = ("Q_MDP", "Q_POMDP", "Q_BG")


class HistoryBudgetError(InputError, RuntimeError):
    """Enumerating the histories would exceed the node budget."""


class PolicyBudgetError(RuntimeError):
    """An exact search would enumerate more (partial) policies than its budget allows."""
