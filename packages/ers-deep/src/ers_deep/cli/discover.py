"""``ers-deep discover``: learned ER symmetries of a pool (the paper's Algorithms 1-3, ``ers_deep.discovery``).

Trains ``--candidates`` phi = (phi_O network, fixed phi_A) through the frozen pool, keeps the ``--top`` best on
held-out policies and writes ``OUT/discovery.json`` (a ``DiscoveryResult``), ``OUT/symmetries.safetensors``
and the run directory ``OUT/run`` (``--resume`` continues it). On tabular pools every kept phi is rounded to
an ers-exact transformation and scored exactly (admissible, Dec-POMDP symmetry, ER symmetry, exact mean J);
on Hanabi and Overcooked V2 its rounding is compared with the env's known Dec-POMDP symmetries (which one it
equals, or the nearest, and the fraction of varying observation features on which they agree).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import warnings
from pathlib import Path
from typing import Any, Literal

from ers_deep.cli.common import device_check
from ers_deep.cli.discover_show import show_discover
from ers_exact.util.options import (
    Options,
    UsageError,
    at_least,
    between,
    non_negative,
    option,
    output_folder,
    positive,
    seed_range,
    thread_count,
)

__all__ = ["DiscoverOptions", "discovery_check", "pool_check", "run_discover", "show_discover"]

DEEP_ENVS = ("hanabi", "overcooked-v2")
#: the phi_A a candidate of a deep env carries, whatever --action-set (``rounding.action_candidates``)
_FIXED_ACTION_MAPS = {
    "hanabi": "one transposition of two moves of one kind",
    "overcooked-v2": "the identity action map",
}


def pool_check(value: object) -> str | None:
    """A pool folder (``ers-deep train-sp --out``): an existing folder holding a readable pool.json."""
    path = Path(str(value))
    if not path.exists():
        return "does not exist (give a pool folder made by ers-deep train-sp)"
    if not path.is_dir():
        return "is not a folder (give a pool folder made by ers-deep train-sp)"
    if not (path / "pool.json").is_file():
        return "is not a pool (no pool.json; build one with ers-deep train-sp)"
    return None


def discovery_check(value: object) -> str | None:
    """A previous discovery: its output folder or its discovery.json."""
    path = Path(str(value))
    file = path if path.suffix == ".json" else path / "discovery.json"
    if not file.is_file():
        return "holds no discovery.json (give the --out folder of an earlier ers-deep discover)"
    return None


def _pool_info(path: str, flag: str) -> dict[str, Any]:
    """pool.json of a pool folder (already checked to exist), or a UsageError naming it."""
    file = Path(path) / "pool.json"
    try:
        info = json.loads(file.read_text())
        if not isinstance(info.get("policies"), list) or not isinstance(info.get("env"), str):
            raise ValueError
    except (OSError, ValueError, AttributeError):
        raise UsageError(f"{flag} {path!r}: {file} is not a pool summary (damaged pool.json)") from None
    return info


def _policies(n: int) -> str:
    return f"{n} polic{'y' if n == 1 else 'ies'}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiscoverOptions(Options):
    """``ers-deep discover``: learn ER symmetries of a pool of frozen self-play policies (Algorithms 1-3)."""

    pool: str = option(
        help="the pool to learn from (ers-deep train-sp --out)", check=pool_check, metavar="DIR"
    )
    held_out: str | None = option(
        None,
        help="a second pool: the unseen policies Table 2's metrics are measured on (candidates are ranked on "
        "the policies they train on)",
        check=pool_check,
        metavar="DIR",
        default_text="the second half of --pool",
    )
    algorithm: Literal["sp-max", "sp-max-reg", "xp-max"] = option(
        "sp-max",
        help="sp-max: mean J(phi(pi)) (Alg. 1); sp-max-reg: with composition and invertibility terms "
        "(Alg. 2); xp-max: XP(pi_i, phi(pi_j)) over pairs (Alg. 3)",
    )
    candidates: int = option(8, help="symmetries trained together (L)", check=at_least(1))
    top: int = option(4, help="symmetries kept, best on the policies they trained on (l)", check=at_least(1))
    action_set: Literal["transpositions", "permutations"] = option(
        "transpositions", help="tabular: the fixed phi_A maps candidates draw from"
    )
    defaults: Literal["cpu", "paper"] = option(
        "cpu",
        help="where the options not given come from: cpu (sizes for a CPU run) or paper (the paper's discovery "
        "hyper-parameters for the pool's env, Appendix A; Hanabi and Overcooked V2 pools only)",
    )
    total_steps: int | None = option(
        None,
        help="env steps per candidate, rounded down to whole updates of --num-envs x --num-steps, at least one",
        check=at_least(1),
        default_text="tabular: 300,000; otherwise 400,000 (--defaults paper: Hanabi 2.25e9, Overcooked V2 1.5e8)",
    )
    num_envs: int | None = option(
        None,
        help="games per candidate",
        check=at_least(1),
        default_text="tabular: 256; otherwise 128 (--defaults paper: Hanabi 1024 per training policy, Overcooked "
        "V2 256)",
    )
    num_steps: int | None = option(
        None,
        help="steps per game per update",
        check=at_least(1),
        default_text="tabular: 4; otherwise 32 (--defaults paper: Hanabi 128, Overcooked V2 256)",
    )
    lr: float | None = option(
        None,
        help="Adam learning rate of phi_O and the critic",
        check=positive,
        default_text="tabular: 0.01; otherwise 0.001 (--defaults paper: 1e-5)",
    )
    lr_schedule: Literal["linear", "constant"] | None = option(
        None,
        help="the learning rate over the run: annealed linearly to 0, or constant",
        default_text="linear (--defaults paper: Hanabi linear, Overcooked V2 constant)",
    )
    alpha: float | None = option(
        None,
        help="entropy coefficient of the discovery run",
        check=non_negative,
        default_text="the pool's alpha (tabular: its temperature; Hanabi: 0.01)",
    )
    lambda1: float | None = option(
        None,
        help="sp-max-reg: probability of a rollout composed with earlier symmetries, in [0, 1)",
        check=between(0, 1, open_hi=True),
        default_text="0.35 (--defaults paper: Hanabi 0.65)",
    )
    lambda2: float | None = option(
        None,
        help="sp-max-reg: weight of the invertibility penalty E||o - phi(phi(o))||^2",
        check=non_negative,
        default_text="0.01 (--defaults paper: Hanabi 2.5e-9)",
    )
    earlier: str | None = option(
        None,
        help="sp-max-reg: the earlier symmetries (the --out folder of an earlier discover)",
        check=discovery_check,
        metavar="DIR",
        default_text="run sp-max first, into OUT/earlier",
    )
    eval_games: int = option(
        500,
        help="sampled games per policy for every score (tabular pools: exact returns)",
        check=at_least(1),
    )
    sampled_scores: bool = option(
        False,
        help="tabular pools: score candidates by --eval-games sampled games instead of their exact return",
    )
    seed: int = option(0, help="seed of the candidates, their action maps and the games", check=seed_range)
    out: str | None = option(
        None,
        help="folder for discovery.json, symmetries.safetensors and the run",
        check=output_folder,
        metavar="DIR",
        default_text="POOL/discovery-ALGORITHM",
    )
    resume: bool = option(False, help="continue the interrupted run in --out from its last checkpoint")
    force: bool = option(
        False,
        help="replace the discovery run in --out: what ers wrote there is removed first; a folder holding "
        "anything else is refused, and so is a run without --force",
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

    def check(self) -> None:
        if self.top > self.candidates and not self.resume:  # a resume checks the run's config, merged
            raise UsageError(f"--top {self.top} is more than --candidates {self.candidates}")
        if self.earlier is not None and self.algorithm != "sp-max-reg":
            raise UsageError(f"--earlier {self.earlier!r} only applies to --algorithm sp-max-reg")
        changed = [
            f"--{k} {getattr(self, k)}" for k in ("lambda1", "lambda2") if getattr(self, k) is not None
        ]
        if changed and self.algorithm != "sp-max-reg":
            verb = "applies" if len(changed) == 1 else "apply"
            raise UsageError(f"{' and '.join(changed)} only {verb} to --algorithm sp-max-reg (Algorithm 2)")
        info = _pool_info(self.pool, "--pool")
        if self.defaults == "paper" and info["env"] not in DEEP_ENVS:
            raise UsageError(
                f"--defaults paper: the paper gives discovery hyper-parameters for Hanabi and Overcooked V2 "
                f"pools, and --pool {self.pool!r} is a pool of {info['env']} (use --defaults cpu)"
            )
        if self.action_set != "transpositions" and info["env"] in DEEP_ENVS and not self.resume:
            raise UsageError(
                f"--action-set {self.action_set} only applies to tabular pools; --pool {self.pool!r} is a pool of "
                f"{info['env']}, whose candidates carry {_FIXED_ACTION_MAPS[info['env']]}"
            )
        from ers_deep.discovery.config import training_count

        n = len(info["policies"])
        need = 2 if self.algorithm == "xp-max" else 1
        if self.held_out is not None:
            m = len(_pool_info(self.held_out, "--held-out")["policies"])
            if n < need or m < need:
                raise UsageError(
                    f"--algorithm {self.algorithm} needs {need}+ policies in --pool and in --held-out: "
                    f"--pool {self.pool!r} has {_policies(n)}, --held-out {self.held_out!r} {_policies(m)}"
                )
        elif n - training_count(n) < need:
            raise UsageError(
                f"--pool {self.pool!r} has {_policies(n)}: --algorithm {self.algorithm} trains on half of a "
                f"pool and keeps on the other half, so it needs {2 * need}+ policies (or give --held-out)"
            )
        if self.force and self.resume:
            raise UsageError(
                "--force starts a new discovery run in --out; --resume continues one: give one of them"
            )
        from ers_deep.cli.common import (
            DISCOVERY_LAYOUT,
            refuse_foreign_entries,
            refuse_foreign_run,
            refuse_links,
        )

        refuse_foreign_run(self.out_dir(), "discovery", "--out")
        if self.force:
            refuse_foreign_entries(self.out_dir(), DISCOVERY_LAYOUT, "a discovery run", "--out")
        refuse_links(self.out_dir(), DISCOVERY_LAYOUT, "--out", [self.pool, self.held_out, self.earlier])
        if self.resume and not self.holds_run():
            raise UsageError(
                f"--resume: --out {str(self.out_dir())!r} holds no discovery run to continue; start one "
                "without --resume"
            )
        if self.holds_run() and not self.resume and not self.force:
            raise UsageError(
                f"--out {str(self.out_dir())!r} already holds a discovery run; continue it with --resume, pass "
                "--force to replace it or choose another --out"
            )

    def holds_run(self) -> bool:
        """Whether ``--out`` holds a discovery run (finished or not)."""
        from ers_deep.cli.common import folder_kind

        return folder_kind(self.out_dir()) in ("discovery", "run")

    def training_policies(self) -> int:
        """The number of policies phi trains on: all of --pool with --held-out, else its first half."""
        from ers_deep.discovery.config import training_count

        n = len(_pool_info(self.pool, "--pool")["policies"])
        return n if self.held_out is not None else training_count(n)

    def out_dir(self) -> Path:
        """``--out``, or POOL/discovery-ALGORITHM."""
        return Path(self.out) if self.out is not None else Path(self.pool) / f"discovery-{self.algorithm}"

    def config(self, env: str) -> Any:
        """The ``DeepDiscoveryConfig`` for a pool of ``env``: the options given, over ``--defaults`` (cpu: the
        dataclass defaults, tabular pools ``TABULAR_SETTINGS``; paper: ``paper_discovery_settings`` for the
        number of policies phi trains on)."""
        from ers_deep.discovery.config import DeepDiscoveryConfig

        return DeepDiscoveryConfig(**self.config_fields(env))

    def config_fields(self, env: str) -> dict[str, Any]:
        """The fields of :meth:`config`, not yet checked (a resume merges them with the run's own)."""
        from ers_deep.discovery.config import TABULAR_SETTINGS, paper_discovery_settings

        if self.defaults == "paper":
            over = paper_discovery_settings(env, self.training_policies())
        else:
            over = dict(TABULAR_SETTINGS) if env not in DEEP_ENVS else {}
        for field, key in (
            ("total_steps", "total_env_steps"),
            ("num_envs", "num_envs"),
            ("num_steps", "num_steps"),
            ("lr", "lr"),
            ("lr_schedule", "lr_schedule"),
            ("lambda1", "lambda1"),
            ("lambda2", "lambda2"),
        ):
            if getattr(self, field) is not None:
                over[key] = getattr(self, field)
        return {
            "algorithm": self.algorithm,
            "candidates": self.candidates,
            "top": self.top,
            "action_set": self.action_set,
            "earlier": self.earlier,
            "alpha": self.alpha,
            "eval_games": self.eval_games,
            "exact_scores": not self.sampled_scores,
            "seed": self.seed,
            **over,
        }


def _resumed_config(opts: DiscoverOptions, env: str) -> Any:
    """``--resume``: the run's own config (OUT/discovery-config.json, ``read_saved_config``), so that a resume
    needs no options repeated; an option given (other than its default) must agree with the run's, else
    ``UsageError``. (An option given at its default value cannot be told from one left out: the run's value
    is kept.) A saved value the paper's range now refuses (lambda1 = 1) is kept, with one warning line."""
    from ers_deep.discovery.config import read_saved_config

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = read_saved_config(opts.out_dir())
    for w in caught:
        print(f"ers-deep discover: warning: {w.message}", file=sys.stderr)
    if run is None:  # killed before the run began: it starts with these options
        return opts.config(env)
    saved = run.to_json()
    default = DiscoverOptions(pool=opts.pool, out=str(opts.out_dir()), resume=True)
    g, d = opts.config_fields(env), default.config_fields(env)
    # a field the defaults leave out (--total-steps, --num-envs, --num-steps, --lr: unset means the env's own) is
    # given whenever it is there
    changed = [k for k in g if g[k] != d.get(k) and g[k] != saved.get(k, g[k])]
    if changed:
        raise UsageError(
            f"{opts.out_dir()}: --resume continues the discovery run with the options it was started with; "
            + ", ".join(f"{k} = {g[k]!r} (the run's: {saved.get(k)!r})" for k in changed)
            + " would change it (drop them, or start anew with --force)"
        )
    return run


def _check_memory(pool: Any, config: Any) -> None:
    """Refuse games that would not fit before anything is written: the run's (--num-envs for each of the
    --candidates, with --num-steps stored) and, where candidates are scored by sampled games, --eval-games."""
    from ers_deep.cli.common import check_games_memory

    env = pool.policies[0].config
    games = config.num_envs * config.candidates
    check_games_memory("--num-envs x --candidates", games, env, stored_steps=config.num_steps)
    if env.env_kind != "tabular" or not config.exact_scores:
        check_games_memory("--eval-games", config.eval_games, env)


def run_discover(opts: DiscoverOptions) -> dict[str, Any]:
    """Learn, keep, round and score symmetries of ``--pool``; the DiscoveryResult as JSON, with the files."""
    import time

    import torch

    from ers_deep.cli.common import DISCOVERY_LAYOUT, foreign_entries
    from ers_deep.discovery import discover
    from ers_deep.pools import PoolError, load_pool
    from ers_exact.util.output import output_root, replace_run_folder

    if opts.threads:
        torch.set_num_threads(opts.threads)
    pool = load_pool(opts.pool, opts.device)
    held_out = load_pool(opts.held_out, opts.device) if opts.held_out is not None else None
    if held_out is not None and held_out.info["env"] != pool.info["env"]:
        raise PoolError(
            f"--held-out {opts.held_out}: a pool of {held_out.info['env']}, but --pool {opts.pool} is a pool of "
            f"{pool.info['env']}; give held-out policies of the same env"
        )
    env = str(pool.info["env"])
    config = _resumed_config(opts, env) if opts.resume else opts.config(env)
    _check_memory(pool, config)
    out = opts.out_dir()
    if opts.force:  # only what discover writes (refused in check() when the folder holds anything else)
        reads = [opts.pool, opts.held_out, opts.earlier]
        foreign = foreign_entries(out, DISCOVERY_LAYOUT) if out.is_dir() else []
        replace_run_folder(out, is_run=opts.holds_run(), what="a discovery run", foreign=foreign, reads=reads)
    start = time.perf_counter()
    with output_root(out):  # no write in --out goes through a symbolic link below it
        result = discover(pool, config, out, held_out=held_out, resume_run=opts.resume, threads=opts.threads)
    files = {
        "discovery": str(out / "discovery.json"),
        "symmetries": str(out / "symmetries.safetensors"),
        "run": str(out / "run"),
    }
    return {**result.to_json(), "files": files, "seconds": time.perf_counter() - start}
