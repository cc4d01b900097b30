"""Figures: J of every Boltzmann fixed point against alpha (:func:`plot_sweep`) and the symmetry atlas
|Pi*_alpha|, |Phi_ER(alpha)|, |Phi_MDP| against alpha (:func:`plot_atlas`). matplotlib is an optional
dependency (the ``plot`` extra), imported only when a figure is drawn."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ers_exact.solve.sweep import SweepResult
from ers_exact.util.output import save_figure as write_figure

__all__ = ["plot_atlas", "plot_sweep", "save_figure"]


def plot_sweep(result: SweepResult, path: str | Path) -> Path:
    """J of every fixed point against alpha; optimal points highlighted, unstable ones hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for fs in result.sets:
        for p in fs.points:
            colour = "tab:red" if p.optimal else "tab:blue"
            ax.scatter(
                fs.alpha,
                p.J,
                s=28 if p.optimal else 14,
                edgecolors=colour,
                facecolors=colour if p.stable else "none",
                linewidths=1.0,
                zorder=3 if p.optimal else 2,
            )
    for b in result.bifurcations:
        ax.axvline(float(np.mean(b["between"])), color="grey", lw=0.8, ls="--", zorder=1)
    ax.set_xlabel(r"temperature $\alpha$")
    ax.set_ylabel(r"$J(\pi)$ of each Boltzmann fixed point")
    ax.set_title(
        f"{result.game} (H={result.horizon}): red = self-play optimal, hollow = unstable, "
        "dashed = count changes",
        fontsize=9,
    )
    return save_figure(fig, path)


def save_figure(fig: Any, path: str | Path) -> Path:
    """Lay out, write (creating the folder) and close a matplotlib figure; return its path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        return write_figure(fig, out, dpi=120)
    finally:
        plt.close(fig)


def plot_atlas(result: dict[str, Any], path: str | Path) -> Path:
    """One figure: |Pi*_alpha|, |Phi_ER| (on policies) and |Phi_MDP| against alpha, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    a = [r["alpha"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))

    def column(key: str) -> list[float]:  # None (an alpha where the ER test is undefined) as a gap
        return [math.nan if r[key] is None else r[key] for r in rows]

    pool = column("pool_size")
    proven = [bool(r.get("optimal_set_complete")) for r in rows]  # Pi*_alpha proven complete at that alpha
    line = ax.plot(
        a, pool, "o-", mfc="white", label=r"$|\Pi^*_\alpha|$ (open: found, filled: proven complete)"
    )
    ax.plot(
        [x for x, p in zip(a, proven) if p],
        [y for y, p in zip(pool, proven) if p],
        "o",
        color=line[0].get_color(),
    )
    ax.plot(a, column("er_order_on_policies"), "s-", label=r"$|\Phi^{ER}(\alpha)|$ on policies")
    ax.plot(a, column("mdp_order"), "^--", label=r"$|\Phi^{MDP}|$")
    ax.axhline(result["psi_order_on_policies"], color="grey", lw=0.8, ls=":", label=r"$|\Psi|$ on policies")
    ax.set_yscale("log")
    ax.set_xlabel(r"temperature $\alpha$")
    ax.set_title(f"{result['game']} (H={result['horizon']})", fontsize=10)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
