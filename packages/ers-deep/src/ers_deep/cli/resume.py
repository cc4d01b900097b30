"""What ``train-sp --resume`` and ``train-op --resume`` check and run besides the run itself: the pool folder a
``--resume`` names, the refusals before a resume starts (a Ray pool without ``--ray``, ``--ray`` for a one-process
pool, ``--max-updates`` already reached), and the resume of a killed Ray pool (``pools.read_ray_run``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ers_exact.util.options import UsageError

__all__ = ["check_resume_updates", "resume_folder", "resume_ray_pool"]


def resume_folder(text: str) -> Path:
    """The pool folder of ``--resume``: the pool itself, or its run/ folder."""
    pool = Path(text)
    return pool.parent if pool.name == "run" and (pool / "config.json").exists() else pool


def check_resume_updates(folder: Path, max_updates: int | None, ray: str | None = None) -> None:
    """Refuse ``--resume`` of a Ray pool (its seeds' runs in ``runs/seed-N/``, no ``run/``) without ``--ray`` (it
    was a one-line "no run to resume (config.json missing)"), ``--ray`` for a pool trained in one process, and
    ``--max-updates`` at or below the update the run to resume has already reached: that of the newest checkpoint
    that verifies, the one ``resume`` falls back to (a damaged newest file's header once gave an "already at
    update N" that resume would not have reached)."""
    from ers_deep.train.checkpoint import CheckpointError
    from ers_deep.train.run import checkpoints, read_checkpoint

    ray_pool = not (folder / "run" / "config.json").exists() and (folder / "runs").is_dir()
    if ray_pool and ray is None:
        raise UsageError(
            f"--resume {folder}: a Ray pool (one run per seed in runs/seed-N/); continue it on a Ray cluster "
            "with --resume POOL --ray ADDRESS"
        )
    if ray is not None and not ray_pool:
        raise UsageError(
            f"--ray continues a Ray pool; --resume {folder} is a pool trained in one process: drop --ray"
        )
    if max_updates is None:
        return
    for path in reversed(checkpoints(folder / "run")):
        try:
            done = int(read_checkpoint(path)[1]["counters"]["update"])
        except CheckpointError:
            continue
        if max_updates <= done:
            raise UsageError(
                f"--max-updates {max_updates}: the run in {folder} is already at update {done}; give a larger "
                "value to continue it"
            )
        return


def resume_ray_pool(folder: Path, address: str, threads: int | None, other_play: bool) -> dict[str, Any]:
    """Continue the killed Ray pool ``folder`` (``pools.read_ray_run``: its config, games and, for other-play,
    its symmetries' source) on the Ray cluster ``address``; ``PoolError`` for the other command's pool."""
    from ers_deep.other_play import train_op_pool_ray
    from ers_deep.pools import PoolError, read_ray_run, train_pool_ray
    from ers_deep.train.config import TrainConfig

    started = read_ray_run(folder)
    config = TrainConfig.from_json(started["config"])
    if ("symmetries" in started) != other_play:
        other = "train-op" if "symmetries" in started else "train-sp"
        raise PoolError(f"{folder}: a Ray pool of ers-deep {other}; resume it with {other} --resume --ray")
    if other_play:
        return train_op_pool_ray(
            config, started["symmetries"], folder, address, threads=threads, resume_run=True
        )
    return train_pool_ray(config, folder, address, threads=threads, resume_run=True)
