"""Pools: directories of frozen self-play policies (the deep Pi' of the paper) with their scores and configs.

    POOL/
      pool.json                    env, config, per seed: policy file, self-play score (mean, se, games),
                                   final training return, and on tabular games the exact J / fixed-point check
      policies/seed-S.safetensors  one frozen single-seed network (``ers_deep.train.checkpoint`` format:
                                   safetensors + JSON metadata with the TrainConfig, seed, obs shape, actions)
      run/                         the training run (``ers_deep.train.run``: config.json, metrics.csv, checkpoints);
                                   its config.json also keeps ``eval_games``, the games per policy of the scores

``train_pool(config, out)`` trains all seeds of ``config.seeds`` together in one process (stacked parameters,
``ers_deep.train.ippo``), or continues an interrupted pool (``resume=True``), then freezes every seed. A resumed
pool is scored on the games its run recorded (``pool_eval_games``), so it ends as the uninterrupted pool would.
``train_pool_ray(config, out, address)`` trains the same pool as separate jobs on a Ray cluster (the ``ray``
extra; ``address`` ``local`` starts a local Ray instance): one Ray task per seed runs ``train_pool`` for that
seed alone into ``POOL/runs/seed-S/`` (a complete one-seed pool: run directory, checkpoints, pool.json); the
driver writes each frozen policy (returned as bytes, so the workers need not share the driver's disk) to
``POOL/policies/seed-S.safetensors`` and the gathered pool.json, which ``load_pool`` reads like any other; it
records how it was started in ``POOL/ray-run.json``, so a killed Ray pool resumes (``resume_run=True``).
A seed trained alone equals ``train_pool`` of the one-seed config bit for bit, but not that seed's slice of a
multi-seed in-process pool: the env's and the sampler's generators of a vectorised pool are seeded from its
first seed (``ers_deep.train.ippo``), so the other seeds see other games (same distribution, other samples).
``load_pool(dir)`` and ``load_policy(file)`` read them back (verified; nothing is unpickled). The policy files
themselves (``Policy``, ``seed_net``, ``save_policy``, ``load_policy``) live in ``ers_deep.policies``, re-exported
here. A pool may come from a stranger: ``load_pool`` reads only policy files inside the pool's folder (relative
paths without "..", no link leading out; regular files of at most ``MAX_FILE_BYTES``), checks each file against
the ``sha256`` its entry records (pools written since 2026-12-07; older ones have none) and each policy's own
seed and training config against its entry's seed and pool.json's config.

Variants of the training (other-play: ``ers_deep.other_play``) reuse both: ``make_learner`` builds the learner
around a composite net, ``policy_net`` picks the trainable pi out of it (the net that is frozen and scored),
``score`` adds per-policy entries and ``record`` top-level keys to pool.json; ``train_pool_ray(...,
trainer=...)`` runs such a variant per seed (the top-level keys a seed's pool.json adds are gathered too).
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import ActorCritic
from ers_deep.policies import (
    MAX_FILE_BYTES,
    Policy,
    load_listed_policy,
    load_policy,
    policy_bytes,
    save_policy,
    seed_net,
)
from ers_deep.ray_cluster import RayError, ray_init, ray_task_device
from ers_deep.train.checkpoint import atomic_write_bytes
from ers_deep.train.config import TrainConfig
from ers_deep.train.evaluate import play
from ers_deep.train.exact import exact_report
from ers_deep.train.games_memory import check_run_memory
from ers_deep.train.ippo import Learner
from ers_deep.train.run import read_metrics, read_run_config, resume, train
from ers_deep.train.run_files import write_run_config
from ers_exact.util.errors import InputError
from ers_exact.util.output import dumps, read_json, remove_stale_temporaries


class PoolError(ValueError, InputError):
    """A folder that is not a usable pool; the message names it."""


__all__ = [
    "DEFAULT_EVAL_GAMES",
    "MAX_FILE_BYTES",
    "RAY_RUN",
    "Policy",
    "Pool",
    "PoolError",
    "RayError",
    "load_policy",
    "load_pool",
    "pool_eval_games",
    "ray_task_device",
    "read_ray_run",
    "save_policy",
    "seed_net",
    "train_pool",
    "train_pool_ray",
]


@dataclass(frozen=True)
class Pool:
    path: Path
    info: dict[str, Any]
    policies: tuple[Policy, ...]

    @property
    def name(self) -> str:
        return self.path.name


def _final_returns(run_dir: Path, seeds: tuple[int, ...], window: int = 10) -> dict[int, float]:
    """Per seed, the mean training return over the last ``window`` updates that had finished episodes."""
    rows = read_metrics(run_dir)
    out = {}
    for seed in seeds:
        vals = [float(r["return"]) for r in rows if int(r["seed"]) == seed and r["return"] != "nan"]
        out[seed] = sum(vals[-window:]) / len(vals[-window:]) if vals else math.nan
    return out


#: self-play games per policy for a pool's scores when none is given: a new pool's, and a resumed pool's whose run
#: was recorded before run/config.json kept its ``eval_games``
DEFAULT_EVAL_GAMES = 1000


def pool_eval_games(out: str | os.PathLike[str], eval_games: int | None, resume_run: bool) -> int:
    """The games per policy the pool ``out`` is scored on: ``eval_games`` when given; else, for a resumed pool,
    the value its run recorded (run/config.json's ``eval_games``), so that a pool killed and resumed is scored
    as the unkilled one; else (a new pool, a run recorded without it) ``DEFAULT_EVAL_GAMES``. A recorded value
    that is no positive integer is a :class:`PoolError` naming the file."""
    path = Path(out) / "run" / "config.json"
    if eval_games is not None or not resume_run or not path.is_file():
        return DEFAULT_EVAL_GAMES if eval_games is None else eval_games
    saved = read_run_config(path.parent)[0].get("eval_games", DEFAULT_EVAL_GAMES)
    if type(saved) is not int or saved < 1:
        raise PoolError(
            f"{path}: its scores' games per policy, {saved!r}, are no positive integer (damaged run)"
        )
    return saved


def _record_eval_games(run_dir: Path, games: int) -> None:
    """A resume's ``eval_games`` that is not the one its run recorded replaces it in run/config.json (scoring is
    no part of training: the value given last is the one a later resume without it uses)."""
    info, _ = read_run_config(run_dir)
    if info.get("eval_games") != games:
        write_run_config(run_dir, {**info, "eval_games": games})


def _train_or_resume(
    config: TrainConfig, out: Path, resume_run: bool, eval_games: int, given: bool, runs: dict[str, Any]
) -> tuple[Learner, dict[str, Any]]:
    """``train`` a new pool's run (recording ``eval_games`` in its config.json) or ``resume`` its run (recording
    ``eval_games`` only where ``given``: a run recorded without it is not rewritten unasked)."""
    run_dir = out / "run"
    if resume_run:
        # only in a pool's folder (a mistyped --resume path is refused by resume, with nothing removed)
        if (run_dir / "config.json").is_file():
            for path in remove_stale_temporaries(out) + remove_stale_temporaries(out / "policies"):
                print(f"resume: removed {path}, left by a write that was interrupted", file=sys.stderr)
            if given:
                _record_eval_games(run_dir, eval_games)
        return resume(run_dir, **runs)
    if (out / "pool.json").exists() or (run_dir / "config.json").exists():
        raise PoolError(
            f"{out} already holds a pool; continue it with --resume, pass --force to replace it or choose "
            "another --out"
        )
    return train(config, run_dir, settings={"eval_games": eval_games}, **runs)


def train_pool(
    config: TrainConfig,
    out: str | os.PathLike[str],
    *,
    resume_run: bool = False,
    eval_games: int | None = None,
    progress: bool | None = None,
    threads: int | None = None,
    max_updates: int | None = None,
    make_learner: Callable[[TrainConfig], Learner] = Learner,
    policy_net: Callable[[ActorCritic], ActorCritic] | None = None,
    score: Callable[[Policy], dict[str, Any]] | None = None,
    record: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train (or continue) the pool ``out`` and freeze its seeds; returns the pool summary (also pool.json).

    ``make_learner``: the learner factory (given to ``train``/``resume``); ``policy_net``: learner.net -> the
    network to freeze, score and check (default: learner.net itself); ``score``: extra entries per frozen
    policy; ``record``: extra top-level keys of pool.json (module docstring). ``eval_games``: self-play games
    per policy for the scores (``pool_eval_games``: unset, a resumed pool's own), recorded in run/config.json."""
    out = Path(out)
    games = pool_eval_games(out, eval_games, resume_run)
    runs: dict[str, Any] = dict(
        progress=progress, threads=threads, max_updates=max_updates, make_learner=make_learner
    )
    learner, summary = _train_or_resume(config, out, resume_run, games, eval_games is not None, runs)
    cfg = learner.config
    net = learner.net if policy_net is None else policy_net(learner.net)
    (out / "policies").mkdir(parents=True, exist_ok=True)
    final = _final_returns(out / "run", cfg.seeds)
    exact = (
        exact_report(net, learner.env, cfg.alpha)
        if isinstance(learner.env, TabularEnv)
        else [None] * len(cfg.seeds)
    )
    entries = []
    for s, seed in enumerate(cfg.seeds):
        file = out / "policies" / f"seed-{seed}.safetensors"
        data = policy_bytes(learner, s, net=net)  # save_policy's bytes, hashed as written
        atomic_write_bytes(file, data)
        policy = load_policy(file)
        sp = play([policy.agent()] * learner.env.num_agents, cfg, games, seed=10_000 + seed)
        entry: dict[str, Any] = {
            "seed": seed,
            "file": str(file.relative_to(out)),
            "sha256": hashlib.sha256(data).hexdigest(),  # load_pool checks it
            "self_play": sp,
            "final_return": final[seed],
        }
        if exact[s] is not None:
            entry["exact"] = exact[s]
        entries.append({**entry, **(score(policy) if score is not None else {})})
    info = {
        "env": cfg.env,
        "alpha": cfg.alpha,
        "seeds": list(cfg.seeds),
        "config": cfg.to_json(),
        "training": summary,
        "policies": entries,
        **(record or {}),
    }
    atomic_write_bytes(out / "pool.json", dumps(info, indent=2, sort_keys=True).encode())
    return info


#: the keys of pool.json that ``train_pool`` itself writes (a variant's ``record`` adds others)
_POOL_KEYS = ("env", "alpha", "seeds", "config", "training", "policies")


def _train_seed(
    trainer: Callable[..., dict[str, Any]],
    config_json: dict[str, Any],
    seed_dir: str,
    eval_games: int,
    threads: int | None,
    max_updates: int | None,
    resume_run: bool = False,
) -> tuple[dict[str, Any], bytes]:
    """One Ray task: ``trainer`` (``train_pool`` or a variant with its signature) of one seed into ``seed_dir``
    (``resume_run``: continuing its run); its pool.json and its frozen policy's bytes."""
    info = trainer(
        TrainConfig.from_json(config_json),
        seed_dir,
        resume_run=resume_run,
        eval_games=eval_games,
        progress=False,
        threads=threads,
        max_updates=max_updates,
    )
    return info, (Path(seed_dir) / info["policies"][0]["file"]).read_bytes()


#: a Ray pool's start record (``train_pool_ray``), what its resume reads
RAY_RUN = "ray-run.json"


def read_ray_run(out: str | os.PathLike[str]) -> dict[str, Any]:
    """The start record of the Ray pool in ``out`` (``RAY_RUN``: ``config``, ``eval_games`` and a variant's
    entries); ``PoolError`` naming the folder where there is none (no Ray pool, or one started before
    2026-12-07, which cannot be resumed)."""
    path = Path(out) / RAY_RUN
    if not path.is_file():
        raise PoolError(
            f"{out}: no {RAY_RUN}, so no Ray pool to resume (one started before 2026-12-07 did not record how it "
            "was started: train it again with --force)"
        )
    return read_json(path, "a Ray pool's start record", ("config", "eval_games"))


def train_pool_ray(
    config: TrainConfig,
    out: str | os.PathLike[str],
    address: str,
    *,
    eval_games: int | None = None,
    threads: int | None = None,
    max_updates: int | None = None,
    trainer: Callable[..., dict[str, Any]] = train_pool,
    resume_run: bool = False,
    record: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train the pool ``out`` on a Ray cluster, one task per seed (module docstring); returns pool.json.
    ``trainer``: what each task runs, ``train_pool`` or a picklable variant with its signature; ``eval_games``
    (unset: ``DEFAULT_EVAL_GAMES``) is each seed's, recorded in its run. A new pool first writes
    ``POOL/ray-run.json`` (``config``, ``eval_games`` and ``record``, a variant's own entries); ``resume_run``
    continues a killed one (``config``: the one ``read_ray_run`` gives): each seed's run resumes where it has one,
    the others start, and the gathered pool equals the uninterrupted one."""
    out = Path(out).absolute()
    games = DEFAULT_EVAL_GAMES if eval_games is None else eval_games
    if resume_run:
        games = int(read_ray_run(out)["eval_games"])
        for seed in config.seeds:  # before any task starts (each task's resume checks its own run too)
            check_run_memory(out / "runs" / f"seed-{seed}" / "run")
    elif any((out / name).exists() for name in ("pool.json", "runs", "run", RAY_RUN)):
        raise PoolError(f"{out} already holds a pool; pass --force to replace it or choose another --out")
    ray, connected = ray_init(address)
    if not resume_run:
        out.mkdir(parents=True, exist_ok=True)
        start = {"config": config.to_json(), "eval_games": games, **(record or {})}
        atomic_write_bytes(out / RAY_RUN, dumps(start, indent=2, sort_keys=True).encode())
    try:
        task = ray.remote(
            num_cpus=threads or 1, num_gpus=1 if config.device.startswith("cuda") else 0, max_retries=0
        )(_train_seed)
        refs = [
            task.remote(
                trainer,
                config.replace(seeds=(seed,), device=ray_task_device(config.device)).to_json(),
                str(out / "runs" / f"seed-{seed}"),
                games,
                threads,
                max_updates,
                (out / "runs" / f"seed-{seed}" / "run" / "config.json").is_file(),
            )
            for seed in config.seeds
        ]
        results: list[tuple[dict[str, Any], bytes]] = ray.get(refs)
    finally:
        if connected:
            ray.shutdown()
    (out / "policies").mkdir(parents=True, exist_ok=True)
    entries, runs = [], []
    for seed, (info, policy) in zip(config.seeds, results):
        file = out / "policies" / f"seed-{seed}.safetensors"
        atomic_write_bytes(file, policy)
        load_policy(file)  # verifies what came back
        sha256 = hashlib.sha256(policy).hexdigest()  # of the bytes written
        entry = {"file": str(file.relative_to(out)), "run": f"runs/seed-{seed}", "sha256": sha256}
        entries.append({**info["policies"][0], **entry})
        runs.append(info["training"])
    rate = sum(r["env_steps_per_s"] for r in runs)
    training = {  # as train_pool's (ers_deep.train.run): env_steps per seed, env_steps_per_s all seeds together
        "updates": min(r["updates"] for r in runs),
        "env_steps": min(r["env_steps"] for r in runs),
        "env_steps_per_seed": min(r["env_steps"] for r in runs),
        "env_steps_all_seeds": sum(r["env_steps"] for r in runs),
        "seconds": max(r["seconds"] for r in runs),
        "env_steps_per_s": rate,
        "env_steps_per_s_all_seeds": rate,
        "finished": all(r["finished"] for r in runs),
        "ray": {"address": address, "tasks": len(runs)},
        "runs": runs,
    }
    info = {
        "env": config.env,
        "alpha": config.alpha,
        "seeds": list(config.seeds),
        "config": config.to_json(),
        "training": training,
        "policies": entries,
        **{k: v for k, v in results[0][0].items() if k not in _POOL_KEYS},
    }
    atomic_write_bytes(out / "pool.json", dumps(info, indent=2, sort_keys=True).encode())
    return info


def _pool_config(path: Path, info: dict[str, Any]) -> TrainConfig | None:
    """pool.json's training config (None where it records none)."""
    try:
        return None if "config" not in info else TrainConfig.from_json(info["config"])
    except (KeyError, TypeError, ValueError) as e:
        raise PoolError(f"{path / 'pool.json'}: 'config' is not a training config ({e})") from None


def load_pool(path: str | os.PathLike[str], device: str | None = None) -> Pool:
    """A pool directory (``ValueError`` naming it when it is not one, or when its policy files are not the
    ones it records: module docstring), its policies on ``device`` (by default each on the device it was
    trained on where this machine has it, else the CPU: ``load_policy``)."""
    path = Path(path)
    if not (path / "pool.json").is_file():
        raise PoolError(f"{path}: not a pool (no pool.json); build one with ers-deep train-sp")
    info = read_json(path / "pool.json", "a pool summary written by ers-deep train-sp", ("env", "policies"))
    entries = info["policies"]
    if not (
        isinstance(entries, list)
        and all(isinstance(p, dict) and isinstance(p.get("file"), str) for p in entries)
    ):
        raise PoolError(
            f"{path / 'pool.json'}: 'policies' is not a list of {{\"file\": ...}} entries (damaged pool)"
        )
    if not isinstance(info["env"], str):
        raise PoolError(f"{path / 'pool.json'}: 'env' is not an env name (damaged pool)")
    config, record = _pool_config(path, info), path / "pool.json"
    policies = tuple(load_listed_policy(path, p, record, config, device) for p in entries)
    seeds = [p.seed for p in policies]
    if len(set(seeds)) != len(seeds):
        raise PoolError(f"{record}: lists seed {max(seeds, key=seeds.count)} more than once (edited pool)")
    envs = {p.config.env for p in policies}
    if envs - {info["env"]}:
        raise PoolError(
            f"{path / 'pool.json'}: says env {info['env']!r}, but its policies were trained on "
            f"{', '.join(sorted(envs))} (damaged or edited pool)"
        )
    return Pool(path, info, policies)
