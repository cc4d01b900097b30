"""``ers-deep train-sp``: a pool of IPPO self-play policies."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

from ers_deep.cli.common import (
    POOL_ENTRIES,
    POOL_LAYOUT,
    PRESET_NAMES,
    Switch,
    check_games_memory,
    device_check,
    draw_pool_curve,
    env_check,
    foreign_entries,
    parse_seeds,
    refuse_foreign_run,
    refuse_links,
    refuse_non_pool,
    refuse_unread,
    seeds_check,
    switch,
)
from ers_deep.cli.resume import check_resume_updates, resume_folder, resume_ray_pool
from ers_deep.envs.overcooked_v2.layouts import LAYOUT_STRINGS
from ers_exact.util.options import (
    Options,
    UsageError,
    at_least,
    flag_name,
    non_negative,
    one_of,
    option,
    output_folder,
    positive,
    thread_count,
)

__all__ = ["TrainSPOptions", "replace_pool", "resume_folder", "run_train_sp", "show_train_sp"]

PAPERS = "the paper's"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainSPOptions(Options):
    """``ers-deep train-sp``: a pool of IPPO self-play policies (all seeds trained together in one process, or
    one Ray job per seed with ``--ray``)."""

    env: str | None = option(
        None,
        help="hanabi, overcooked-v2, tabular:NAME or a .dpomdp path (required unless --resume)",
        check=env_check,
    )
    seeds: str | None = option(
        None, help="seeds of the pool: a range 0-4 or a list 0,2,5", check=seeds_check, default_text="0-4"
    )
    out: str | None = option(
        None, help="the pool folder to create (required unless --resume)", check=output_folder
    )
    resume: str | None = option(
        None, help="continue the interrupted pool in this folder from its last checkpoint", metavar="POOL"
    )
    force: bool = option(
        False,
        help="replace the pool in --out: what ers wrote there is removed first, the analysis/, crossplay/ and "
        "discovery-*/ results of that pool included; a folder holding anything else is refused, and so is a pool "
        "without --force",
    )
    alpha: float | None = option(
        None,
        help="temperature = entropy coefficient",
        check=non_negative,
        default_text="the env's paper value",
    )
    total_steps: int | None = option(
        None,
        help="env steps per seed, rounded down to whole updates of --num-envs x --num-steps, at least one "
        "(pool.json's config keeps the value given, its training.env_steps the steps trained)",
        check=at_least(1),
        default_text=PAPERS,
    )
    num_envs: int | None = option(None, help="games per seed", check=at_least(1), default_text=PAPERS)
    num_steps: int | None = option(
        None, help="steps per game per update", check=at_least(1), default_text=PAPERS
    )
    minibatches: int | None = option(
        None, help="minibatches per epoch", check=at_least(1), default_text=PAPERS
    )
    lr: float | None = option(None, help="Adam learning rate", check=positive, default_text=PAPERS)
    hidden: int | None = option(
        None,
        help="network width",
        check=at_least(1),
        default_text="the paper's: 512 Hanabi, 128 Overcooked",
    )
    conv: int | None = option(
        None, help="Overcooked V2: width of the wide 1x1 convolutions", check=at_least(1), default_value=128
    )
    shaped_horizon: int | None = option(
        None,
        help="Overcooked V2: env steps over which the shaped reward anneals 1 -> 0 (0: never)",
        check=at_least(0),
        default_text="the paper's 1.5e7",
    )
    preset: str | None = option(
        None, help="Hanabi: HLE preset", check=one_of(PRESET_NAMES), default_value="Hanabi-Full"
    )
    knowledge: Literal["plausible", "v0-belief"] | None = option(
        None,
        help="Hanabi: the plausible-card features of the observation: HLE's bits (plausible) or JaxMARL's V0 "
        "belief, the plausible bits times the copies not yet discarded or played, normalised per slot "
        "(v0-belief: the JAX anchor's observation)",
        default_value="plausible",
    )
    layout: str | None = option(
        None,
        help="Overcooked V2 layout",
        check=one_of(sorted(LAYOUT_STRINGS)),
        default_value="grounded_coord_simple",
    )
    advantage: Literal["gae", "exact"] | None = option(
        None, help="tabular: exact = all-actions gradient with ers-exact's advantages", default_value="gae"
    )
    collector: Literal["fast", "native", "torchrl"] | None = option(
        None,
        help="fast: env + policy through ers_deep.accel (compiled / CUDA-graph-captured); torchrl: torchrl's "
        "Collector over the same env, native: the per-step loop (both references give the same data)",
        default_value="fast",
    )
    collect_mode: Literal["auto", "eager", "compile", "graph", "compile-graph"] | None = option(
        None,
        help="the fast collection's mode (auto: eager on tabular games, else compile-graph on CUDA, compile at "
        "small CPU batches unless the run is under 20,000 joint steps, else eager)",
        default_value="auto",
    )
    update_mode: Literal["auto", "eager", "compile", "graph", "compile-graph"] | None = option(
        None,
        help="the PPO update: eager, compile (loss and clipping), graph / compile-graph (the minibatch step "
        "captured as a CUDA graph; auto: captured on CUDA, see README)",
        default_value="auto",
    )
    bf16_gradients: Switch = switch(
        "CPU: the update's gradient products on bfloat16 operands, its forward float32 (auto: on for Hanabi's MLP, "
        "the net studied, where the CPU multiplies bfloat16 natively; off on CUDA; the run records what it resolved to)"
    )
    int8_inputs: Switch = switch(
        "CPU, Hanabi's HLE bits: the MLP's embedding as exact int8 products of its weights' two int8 limbs, "
        "within ~1e-4 of float32's (auto: on where the CPU has int8 dot products (VNNI) and the learner keeps freed "
        "memory; the run records it)"
    )
    eval_games: int | None = option(
        None,
        help="self-play games per policy for the pool's scores, saved with the run: --resume scores with the "
        "run's value, or with one given there, which replaces it (scoring only: training is unchanged)",
        check=at_least(1),
        default_text="1000; --resume: the run's",
    )
    max_updates: int | None = option(
        None, help="stop after this many updates (continue later with --resume)", check=at_least(1)
    )
    device: str | None = option(
        None, help="torch device: cpu, cuda or cuda:N", check=device_check, default_value="cpu"
    )
    threads: int | None = option(
        None, help="torch CPU threads", check=thread_count, default_text="torch's choice"
    )
    ray: str | None = option(
        None,
        help="train each seed as a separate job on this Ray cluster (local: a local Ray instance; "
        "needs the ray extra); such a pool trains to the end (no --max-updates), and a killed one continues with "
        "--resume POOL --ray ADDRESS",
        metavar="ADDRESS",
    )

    def check(self) -> None:
        if self.resume is None and (self.env is None or self.out is None):
            raise UsageError("--env and --out are required (or --resume POOL)")
        if self.resume is not None:
            given = [flag_name(f) for f in _RUN_FIELDS if getattr(self, f) is not None]
            if given:
                raise UsageError(
                    f"--resume continues the run with the config it was started with; {', '.join(given)} "
                    "cannot change it (drop them, or train a new pool with --out)"
                )
        if self.force and self.resume is not None:
            raise UsageError("--force starts a new pool in --out; --resume continues one: give one of them")
        if self.ray is not None and self.max_updates is not None:
            raise UsageError(
                "--max-updates stops a pool to continue it with --resume, which a Ray pool (one job per seed) "
                "cannot be: train it to --total-steps, or drop --ray"
            )
        if self.ray is not None and not self.ray.strip():
            raise UsageError("--ray needs an address (local, auto or HOST:PORT)")
        if self.advantage == "exact" and self.env is not None and self.env in ("hanabi", "overcooked-v2"):
            raise UsageError(f"--advantage exact needs a tabular env, not {self.env}")
        if self.resume is not None:
            refuse_foreign_run(resume_folder(self.resume), "pool", "--resume")
            refuse_links(resume_folder(self.resume), POOL_LAYOUT, "--resume")
        elif self.out is not None:
            refuse_foreign_run(Path(self.out), "pool", "--out")
            refuse_non_pool(Path(self.out))
            refuse_links(Path(self.out), POOL_LAYOUT, "--out")
        if self.env is not None:
            kind = self.env if self.env in ("hanabi", "overcooked-v2") else "tabular"
            if kind == "tabular" and self.alpha is not None and self.alpha <= 0:
                raise UsageError(
                    f"--alpha {self.alpha:g}: the temperature of a tabular env (--env {self.env}) must be > 0 "
                    "(its policies are scored exactly at that temperature)"
                )
            stray = [
                f"{flag_name(f)} (an option of {' and '.join(kinds)})"
                for f, kinds in _ENV_FIELDS.items()
                if getattr(self, f) is not None and kind not in kinds
            ]
            refuse_unread(f"--env {self.env}", stray)

    def config(self) -> Any:
        """The resolved ``TrainConfig`` (the paper's defaults for the env, then these options)."""
        from ers_deep.nets import NetConfig
        from ers_deep.train.config import paper_config

        assert self.env is not None
        over: dict[str, Any] = {"seeds": parse_seeds(self.seeds or "0-4")}
        for field, key in _CONFIG_FIELDS.items():
            if getattr(self, field) is not None:
                over[key] = getattr(self, field)
        for field in ("bf16_gradients", "int8_inputs"):
            if getattr(self, field) is not None:
                over[field] = {"on": True, "off": False}.get(getattr(self, field), "auto")
        base = paper_config(self.env)
        if self.hidden is not None or self.conv is not None:
            over["net"] = NetConfig(
                kind=base.net.kind, hidden=self.hidden or base.net.hidden, conv=self.conv or base.net.conv
            )
        return paper_config(self.env, **over)


#: the options that set a ``TrainConfig`` field of the same value (option -> field); unset (None): the paper's
_CONFIG_FIELDS = {
    "device": "device",
    "preset": "hanabi_preset",
    "knowledge": "hanabi_knowledge",
    "layout": "layout",
    "advantage": "advantage",
    "collector": "collector",
    "collect_mode": "collect_mode",
    "update_mode": "update_mode",
    "alpha": "alpha",
    "total_steps": "total_env_steps",
    "num_envs": "num_envs",
    "num_steps": "num_steps",
    "minibatches": "minibatches",
    "lr": "lr",
    "shaped_horizon": "shaped_reward_horizon",
}

#: the options of one env family (and the families they apply to); given for another env they are refused
_ENV_FIELDS = {
    **dict.fromkeys(("preset", "knowledge"), ("hanabi",)),
    **dict.fromkeys(("layout", "shaped_horizon", "conv"), ("overcooked-v2",)),
    "hidden": ("hanabi", "overcooked-v2"),
}

#: options that define a run (its config and folder): --resume keeps the run's own, so it refuses them (only
#: --eval-games, --threads and --max-updates apply to a resumed run)
_RUN_FIELDS = ("env", "seeds", "out", "hidden", "conv", "bf16_gradients", "int8_inputs", *_CONFIG_FIELDS)


def replace_pool(opts: TrainSPOptions) -> None:
    """``--force``: remove the earlier pool in ``--out``, entry by entry (:data:`POOL_LAYOUT`: the pool and the
    results written into it); refused when the folder is not a pool, holds anything else or holds the env's
    .dpomdp file."""
    from ers_exact.util.output import replace_run_folder

    if not opts.force or opts.out is None:
        return
    out = Path(opts.out)
    is_pool = any((out / name).exists() for name in POOL_ENTRIES)
    foreign = foreign_entries(out, POOL_LAYOUT) if out.is_dir() else []
    env = opts.env if opts.env is not None and Path(opts.env).is_file() else None
    replace_run_folder(out, is_run=is_pool, what="a pool", foreign=foreign, reads=[env])


def with_learning_curve(res: dict[str, Any], pool: Path) -> dict[str, Any]:
    """Draw the pool's learning curves (``draw_pool_curve``) and name the figure (relative to the pool, like
    the policy files) in pool.json and the summary (``figure``); where none is drawn both stay as they are."""
    from ers_deep.train.checkpoint import atomic_write_bytes
    from ers_exact.util.output import dumps, output_root

    with output_root(pool):  # no write through a link in the pool
        path = draw_pool_curve(pool, f"{res['env']}, alpha {res['alpha']}: training")
        if path is None:
            return res
        res = {**res, "figure": str(path.relative_to(pool))}
        atomic_write_bytes(pool / "pool.json", dumps(res, indent=2, sort_keys=True).encode())
    return res


def run_train_sp(opts: TrainSPOptions) -> dict[str, Any]:
    """Train (or continue) a pool; the pool summary (pool.json) and its learning-curve figure. No write in the
    pool folder goes through a symbolic link below it (``output_root``; the folder itself may be one)."""
    from ers_exact.util.output import output_root

    folder = resume_folder(opts.resume) if opts.resume is not None else Path(str(opts.out))
    if opts.resume is not None:
        check_resume_updates(folder, opts.max_updates, opts.ray)
    with output_root(folder):
        return with_learning_curve(_train_sp(opts), folder)


def _train_sp(opts: TrainSPOptions) -> dict[str, Any]:
    from ers_deep.pools import train_pool
    from ers_deep.train.config import paper_config

    if opts.resume is not None:
        from ers_deep.other_play import RECORD
        from ers_deep.pools import PoolError

        if (resume_folder(opts.resume) / "run" / RECORD).is_file():  # its net holds the symmetries too
            raise PoolError(f"{opts.resume}: an other-play pool; resume it with ers-deep train-op --resume")
        if opts.ray is not None:
            return resume_ray_pool(resume_folder(opts.resume), opts.ray, opts.threads, other_play=False)
        return train_pool(
            paper_config("hanabi"),
            resume_folder(opts.resume),
            resume_run=True,
            eval_games=opts.eval_games,
            threads=opts.threads,
            max_updates=opts.max_updates,
        )
    config = opts.config()
    check_games_memory(
        "--num-envs x --seeds", config.num_envs * len(config.seeds), config, stored_steps=config.num_steps
    )
    replace_pool(opts)
    if opts.ray is not None:
        from ers_deep.pools import train_pool_ray

        return train_pool_ray(
            config,
            str(opts.out),
            opts.ray,
            eval_games=opts.eval_games,
            threads=opts.threads,
            max_updates=opts.max_updates,
        )
    return train_pool(
        config,
        str(opts.out),
        eval_games=opts.eval_games,
        threads=opts.threads,
        max_updates=opts.max_updates,
    )


def show_train_sp(res: dict[str, Any]) -> None:
    show_pool(res)
    show_figure(res)


def show_figure(res: dict[str, Any]) -> None:
    """The summary's last line: where the learning curves are (``with_learning_curve``), if drawn."""
    if "figure" in res:
        print(f"  learning curves: {res['figure']} (in the pool folder)")


def show_pool(res: dict[str, Any]) -> None:
    """A pool summary: size, env, training, and each seed's self-play score (exact values on tabular games)."""
    t, n = res["training"], len(res["policies"])
    together = "" if n == 1 else f" ({t.get('env_steps_all_seeds', t['env_steps'] * n):,} for the {n} seeds)"
    rate = "" if n == 1 else f" for the {n} seeds together"
    print(
        f"pool of {n} seed{'s' if n != 1 else ''} on {res['env']} (alpha {res['alpha']}): {t['updates']} updates, "
        f"{t['env_steps']:,} env steps per seed{together}, {t['env_steps_per_s']:,.0f} env-steps/s{rate}"
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
