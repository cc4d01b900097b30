"""Figures of training runs: learning curves from a run directory's ``metrics.csv`` (matplotlib, the ``plot``
extra), and the time to reach a fraction of the best score."""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from ers_deep.train.run import read_metrics
from ers_exact.util.output import save_figure

__all__ = [
    "bin_means",
    "column_curves",
    "curves",
    "learning_curve",
    "pool_curve",
    "pool_run_dirs",
    "time_to_fraction",
    "trailing_mean",
    "value_at",
]


RunDirs = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


Curve = list[tuple[int, float, float]]


def column_curves(run_dir: RunDirs, columns: Sequence[str]) -> dict[str, dict[int, Curve]]:
    """``curves`` of several columns from one read of each metrics file; a column a file lacks counts as
    NaN (left out)."""
    dirs = [run_dir] if isinstance(run_dir, (str, os.PathLike)) else list(run_dir)
    out: dict[str, dict[int, Curve]] = {c: defaultdict(list) for c in columns}
    for d in dirs:
        clock: dict[
            int, float
        ] = {}  # per update, the seconds of the updates logged up to it (one row per seed)
        elapsed = 0.0
        for row in read_metrics(d):
            u = int(row["update"])
            if u not in clock:  # a gap in the updates (rows a kill cut) does not restart the clock
                elapsed += float(row["seconds"])
                clock[u] = elapsed
            for c in columns:
                value = float(row.get(c) or "nan")
                if not math.isnan(value):
                    out[c][int(row["seed"])].append((int(row["env_steps"]), value, clock[u]))
    return {c: dict(v) for c, v in out.items()}


def curves(run_dir: RunDirs, column: str = "return") -> dict[int, Curve]:
    """Per seed: (env steps per seed, value of ``column``, wall-clock seconds since the start of its run) per
    update; updates where the value is NaN (no episode ended) are left out. ``run_dir``: one run directory or
    several (a Ray pool's ``runs/seed-N``, one seed each)."""
    return column_curves(run_dir, (column,))[column]


def pool_run_dirs(pool: str | os.PathLike[str]) -> list[Path]:
    """The run directories of a pool folder: ``run/`` (seeds in one process) or ``runs/seed-N/`` (Ray)."""
    pool = Path(pool)
    if (pool / "run" / "metrics.csv").exists():
        return [pool / "run"]
    return sorted(p for p in (pool / "runs").glob("seed-*") if (p / "metrics.csv").exists())


def pool_curve(
    pool: str | os.PathLike[str], path: str | os.PathLike[str] | None = None, title: str = ""
) -> Path | None:
    """The learning curves of a trained pool (``train-sp`` / ``train-op`` write it as
    ``learning-curve.png`` beside pool.json): training return, the shaped return where the env has one,
    and the policy entropy, against env steps per seed. None when the pool has no metrics."""
    dirs = pool_run_dirs(pool)
    if not dirs:
        return None
    per_column = column_curves(dirs, ("return", "shaped_return", "entropy"))
    shaped = [v for pts in per_column["shaped_return"].values() for _, v, _ in pts]
    if shaped and not any(shaped):  # recorded, and 0 throughout: an env without a shaped reward
        del per_column["shaped_return"]
    return _draw(per_column, path or Path(pool) / "learning-curve.png", title)


def trailing_mean(values: list[float], k: int) -> list[float]:
    """Each value replaced by the mean of it and the up to ``k - 1`` values before it (``k`` = 1: unchanged);
    ``ValueError`` for ``k`` < 1 (it was a ZeroDivisionError)."""
    if k < 1:
        raise ValueError(f"smoothing window {k}: must be at least 1 (1 leaves the curve as it is)")
    return [
        sum(values[max(0, i - k + 1) : i + 1]) / len(values[max(0, i - k + 1) : i + 1])
        for i in range(len(values))
    ]


def value_at(curves: Iterable[Curve], mark: float, window: float) -> float:
    """The mean over the curves (e.g. seeds) and their points within ``window`` (env-steps, or whatever the
    curves' first entry counts) of ``mark``; NaN where none."""
    values = [v for pts in curves for step, v, _ in pts if abs(step - mark) <= window]
    return sum(values) / len(values) if values else math.nan


def bin_means(curves: Iterable[Curve], marks: Sequence[float], window: float) -> list[float]:
    """Per mark, ``value_at``'s mean over the curves' points within ``window`` of it, except that a point on the
    edge two marks' bins share (``window`` from both: bins of half the gap between marks tile the axis) counts
    half in each rather than fully in both; NaN where a mark has no point. Wider windows overlap, and their
    points count in every bin they lie in, as with ``value_at``."""
    sums, weights = [0.0] * len(marks), [0.0] * len(marks)
    for pts in curves:
        for step, value, _ in pts:
            dist = [abs(step - m) for m in marks]
            inside = [i for i, d in enumerate(dist) if d <= window]
            shared = sum(math.isclose(dist[i], window, rel_tol=1e-12) for i in inside) > 1
            for i in inside:
                w = 0.5 if shared and math.isclose(dist[i], window, rel_tol=1e-12) else 1.0
                sums[i] += w * value
                weights[i] += w
    return [s / w if w else math.nan for s, w in zip(sums, weights)]


def seed_mean(per_seed: dict[int, Curve]) -> tuple[list[int], list[float]]:
    """The mean over seeds of a ``curves`` column at every env step where every seed has a value (an update
    where some seed finished no episode is left out rather than averaged over fewer seeds)."""
    by_step: dict[int, list[float]] = defaultdict(list)
    for pts in per_seed.values():
        for step, value, _ in pts:
            by_step[step].append(value)
    steps = sorted(k for k, v in by_step.items() if len(v) == len(per_seed))
    return steps, [sum(by_step[k]) / len(per_seed) for k in steps]


def time_to_fraction(
    run_dir: str | os.PathLike[str], fraction: float = 0.9, column: str = "return", smooth: int = 10
) -> dict[str, float | None]:
    """The best smoothed mean-over-seeds value of ``column``, best = max_u R_u, and the first wall-clock time
    (s) and env step at which the smoothed mean reached ``fraction`` * best. Both are None where no update
    reached it, i.e. where ``fraction`` * best lies above the best: a ``fraction`` above 1 with a positive best,
    or one below 1 with a negative best (Overcooked early in training, every return below 0); None, not NaN:
    strict JSON."""
    per_seed = curves(run_dir, column)
    steps, mean = seed_mean(per_seed)
    if not steps:
        raise ValueError(f"time_to_fraction: no update of {run_dir} has a {column} for every seed")
    sm = trailing_mean(mean, smooth)
    best = max(sm)
    first = next((i for i, v in enumerate(sm) if v >= fraction * best), None)
    clock = {step: t for pts in per_seed.values() for step, _, t in pts}  # seeds in one run share the clock
    return {
        "best": best,
        "fraction": fraction,
        "seconds": None if first is None else clock[steps[first]],
        "env_steps": None if first is None else steps[first],
        "total_seconds": max(clock.values()),
    }


def learning_curve(
    run_dir: RunDirs,
    path: str | os.PathLike[str],
    columns: tuple[str, ...] = ("return",),
    title: str = "",
    smooth: int = 10,
) -> Path:
    """A small PNG: per column, every seed's smoothed curve (thin) and their mean (thick) against env steps."""
    return _draw(column_curves(run_dir, columns), path, title, smooth)


def _draw(
    per_column: dict[str, dict[int, Curve]], path: str | os.PathLike[str], title: str, smooth: int = 10
) -> Path:
    """``learning_curve``'s figure of curves already read, one panel per column."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(per_column), figsize=(4.2 * len(per_column), 3.0), dpi=100, squeeze=False)
    for ax, (column, per_seed) in zip(axes[0], per_column.items()):
        ax.set_xlabel("env steps per seed")
        ax.set_ylabel(column.replace("_", " "))
        ax.grid(alpha=0.3)
        if not per_seed:  # no episode ended yet
            ax.text(0.5, 0.5, "no finished episode", ha="center", va="center", transform=ax.transAxes)
            continue
        few = max(len(v) for v in per_seed.values()) < 20  # markers, so that a single update shows
        for seed, pts in sorted(per_seed.items()):
            ax.plot(
                [p[0] for p in pts],
                trailing_mean([p[1] for p in pts], smooth),
                lw=0.8,
                alpha=0.6,
                marker="o" if few else None,
                ms=2,
                label=f"seed {seed}",
            )
        steps, mean = seed_mean(per_seed)
        ax.plot(
            steps,
            trailing_mean(mean, smooth),
            lw=2.0,
            color="k",
            marker="o" if few else None,
            ms=3,
            label="mean",
        )
    if axes[0][0].has_data():
        axes[0][0].legend(fontsize=6)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return Path(path)
