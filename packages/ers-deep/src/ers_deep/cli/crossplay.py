"""``ers-deep crossplay``: exact-seat cross-play of one or two pools, heatmap and ZSC report."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from ers_deep.cli.common import device_check
from ers_deep.train.evaluate import AVERAGES
from ers_exact.util.options import (
    Options,
    at_least,
    force_option,
    one_of,
    option,
    output_folder,
    seed_range,
    thread_count,
)

if TYPE_CHECKING:
    from ers_deep.pools import Policy
    from ers_exact.interface import PopulationRow

__all__ = ["CrossplayOptions", "population_names", "run_crossplay", "show_crossplay"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CrossplayOptions(Options):
    """``ers-deep crossplay``: exact-seat cross-play of every policy pair (both seat orders), ZSC report."""

    pool_a: str = option(help="a pool folder (ers-deep train-sp --out)", positional=True, metavar="POOL_A")
    pool_b: str | None = option(
        None,
        help="a second pool",
        positional=True,
        metavar="POOL_B",
        default_text="POOL_A against itself",
    )
    games: int = option(1000, help="games per pair and seat order", check=at_least(1))
    greedy: bool = option(False, help="play the argmax action instead of sampling")
    seed: int = option(0, help="seed of the games", check=seed_range)
    out: str | None = option(
        None,
        help="folder for xp.json, xp.png and report.json",
        check=output_folder,
        default_text="POOL_A/crossplay",
    )
    force: bool = force_option()
    no_mdp: bool = option(False, help="skip the matrix symmetrised over the env's Dec-POMDP symmetries")
    symmetriser: str = option(
        "logits",
        help="what XP(*)+MDP's symmetriser averages over Phi: logits (the official code's mean of unmasked "
        "logits) or probabilities (the paper's S(pi) = mean of phi(pi), as ers-exact's columns); recorded in "
        "report.json and xp.json",
        check=one_of(AVERAGES),
    )
    device: str | None = option(
        None,
        help="torch device of the pools' policies and of the games: cpu, cuda or cuda:N",
        check=device_check,
        default_text="each policy's training device where this machine has it, else cpu",
    )
    threads: int | None = option(
        None, help="torch CPU threads", check=thread_count, default_text="torch's choice"
    )


def run_crossplay(opts: CrossplayOptions) -> dict[str, Any]:
    """Cross-play matrix, heatmap and ZSC report of one or two pools (written to ``--out``). Both pools' envs
    are checked before any game; the populations are named by :func:`population_names`."""
    from pathlib import Path

    from ers_deep.cli.common import check_games_memory, require_two_seats
    from ers_deep.crossplay import check_compatible, crossplay_matrix, heatmap
    from ers_deep.pools import load_pool
    from ers_exact.interface import ZSCReport
    from ers_exact.util.output import claim_folder, write_atomic, write_json

    if opts.threads:
        torch.set_num_threads(opts.threads)
    given = [opts.pool_a] + ([opts.pool_b] if opts.pool_b else [])
    pools = [load_pool(g, opts.device) for g in given]
    for pool in pools:
        require_two_seats(pool, "crossplay")
        check_games_memory("--games", opts.games, pool.policies[0].config)
    populations = {
        name: tuple(dataclasses.replace(p, name=f"{name}/seed-{p.seed}") for p in pool.policies)
        for name, pool in zip(population_names(given), pools)
    }
    check_compatible([p for policies in populations.values() for p in policies])  # before any game
    out = Path(opts.out) if opts.out else pools[0].path / "crossplay"
    claim_folder(out, force=opts.force, command="ers-deep crossplay", reads=[pool.path for pool in pools])
    rows: list[Any] = []
    sym_matrices: dict[str, dict[str, Any]] = {}
    for name, policies in populations.items():
        row, plain, sym = _population(name, policies, opts)
        rows.append(row)
        sym_matrices[name] = {"plain": plain, "mdp": sym}
    names, teams = list(populations), list(populations.values())
    matrix: dict[str, Any] = (
        sym_matrices[names[0]]["plain"]
        if len(teams) == 1
        else crossplay_matrix(teams[0], teams[1], opts.games, greedy=opts.greedy, seed=opts.seed)
    )
    report = ZSCReport(
        pools[0].info["env"],
        tuple(rows),
        config={
            "games_per_seat_order": opts.games,
            "greedy": opts.greedy,
            "seed": opts.seed,
            "symmetriser": None if opts.no_mdp else opts.symmetriser,
            "source": "ers-deep crossplay",
        },
    )
    heatmap(matrix, out / "xp.png", "cross-play " + " x ".join(names))
    write_json(out / "xp.json", {"matrix": matrix, "populations": sym_matrices})
    write_atomic(out / "report.json", report.dumps())
    files = {
        "matrix": str(out / "xp.json"),
        "heatmap": str(out / "xp.png"),
        "report": str(out / "report.json"),
    }
    return {"matrix": matrix, "report": report.to_json(), "files": files}


def population_names(given: list[str]) -> list[str]:
    """The populations' names: each pool folder's name; where two share it, the paths as given (``a/pool``,
    ``b/pool``), numbered when those are the same too (a pool against itself)."""
    from pathlib import Path

    names = [Path(g).resolve().name or g for g in given]
    if len(set(names)) < len(names):
        names = list(given)
    if len(set(names)) < len(names):
        names = [f"{n} ({i + 1})" for i, n in enumerate(names)]
    return names


def _population(
    name: str, policies: tuple[Policy, ...], opts: CrossplayOptions
) -> tuple[PopulationRow, dict[str, Any], dict[str, Any] | None]:
    """(ZSC row, plain XP matrix, symmetrised matrix or None) of one population; ``--no-mdp``: no
    symmetrised matrix (its XP(*)+MDP NaN)."""
    import math

    from ers_deep.crossplay import crossplay_matrix, population_report, xp_estimates
    from ers_exact.interface import Estimate, PopulationRow

    if not opts.no_mdp:
        report, plain, sym = population_report(
            name,
            policies,
            opts.games,
            greedy=opts.greedy,
            seed=opts.seed,
            average=opts.symmetriser,  # type: ignore[arg-type]
        )
        return report.rows[0], plain, sym
    m = crossplay_matrix(policies, policies, opts.games, greedy=opts.greedy, seed=opts.seed)
    est = xp_estimates(m, opts.seed)
    nan = Estimate(math.nan, math.nan)
    return PopulationRow(name, est["sp"], est["xp"], est["xp_median"], nan, nan), m, None


def show_crossplay(res: dict[str, Any]) -> None:
    from ers_exact.interface import ZSCReport

    m = res["matrix"]
    print("cross-play (mean over both seat orders):")
    for name, row in zip(m["rows"], m["mean"]):
        print(f"  {name:<24} " + " ".join(f"{v:8.3f}" for v in row))
    print(ZSCReport.from_json(res["report"]).to_markdown())
    print("files: " + ", ".join(res["files"].values()))
