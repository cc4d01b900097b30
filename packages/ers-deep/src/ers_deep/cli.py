"""Command line of ers-deep (console script ``ers-deep``).

    ers-deep env-bench hanabi --batch 1024 --steps 200 [--device cuda] [--against hle,jaxmarl] [--json]
    ers-deep env-bench overcooked-v2 --batch 1024 --steps 200 [--layout L] [--against jaxmarl] [--json]
    ers-deep train-sp --env ENV --seeds 0-4 --out POOL [--alpha A] [--total-steps N] [--ray ADDRESS] [--json]
    ers-deep train-sp --resume POOL [--json]
    ers-deep crossplay POOL_A [POOL_B] --games N [--greedy] [--json]

Options come from one frozen options class per command (defaults, help and validation in one place, shared
with ers-exact through :mod:`ers_exact.util.options`); every invalid input exits with status 2 and one line
``ers-deep CMD: error: ...`` naming the value.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any, Literal

import torch

from ers_deep import __version__
from ers_deep.bench import ENV_BENCHES
from ers_deep.bench import hanabi as bench_hanabi
from ers_deep.bench import overcooked_v2 as bench_overcooked
from ers_deep.envs.hanabi.config import PRESET_ALIASES, PRESETS, HanabiConfig
from ers_deep.envs.overcooked_v2.layouts import LAYOUT_STRINGS
from ers_exact.util.cli import Command, run_cli
from ers_exact.util.options import (
    Options,
    UsageError,
    at_least,
    between,
    non_negative,
    one_of,
    option,
    output_folder,
    positive,
)

__all__ = [
    "COMMANDS",
    "CrossplayOptions",
    "EnvBenchOptions",
    "TrainSPOptions",
    "main",
    "run_crossplay",
    "run_env_bench",
    "run_train_sp",
]

#: the references each env can be measured against (``--against``)
ENV_REFERENCES: dict[str, tuple[str, ...]] = {
    "hanabi": bench_hanabi.REFERENCES,
    "overcooked-v2": ("jaxmarl",),
}
_PRESET_NAMES = sorted(PRESETS) + sorted(PRESET_ALIASES)


def device_check(value: object) -> str | None:
    """A torch device string that exists on this machine (``cpu``, ``cuda``, ``cuda:N``, ``mps``)."""
    try:
        dev = torch.device(str(value))
    except (RuntimeError, ValueError):
        return "is not a torch device (try cpu, cuda, cuda:0)"
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            return "needs CUDA, which this machine does not have (use --device cpu)"
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            return f"does not exist: this machine has {torch.cuda.device_count()} CUDA device(s)"
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        return "needs MPS, which this machine does not have (use --device cpu)"
    elif dev.type not in ("cpu", "cuda", "mps"):
        return "is not supported (use cpu or cuda)"
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class EnvBenchOptions(Options):
    """``ers-deep env-bench``: env-steps/s with random legal moves (auto-reset on), against references."""

    env: Literal["hanabi", "overcooked-v2"] = option(help="the batched env to time", positional=True)
    batch: int = option(1024, help="games stepped together (B)", check=at_least(1))
    steps: int = option(100, help="batched steps to time", check=at_least(1))
    device: str = option("cpu", help="torch device: cpu, cuda or cuda:N", check=device_check)
    preset: str = option(
        "Hanabi-Full",
        help="Hanabi: HLE preset (or alias full, small, very-small, minimal)",
        check=one_of(_PRESET_NAMES),
    )
    players: int = option(2, help="Hanabi: number of players (2-5)", check=between(2, 5))
    layout: str = option(
        "grounded_coord_simple", help="Overcooked V2 layout", check=one_of(sorted(LAYOUT_STRINGS))
    )
    obs_dtype: Literal["uint8", "float32"] = option("uint8", help="Overcooked V2: observation dtype")
    no_obs: bool = option(
        False, help="Overcooked V2: time the transition and resets only (JaxMARL: observation unused)"
    )
    against: str = option(
        "", help="comma-separated references: hle, jaxmarl (Hanabi); jaxmarl (Overcooked V2)"
    )
    threads: int | None = option(None, help="torch CPU threads (default: torch's choice)", check=at_least(1))
    no_check: bool = option(False, help="Hanabi: skip the per-step legality check (no device sync)")
    seed: int = option(0, help="seed of the env's generator and of the random moves", check=at_least(0))
    profile: int = option(
        0,
        help="also profile this many batched steps with torch.profiler (0: off)",
        metavar="STEPS",
        check=at_least(0),
    )

    @property
    def references(self) -> tuple[str, ...]:
        """``--against`` as a tuple of names."""
        return tuple(x.strip() for x in self.against.split(",") if x.strip())

    def check(self) -> None:
        known = ENV_REFERENCES[self.env]
        unknown = [r for r in self.references if r not in known]
        if unknown:
            raise UsageError(
                f"--against {self.against!r}: unknown reference {unknown[0]!r} for {self.env}; "
                f"choose from {', '.join(known)}"
            )


def run_env_bench(opts: EnvBenchOptions) -> dict[str, Any]:
    """Time the env (and the references in ``--against``); the result dict of ``bench.*.env_bench``."""
    if opts.threads:
        torch.set_num_threads(opts.threads)
    if opts.env == "overcooked-v2":
        return bench_overcooked.env_bench(
            opts.layout,
            batch=opts.batch,
            steps=opts.steps,
            device=opts.device,
            against=opts.references,
            seed=opts.seed,
            obs_dtype=opts.obs_dtype,
            observations=not opts.no_obs,
            profile_steps=opts.profile,
        )
    cfg = HanabiConfig.preset(opts.preset, players=opts.players)
    return ENV_BENCHES["hanabi"](
        cfg,
        batch=opts.batch,
        steps=opts.steps,
        device=opts.device,
        against=opts.references,
        seed=opts.seed,
        check_legal=not opts.no_check,
        profile_steps=opts.profile,
    )


def show_env_bench(res: dict[str, Any]) -> None:
    """The text summary of ``env-bench``."""
    print(
        f"ers {res['env']}  batch {res['batch']:>6}  device {res['device']:<6}  "
        f"{res['env_steps_per_s']:>14,.0f} env-steps/s"
    )
    for name, r in res["references"].items():
        if "error" in r:
            print(f"{name:<10} skipped: {r['error']}")
        else:
            print(
                f"{name:<10} batch {r['batch']:>6}  {r['env_steps_per_s']:>29,.0f} env-steps/s  "
                f"ratio ers/{name} = {r['ratio']:.1f}x"
            )
    for row in res.get("profile", []):
        print(
            f"  {row['op']:<40} {row['calls_per_step']:6.1f} calls/step  {row['self_us_per_step']:10.1f} us/step"
        )


def env_check(value: object) -> str | None:
    """``hanabi``, ``overcooked-v2``, ``tabular:NAME`` (a registered ers-exact game) or a .dpomdp file."""
    from ers_exact.games import GAMES, find_game_file

    text = str(value)
    if text in ("hanabi", "overcooked-v2"):
        return None
    name = text.removeprefix("tabular:")
    if name.lower().replace("_", "-") in GAMES or find_game_file(name) is not None:
        return None
    if name.endswith(".dpomdp"):
        return "names no readable .dpomdp file"
    return (
        f"is not an env: use hanabi, overcooked-v2, tabular:NAME (NAME in {', '.join(sorted(GAMES))}) or a "
        ".dpomdp path"
    )


def parse_seeds(text: str) -> tuple[int, ...]:
    """``0-4`` -> (0, 1, 2, 3, 4); ``1,3,7`` -> (1, 3, 7); ``2`` -> (2,)."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        a = int(lo)
        b = int(hi) if hi else a
        if a < 0 or b < a:
            raise ValueError(part)
        out += range(a, b + 1)
    if len(set(out)) != len(out) or not out:
        raise ValueError(text)
    return tuple(out)


def seeds_check(value: object) -> str | None:
    try:
        parse_seeds(str(value))
    except ValueError:
        return "is not a seed list (e.g. 0-4 or 0,2,5: distinct integers >= 0)"
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainSPOptions(Options):
    """``ers-deep train-sp``: a pool of IPPO self-play policies (all seeds trained together in one process, or
    one Ray job per seed with ``--ray``)."""

    env: str | None = option(
        None,
        help="hanabi, overcooked-v2, tabular:NAME or a .dpomdp path (required unless --resume)",
        check=env_check,
    )
    seeds: str = option("0-4", help="seeds of the pool: a range 0-4 or a list 0,2,5", check=seeds_check)
    out: str | None = option(
        None, help="the pool folder to create (required unless --resume)", check=output_folder
    )
    resume: str | None = option(
        None, help="continue the interrupted pool in this folder from its last checkpoint", metavar="POOL"
    )
    alpha: float | None = option(
        None, help="temperature = entropy coefficient (default: the env's paper value)", check=non_negative
    )
    total_steps: int | None = option(
        None, help="env steps per seed (default: the paper's)", check=at_least(1)
    )
    num_envs: int | None = option(None, help="games per seed (default: the paper's)", check=at_least(1))
    num_steps: int | None = option(
        None, help="steps per game per update (default: the paper's)", check=at_least(1)
    )
    minibatches: int | None = option(
        None, help="minibatches per epoch (default: the paper's)", check=at_least(1)
    )
    lr: float | None = option(None, help="Adam learning rate (default: the paper's)", check=positive)
    hidden: int | None = option(
        None, help="network width (default: the paper's: 512 Hanabi, 128 Overcooked)", check=at_least(1)
    )
    conv: int | None = option(
        None, help="Overcooked V2: width of the wide 1x1 convolutions (default 128)", check=at_least(1)
    )
    shaped_horizon: int | None = option(
        None,
        help="Overcooked V2: env steps over which the shaped reward anneals "
        "1 -> 0 (0: never; default: the paper's 1.5e7)",
        check=at_least(0),
    )
    preset: str = option("Hanabi-Full", help="Hanabi: HLE preset", check=one_of(_PRESET_NAMES))
    layout: str = option(
        "grounded_coord_simple", help="Overcooked V2 layout", check=one_of(sorted(LAYOUT_STRINGS))
    )
    advantage: Literal["gae", "exact"] = option(
        "gae", help="tabular: exact = all-actions gradient with ers-exact's advantages"
    )
    collector: Literal["native", "torchrl"] = option(
        "native", help="rollouts from the native batched loop or through torchrl's Collector (the same data)"
    )
    eval_games: int = option(1000, help="self-play games per policy for the pool's scores", check=at_least(1))
    max_updates: int | None = option(
        None, help="stop after this many updates (continue later with --resume)", check=at_least(1)
    )
    device: str = option("cpu", help="torch device: cpu, cuda or cuda:N", check=device_check)
    threads: int | None = option(None, help="torch CPU threads (default: torch's choice)", check=at_least(1))
    ray: str | None = option(
        None,
        help="train each seed as a separate job on this Ray cluster (local: a local Ray instance; "
        "needs the ray extra)",
        metavar="ADDRESS",
    )

    def check(self) -> None:
        if self.resume is None and (self.env is None or self.out is None):
            raise UsageError("--env and --out are required (or --resume POOL)")
        if self.ray is not None and self.resume is not None:
            raise UsageError(
                "--resume cannot be combined with --ray (a Ray pool trains each seed in one job)"
            )
        if self.ray is not None and not self.ray.strip():
            raise UsageError("--ray needs an address (local, auto or HOST:PORT)")
        if self.advantage == "exact" and self.env is not None and self.env in ("hanabi", "overcooked-v2"):
            raise UsageError(f"--advantage exact needs a tabular env, not {self.env}")

    def config(self) -> Any:
        """The resolved ``TrainConfig`` (the paper's defaults for the env, then these options)."""
        from ers_deep.nets import NetConfig
        from ers_deep.train.config import paper_config

        assert self.env is not None
        over: dict[str, Any] = {
            "seeds": parse_seeds(self.seeds),
            "device": self.device,
            "hanabi_preset": self.preset,
            "layout": self.layout,
            "advantage": self.advantage,
            "collector": self.collector,
        }
        for field, key in (
            ("alpha", "alpha"),
            ("total_steps", "total_env_steps"),
            ("num_envs", "num_envs"),
            ("num_steps", "num_steps"),
            ("minibatches", "minibatches"),
            ("lr", "lr"),
        ):
            if getattr(self, field) is not None:
                over[key] = getattr(self, field)
        if self.shaped_horizon is not None:
            over["shaped_reward_horizon"] = self.shaped_horizon
        base = paper_config(self.env)
        if self.hidden is not None or self.conv is not None:
            over["net"] = NetConfig(
                kind=base.net.kind, hidden=self.hidden or base.net.hidden, conv=self.conv or base.net.conv
            )
        return paper_config(self.env, **over)


def run_train_sp(opts: TrainSPOptions) -> dict[str, Any]:
    """Train (or continue) a pool; the pool summary (pool.json)."""
    from ers_deep.pools import train_pool
    from ers_deep.train.config import paper_config

    if opts.resume is not None:
        from pathlib import Path

        pool = Path(opts.resume)
        pool = pool.parent if pool.name == "run" and (pool / "config.json").exists() else pool
        return train_pool(
            paper_config("hanabi"),
            pool,
            resume_run=True,
            eval_games=opts.eval_games,
            threads=opts.threads,
            max_updates=opts.max_updates,
        )
    if opts.ray is not None:
        from ers_deep.pools import train_pool_ray

        return train_pool_ray(
            opts.config(),
            str(opts.out),
            opts.ray,
            eval_games=opts.eval_games,
            threads=opts.threads,
            max_updates=opts.max_updates,
        )
    return train_pool(
        opts.config(),
        str(opts.out),
        eval_games=opts.eval_games,
        threads=opts.threads,
        max_updates=opts.max_updates,
    )


def show_train_sp(res: dict[str, Any]) -> None:
    t = res["training"]
    print(
        f"pool of {len(res['policies'])} seeds on {res['env']} (alpha {res['alpha']}): {t['updates']} updates, "
        f"{t['env_steps']:,} env steps per seed, {t['env_steps_per_s']:,.0f} env-steps/s"
    )
    for p in res["policies"]:
        sp = p["self_play"]
        line = f"  seed {p['seed']:>3}  self-play {sp['mean']:8.3f} ± {sp['se']:.3f}  final return {p['final_return']:8.3f}"
        if "exact" in p:
            e = p["exact"]
            line += f"  exact J {e['J']:.6f}  residual {e['residual']:.2e}"
            if "fixed_point" in e:
                line += f"  fixed point J {e['fixed_point']['J']:.6f}"
        print(line)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CrossplayOptions(Options):
    """``ers-deep crossplay``: exact-seat cross-play of every policy pair (both seat orders), ZSC report."""

    pool_a: str = option(help="a pool folder (ers-deep train-sp --out)", positional=True, metavar="POOL_A")
    pool_b: str | None = option(
        None, help="a second pool (default: POOL_A against itself)", positional=True, metavar="POOL_B"
    )
    games: int = option(1000, help="games per pair and seat order", check=at_least(1))
    greedy: bool = option(False, help="play the argmax action instead of sampling")
    seed: int = option(0, help="seed of the games", check=at_least(0))
    out: str | None = option(
        None,
        help="folder for xp.json, xp.png and report.json (default: POOL_A/crossplay)",
        check=output_folder,
    )
    no_mdp: bool = option(False, help="skip the matrix symmetrised over the env's Dec-POMDP symmetries")
    threads: int | None = option(None, help="torch CPU threads (default: torch's choice)", check=at_least(1))


def run_crossplay(opts: CrossplayOptions) -> dict[str, Any]:
    """Cross-play matrix, heatmap and ZSC report of one or two pools (written to ``--out``)."""
    import json
    import math
    from pathlib import Path

    from ers_deep.crossplay import crossplay_matrix, heatmap, population_report, xp_estimates
    from ers_deep.pools import load_pool
    from ers_exact.interface import Estimate, PopulationRow, ZSCReport

    if opts.threads:
        torch.set_num_threads(opts.threads)
    a = load_pool(opts.pool_a)
    b = load_pool(opts.pool_b) if opts.pool_b else None
    out = Path(opts.out) if opts.out else a.path / "crossplay"
    out.mkdir(parents=True, exist_ok=True)
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
    (out / "xp.json").write_text(json.dumps({"matrix": matrix, "populations": sym_matrices}, indent=2))
    (out / "report.json").write_text(report.dumps())
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


COMMANDS: tuple[Command, ...] = (
    Command(
        "env-bench",
        "env-steps/s with random legal moves (auto-reset on), against references",
        EnvBenchOptions,
        run_env_bench,
        show_env_bench,
    ),
    Command(
        "train-sp",
        "train a pool of IPPO self-play policies (seeds together; --resume continues one)",
        TrainSPOptions,
        run_train_sp,
        show_train_sp,
    ),
    Command(
        "crossplay",
        "exact-seat cross-play of one or two pools: XP matrix JSON, heatmap PNG, ZSC report",
        CrossplayOptions,
        run_crossplay,
        show_crossplay,
    ),
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ers-deep`` console script; returns the exit status."""
    return run_cli(
        "ers-deep",
        "ers-deep: batched torch environments and deep RL for ER symmetries",
        __version__,
        COMMANDS,
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
