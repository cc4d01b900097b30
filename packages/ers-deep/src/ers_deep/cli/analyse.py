"""``ers-deep action-matrix | op-preservation | xp-distribution``: the paper's analyses of trained policies, each
writing ``NAME.json`` beside ``NAME-config.json`` (the options) and ``NAME.png`` into ``--out``."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import torch

from ers_deep.cli.common import check_games_memory, folder_kind, require_two_seats, shown_entries
from ers_exact.util.options import (
    Options,
    UsageError,
    at_least,
    between,
    force_option,
    option,
    output_folder,
    seed_range,
    thread_count,
)
from ers_exact.util.output import MARKER, claim_files, recorded_command, write_json

__all__ = [
    "ActionMatrixOptions",
    "OPPreservationOptions",
    "XPDistributionOptions",
    "run_action_matrix",
    "run_op_preservation",
    "run_xp_distribution",
    "show_action_matrix",
    "show_op_preservation",
    "show_xp_distribution",
]


def _files(out: Path, name: str) -> dict[str, Path]:
    return {
        "json": out / f"{name}.json",
        "config": out / f"{name}-config.json",
        "figure": out / f"{name}.png",
    }


#: the analyses, which share one folder (their files: :func:`_files`)
_ANALYSES = ("action-matrix", "op-preservation", "xp-distribution")
#: the commands whose results folders hold pools, which an analysis may share (TABLE1/analysis is its default)
_POOL_HOLDERS = ("ers-deep table1", "ers-deep table2")


def _shared(out: Path) -> None:
    """Refuse an ``--out`` that an analysis may not write into: only a missing or empty folder, a pool, a
    table1 / table2 folder or a folder holding analyses' files (anything else in it is kept) is shared; another
    command's results folder (census, crossplay, demo, ...: its marker names the command), a discovery run or
    a folder of other files only are refused (the analysis wrote its files beside theirs)."""
    if not out.is_dir():
        return
    if (out / MARKER).exists():
        if recorded_command(out) in _POOL_HOLDERS:
            return
    elif (kind := folder_kind(out)) == "pool":
        return
    elif kind is None:
        own = {f.name for name in _ANALYSES for f in _files(out, name).values()}
        names = [re.sub(r"^\.(.+)\.tmp-[0-9]+$", r"\1", p.name) for p in out.iterdir()]  # temporaries too
        if not names or any(n in own for n in names):
            return
    raise UsageError(
        f"--out {str(out)!r}: {shown_entries(out)}, not a pool, a table1 folder or an analysis folder; "
        "choose a new or empty folder"
    )


def _claim(out: Path, name: str, force: bool) -> None:
    """Before the work: refuse an ``out`` the analyses may not share (:func:`_shared`), and an earlier ``NAME``
    run in it unless ``--force`` (other analyses' files in the same folder are kept)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file, not a folder")
    _shared(out)
    if not force:
        claim_files(_files(out, name).values(), force=False, command=f"ers-deep {name}")


def _write(out: Path, name: str, opts: Options, result: dict[str, Any]) -> dict[str, str]:
    """``OUT/NAME.json`` (the result, NaN as null) beside ``OUT/NAME-config.json`` (the options); their paths.
    An earlier run's three files (allowed by ``--force``, see :func:`_claim`) are removed first."""
    out.mkdir(parents=True, exist_ok=True)
    files = _files(out, name)
    claim_files(files.values(), force=True, command=f"ers-deep {name}")
    write_json(files["config"], opts.to_json())
    write_json(files["json"], result)
    return {k: str(v) for k, v in files.items()}


def _threads(n: int | None) -> None:
    if n:
        torch.set_num_threads(n)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ActionMatrixOptions(Options):
    """``ers-deep action-matrix``: P(a_t^i | a_{t-1}^j) over self-play games of chosen policies."""

    pool: str | None = option(None, help="a pool folder", positional=True, metavar="POOL")
    policy: str | None = option(
        None,
        help="policies of POOL, comma-separated seeds or names (seed-3, sp/seed-3)",
        default_text="every policy of POOL",
    )
    table1: str | None = option(
        None, help="an ers-deep table1 folder instead of POOL: the best cross-play agent of each population"
    )
    games: int = option(1000, help="self-play games per policy", check=at_least(1))
    greedy: bool = option(False, help="play the argmax action instead of sampling")
    seed: int = option(0, help="seed of the games", check=seed_range)
    out: str | None = option(
        None,
        help="folder of the results",
        check=output_folder,
        default_text="POOL/analysis or TABLE1/analysis",
    )
    force: bool = force_option()
    threads: int | None = option(
        None, help="torch CPU threads", check=thread_count, default_text="torch's choice"
    )

    def check(self) -> None:
        if self.pool is None and self.table1 is None:
            raise UsageError("give a POOL or --table1 DIR")
        if self.pool is not None and self.table1 is not None:
            raise UsageError(f"POOL {self.pool} and --table1 {self.table1}: give one of them")
        if self.table1 is not None and self.policy is not None:
            raise UsageError(f"--policy {self.policy} picks policies of a POOL; --table1 picks its own")


def _pick(pool: Any, spec: str | None) -> list[Any]:
    from ers_deep.pools import PoolError

    if spec is None:
        return list(pool.policies)
    chosen = []
    for item in (s.strip() for s in spec.split(",")):
        match = [
            p for p in pool.policies if item in (str(p.seed), f"seed-{p.seed}", p.name, p.name.split("/")[-1])
        ]
        if not match:
            names = ", ".join(p.name.split("/")[-1] for p in pool.policies)
            raise PoolError(f"--policy {item}: {pool.path} has no such policy (it has {names})")
        chosen.append(match[0])
    return chosen


def _best_per_population(folder: Path) -> list[tuple[str, Any]]:
    """(title, policy): per population of a table1 folder, the agent with the highest mean cross-play score
    against the others (its row of ``xp-TAG-plain.json``)."""
    import numpy as np

    from ers_deep.analysis import table1_matrix
    from ers_deep.pools import PoolError
    from ers_deep.zsc import POPULATIONS, load_deployed

    _, deployed = load_deployed(folder)
    out = []
    for tag, name in POPULATIONS.items():
        matrix = table1_matrix(folder, tag)
        m = np.asarray(matrix["mean"], float)
        if len(m) != len(deployed[tag]):
            raise PoolError(
                f"{matrix['source']}: {len(m)} agents, but {folder} deploys {len(deployed[tag])} (damaged folder)"
            )
        pair = (m + m.T) / 2
        score = (pair.sum(1) - np.diag(pair)) / (len(m) - 1)
        best = int(np.argmax(score))
        out.append((f"{name}: {deployed[tag][best].name} (XP {score[best]:.2f})", deployed[tag][best]))
    return out


def run_action_matrix(opts: ActionMatrixOptions) -> dict[str, Any]:
    from ers_deep.analysis import action_matrix, matrix_figure
    from ers_deep.pools import load_pool

    _threads(opts.threads)
    if opts.table1 is not None:
        chosen = _best_per_population(Path(opts.table1))
        out = Path(opts.out) if opts.out else Path(opts.table1) / "analysis"
    else:
        assert opts.pool is not None
        pool = load_pool(opts.pool)
        chosen = [(p.name, p) for p in _pick(pool, opts.policy)]
        out = Path(opts.out) if opts.out else pool.path / "analysis"
    if chosen:  # one env: the pool's, or table1's three populations' (checked by table1)
        check_games_memory("--games", opts.games, chosen[0][1].config)
    _claim(out, "action-matrix", opts.force)
    matrices = [
        {"title": title, **action_matrix(p, opts.games, seed=opts.seed, greedy=opts.greedy)}
        for title, p in chosen
    ]
    result = {"matrices": matrices}
    files = _write(out, "action-matrix", opts, result)
    matrix_figure(matrices, files["figure"], [m["title"] for m in matrices])
    return {**result, "files": files}


def show_action_matrix(res: dict[str, Any]) -> None:
    for m in res["matrices"]:
        print(f"{m['title']}: {m['transitions']} transitions over {m['games']} games")
        labels = m["labels"]
        for b, row in enumerate(m["probabilities"]):
            if row[0] is None:
                continue
            top = max(range(len(row)), key=lambda a: row[a])
            print(f"  after {labels[b]:<12} -> {labels[top]:<12} {row[top]:.2f}  (n = {m['row_counts'][b]})")
    print("files: " + ", ".join(res["files"].values()))


@dataclasses.dataclass(frozen=True, kw_only=True)
class OPPreservationOptions(Options):
    """``ers-deep op-preservation``: E[OP^Phi(pi)] against E_phi[OP^Phi(phi(pi))] for a learned set Phi."""

    discovery: str = option(
        help="a discovery output folder (ers-deep discover --out): Phi = identity + its phi"
    )
    pool: str = option(
        help="a pool of policies trained to maximise OP^Phi (ers-deep train-op --symmetries DIR)"
    )
    games: int = option(1000, help="games per pair and seat order", check=at_least(1))
    seed: int = option(0, help="seed of the games", check=seed_range)
    out: str | None = option(
        None, help="folder of the results", check=output_folder, default_text="POOL/analysis"
    )
    force: bool = force_option()
    threads: int | None = option(
        None, help="torch CPU threads", check=thread_count, default_text="torch's choice"
    )


def run_op_preservation(opts: OPPreservationOptions) -> dict[str, Any]:
    from ers_deep.analysis import discovery_folder, op_preservation, preservation_figure
    from ers_deep.pools import load_pool

    _threads(opts.threads)
    discovery_folder(opts.discovery)  # refused before the pool is read
    pool = load_pool(opts.pool)
    require_two_seats(pool, "op-preservation")
    out = Path(opts.out) if opts.out else pool.path / "analysis"
    check_games_memory("--games", opts.games, pool.policies[0].config)
    _claim(out, "op-preservation", opts.force)
    result = op_preservation(opts.discovery, pool, opts.games, seed=opts.seed)
    files = _write(out, "op-preservation", opts, result)
    title = f"{pool.info['env']}: {len(pool.policies)} OP policies, |Phi| = {len(result['symmetries'])} (identity incl.)"
    preservation_figure(result, files["figure"], title)
    return {**result, "files": files}


def _est(e: dict[str, Any]) -> str:
    """``value ± se``; the value alone where the se across policies is undefined (a pool of one policy)."""
    return f"{e['value']:.4f}" + (f" ± {e['se']:.4f}" if _defined(e["se"]) else "")


def _line(label: str, r: dict[str, Any]) -> str:
    op, sh = r["op"], r["shifted"]
    mc = f" (MC {op['mc_se']:.4f}, {sh['mc_se']:.4f})" if op.get("mc_se") else ""
    return f"  {label:<32} E[OP(pi)] = {_est(op)}   E[E_phi OP(phi(pi))] = {_est(sh)}{mc}"


def show_op_preservation(res: dict[str, Any]) -> None:
    print(f"Phi = {', '.join(res['symmetries'])}; pool trained with this set: {res['pool_trained_with_set']}")
    print(_line("deep (Monte Carlo)", res["deep"]))
    if res.get("learned_exact"):
        print(_line("exact, learned phi", res["learned_exact"]))
    if "exact" in res:
        print(_line("ers-exact, rounded phi", res["exact"]) if res["exact"] else f"  {res['exact_note']}")
    print("files: " + ", ".join(res["files"].values()))


@dataclasses.dataclass(frozen=True, kw_only=True)
class XPDistributionOptions(Options):
    """``ers-deep xp-distribution``: histograms of pairwise cross-play scores of populations, on one figure."""

    populations: str | None = option(
        None,
        help="comma-separated NAME=SOURCE, SOURCE a pool folder (all its policies) or TABLE1_FOLDER:TAG "
        "(TAG ippo, op-mdp or op-er of an ers-deep table1 run)",
    )
    table1: str | None = option(None, help="an ers-deep table1 folder: its three populations")
    games: int = option(1000, help="games per pair and seat order (pool sources)", check=at_least(1))
    bins: int = option(20, help="histogram bins, 1 to 1000", check=between(1, 1000))
    seed: int = option(0, help="seed of the games", check=seed_range)
    out: str | None = option(
        None, help="folder of the results", check=output_folder, default_text="TABLE1/analysis, else required"
    )
    force: bool = force_option()
    threads: int | None = option(
        None, help="torch CPU threads", check=thread_count, default_text="torch's choice"
    )

    def check(self) -> None:
        if self.populations is None and self.table1 is None:
            raise UsageError("give --populations NAME=SOURCE,... or --table1 DIR")
        if self.populations is not None and self.table1 is not None:
            raise UsageError(f"--populations {self.populations} and --table1 {self.table1}: give one of them")
        if self.out is None and self.table1 is None:
            raise UsageError("--populations needs --out DIR")


def run_xp_distribution(opts: XPDistributionOptions) -> dict[str, Any]:
    from ers_deep.analysis import (
        distribution_figure,
        parse_populations,
        source_pool,
        table1_sources,
        xp_distribution,
    )
    from ers_deep.pools import PoolError

    _threads(opts.threads)
    if opts.table1 is not None:
        if not Path(opts.table1).is_dir():
            raise PoolError(f"--table1 {opts.table1}: no such folder (an ers-deep table1 --out folder)")
        sources = table1_sources(opts.table1)
        out = Path(opts.out) if opts.out else Path(opts.table1) / "analysis"
    else:
        assert opts.populations is not None and opts.out is not None
        sources = parse_populations(opts.populations.split(","))
        out = Path(opts.out)
        for source in sources.values():  # every pool before any work (table1 folders hold two-seat matrices)
            pool = source_pool(source)
            if pool is not None:
                require_two_seats(pool, "xp-distribution")
                check_games_memory("--games", opts.games, pool.policies[0].config)
    _claim(out, "xp-distribution", opts.force)
    result = {"populations": xp_distribution(sources, opts.games, seed=opts.seed)}
    files = _write(out, "xp-distribution", opts, result)
    envs = sorted({str(v["matrix"].get("env", "")) for v in result["populations"].values()} - {""})
    title = "cross-play score distribution" + (f" ({', '.join(envs)})" if envs else "")
    distribution_figure(result["populations"], files["figure"], title, bins=opts.bins)
    return {**result, "files": files}


def _defined(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _pm(est: dict[str, Any]) -> str:
    """``mean ± se``; the mean alone (padded to the same width) where there is no standard error (one pair)."""
    se = est["se"]
    return f"{est['value']:8.3f}" + (f" ± {se:.3f}" if _defined(se) else " " * 8)


def show_xp_distribution(res: dict[str, Any]) -> None:
    for name, s in res["populations"].items():
        b = s["bimodality"]
        print(
            f"  {name:<28} SP {_pm(s['sp'])}   XP {_pm(s['xp'])}   "
            f"pairs {len(s['pairs'])}, bimodality {f'{b:.3f}' if _defined(b) else '-'}"
        )
    print("files: " + ", ".join(res["files"].values()))
