"""The files of a training run's directory (the layout: :mod:`ers_deep.train.run`): metrics.csv (its columns,
the rows an update appends, the truncation a resume makes, the rows read back), the checkpoint files (listed
oldest first, written with the learner's full state, read back verified), config.json (the run's record and
its ``TrainConfig``) and the check a resume makes of config.json against the config a checkpoint recorded."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import torch

from ers_deep.train.checkpoint import CheckpointError, atomic_write_bytes, load_checkpoint, save_checkpoint
from ers_deep.train.config import TrainConfig
from ers_deep.train.ippo import Learner
from ers_exact.util.errors import InputError
from ers_exact.util.output import read_json

__all__ = [
    "EXECUTION_FIELDS",
    "METRIC_COLUMNS",
    "RunError",
    "check_config",
    "checkpoints",
    "latest_checkpoint",
    "metrics_seconds",
    "read_checkpoint",
    "read_metrics",
    "read_run_config",
    "save_run_checkpoint",
    "truncate_metrics",
    "write_metric_rows",
    "write_run_config",
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


def write_metric_rows(path: Path, m: dict[str, Any], seeds: tuple[int, ...], seconds: float) -> None:
    """Append update ``m``'s rows to metrics.csv, one per seed (``seconds``: the update's own), synced; never
    through a symbolic link (``O_NOFOLLOW``: a link planted in a shared run folder is refused, not followed)."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | nofollow, 0o666)
    except OSError as e:
        raise OSError(
            e.errno, f"{path}: cannot append metrics ({e.strerror}; a symbolic link is refused)"
        ) from None
    with os.fdopen(fd, "a", newline="") as f:
        w = csv.writer(f)
        for s, seed in enumerate(seeds):
            row = [m["update"], m["env_steps"], seed] + [repr(float(m[k][s])) for k in METRIC_COLUMNS[3:10]]
            w.writerow([*row, repr(m["lr"]), repr(m["shaped_coef"]), f"{seconds:.3f}"])
        f.flush()
        os.fsync(f.fileno())


def truncate_metrics(path: Path, update: int) -> list[list[str]]:
    """Keep the header and the complete rows of updates <= ``update``: rows written after the checkpoint go, and
    so does a row a kill cut short (its update may read as an earlier one: "1" of "11,..."); the rows kept."""
    rows = list(csv.reader(io.StringIO(path.read_text()))) if path.exists() else []
    full = len(METRIC_COLUMNS)
    keep = [r for r in rows[1:] if len(r) == full and r[0].isdigit() and int(r[0]) <= update]
    buf = io.StringIO()
    csv.writer(buf).writerows([list(METRIC_COLUMNS), *keep])
    atomic_write_bytes(path, buf.getvalue().encode())
    return keep


def save_run_checkpoint(learner: Learner, run_dir: Path, seconds: float) -> Path:
    """Checkpoint the learner (``seconds``: the run's wall-clock seconds so far) and drop the oldest."""
    folder = run_dir / "checkpoints"
    folder.mkdir(exist_ok=True)
    path = folder / f"update-{learner.update:06d}.safetensors"
    meta = {
        "counters": {**learner.counters(), "seconds": seconds},
        "config": learner.config.to_json(),
        "env_state": type(learner.env.state).__name__,
        # the env's step style (collect_mode decides it): its random numbers are drawn in another order
        "branch_free": bool(getattr(learner.env, "branch_free", False)),
        "torch": torch.__version__,
    }
    save_checkpoint(path, learner.state_tensors(), meta)
    for old in checkpoints(run_dir)[: -learner.config.keep_checkpoints]:
        old.unlink()
    return path


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


def write_run_config(run_dir: str | os.PathLike[str], info: dict[str, Any]) -> None:
    """A run's config.json (``info``: the record ``train`` writes, ``read_run_config`` reads), written whole
    (atomically), keys sorted."""
    atomic_write_bytes(Path(run_dir) / "config.json", json.dumps(info, indent=2, sort_keys=True).encode())


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


#: fields that choose how a run executes, not what it computes (modes, compile and memory settings,
#: checkpoint cadence), and those whose "auto" a resume takes from the run's record (cpu_products,
#: bf16_gradients, int8_inputs): config.json may change them between segments of a run
EXECUTION_FIELDS = (
    "cpu_products",
    "bf16_gradients",
    "int8_inputs",
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


def check_config(config: TrainConfig, recorded: Any, path: Path) -> None:
    """Refuse to resume ``config`` (config.json's) from the checkpoint ``path`` written with another config
    (``recorded``, its metadata's; ``EXECUTION_FIELDS`` aside: ``cpu_products``, ``bf16_gradients`` and
    ``int8_inputs`` are what ``auto`` resolved to, the others choose how the run executes): a :class:`RunError`
    naming each changed field. A config that is no training config is the checkpoint's damage (:class:`CheckpointError`); a
    checkpoint without one is not checked."""
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


def metrics_seconds(run_dir: Path) -> float:
    """The sum of metrics.csv's ``seconds`` over its updates (one per update: each seed's row repeats it)."""
    per_update = {row["update"]: float(row["seconds"]) for row in read_metrics(run_dir)}
    return sum(per_update.values())
