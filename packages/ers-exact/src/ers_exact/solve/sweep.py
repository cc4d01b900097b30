"""Alpha sweeps of the Boltzmann fixed points: continuation over a grid of temperatures (each solve is
warm-started from the previous alpha's points, plus fresh seeded starts), bifurcation detection (where
the number of fixed points changes). The plot of J of every fixed point against alpha is
:func:`ers_exact.analysis.plots.plot_sweep`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree, check_tree
from ers_exact.solve.config import MAX_ALPHAS, parse_alphas, repeated_alpha
from ers_exact.solve.fixed_points import FixedPointSet, SolverConfig, solve_fixed_points
from ers_exact.util.progress import Progress

__all__ = ["MAX_ALPHAS", "SweepResult", "parse_alphas", "sweep"]


@dataclass(frozen=True)
class SweepResult:
    """Fixed points at every alpha of a grid, and where their number changes."""

    game: str
    horizon: int
    sets: tuple[FixedPointSet, ...]

    @property
    def alphas(self) -> list[float]:
        return [s.alpha for s in self.sets]

    @property
    def bifurcations(self) -> list[dict[str, Any]]:
        """Consecutive grid points where the number of fixed points found changes. ``proven`` is True only
        when both lists are certified complete; otherwise a change may reflect multistart sampling."""
        out = []
        for a, b in zip(self.sets[:-1], self.sets[1:]):
            if len(a.points) != len(b.points):
                out.append(
                    {
                        "between": [a.alpha, b.alpha],
                        "n_before": len(a.points),
                        "n_after": len(b.points),
                        "proven": bool(a.complete and b.complete),
                    }
                )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "game": self.game,
            "horizon": self.horizon,
            "alphas": self.alphas,
            "bifurcations": self.bifurcations,
            "per_alpha": [
                {
                    "alpha": s.alpha,
                    "J_star": s.J_star,
                    "n_fixed_points": len(s.points),
                    "n_optimal": len(s.optimal_points),
                    "n_unconverged": s.unconverged,
                    "complete": s.complete,
                    "fixed_points": [
                        {"J": p.J, "stable": p.stable, "optimal": p.optimal, "certified": p.certified}
                        for p in s.points
                    ],
                }
                for s in self.sets
            ],
        }


def sweep(
    tree: HistoryTree,
    alphas: Sequence[float],
    config: SolverConfig | None = None,
    progress: bool | None = None,
) -> SweepResult:
    """Solve at every alpha (ascending), warm-starting from the neighbour's fixed points."""
    check_tree(tree)
    cfg = config or SolverConfig()
    if (repeated := repeated_alpha(alphas)) is not None:
        raise ValueError(f"sweep: alpha {repeated!r} is given more than once; give each once")
    sets: list[FixedPointSet] = []
    warm: np.ndarray | None = None
    previous = None
    with Progress(len(alphas), f"sweep {tree.game.name}", enabled=progress) as bar:
        for k, alpha in enumerate(sorted(alphas)):
            if warm is not None and previous is not None:
                warm = warm * (previous / alpha)  # y = Q-gap / alpha: rescale to the new temperature
            fs = solve_fixed_points(tree, alpha, replace(cfg, seed=cfg.seed + k), warm_starts=warm)
            sets.append(fs)
            warm = np.array([p.y for p in fs.points]) if fs.points else None
            previous = alpha
            bar.update()
    return SweepResult(game=tree.game.name, horizon=tree.game.horizon, sets=tuple(sets))
