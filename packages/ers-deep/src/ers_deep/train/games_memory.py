"""The memory a batch of parallel games needs, checked against the one budget (:mod:`ers_exact.util.budget`)
before a run builds them: ``check_games_memory`` for a size a user gives (the commands' ``--num-envs``,
``--games``, ...), ``check_run_memory`` for the run a resume rebuilds from its config.json (an edited or crafted
one asked for 200,000,000 games: 12.8 GB allocated, then an internal error). ``ers_deep.cli.common`` re-exports
the first two."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from ers_deep.train.config import TrainConfig, make_env
from ers_deep.train.run_files import read_run_config
from ers_exact.util.budget import check_memory

__all__ = ["bytes_per_game", "check_games_memory", "check_run_memory"]


def _tensor_bytes(x: Any, seen: set[int]) -> int:
    """Bytes of the tensors reachable from ``x`` (attributes, tuples, lists, dicts), each counted once."""
    if isinstance(x, torch.Tensor):
        if id(x) in seen:
            return 0
        seen.add(id(x))
        return x.numel() * x.element_size()
    if isinstance(x, dict):
        return sum(_tensor_bytes(v, seen) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(_tensor_bytes(v, seen) for v in x)
    if hasattr(x, "__dict__") and not isinstance(x, type):
        return sum(_tensor_bytes(v, seen) for v in vars(x).values())
    return 0


def bytes_per_game(config: Any, stored_steps: int = 0) -> int:
    """Estimated memory of one game of ``config``'s env (a ``TrainConfig``): its state, observations and
    legal masks measured on a batch of two, x3 for the step's temporaries, plus ``stored_steps`` copies of
    one step's outputs (a rollout buffer)."""
    env = make_env(config.replace(device="cpu"), 2, seed=0)
    step = env.reset(seed=0)
    state = _tensor_bytes(env, set()) / 2
    out = _tensor_bytes(step, set()) / 2
    return int(3 * (state + out) + stored_steps * 2 * out)


def check_games_memory(flag: str, games: int, config: Any, stored_steps: int = 0) -> None:
    """Refuse ``games`` parallel games of ``config``'s env (``flag`` names the option that sets them) when
    they would not fit the memory budget (:mod:`ers_exact.util.budget`)."""
    per = bytes_per_game(config, stored_steps)
    check_memory(f"{flag}: {games:,} games of {config.env}", games * per, f"lower {flag}")


def check_run_memory(run_dir: str | os.PathLike[str], config: TrainConfig | None = None) -> None:
    """The memory check a new run of ``config`` gets, for the run in ``run_dir`` whose config.json holds it
    (None: read from there; nothing to check where there is none, a run not begun), what
    ``ers_deep.train.run.resume`` rebuilds: its num_envs games per seed, each with a rollout of num_steps
    (``BudgetError`` naming the file)."""
    if config is None:
        if not (Path(run_dir) / "config.json").is_file():
            return
        config = read_run_config(run_dir)[1]
    games = config.num_envs * len(config.seeds)
    where = f"{Path(run_dir) / 'config.json'}'s num_envs x seeds"
    check_games_memory(where, games, config, stored_steps=config.num_steps)
