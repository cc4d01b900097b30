"""``ers-deep env-bench``: env-steps/s of the batched envs with random legal moves, against references."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import torch

from ers_deep.accel import MODES
from ers_deep.bench import ENV_BENCHES
from ers_deep.bench import hanabi as bench_hanabi
from ers_deep.bench import overcooked_v2 as bench_overcooked
from ers_deep.bench.runner import one_core
from ers_deep.cli.common import PRESET_NAMES, device_check, refuse_unread
from ers_deep.envs.hanabi.config import HanabiConfig
from ers_deep.envs.overcooked_v2.layouts import LAYOUT_STRINGS
from ers_exact.util.options import (
    Options,
    UsageError,
    at_least,
    between,
    one_of,
    option,
    seed_range,
    thread_count,
)

__all__ = ["ENV_REFERENCES", "EnvBenchOptions", "run_env_bench", "show_env_bench"]

#: the references each env can be measured against (``--against``)
ENV_REFERENCES: dict[str, tuple[str, ...]] = {
    "hanabi": bench_hanabi.REFERENCES,
    "overcooked-v2": ("jaxmarl",),
}


#: options that only one env reads (the other ignored them): the env that reads each
_ENV_FIELDS = {
    "preset": "hanabi",
    "players": "hanabi",
    "no_check": "hanabi",
    "layout": "overcooked-v2",
    "obs_dtype": "overcooked-v2",
}


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
        check=one_of(PRESET_NAMES),
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
    threads: int | None = option(
        None, help="torch CPU threads", check=thread_count, default_text="torch's choice"
    )
    no_check: bool = option(
        False, help="Hanabi: skip the per-step legality check (eager mode; no device sync)"
    )
    mode: str = option(
        "auto",
        help="fast path (ers_deep.accel): auto (CUDA: compile-graph; CPU: compile at small batches, else eager; "
        "a failed compilation falls back to the uncompiled twin), "
        "eager, compile, graph, compile-graph",
        check=one_of(("auto", *MODES)),
    )
    eager: bool = option(False, help="the eager reference step (same as --mode eager)")
    unroll: int = option(
        1, help="fast modes: steps per compiled/captured call (1: one step per replay)", check=at_least(1)
    )
    seed: int = option(0, help="seed of the env's generator and of the random moves", check=seed_range)
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

    @property
    def resolved_mode(self) -> str:
        """``--mode``, with ``--eager`` applied."""
        return "eager" if self.eager else self.mode

    def check(self) -> None:
        if self.eager and self.mode not in ("auto", "eager"):
            raise UsageError(f"--eager contradicts --mode {self.mode}")
        if self.no_obs and self.env != "overcooked-v2":
            raise UsageError("--no-obs (the state-only rate) is an Overcooked V2 option")
        defaults = {f.name: f.default for f in dataclasses.fields(EnvBenchOptions)}
        stray = [
            "--" + f.replace("_", "-")
            for f, env in _ENV_FIELDS.items()
            if env != self.env and getattr(self, f) != defaults[f]
        ]
        refuse_unread(self.env, stray)  # ignored, the result named the env's own configuration
        if self.resolved_mode.endswith("graph") and not self.device.startswith("cuda"):
            raise UsageError(f"--mode {self.mode} captures CUDA graphs: it needs --device cuda")
        known = ENV_REFERENCES[self.env]
        unknown = [r for r in self.references if r not in known]
        if unknown:
            raise UsageError(
                f"--against {self.against!r}: unknown reference {unknown[0]!r} for {self.env}; "
                f"choose from {', '.join(known)}"
            )


def run_env_bench(opts: EnvBenchOptions) -> dict[str, Any]:
    """Time the env (and the references in ``--against``); the result dict of ``bench.*.env_bench``."""
    from ers_deep.cli.common import check_games_memory
    from ers_deep.train.config import paper_config

    base = {"layout": opts.layout} if opts.env == "overcooked-v2" else {"hanabi_preset": opts.preset}
    check_games_memory("--batch", opts.batch, paper_config(opts.env, **base))
    if opts.threads:
        torch.set_num_threads(opts.threads)
    # one torch thread on the CPU: JaxMARL's process on one core too (XLA's pool ignores its thread flags)
    pin = one_core() if opts.threads == 1 and opts.device == "cpu" else None
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
            mode=opts.resolved_mode,
            unroll=opts.unroll,
            reference_cpus=pin,
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
        mode=opts.resolved_mode,
        unroll=opts.unroll,
        reference_cpus=pin,
    )


def show_env_bench(res: dict[str, Any]) -> None:
    """The text summary of ``env-bench``."""
    print(
        f"ers {res['env']}  batch {res['batch']:>6}  device {res['device']:<6}  "
        f"{res['env_steps_per_s']:>14,.0f} env-steps/s  ({res['mode']}, unroll {res['unroll']}, "
        f"setup {res['setup_seconds']:.1f} s, {res['cores_used']:.2f} cores)"
    )
    for name, r in res["references"].items():
        if "error" in r:
            print(f"{name:<10} skipped: {r['error']}")
        else:
            print(
                f"{name:<10} batch {r['batch']:>6}  {r['env_steps_per_s']:>29,.0f} env-steps/s  "
                f"ratio ers/{name} = {r['ratio']:.1f}x  ({r['cores_used']:.2f} cores)"
            )
    for row in res.get("profile", []):
        print(
            f"  {row['op']:<40} {row['calls_per_step']:6.1f} calls/step  {row['self_us_per_step']:10.1f} us/step"
        )
