"""``ers-deep crossplay``: exact-seat cross-play of one or two pools, heatmap and ZSC report."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ers_exact.util.options import (
    Options,
    at_least,
    force_option,
    option,
    output_folder,
    thread_count,
)

__all__ = ["CrossplayOptions", "run_crossplay", "show_crossplay"]


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
    seed: int = option(0, help="seed of the games", check=at_least(0))
    out: str | None = option(
        None,
        help="folder for xp.json, xp.png and report.json",
        check=output_folder,
        default_text="POOL_A/crossplay",
    )
    force: bool = force_option()
    no_mdp: bool = option(False, help="skip the matrix symmetrised over the env's Dec-POMDP symmetries")
    threads: int | None = option(
        None, help="torch CPU threads", check=thread_count, default_text="torch's choice"
    )


def run_crossplay(opts: CrossplayOptions) -> dict[str, Any]:
    """Cross-play matrix, heatmap and ZSC report of one or two pools (written to ``--out``)."""
    import math
    from pathlib import Path

    from ers_deep.cli.common import check_games_memory, require_two_seats
    from ers_deep.crossplay import crossplay_matrix, heatmap, population_report, xp_estimates
    from ers_deep.pools import load_pool
    from ers_exact.interface import Estimate, PopulationRow, ZSCReport
    from ers_exact.util.output import claim_folder, write_atomic, write_json

    if opts.threads:
        torch.set_num_threads(opts.threads)
    a = load_pool(opts.pool_a)
    b = load_pool(opts.pool_b) if opts.pool_b else None
    out = Path(opts.out) if opts.out else a.path / "crossplay"
    for pool in (a, b) if b is not None else (a,):
        require_two_seats(pool, "crossplay")
        check_games_memory("--games", opts.games, pool.policies[0].config)
    reads = [a.path] + ([b.path] if b is not None else [])
    claim_folder(out, force=opts.force, command="ers-deep crossplay", reads=reads)
    rows: list[Any] = []
    sym_matrices: dict[str, dict[str, Any]] = {}
    for pool in [a] if b is None else [a, b]:
        if opts.no_mdp:
            m = crossplay_matrix(pool.policies, pool.policies, opts.games, greedy=opts.greedy, seed=opts.seed)
            est = xp_estimates(m, opts.seed)
            nan = Estimate(math.nan, math.nan)
            report = ZSCReport(
                pool.info["env"],
                (PopulationRow(pool.name, est["sp"], est["xp"], est["xp_median"], nan, nan),),
            )
            plain, sym = m, None
        else:
            report, plain, sym = population_report(
                pool.name, pool.policies, opts.games, greedy=opts.greedy, seed=opts.seed
            )
        rows += list(report.rows)
        sym_matrices[pool.name] = {"plain": plain, "mdp": sym}
    matrix: dict[str, Any] = (
        sym_matrices[a.name]["plain"]
        if b is None
        else crossplay_matrix(a.policies, b.policies, opts.games, greedy=opts.greedy, seed=opts.seed)
    )
    report = ZSCReport(
        a.info["env"],
        tuple(rows),
        config={
            "games_per_seat_order": opts.games,
            "greedy": opts.greedy,
            "seed": opts.seed,
            "source": "ers-deep crossplay",
        },
    )
    title = f"cross-play {a.name}" + (f" x {b.name}" if b else "")
    heatmap(matrix, out / "xp.png", title)
    write_json(out / "xp.json", {"matrix": matrix, "populations": sym_matrices})
    write_atomic(out / "report.json", report.dumps())
    files = {
        "matrix": str(out / "xp.json"),
        "heatmap": str(out / "xp.png"),
        "report": str(out / "report.json"),
    }
    return {"matrix": matrix, "report": report.to_json(), "files": files}


def show_crossplay(res: dict[str, Any]) -> None:
    from ers_exact.interface import ZSCReport

    m = res["matrix"]
    print("cross-play (mean over both seat orders):")
    for name, row in zip(m["rows"], m["mean"]):
        print(f"  {name:<24} " + " ".join(f"{v:8.3f}" for v in row))
    print(ZSCReport.from_json(res["report"]).to_markdown())
    print("files: " + ", ".join(res["files"].values()))
