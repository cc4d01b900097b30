"""The run directory of a training run, and ``train(config, run_dir)`` / ``resume(run_dir)``.

    RUN_DIR/
      config.json                 the resolved TrainConfig (+ versions), written once, atomically
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

import csv
import io
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ers_deep.train.checkpoint import CheckpointError, atomic_write_bytes, load_checkpoint, save_checkpoint
from ers_deep.train.config import TrainConfig
from ers_deep.train.gaps import gap_warning, missing_updates
from ers_deep.train.ippo import Learner
from ers_exact.util.errors import InputError
from ers_exact.util.output import read_json, remove_stale_temporaries

__all__ = [
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

METRIC_COLUMNS = (
    "update",
    "env_steps",
    "seed",
    "return",
    "shaped_return",
    "episodes",
    "actor_loss",
    "value_loss",
    "entropy",
    "grad_norm",
    "lr",
    "shaped_coef",
    "seconds",
)


class RunError(ValueError, InputError):
    """A run directory that cannot be started or resumed; the message names it."""


_CKPT = re.compile(r"^update-(\d{6,})\.safetensors$")


def checkpoints(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Checkpoint files of a run, oldest first (temporary files of an interrupted write are ignored)."""
    folder = Path(run_dir) / "checkpoints"
    found = [p for p in folder.glob("update-*.safetensors") if _CKPT.match(p.name)] if folder.is_dir() else []
    return sorted(found, key=lambda p: int(_CKPT.match(p.name).group(1)))  # type: ignore[union-attr]


def latest_checkpoint(run_dir: str | os.PathLike[str]) -> Path | None:
    """The newest checkpoint file of a run, or None if it has none."""
    found = checkpoints(run_dir)
    return found[-1] if found else None


def read_metrics(run_dir: str | os.PathLike[str]) -> list[dict[str, str]]:
    """The rows of a run's metrics.csv, as strings keyed by column."""
    with open(Path(run_dir) / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


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
    return SummaryWriter(str(run_dir / "tensorboard"), purge_step=purge_step)


def _write_rows(path: Path, m: dict[str, Any], seeds: tuple[int, ...], seconds: float) -> None:
    with open(path, "a", newline="") as f:
        w = csv.writer(f)
        for s, seed in enumerate(seeds):
            row = [m["update"], m["env_steps"], seed] + [repr(float(m[k][s])) for k in METRIC_COLUMNS[3:10]]
            w.writerow([*row, repr(m["lr"]), repr(m["shaped_coef"]), f"{seconds:.3f}"])
        f.flush()
        os.fsync(f.fileno())


def _truncate_metrics(path: Path, update: int) -> list[list[str]]:
    """Keep the header and the complete rows of updates <= ``update``: rows written after the checkpoint go, and
    so does a row a kill cut short (its update may read as an earlier one: "1" of "11,..."); the rows kept."""
    rows = list(csv.reader(io.StringIO(path.read_text()))) if path.exists() else []
    full = len(METRIC_COLUMNS)
    keep = [r for r in rows[1:] if len(r) == full and r[0].isdigit() and int(r[0]) <= update]
    buf = io.StringIO()
    csv.writer(buf).writerows([list(METRIC_COLUMNS), *keep])
    atomic_write_bytes(path, buf.getvalue().encode())
    return keep


def _save(learner: Learner, run_dir: Path, seconds: float) -> Path:
    """Checkpoint the learner (``seconds``: the run's wall-clock seconds so far) and drop the oldest."""
    folder = run_dir / "checkpoints"
    folder.mkdir(exist_ok=True)
    path = folder / f"update-{learner.update:06d}.safetensors"
    meta = {
        "counters": {**learner.counters(), "seconds": seconds},
        "config": learner.config.to_json(),
        "env_state": type(learner.env.state).__name__,
        "torch": torch.__version__,
    }
    save_checkpoint(path, learner.state_tensors(), meta)
    for old in checkpoints(run_dir)[: -learner.config.keep_checkpoints]:
        old.unlink()
    return path


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
        _write_rows(run_dir / "metrics.csv", m, cfg.seeds, elapsed)
        history.append(m)
        if tb is not None:
            for k in ("return", "shaped_return", "entropy", "value_loss"):
                for s, seed in enumerate(cfg.seeds):
                    tb.add_scalar(f"{k}/seed{seed}", m[k][s], m["env_steps"])
        if learner.update % cfg.checkpoint_every == 0 or learner.update == stop:
            _save(learner, run_dir, seconds_before + time.perf_counter() - start)
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
) -> tuple[Learner, dict[str, Any]]:
    """Start a run in a new (or empty) ``run_dir``; ``max_updates`` stops early (the run can be resumed).
    ``make_learner`` builds the learner from the config (a composite net: discovery, other-play); ``resume``
    must be given the same one."""
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
    }
    atomic_write_bytes(run_dir / "config.json", json.dumps(info, indent=2, sort_keys=True).encode())
    _truncate_metrics(run_dir / "metrics.csv", -1)
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
    """Continue the run in ``run_dir`` from its newest readable checkpoint (see the module docstring)."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.json").is_file():
        raise RunError(f"{run_dir}: no run to resume (config.json missing)")
    info, config = read_run_config(run_dir)
    for folder in (run_dir, run_dir / "checkpoints"):
        for path in remove_stale_temporaries(folder):
            print(f"resume: removed {path}, left by a write that was interrupted", file=sys.stderr)
    if threads:
        torch.set_num_threads(threads)
    # the products the run began with (what its cpu_products resolved to), not what auto would pick here
    if info.get("cpu_products") in ("torch", "openblas"):
        config = config.replace(cpu_products=info["cpu_products"])
    learner = make_learner(config)
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
    kept = _truncate_metrics(run_dir / "metrics.csv", learner.update)
    missing = missing_updates(kept, learner.update, learner.config.seeds)
    if (warning := gap_warning(run_dir / "metrics.csv", missing, learner.update)) is not None:
        print(warning, file=sys.stderr)
    if math.isnan(seconds):  # a checkpoint from before the record: the updates' own seconds
        seconds = _metrics_seconds(run_dir)
    return learner, _loop(learner, run_dir, max_updates, progress, on_update, seconds, resumed=True)


def read_run_config(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], TrainConfig]:
    """A run's config.json (the record ``train`` wrote) and its ``TrainConfig``; ``FileFormatError`` or
    :class:`RunError` naming the file when it is not one (a field missing or of a wrong value)."""
    path = Path(run_dir) / "config.json"
    info = read_json(path, "a training run's config", ("config",))
    try:
        return info, TrainConfig.from_json(info["config"])
    except KeyError as e:
        raise RunError(f"{path}: its 'config' has no {e} (not a training run's config)") from None
    except (TypeError, ValueError) as e:  # UsageError is a ValueError
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise RunError(f"{path}: its 'config' is not a training config ({first})") from None


def read_checkpoint(path: str | os.PathLike[str]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """A run's checkpoint (tensors, metadata), verified against its digest, whose metadata holds integer
    ``counters["update"]`` and ``["env_steps"]``; :class:`CheckpointError` naming the file otherwise. What
    ``resume`` and ``--resume --max-updates``'s check both read (an unverified header may be a damaged file's)."""
    tensors, meta = load_checkpoint(path)
    counters = meta.get("counters")
    if not (
        isinstance(counters, dict) and all(type(counters.get(k)) is int for k in ("update", "env_steps"))
    ):
        raise CheckpointError(f"{path}: not a training checkpoint (no update and env-step counters)")
    return tensors, meta


def _restore(learner: Learner, path: Path) -> float:
    """Load the checkpoint ``path`` into ``learner``; the run's seconds up to it (NaN when not recorded).
    :class:`CheckpointError` naming the file when it is damaged or not a checkpoint of this run's learner."""
    tensors, meta = read_checkpoint(path)
    counters = meta["counters"]
    _check_config(learner.config, meta.get("config"), path)
    try:
        learner.load_state_tensors(tensors, counters)
    except (KeyError, RuntimeError, ValueError, TypeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CheckpointError(f"{path}: its tensors do not fit this run's learner ({first})") from None
    seconds = counters.get("seconds")
    return float(seconds) if isinstance(seconds, (int, float)) and math.isfinite(seconds) else math.nan


#: fields that choose how a run executes, not what it computes (modes, compile and memory settings,
#: checkpoint cadence): config.json may change them between segments of a run
EXECUTION_FIELDS = (
    "cpu_products",
    "checkpoint_every",
    "keep_checkpoints",
    "update_mode",
    "collect_mode",
    "cudnn_benchmark",
    "parallel_compile",
    "autotune_pointwise",
    "gemm_autotune",
    "keep_cpu_memory",
)


def _check_config(config: TrainConfig, recorded: Any, path: Path) -> None:
    """Refuse to resume ``config`` (config.json's) from the checkpoint ``path`` written with another config
    (``recorded``, its metadata's; ``EXECUTION_FIELDS`` aside: ``cpu_products`` is what ``auto`` resolved to,
    the others choose how the run executes): a :class:`RunError` naming each changed field. A config that is no
    training config is the checkpoint's damage (:class:`CheckpointError`); a checkpoint without one is not
    checked."""
    if recorded is None:
        return
    try:
        keep = {k: getattr(config, k) for k in EXECUTION_FIELDS}
        then = TrainConfig.from_json(recorded).replace(**keep)
    except (KeyError, TypeError, ValueError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CheckpointError(f"{path}: its recorded config is not a training config ({first})") from None
    now, was = _flat(config.to_json()), _flat(then.to_json())
    changed = [f"{k} = {now[k]!r} (the checkpoint's: {was.get(k)!r})" for k in now if now[k] != was.get(k)]
    if changed:
        raise RunError(
            f"{path.parent.parent / 'config.json'}: {', '.join(changed)}; the run's checkpoint {path.name} was "
            "written with the config the run started with, and a resumed run keeps it (restore config.json, "
            "or train a new run)"
        )


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    """A config's JSON with the net's fields as ``net.FIELD``."""
    net = config.get("net") or {}
    return {**{k: v for k, v in config.items() if k != "net"}, **{f"net.{k}": v for k, v in net.items()}}


def _metrics_seconds(run_dir: Path) -> float:
    """The sum of metrics.csv's ``seconds`` over its updates (one per update: each seed's row repeats it)."""
    per_update = {row["update"]: float(row["seconds"]) for row in read_metrics(run_dir)}
    return sum(per_update.values())
