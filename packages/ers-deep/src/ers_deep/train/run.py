"""The run directory of a training run, and ``train(config, run_dir)`` / ``resume(run_dir)``.

    RUN_DIR/
      config.json                 the resolved TrainConfig (+ versions, what its "auto"s resolved to, torch's
                                  threads and the collection and update modes as run, + the caller's ``settings``:
                                  a pool's eval_games, which a pool's resume may replace), written atomically
      metrics.csv                 one row per update and seed (update, env_steps, seed, return, ...; ``seconds``
                                  is the only wall-clock column)
      checkpoints/update-NNNNNN.safetensors   the full learner state (``ers_deep.train.checkpoint``), the last
                                  ``keep_checkpoints`` kept
      tensorboard/                scalars, when the ``tensorboard`` extra is installed (at env steps; a resumed run
                                  purges the re-run updates' earlier ones: ``purge_step``)

Resume: ``resume(run_dir)`` rebuilds the learner from ``config.json``, loads the newest checkpoint that
verifies (model, Adam moments, learning-rate schedule and shaped-reward annealing -- both pure functions of
the update counter --, the env's full state and generator, the learner's sampling generator, the recurrent
state and the running episode returns, the counters), drops the metrics rows written after that checkpoint
(and a row a kill cut short; rows missing at or below it are named on stderr: ``ers_deep.train.gaps``),
removes the temporary files of writes a kill interrupted (``.NAME.tmp-PID`` of a process no longer running,
in the run directory and checkpoints/: ``remove_stale_temporaries``), and continues. A config.json that
differs from the config the checkpoint recorded (edited since the run started) is a ``RunError`` naming each
changed field. A checkpoint also records the run's wall-clock seconds up to it, so a resumed run's summary
(pool.json's ``training``: ``env_steps`` = ``env_steps_per_seed`` per seed, ``env_steps_all_seeds``;
``seconds``; ``env_steps_per_s`` = ``env_steps_per_s_all_seeds``, all seeds together) counts the whole run,
and its ``segment`` this process's part alone (a checkpoint written before that record: the ``seconds``
column of metrics.csv up to it, which leaves out the checkpoint writes). Nothing is re-seeded: on the same machine and thread count the
resumed curve equals the uninterrupted one bit for bit (tests/deep/train/test_run.py kills a run with SIGKILL
and compares). The same holds with ``collector="torchrl"``: the new learner builds a new ``Collector``, which
deals no games of its own; every batch starts from the learner's env state, here the restored one
(``ers_deep.train.collector``; tests/deep/train/test_collector.py resumes such a run and compares).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ers_deep.train.checkpoint import CheckpointError
from ers_deep.train.config import TrainConfig
from ers_deep.train.games_memory import check_run_memory
from ers_deep.train.gaps import gap_warning, missing_updates
from ers_deep.train.ippo import Learner
from ers_deep.train.run_files import (
    EXECUTION_FIELDS,
    METRIC_COLUMNS,
    RunError,
    check_config,
    checkpoints,
    latest_checkpoint,
    metrics_seconds,
    read_checkpoint,
    read_metrics,
    read_run_config,
    save_run_checkpoint,
    truncate_metrics,
    write_metric_rows,
    write_run_config,
)
from ers_exact.util.output import OutputError, remove_stale_temporaries

__all__ = [
    "EXECUTION_FIELDS",
    "METRIC_COLUMNS",
    "RunError",
    "checkpoints",
    "latest_checkpoint",
    "read_checkpoint",
    "read_metrics",
    "read_run_config",
    "resume",
    "train",
]


class _Bar:
    """One stderr line: update, env-steps/s and the recent return (only on a terminal unless forced)."""

    def __init__(self, total: int, enabled: bool | None) -> None:
        self.total, self.enabled = total, sys.stderr.isatty() if enabled is None else enabled
        self.last = 0.0

    def show(self, m: dict[str, Any], sps: float, force: bool = False) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self.last < 0.5 and not force):
            return
        self.last = now
        rets = [r for r in m["return"] if not math.isnan(r)]
        ret = f"{sum(rets) / len(rets):8.3f}" if rets else "     n/a"
        bar = "#" * int(20 * m["update"] / self.total)
        sys.stderr.write(
            f"\r[{bar:<20}] update {m['update']}/{self.total}  {sps:,.0f} env-steps/s  return {ret}"
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def _tensorboard(run_dir: Path, purge_step: int | None) -> Any:
    """The run's TensorBoard writer (None without the ``tensorboard`` extra). A resumed run passes
    ``purge_step``, the first env step after its checkpoint: TensorBoard then hides the earlier process's
    scalars from that step on (those of the updates re-run, which would otherwise show twice)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # the optional `tensorboard` extra
        return None
    folder = run_dir / "tensorboard"
    if folder.is_symlink():  # planted in a received run folder, it would send the event files anywhere
        raise OutputError(
            f"{folder}: a symbolic link in the run folder; refusing to write TensorBoard's events through it"
        )
    return SummaryWriter(str(folder), purge_step=purge_step)


def _loop(
    learner: Learner,
    run_dir: Path,
    max_updates: int | None,
    progress: bool | None,
    on_update: Callable[[dict[str, Any]], None] | None,
    seconds_before: float = 0.0,
    resumed: bool = False,
) -> dict[str, Any]:
    """Train to ``max_updates`` (or the end), checkpointing; the run's summary (``seconds_before``: the seconds
    the run had taken up to the checkpoint it resumed from; ``resumed``: TensorBoard purges what follows it)."""
    cfg = learner.config
    stop = cfg.num_updates if max_updates is None else min(cfg.num_updates, max_updates)
    tb = _tensorboard(run_dir, learner.env_steps + 1 if resumed else None)
    bar, history = _Bar(cfg.num_updates, progress), []
    start, steps0, update0 = time.perf_counter(), learner.env_steps, learner.update
    m: dict[str, Any] = {}
    while learner.update < stop:
        t0 = time.perf_counter()
        m = learner.train_step()
        elapsed = time.perf_counter() - t0
        write_metric_rows(run_dir / "metrics.csv", m, cfg.seeds, elapsed)
        history.append(m)
        if tb is not None:
            for k in ("return", "shaped_return", "entropy", "value_loss"):
                for s, seed in enumerate(cfg.seeds):
                    tb.add_scalar(f"{k}/seed{seed}", m[k][s], m["env_steps"])
        if learner.update % cfg.checkpoint_every == 0 or learner.update == stop:
            save_run_checkpoint(learner, run_dir, seconds_before + time.perf_counter() - start)
        sps = (learner.env_steps - steps0) * len(cfg.seeds) / max(1e-9, time.perf_counter() - start)
        bar.show(m, sps, force=learner.update == stop)
        if on_update is not None:
            on_update(m)
    bar.close()
    if tb is not None:
        tb.close()
    seconds = time.perf_counter() - start
    total, n = seconds_before + seconds, len(cfg.seeds)
    rate, segment_rate = (
        learner.env_steps * n / max(total, 1e-9),
        (learner.env_steps - steps0) * n / max(seconds, 1e-9),
    )
    return {  # env_steps: per seed; env_steps_per_s: all seeds together (the explicit names say so)
        "run_dir": str(run_dir),
        "updates": learner.update,
        "env_steps": learner.env_steps,
        "env_steps_per_seed": learner.env_steps,
        "env_steps_all_seeds": learner.env_steps * n,
        "seconds": total,
        "env_steps_per_s": rate,
        "env_steps_per_s_all_seeds": rate,
        "segment": {  # this process's part of the run (all of it unless resumed)
            "from_update": update0,
            "seconds": seconds,
            "env_steps_per_s": segment_rate,
            "env_steps_per_s_all_seeds": segment_rate,
        },
        "finished": learner.update >= cfg.num_updates,
    }


def train(
    config: TrainConfig,
    run_dir: str | os.PathLike[str],
    *,
    max_updates: int | None = None,
    progress: bool | None = None,
    threads: int | None = None,
    on_update: Callable[[dict[str, Any]], None] | None = None,
    make_learner: Callable[[TrainConfig], Learner] = Learner,
    settings: dict[str, Any] | None = None,
) -> tuple[Learner, dict[str, Any]]:
    """Start a run in a new (or empty) ``run_dir``; ``max_updates`` stops early (the run can be resumed).
    ``make_learner`` builds the learner from the config (a composite net: discovery, other-play); ``resume``
    must be given the same one. ``settings``: more top-level keys of config.json, the caller's own options of
    the run that are no ``TrainConfig`` field (a pool's ``eval_games``), read back with ``read_run_config``."""
    run_dir = Path(run_dir)
    if (run_dir / "config.json").exists():
        raise RunError(f"{run_dir} already holds a run (config.json); resume it with --resume {run_dir}")
    if threads:
        torch.set_num_threads(threads)
    learner = make_learner(config)  # before the folder: a config it refuses leaves nothing behind
    run_dir.mkdir(parents=True, exist_ok=True)
    info = {
        "config": config.to_json(),
        "torch": torch.__version__,
        "obs_shape": list(learner.env.obs_shape),
        "num_actions": learner.env.num_actions,
        "num_agents": learner.env.num_agents,
        "cpu_products": learner.cpu_products,  # what cpu_products resolved to: a resume uses the same
        "bf16_gradients": learner.bf16_gradients,  # likewise
        "int8_inputs": learner.int8_inputs,  # likewise
        # what else the run's floats depend on that its config leaves to the machine or to "auto": torch's CPU
        # threads (a sum's order), the collection's mode ("auto" compiles only long CPU runs; a compiled step
        # draws from a branch-free env) and the update's
        "threads": torch.get_num_threads(),
        "collect_mode": learner.collect_mode,
        "update_mode": learner.updater.mode,
        **(settings or {}),
    }
    write_run_config(run_dir, info)
    truncate_metrics(run_dir / "metrics.csv", -1)
    return learner, _loop(learner, run_dir, max_updates, progress, on_update)


def resume(
    run_dir: str | os.PathLike[str],
    *,
    max_updates: int | None = None,
    progress: bool | None = None,
    threads: int | None = None,
    on_update: Callable[[dict[str, Any]], None] | None = None,
    make_learner: Callable[[TrainConfig], Learner] = Learner,
) -> tuple[Learner, dict[str, Any]]:
    """Continue the run in ``run_dir`` from its newest readable checkpoint (see the module docstring), after the
    memory check a new run gets (``games_memory.check_run_memory``: ``BudgetError`` where config.json asks for
    more games than the budget holds)."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.json").is_file():
        raise RunError(f"{run_dir}: no run to resume (config.json missing)")
    info, config = read_run_config(run_dir)
    check_run_memory(run_dir, config)  # before anything is removed or built
    recorded = config
    for folder in (run_dir, run_dir / "checkpoints"):
        for path in remove_stale_temporaries(folder):
            print(f"resume: removed {path}, left by a write that was interrupted", file=sys.stderr)
    if threads:
        torch.set_num_threads(threads)
    # the products the run began with (what its cpu_products resolved to), not what auto would pick here
    if info.get("cpu_products") in ("torch", "openblas"):
        config = config.replace(cpu_products=info["cpu_products"])
    # likewise what its bf16_gradients and int8_inputs resolved to (a run begun before that record: its config's
    # own value)
    for name in ("bf16_gradients", "int8_inputs"):
        if type(info.get(name)) is bool:
            config = config.replace(**{name: info[name]})
    learner = make_learner(config)
    began = info.get("threads")
    if type(began) is int and began != torch.get_num_threads():
        print(
            f"resume: the run began with {began} torch threads, this process has {torch.get_num_threads()} "
            "(--threads): its sums may round otherwise from here on",
            file=sys.stderr,
        )
    # built with what the run's "auto"s resolved to (read at construction only); it records the run's own config,
    # so the checkpoints, policies and pool.json of a resumed run say what an uninterrupted one's say (they
    # recorded the resolved values before 2026-12-07)
    learner.config = learner.config.replace(**{k: getattr(recorded, k) for k in RESOLVED_AT_START})
    errors, seconds = [], 0.0
    for path in reversed(checkpoints(run_dir)):
        try:
            seconds = _restore(learner, path)
        except CheckpointError as e:  # e.g. a file damaged after it was written: fall back to an older one
            errors.append(str(e))
            print(f"resume: skipped a damaged checkpoint, trying an older one: {e}", file=sys.stderr)
            continue
        break
    else:
        if errors:
            raise CheckpointError("; ".join(errors))
        # killed before the first checkpoint: start over (the fresh learner is the state at update 0)
    kept = truncate_metrics(run_dir / "metrics.csv", learner.update)
    missing = missing_updates(kept, learner.update, learner.config.seeds)
    if (warning := gap_warning(run_dir / "metrics.csv", missing, learner.update)) is not None:
        print(warning, file=sys.stderr)
    if math.isnan(seconds):  # a checkpoint from before the record: the updates' own seconds
        seconds = metrics_seconds(run_dir)
    return learner, _loop(learner, run_dir, max_updates, progress, on_update, seconds, resumed=True)


#: the fields whose "auto" a run resolves once, at its start (run/config.json records the result), and a resume
#: builds its learner with
RESOLVED_AT_START = ("cpu_products", "bf16_gradients", "int8_inputs")


def check_step_style(learner: Learner, meta: dict[str, Any], path: Path) -> None:
    """Refuse to resume where ``collect_mode`` changed the env's step style (branch-free for a compiled or
    captured collection, else with branches): the two draw their random numbers in other orders, so the run
    would continue on another stream (``collect_mode`` is an ``EXECUTION_FIELDS`` field otherwise, free to
    change; a checkpoint written before 2026-12-07 does not record the style and is not checked)."""
    recorded, now = meta.get("branch_free"), bool(getattr(learner.env, "branch_free", False))
    if isinstance(recorded, bool) and recorded != now:
        config = meta.get("config")
        before = config.get("collect_mode") if isinstance(config, dict) else None
        style = {True: "branch-free", False: "with branches"}
        raise RunError(
            f"{path}: the run's env stepped {style[recorded]} (collect_mode {before!r}); collect_mode = "
            f"{learner.config.collect_mode!r} steps it {style[now]}, whose random numbers come in another order: "
            "resume with the run's collect_mode"
        )


def _restore(learner: Learner, path: Path) -> float:
    """Load the checkpoint ``path`` into ``learner``; the run's seconds up to it (NaN when not recorded).
    :class:`CheckpointError` naming the file when it is damaged or not a checkpoint of this run's learner."""
    tensors, meta = read_checkpoint(path)
    counters = meta["counters"]
    check_config(learner.config, meta.get("config"), path)
    check_step_style(learner, meta, path)
    try:
        learner.load_state_tensors(tensors, counters)
    except (KeyError, RuntimeError, ValueError, TypeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CheckpointError(f"{path}: its tensors do not fit this run's learner ({first})") from None
    seconds = counters.get("seconds")
    return float(seconds) if isinstance(seconds, (int, float)) and math.isfinite(seconds) else math.nan
