"""Figures of training runs: learning curves from a run directory's ``metrics.csv`` (matplotlib, the ``plot``
extra), and the time to reach a fraction of the best score."""

from __future__ import annotations

import math
import os
from collections import defaultdict
from pathlib import Path

from ers_deep.train.run import read_metrics
from ers_exact.util.output import save_figure

__all__ = ["curves", "learning_curve", "time_to_fraction"]


def curves(
    run_dir: str | os.PathLike[str], column: str = "return"
) -> dict[int, list[tuple[int, float, float]]]:
    """Per seed: (env steps per seed, value of ``column``, wall-clock seconds since the start) per update;
    updates where the value is NaN (no episode ended) are left out."""
    out: dict[int, list[tuple[int, float, float]]] = defaultdict(list)
    clock: dict[int, float] = {}
    for row in read_metrics(run_dir):
        u = int(row["update"])
        clock.setdefault(u, clock.get(u - 1, 0.0) + float(row["seconds"]))
        value = float(row[column])
        if not math.isnan(value):
            out[int(row["seed"])].append((int(row["env_steps"]), value, clock[u]))
    return dict(out)


def _smooth(values: list[float], k: int) -> list[float]:
    return [
        sum(values[max(0, i - k + 1) : i + 1]) / len(values[max(0, i - k + 1) : i + 1])
        for i in range(len(values))
    ]


def time_to_fraction(
    run_dir: str | os.PathLike[str], fraction: float = 0.9, column: str = "return", smooth: int = 10
) -> dict[str, float]:
    """The best smoothed mean-over-seeds value of ``column`` and the first wall-clock time (s) and env step at
    which the smoothed mean reached ``fraction`` of it."""
    per_seed = curves(run_dir, column)
    n = min(len(v) for v in per_seed.values())
    mean = [sum(per_seed[s][i][1] for s in per_seed) / len(per_seed) for i in range(n)]
    sm = _smooth(mean, smooth)
    best = max(sm)
    first = next(i for i, v in enumerate(sm) if v >= fraction * best)
    any_seed = next(iter(per_seed.values()))
    return {
        "best": best,
        "fraction": fraction,
        "seconds": any_seed[first][2],
        "env_steps": any_seed[first][0],
        "total_seconds": any_seed[n - 1][2],
    }


def learning_curve(
    run_dir: str | os.PathLike[str],
    path: str | os.PathLike[str],
    columns: tuple[str, ...] = ("return",),
    title: str = "",
    smooth: int = 10,
) -> Path:
    """A small PNG: per column, every seed's smoothed curve (thin) and their mean (thick) against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(columns), figsize=(4.2 * len(columns), 3.0), dpi=100, squeeze=False)
    for ax, column in zip(axes[0], columns):
        per_seed = curves(run_dir, column)
        for seed, pts in sorted(per_seed.items()):
            ax.plot(
                [p[0] for p in pts],
                _smooth([p[1] for p in pts], smooth),
                lw=0.8,
                alpha=0.6,
                label=f"seed {seed}",
            )
        n = min(len(v) for v in per_seed.values())
        mean = [sum(per_seed[s][i][1] for s in per_seed) / len(per_seed) for i in range(n)]
        ax.plot(
            [p[0] for p in next(iter(per_seed.values()))[:n]],
            _smooth(mean, smooth),
            lw=2.0,
            color="k",
            label="mean",
        )
        ax.set_xlabel("env steps per seed")
        ax.set_ylabel(column.replace("_", " "))
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=6)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return Path(path)
