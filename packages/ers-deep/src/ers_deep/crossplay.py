"""Cross-play between frozen policies of any pools, the symmetrised variant, and the population report.

``crossplay_matrix(rows, cols, games)``: entry (i, j) is the mean team return of policy i with policy j over
``games`` games in *each* seat order (i in seat 0 and j in seat 1, then swapped; exact seats, never a random
seat draw), with the standard error of that mean. Two-player envs only.

``population_report(policies, ...)`` is the ``ZSCReport`` row of one population (``ers_exact.interface``):
self-play (the diagonal), XP (the mean over unordered pairs i < j of XP_ij = (M_ij + M_ji) / 2: entries (i, j)
and (j, i) are two estimates of the same XP(pi_i, pi_j), eq. XP, so each pair is one unit, as in
``ers_exact.zsc.pipeline``), XP(*) (the median of those pairs), XP(*)+MDP (the same after symmetrising every
policy over the env's Dec-POMDP symmetries: Hanabi colour permutations, the Overcooked V2 vertical flip, a
tabular game's Phi_MDP (found by ers-exact); NaN where the env exposes none), XP(*)+ER (NaN: no learned ER
symmetries yet). Means carry std(ddof=1) / sqrt(n), medians a seeded bootstrap standard error, both NaN for
one value (two agents: one pair), as in ``ers_exact.zsc.pipeline``.

``average`` picks the symmetriser (``ers_deep.train.evaluate``): ``"logits"`` (the default, the official
code's mean of unmasked logits) or ``"probabilities"`` (the paper's S(pi) = 1/|Phi| sum_phi phi(pi), the
policy ers-exact's XP(*)+MDP / +ER columns cross-play); a symmetrised matrix and the report's config record
it as ``"symmetriser"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ers_deep.envs.symmetry import IndexSymmetry, Symmetry
from ers_deep.pools import Policy, PoolError
from ers_deep.train.config import TrainConfig
from ers_deep.train.evaluate import Agent, Average, play
from ers_exact.interface import Estimate, PopulationRow, ZSCReport
from ers_exact.util.output import save_figure

__all__ = [
    "check_compatible",
    "crossplay_matrix",
    "env_symmetries",
    "heatmap",
    "mean_se",
    "pairwise_scores",
    "population_report",
    "xp_estimates",
]


def env_symmetries(config: TrainConfig) -> tuple[IndexSymmetry, ...]:
    """The Dec-POMDP symmetries the env of ``config`` exposes (identity included), () when none: Hanabi's
    colour permutations, Overcooked V2's vertical flip, a tabular game's Phi_MDP on policies with one action
    map for all agents (``ers_deep.envs.tabular.symmetry``)."""
    if config.env == "hanabi":
        from ers_deep.envs.hanabi import HanabiConfig, colour_permutations

        return tuple(colour_permutations(HanabiConfig.preset(config.hanabi_preset, players=2)))
    if config.env == "overcooked-v2":
        from ers_deep.envs.overcooked_v2 import OvercookedV2Env
        from ers_deep.envs.overcooked_v2.symmetry import find_vertical_symmetry

        flip = find_vertical_symmetry(
            OvercookedV2Env(config.layout, batch_size=1, paper_obs=config.paper_obs)
        )
        if flip is None:
            return ()
        return (flip.compose(flip.inverse()), flip)
    from ers_deep.envs.tabular.symmetry import tabular_symmetries
    from ers_deep.train.config import make_env

    found = tabular_symmetries(make_env(config, 1, 0))  # type: ignore[arg-type]
    return tuple(found) if len(found) > 1 else ()


def _env_text(c: TrainConfig) -> str:
    """The env of ``c`` with what tells its variants apart (``TrainConfig.env_key``)."""
    return " ".join(c.env_key)


def check_compatible(policies: Sequence[Policy]) -> TrainConfig:
    """The config of the first policy, once every policy is found trained on the same env and observations
    (``TrainConfig.env_key``) and loaded on the same device (their games run on one); ``PoolError`` naming the
    first two that differ."""
    base = policies[0].config
    for p in policies[1:]:
        c = p.config
        if c.env_key != base.env_key:
            raise PoolError(
                f"policies {policies[0].name} and {p.name} were trained on different envs "
                f"({_env_text(base)} vs {_env_text(c)})"
            )
        if torch.device(c.device) != torch.device(base.device):
            raise PoolError(
                f"policies {policies[0].name} and {p.name} are on different devices ({base.device} vs "
                f"{c.device}): load them on one (--device, or ers_deep.pools.load_pool(path, device=...))"
            )
    return base


def crossplay_matrix(
    rows: Sequence[Policy],
    cols: Sequence[Policy],
    games: int,
    *,
    greedy: bool = False,
    seed: int = 0,
    symmetries: Sequence[Symmetry] = (),
    symmetries_of: Callable[[Policy], Sequence[Symmetry]] | None = None,
    average: Average = "logits",
) -> dict[str, Any]:
    """XP matrix (mean over both seat orders) with standard errors; see the module docstring. Every policy
    is symmetrised over ``symmetries`` or, when given, over its own set ``symmetries_of(policy)`` (XP(*)+ER:
    each agent with the ER symmetries it learned), by the symmetriser ``average`` (logits or
    probabilities; recorded as ``"symmetriser"``, None when nothing is symmetrised). Empty ``rows`` or
    ``cols`` are a ``ValueError`` naming them."""
    for name, given in (("rows", rows), ("cols", cols)):
        if len(given) == 0:
            raise ValueError(f"crossplay_matrix: {name} is empty; give at least one policy (ers_deep.Policy)")
    config = check_compatible([*rows, *cols])
    sym = tuple(symmetries)

    def own(p: Policy) -> tuple[Symmetry, ...]:
        return tuple(symmetries_of(p)) if symmetries_of is not None else sym

    mean = np.zeros((len(rows), len(cols)))
    se = np.zeros_like(mean)
    for i, a in enumerate(rows):
        for j, b in enumerate(cols):
            agents = (Agent(a.net, own(a), average), Agent(b.net, own(b), average))
            first = play(agents, config, games, greedy=greedy, seed=seed + 7919 * i + 104729 * j)
            second = play(agents[::-1], config, games, greedy=greedy, seed=seed + 7919 * i + 104729 * j + 1)
            mean[i, j] = (first["mean"] + second["mean"]) / 2
            se[i, j] = math.sqrt(first["se"] ** 2 + second["se"] ** 2) / 2
    return {
        "rows": [p.name for p in rows],
        "cols": [p.name for p in cols],
        "mean": mean.tolist(),
        "se": se.tolist(),
        "games_per_seat_order": games,
        "greedy": greedy,
        "seed": seed,
        "symmetries": len(sym) if symmetries_of is None else "own",
        "symmetriser": average if sym or symmetries_of is not None else None,
        "env": config.env,
    }


def mean_se(values: Sequence[float] | np.ndarray) -> Estimate:
    """The mean of ``values`` with its standard error std(ddof=1) / sqrt(n) (NaN when n < 2; both NaN when
    there are none): ``Estimate.of``, as ers-exact's pipeline reports it."""
    return Estimate.of(values)


def pairwise_scores(matrix: dict[str, Any]) -> np.ndarray:
    """[n (n - 1) / 2] XP of every unordered pair i < j of a population's square matrix: (M_ij + M_ji) / 2."""
    m = np.asarray(matrix["mean"], float)
    i, j = np.triu_indices(len(m), k=1)
    return (m[i, j] + m[j, i]) / 2


def xp_estimates(matrix: dict[str, Any], seed: int = 0) -> dict[str, Estimate]:
    """SP (diagonal mean), XP (mean over unordered pairs, :func:`pairwise_scores`), XP(*) (their median)
    of a population's square matrix; the standard errors count each pair once (module docstring)."""
    m = np.asarray(matrix["mean"], float)
    pairs = pairwise_scores(matrix)
    return {
        "sp": Estimate.of(np.diag(m), False, seed),
        "xp": Estimate.of(pairs, False, seed),
        "xp_median": Estimate.of(pairs, True, seed),
    }


def population_report(
    name: str,
    policies: Sequence[Policy],
    games: int,
    *,
    greedy: bool = False,
    seed: int = 0,
    average: Average = "logits",
) -> tuple[ZSCReport, dict[str, Any], dict[str, Any] | None]:
    """(report, plain XP matrix, symmetrised XP matrix or None) of one population (module docstring);
    XP(*)+MDP by the symmetriser ``average``."""
    config = check_compatible(policies)
    plain = crossplay_matrix(policies, policies, games, greedy=greedy, seed=seed)
    est = xp_estimates(plain, seed)
    sym = env_symmetries(config)
    # Phi_MDP = {id} (Hanabi-Very-Small's one colour, most tabular games): S(pi) = pi, so XP(*)+MDP is XP(*), as
    # table1 and ers-exact report it (it was NaN here before 2026-12-07)
    sym_matrix, mdp = None, est["xp_median"]
    if len(sym) > 1:
        sym_matrix = crossplay_matrix(
            policies, policies, games, greedy=greedy, seed=seed, symmetries=sym, average=average
        )
        mdp = xp_estimates(sym_matrix, seed)["xp_median"]
    row = PopulationRow(
        name=name,
        sp=est["sp"],
        xp=est["xp"],
        xp_median=est["xp_median"],
        xp_median_mdp=mdp,
        xp_median_er=Estimate(math.nan, math.nan),
    )
    report = ZSCReport(
        game=config.game,
        rows=(row,),
        config={
            "games_per_seat_order": games,
            "greedy": greedy,
            "seed": seed,
            "mdp_symmetries": len(sym),
            "symmetriser": average,
            "er_symmetries": "none learned (NaN)",
            "source": "ers-deep crossplay",
        },
    )
    return report, plain, sym_matrix


def heatmap(matrix: dict[str, Any], path: str | Path, title: str = "cross-play") -> Path:
    """A PNG heatmap of an XP matrix (rows: seat-order-averaged partner i, columns: partner j)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = np.asarray(matrix["mean"])
    fig, ax = plt.subplots(figsize=(1.2 + 0.7 * m.shape[1], 1.0 + 0.6 * m.shape[0]), dpi=100)
    im = ax.imshow(m, cmap="viridis")
    for (i, j), v in np.ndenumerate(m):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="w" if v < m.mean() else "k", fontsize=8)
    ax.set_xticks(
        range(m.shape[1]), [c.split("/")[-1] for c in matrix["cols"]], rotation=45, ha="right", fontsize=7
    )
    ax.set_yticks(range(m.shape[0]), [r.split("/")[-1] for r in matrix["rows"]], fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return Path(path)
