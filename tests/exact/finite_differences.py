"""Finite-difference helpers shared by the gradient tests (J and OP are multilinear in the policy entries)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.values import multilinear_return

PolicyFn = Callable[[Sequence[np.ndarray]], float]


def perturbed_value(
    fn: PolicyFn, policy: Sequence[np.ndarray], agent: int, k: int, a: int, h: float = 1e-6
) -> float:
    """Central difference of fn in one policy entry (entries treated as free variables)."""
    plus = [p.copy() for p in policy]
    plus[agent][k, a] += h
    minus = [p.copy() for p in policy]
    minus[agent][k, a] -= h
    return (fn(plus) - fn(minus)) / (2 * h)


def raw_return(tree: HistoryTree) -> PolicyFn:
    """J as a polynomial in the policy entries (no simplex check), for finite differences."""
    return lambda pol: float(np.asarray(multilinear_return(tree, pol)))
