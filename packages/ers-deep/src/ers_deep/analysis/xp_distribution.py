"""The distribution of pairwise cross-play scores of populations (the paper's Overcooked V2 figure "XP score
distribution": 5 IPPO self-play agents against the ER population; SP 162.33 vs 27.81, XP 6.74 vs 15.8, and a
bimodal baseline: its pairs are either highly compatible or incompatible).

A population is a square exact-seat XP matrix M (``ers_deep.crossplay.crossplay_matrix``; entry (i, j): the
mean return of agents i and j over both seat orders). Its pairwise scores are XP_{ij} = (M_ij + M_ji) / 2 for
i < j (one value per unordered pair), its self-play scores the diagonal. Per population: mean SP and mean XP
with standard errors across agents / pairs, and Sarle's bimodality coefficient of the pairwise scores,

    b = (g^2 + 1) / (k + 3 (n - 1)^2 / ((n - 2)(n - 3))),    g skewness, k excess kurtosis (both sample-corrected),

which exceeds 5/9 (the value of a uniform distribution) for bimodal or strongly skewed samples (n >= 4).

A population source is a pool folder (every policy of the pool, cross-played here) or ``TABLE1:TAG``, a
population of an ``ers-deep table1`` folder (TAG ``ippo``, ``op-mdp``, ``op-er``), whose matrix
``TABLE1/xp-TAG-plain.json`` is read back without playing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ers_deep.crossplay import crossplay_matrix, mean_se, pairwise_scores
from ers_deep.pools import Pool, PoolError, load_pool
from ers_deep.zsc import POPULATIONS
from ers_exact.util.output import FileFormatError, read_json, save_figure

__all__ = [
    "bimodality",
    "distribution_figure",
    "pairwise_scores",
    "parse_populations",
    "population_matrix",
    "population_summary",
    "source_pool",
    "table1_matrix",
    "table1_sources",
    "xp_distribution",
]


def table1_sources(folder: str | Path) -> dict[str, str]:
    """The populations of a table1 folder as ``name -> FOLDER:TAG`` (Table 1's row names)."""
    return {name: f"{folder}:{tag}" for tag, name in POPULATIONS.items()}


def _table1_tag(source: str) -> tuple[str, str] | None:
    folder, sep, tag = source.rpartition(":")
    return (folder, tag) if sep and tag in POPULATIONS and Path(folder).is_dir() else None


def source_pool(source: str) -> Pool | None:
    """The pool of a population source, None for a table1 ``FOLDER:TAG`` (``PoolError`` when it is neither)."""
    return None if _table1_tag(source) else load_pool(source)


def table1_matrix(folder: str | Path, tag: str) -> dict[str, Any]:
    """The plain XP matrix of population ``tag`` of a table1 folder (``FOLDER/xp-TAG-plain.json``, its path as
    ``source``); ``PoolError`` naming the file when it is missing, not JSON, or not a square matrix of 2 or
    more agents with their names (``rows``)."""
    path = Path(folder) / f"xp-{tag}-plain.json"
    if not path.is_file():
        raise PoolError(f"{folder}:{tag}: {path} is missing (run ers-deep table1 {folder} to the end)")
    try:
        matrix = read_json(path, "an XP matrix written by ers-deep table1", ("mean", "rows"))
        m = np.asarray(matrix["mean"], float)
    except (FileFormatError, TypeError, ValueError) as e:
        raise PoolError(
            str(e) if isinstance(e, FileFormatError) else f"{path}: 'mean' is not a matrix"
        ) from None
    n = len(matrix["rows"]) if isinstance(matrix["rows"], list) else -1
    if m.ndim != 2 or m.shape != (n, n):
        raise PoolError(
            f"{path}: 'mean' of shape {list(m.shape)} is not the square matrix of its 'rows' (damaged)"
        )
    if n < 2:
        raise PoolError(f"{path}: one agent; a population needs 2 or more for pairwise cross-play")
    # table1 writes none: a NaN (JSON null) emptied the histogram, and argmax took it
    if not np.isfinite(m).all():
        bad = [[int(i), int(j)] for i, j in np.argwhere(~np.isfinite(m))]
        raise PoolError(f"{path}: 'mean' has entries that are not finite numbers at {bad[:4]} (damaged)")
    return {**matrix, "source": str(path)}


def population_matrix(source: str, games: int, *, seed: int = 0) -> dict[str, Any]:
    """The XP matrix of a population source (module docstring); ``PoolError`` naming it when it is none."""
    table1 = _table1_tag(source)
    if table1 is not None:
        return table1_matrix(*table1)
    pool = load_pool(source)
    if len(pool.policies) < 2:
        raise PoolError(f"{source}: one policy; a population needs 2 or more for pairwise cross-play")
    matrix = crossplay_matrix(pool.policies, pool.policies, games, seed=seed)
    matrix["source"] = str(pool.path)
    return matrix


def bimodality(values: np.ndarray) -> float:
    """Sarle's bimodality coefficient (module docstring); NaN below 4 values or without spread."""
    x = np.asarray(values, float)
    n = x.size
    sd = x.std()
    if n < 4 or sd <= 1e-12 * max(1.0, abs(x.mean())):
        return math.nan
    z = (x - x.mean()) / sd
    g = math.sqrt(n * (n - 1)) / (n - 2) * float((z**3).mean())
    k = (n - 1) / ((n - 2) * (n - 3)) * ((n + 1) * (float((z**4).mean()) - 3) + 6)
    return (g * g + 1) / (k + 3 * (n - 1) ** 2 / ((n - 2) * (n - 3)))


def _mean_se(v: np.ndarray) -> dict[str, float]:
    est = mean_se(v)
    return {"value": est.value, "se": est.se}


def population_summary(matrix: dict[str, Any]) -> dict[str, Any]:
    """SP (diagonal) and XP (pairs) means with standard errors, the pairwise scores and their bimodality."""
    pairs = pairwise_scores(matrix)
    return {
        "agents": list(matrix["rows"]),
        "sp": _mean_se(np.diag(np.asarray(matrix["mean"], float))),
        "xp": _mean_se(pairs),
        "pairs": pairs.tolist(),
        "bimodality": bimodality(pairs),
        "source": matrix.get("source"),
    }


def _pm(est: dict[str, Any]) -> str:
    """``mean ± se`` with two decimals; the mean alone where there is no standard error (one value)."""
    se = est["se"]
    return f"{est['value']:.2f}" + ("" if se is None or math.isnan(se) else f" ± {se:.2f}")


def distribution_figure(
    summaries: dict[str, dict[str, Any]], path: str | Path, title: str = "", bins: int = 20
) -> Path:
    """Histograms of every population's pairwise XP scores on one axis (shared bins, each bar the fraction of
    that population's pairs), mean SP and mean XP with their standard errors in the legend, each mean XP as a
    dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    every = np.concatenate([np.asarray(s["pairs"], float) for s in summaries.values()])
    lo, hi = float(every.min()), float(every.max())
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
    fig, ax = plt.subplots(figsize=(5.6, 3.2), dpi=100)
    for k, (name, s) in enumerate(summaries.items()):
        colour = f"C{k}"
        sp, xp = s["sp"], s["xp"]
        label = f"{name}: SP {_pm(sp)}, XP {_pm(xp)} (n = {len(s['pairs'])})"
        pairs = np.asarray(s["pairs"], float)
        weights = np.full(pairs.size, 1.0 / pairs.size)  # fractions: populations of different sizes compare
        ax.hist(pairs, bins=edges.tolist(), weights=weights, alpha=0.55, color=colour, label=label)
        ax.axvline(xp["value"], color=colour, ls="--", lw=1)
    ax.set_xlabel("pairwise cross-play score", fontsize=8)
    ax.set_ylabel("fraction of pairs", fontsize=8)
    ax.set_title(title or "cross-play score distribution", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return Path(path)


def xp_distribution(sources: dict[str, str], games: int, *, seed: int = 0) -> dict[str, Any]:
    """Per named population source: its summary (``population_summary``) and its XP matrix."""
    out: dict[str, Any] = {}
    for k, (name, source) in enumerate(sources.items()):
        matrix = population_matrix(source, games, seed=seed + 1009 * k)
        out[name] = {**population_summary(matrix), "matrix": matrix}
    return out


def parse_populations(sources: Sequence[str]) -> dict[str, str]:
    """``NAME=SOURCE`` items as a dict (``PoolError`` naming a malformed or repeated one)."""
    out: dict[str, str] = {}
    for item in sources:
        name, sep, source = item.partition("=")
        if not sep or not name or not source:
            raise PoolError(f"population {item!r}: write NAME=POOL or NAME=TABLE1_FOLDER:TAG")
        if name in out:
            raise PoolError(f"population name {name!r} is given twice")
        out[name] = source
    return out
