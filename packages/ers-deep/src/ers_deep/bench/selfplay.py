"""A time-budgeted self-play run of ers's learner, the learning half of issue 21's device comparison
(``scripts/gpu_train_table.py``'s learning rows), with one seed or several stacked in one learner.

``timed_selfplay(config, seconds)`` builds the learner, runs its first update (compilation, capture), then
updates until ``seconds`` have passed on its clock (from after that setup, or with ``from_start`` from before
the build), writes one JSON line per update and seed as it goes (``progress``: a killed run keeps its curve;
``ers_deep.bench.learn_pair`` reads it), and after the clock plays each seed's final policy in new games, the
first episode of each (as the JAX anchor's own evaluation). Several seeds answer per env-step questions with a
spread: each seed is its own learner inside the stack (``ers_deep.train.ippo``), so S seeds cost about one run
of S times the envs.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from ers_deep.bench.learn_pair import mean_se
from ers_deep.bench.train import warmed_learner
from ers_deep.pools import seed_net
from ers_deep.train import evaluate
from ers_deep.train.config import TrainConfig
from ers_deep.train.ippo import Learner

__all__ = ["LOGGED", "evaluate_seeds", "timed_selfplay"]

#: the per-seed metrics of each progress line (beside ``seed``, ``elapsed_s`` and ``env_steps``)
LOGGED = ("return", "episodes", "entropy", "value_loss", "grad_norm")


def evaluate_seeds(learner: Learner, games: int) -> dict[str, Any]:
    """Sampled self-play of each seed's policy over ``games`` new games (seed s: evaluation seed 10,000 + s);
    one seed: its ``play`` result; several: the mean of their means, its standard error over seeds, and each
    seed's result. A failure is reported in the result, not raised (the run's row must survive it)."""
    seeds = learner.config.seeds
    try:
        per = {
            s: evaluate.play(
                [evaluate.Agent(seed_net(learner, i))] * learner.P, learner.config, games, seed=10_000 + s
            )
            for i, s in enumerate(seeds)
        }
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:300]}
    if len(seeds) == 1:
        return per[seeds[0]]
    m, se = mean_se([r["mean"] for r in per.values()])
    return {"mean": m, "se": se, "games": games, "per_seed": per}


def timed_selfplay(
    config: TrainConfig,
    seconds: float,
    progress: str | os.PathLike[str] | None = None,
    from_start: bool = False,
    eval_games: int = 200,
) -> dict[str, Any]:
    """The run the module describes; its row: updates (the setup's first one included), env-steps per seed,
    the seconds on the clock, the setup (``setup_s``, ``setup_phase_s``, the update's helper compilation),
    ``return_last`` (the mean training return of the last two updates, over seeds; per seed in
    ``return_last_per_seed``), ``returns`` (the first seed's per update; every seed's in ``returns_per_seed``)
    and ``eval`` (``evaluate_seeds``)."""
    clock = time.perf_counter()
    learner, _, setup_s, setup_phases = warmed_learner(config)
    start, history = (clock if from_start else time.perf_counter()), []
    seeds = config.seeds
    with Path(progress).open("w") if progress else contextlib.nullcontext() as fh:
        while time.perf_counter() - start < seconds:
            history.append(learner.train_step())
            if fh:
                line = {"elapsed_s": time.perf_counter() - start, "env_steps": learner.env_steps}
                for i, s in enumerate(seeds):
                    m = {k: history[-1][k][i] for k in LOGGED}
                    fh.write(json.dumps({"seed": s, **line, **m}) + "\n")
                fh.flush()
    seconds_run = time.perf_counter() - start
    per_seed = {s: [m["return"][i] for m in history] for i, s in enumerate(seeds)}
    last = {s: mean_se(r[-2:])[0] for s, r in per_seed.items()}
    row: dict[str, Any] = {
        "seed": seeds[0],
        "seeds": list(seeds),
        "updates": len(history) + 1,
        "env_steps": learner.env_steps,
        "seconds": seconds_run,
        "eval": evaluate_seeds(learner, eval_games),
        "setup_s": setup_s,
        "setup_phase_s": setup_phases,
        "precompile": learner.await_precompile(),
        "clock": "from the learner's construction" if from_start else "after setup",
        "return_last": mean_se([r for s in seeds for r in per_seed[s][-2:]])[0] if history else 0.0,
        "return_last_per_seed": last,
        "returns": per_seed[seeds[0]],
    }
    if len(seeds) > 1:
        row["returns_per_seed"] = per_seed
    return row
