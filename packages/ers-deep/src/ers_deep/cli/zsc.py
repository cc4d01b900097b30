"""``ers-deep table1`` / ``ers-deep table2``: the paper's population protocol (Table 1) and the discovery
table (Table 2) at any scale; a killed run continues with the same command (every stage resumes)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from ers_deep.cli.common import (
    PRESET_NAMES,
    device_check,
    draw_pool_curve,
    env_check,
    refuse_unread,
    require_two_seat_env,
)
from ers_deep.seed_layout import MAX_AGENTS, MAX_K, MAX_M, MAX_UNSEEN
from ers_deep.train.evaluate import AVERAGES
from ers_exact.deployment import DEFAULT_SELECT_BY, SELECT_BY
from ers_exact.util.deprecation import renamed_fields
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
    seed_range,
    thread_count,
)

__all__ = ["Table1Options", "Table2Options", "run_table1_cmd", "run_table2_cmd", "show_table1", "show_table2"]

_ALGORITHMS = ("sp-max", "sp-max-reg", "xp-max")


def _algorithm_list(value: object) -> str | None:
    names = [a.strip() for a in str(value).split(",")]
    bad = [a for a in names if a not in _ALGORITHMS]
    return f"names unknown algorithms {bad} (use {', '.join(_ALGORITHMS)})" if bad or not names else None


#: options that only some envs read (the others ignore them): the env kinds that read each
_ENV_FIELDS = {
    "preset": ("hanabi",),
    "conv": ("overcooked-v2",),
    "num_envs": ("hanabi", "overcooked-v2"),
    "num_steps": ("hanabi", "overcooked-v2"),
    "hidden": ("hanabi", "overcooked-v2"),
    "minibatches": ("hanabi", "overcooked-v2"),
}


@renamed_fields(l="top")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Table1Options(Options):
    """``ers-deep table1``: IPPO, IPPO + OP-MDP and IPPO + OP-ER populations of P agents; Table 1."""

    env: str = option(
        "hanabi",
        help="hanabi, overcooked-v2 (grounded_coord_simple, CNN + GRU) or tabular:NAME",
        check=env_check,
    )
    preset: str = option("Hanabi-Very-Small", help="Hanabi: HLE preset", check=one_of(PRESET_NAMES))
    out: str = option(help="folder of the run (pools, discoveries, tables)", check=output_folder)
    agents: int = option(
        3, help=f"P, agents per population, 2 to {MAX_AGENTS} (the seed layout)", check=between(2, MAX_AGENTS)
    )
    k: int = option(
        4,
        help=f"self-play seeds per ER agent, 2 to {MAX_K} (its Pi', which trains and ranks the symmetries, with "
        "--unseen; without it the first half, the rest held out for Table 2's metrics)",
        check=between(2, MAX_K),
    )
    unseen: int | None = option(
        None,
        help=f"self-play seeds per agent held out of discovery, 1 to {MAX_UNSEEN}: only Table 2's metrics (J_k, "
        "the reconstruction loss) are measured on them (the paper's Pi_unseen), and all --k seeds are the "
        "agent's Pi', as in the paper's protocol and ers-exact's zsc; recorded in config.json",
        check=between(1, MAX_UNSEEN),
        default_text="none: --k splits in halves",
    )
    candidates: int = option(8, help="symmetries trained per agent", check=at_least(1))
    top: int = option(
        4,
        help="symmetries kept per agent (the paper's l), at most --candidates",
        check=at_least(1),
        renamed_from=("l",),
    )
    m: int = option(
        1,
        help=f"OP seeds per agent, 1 to {MAX_M} (--select-by picks the one deployed)",
        check=between(1, MAX_M),
    )
    select_by: str = option(
        DEFAULT_SELECT_BY,
        help="which of its m OP seeds an agent deploys: sp_return (the paper: the best self-play return, ties "
        "by OP) or op_value (the best OP score, pool.json's other_play, ties by self-play); recorded in "
        "config.json and table1.json",
        check=one_of(SELECT_BY),
    )
    algorithm: str = option(
        "sp-max", help="discovery algorithm of the ER population", check=one_of(_ALGORITHMS)
    )
    sp_steps: int = option(600_000, help="env steps per self-play seed", check=at_least(1))
    op_steps: int = option(600_000, help="env steps per OP seed", check=at_least(1))
    discovery_steps: int = option(300_000, help="env steps per candidate symmetry", check=at_least(1))
    num_envs: int = option(256, help="games per seed (Hanabi, Overcooked V2)", check=at_least(1))
    num_steps: int = option(32, help="steps per game per update (Hanabi, Overcooked V2)", check=at_least(1))
    hidden: int = option(
        128, help="network width (Hanabi: MLP; Overcooked V2: dense, GRU and heads)", check=at_least(1)
    )
    conv: int = option(128, help="Overcooked V2: width of the wide 1x1 convolutions", check=at_least(1))
    minibatches: int | None = option(
        None,
        help="PPO minibatches per epoch",
        check=at_least(1),
        default_text="the paper's, at most 2 x --num-envs",
    )
    lr: float | None = option(None, help="IPPO learning rate", check=positive, default_text="the paper's")
    discovery_lr: float = option(1e-3, help="learning rate of the symmetry networks", check=positive)
    alpha: float | None = option(
        None, help="IPPO entropy coefficient = temperature", check=non_negative, default_text="the paper's"
    )
    games: int = option(500, help="cross-play games per pair and seat order", check=at_least(1))
    greedy: bool = option(
        False,
        help="cross-play (the SP, XP, XP(*) and symmetrised columns) by each policy's most probable legal "
        "action, as the official code's cross_play.py plays Hanabi (without it: actions sampled); the OP column "
        "and the learning stay sampled; recorded in config.json and table1.json",
    )
    symmetriser: str = option(
        "logits",
        help="what the XP(*)+MDP / XP(*)+ER symmetriser averages over Phi: logits (the official code's mean of "
        "unmasked logits) or probabilities (the paper's S(pi) = mean of phi(pi), as ers-exact's columns); "
        "recorded in config.json and table1.json",
        check=one_of(AVERAGES),
    )
    seed: int = option(0, help="seed of the whole experiment", check=seed_range)
    device: str = option("cpu", help="torch device: cpu, cuda or cuda:N", check=device_check)
    threads: int | None = option(
        None, help="torch CPU threads", check=thread_count, default_text="torch's choice"
    )
    force: bool = option(
        False,
        help="replace a run with another config in --out (without it such a folder is refused; the same "
        "options continue the run)",
    )

    def check(self) -> None:
        """Refuse ``--top`` above ``--candidates`` and ``--minibatches`` outside 1 .. 2 x ``--num-envs`` by their
        flags (``PopulationConfig`` named its fields: "PopulationConfig.top = 9 ..."); and, for a new run, an
        option that ``--env`` does not read, given at another value than its default (it was ignored, and
        recorded in config.json as if it had applied); a run already in --out continues with the options it was
        started with."""
        if self.top > self.candidates:
            raise UsageError(f"--top {self.top} is more than --candidates {self.candidates}")
        if self.minibatches is not None and not 1 <= self.minibatches <= 2 * self.num_envs:
            raise UsageError(
                f"--minibatches {self.minibatches}: choose 1 .. 2 x --num-envs = {2 * self.num_envs}"
            )
        if (Path(self.out) / "config.json").exists():
            return
        kind = self.env if self.env in ("hanabi", "overcooked-v2") else "tabular"
        if kind == "tabular" and self.alpha is not None and self.alpha <= 0:  # before any pool trains
            raise UsageError(
                f"--alpha {self.alpha:g}: the temperature of a tabular env (--env {self.env}) must be > 0 "
                "(its policies are scored exactly at that temperature)"
            )
        defaults = {f.name: f.default for f in dataclasses.fields(Table1Options)}
        stray = [
            "--" + f.replace("_", "-")
            for f, kinds in _ENV_FIELDS.items()
            if kind not in kinds and getattr(self, f) != defaults[f]
        ]
        refuse_unread(f"--env {self.env}", stray)

    def config(self) -> Any:
        from ers_deep.zsc import PopulationConfig

        fields = {f.name for f in dataclasses.fields(PopulationConfig)}
        return PopulationConfig(**{k: v for k, v in dataclasses.asdict(self).items() if k in fields})


@renamed_fields(l="top")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Table2Options(Table1Options):
    """``ers-deep table2``: discovery with each algorithm on the same self-play pools; Table 2."""

    algorithms: str = option(
        "sp-max,sp-max-reg", help="comma-separated discovery algorithms", check=_algorithm_list
    )


def run_table1_cmd(opts: Table1Options) -> dict[str, Any]:
    from ers_deep.zsc import run_table1

    if opts.threads:
        torch.set_num_threads(opts.threads)
    config = opts.config()
    require_two_seat_env(config.train_config(config.sp_seeds(0), 1), "table1", "--env")
    report, results = run_table1(opts.config(), opts.out, force=opts.force)
    return {
        "report": report.to_json(),
        "markdown": report.to_markdown(),
        "discoveries": [r.to_json() for r in results],
        "out": opts.out,
        "learning_curves": pool_curves(Path(opts.out)),
    }


def pool_curves(out: Path) -> list[str]:
    """``learning-curve.png`` in every pool folder below ``out`` (``draw_pool_curve``); their paths relative to
    ``out``."""
    folders = [f.parent for f in sorted(out.glob("**/pool.json"))]
    drawn = [draw_pool_curve(p, f"{p.relative_to(out)}: training") for p in folders]
    return [str(p.relative_to(out)) for p in drawn if p is not None]


def show_table1(res: dict[str, Any]) -> None:
    print(res["markdown"])
    print(f"files: {res['out']}/table1.json, table1.md, xp-*.png")
    if res["learning_curves"]:
        print(f"learning curves: {', '.join(res['learning_curves'])}")


def run_table2_cmd(opts: Table2Options) -> dict[str, Any]:
    from ers_deep.zsc import run_table2

    if opts.threads:
        torch.set_num_threads(opts.threads)
    algorithms = tuple(a.strip() for a in opts.algorithms.split(","))
    return {**run_table2(opts.config(), opts.out, algorithms=algorithms, force=opts.force), "out": opts.out}


def show_table2(res: dict[str, Any]) -> None:
    print(res["markdown"])
    print(f"files: {res['out']}/table2.json, table2.md")
