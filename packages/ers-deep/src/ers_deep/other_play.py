"""Other-play training (the paper's eq. other-play) of a pool of seeds: IPPO on ``OtherPlayNet``.

    OP^Phi(pi) = E_{phi ~ U(Phi)} J(pi, phi(pi)),    phi(pi)(a | o) = pi(phi_A(a) | phi_O(o))

Phi is a set of symmetries phi = (phi_O, phi_A) with the identity included (``op_symmetries``):

* ``"none"``: Phi = {identity}; OP is then self-play, bit for bit (tests/deep/test_other_play.py);
* ``"mdp"``: the env's Dec-POMDP symmetries (``ers_deep.crossplay.env_symmetries``: the colors! Hanabi colour
  permutations, the Overcooked V2 flip with the identity, a tabular game's Phi_MDP from ers-exact); {identity}
  where the env exposes none (a layout without the flip, a tabular game whose Phi_MDP is trivial);
* a discovery output (``ers-deep discover``'s folder or its discovery.json): Phi = {identity} plus the l
  learned ER symmetries (``ers_deep.discovery.load_symmetries``); on a tabular game also ers-exact's
  discovery result (``ers-exact discover GAME --json`` saved as FOLDER/discovery.json): Phi = {identity} plus
  its exact transformations, each element once (as ``ers_exact.zsc.discovery.learned_phi``), each acting on
  pi as ers-exact's ``apply_to_policy(phi, pi)`` (``ers_deep.discovery.exact_symmetries_for``).

As in the official code, every actor (agent of a game) draws its own phi uniformly from Phi at the start of
each of its episodes (``ers_deep.nets.other_play``), so the learner's objective and training return are

    E_{phi_1, phi_2 ~ U(Phi)} J(phi_1(pi), phi_2(pi)),

which, for two agents, equals OP^Phi(pi) above when Phi is a group (J is invariant under applying one
symmetry to every agent: J(phi_1(pi), phi_2(pi)) = J(pi, phi_1^-1 phi_2(pi))); for a learned set it is its
per-agent reading. With n > 2 agents every seat draws its own phi_i, E J(phi_1(pi)^1, ..., phi_n(pi)^n) (the
official code's reading), which is not ers-exact's n-agent OP^Phi (``ers_exact.model.objectives``: the mean of
XP(pi, phi(pi)) over the 2^n - 2 seat assignments of two policies) even over a group: -0.148 against -0.222 on
a random 3-agent game with a planted symmetry (``tests/deep/test_op_exact_symmetries.py``).

``train_op_pool(config, source, out)`` trains the seeds of ``config`` together into a pool with exactly
``ers_deep.pools.train_pool``'s layout; the frozen ``policies/seed-S.safetensors`` are the trainable pi (the
base net, not pi played through Phi), so ``ers-deep crossplay`` and ``discover`` take OP pools like any other.
pool.json adds ``"other_play": {"source", "path", "symmetries", "discovery_sha256"}`` and, per policy:

* ``self_play``: J(pi, pi), plain self-play of the frozen pi over ``eval_games`` games (as ``train_pool``);
* ``other_play``: the OP objective E J(phi_1(pi), phi_2(pi)) over the same ``eval_games`` deals, each seat
  drawing its own phi per game (equal to ``self_play`` when Phi = {identity});
* ``final_return``: the learner's training return (mean of the last 10 updates), an on-policy estimate of that
  same OP objective during training.

The run records its symmetry source in ``POOL/run/other_play.json`` before training (once the learner has
taken the config: a refused config leaves no record, which would mark the folder as an other-play run);
``resume_run=True``
rebuilds Phi from it (a discovery output must be unchanged: names and discovery.json's SHA-256 are checked)
and continues exactly (``ers_deep.train.run``).
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from ers_deep.crossplay import env_symmetries
from ers_deep.discovery import exact_symmetries_for, symmetries_for
from ers_deep.envs.symmetry import IndexSymmetry, Symmetry
from ers_deep.nets import ActorCritic, build_net
from ers_deep.nets.other_play import OtherPlayNet
from ers_deep.pools import Policy, PoolError, pool_eval_games, train_pool, train_pool_ray
from ers_deep.train.checkpoint import atomic_write_bytes
from ers_deep.train.config import TrainConfig, make_env
from ers_deep.train.evaluate import Agent, play
from ers_deep.train.ippo import Learner
from ers_deep.train.run import read_run_config
from ers_exact.interface import file_sha256
from ers_exact.util.options import UsageError
from ers_exact.util.output import dumps

__all__ = [
    "RECORD",
    "SOURCES",
    "identity_symmetry",
    "op_net",
    "op_record",
    "op_symmetries",
    "train_op_pool",
    "train_op_pool_ray",
]

#: the named symmetry sources (anything else is a discovery output path)
SOURCES = ("none", "mdp")
#: the run's record of its symmetry source, inside POOL/run/
RECORD = "other_play.json"


def identity_symmetry(config: TrainConfig) -> IndexSymmetry:
    """The identity of the env of ``config`` as an ``IndexSymmetry`` (on ``config.device``)."""
    env = make_env(config, 1, seed=0)
    n, A = math.prod(env.obs_shape), env.num_actions
    return IndexSymmetry(torch.arange(n), torch.arange(A), "identity", env.obs_shape).to(config.device)


def _discovery_folder(source: str) -> Path:
    path = Path(source)
    folder = path.parent if path.suffix == ".json" and path.is_file() else path
    if not folder.is_dir():
        raise PoolError(
            f"symmetries {source!r}: choose none, mdp or a discovery output folder (no such folder)"
        )
    return folder


def _learned(config: TrainConfig, source: str) -> list[Symmetry]:
    """{identity} plus the symmetries of a discovery output (learned by ers-deep, or exact ones of an
    ers-exact result: each element once), checked against the env of ``config``."""
    folder, dev = _discovery_folder(source), torch.device(config.device)
    identity = identity_symmetry(config)
    exact = exact_symmetries_for(config, folder)
    if exact is not None:
        out: list[IndexSymmetry] = [identity]
        for s in (e.to(dev) for e in exact):
            if not any(_same_map(s, t) for t in out):
                out.append(s)
        return list[Symmetry](out)
    syms = symmetries_for(config, folder)
    learned = [replace(s, obs_map=s.obs_map.to(dev), action_map=s.action_map.to(dev)) for s in syms]
    return [identity, *learned]


def _same_map(a: IndexSymmetry, b: IndexSymmetry) -> bool:
    return torch.equal(a.obs_index, b.obs_index) and torch.equal(a.action_index, b.action_index)


def op_symmetries(config: TrainConfig, source: str) -> tuple[Symmetry, ...]:
    """Phi for other-play on the env of ``config`` (identity first; module docstring): ``source`` is
    ``"none"`` (identity only), ``"mdp"`` (the env's Dec-POMDP symmetries; identity only when it has none) or
    a discovery output folder / its discovery.json (identity plus the learned symmetries).
    ``PoolError`` naming ``source`` when it is none of these."""
    if source == "none":
        return (identity_symmetry(config),)
    if source == "mdp":
        found = env_symmetries(config)
        if len(found) <= 1:
            return (identity_symmetry(config),)
        return tuple(s.to(config.device) for s in found)
    return tuple(_learned(config, source))


def op_record(config: TrainConfig, source: str, symmetries: tuple[Symmetry, ...]) -> dict[str, Any]:
    """What pool.json and the run record about Phi: the source as given, the discovery folder it resolved to
    (absolute) and discovery.json's SHA-256 (None for none/mdp), the symmetries' names in draw order."""
    folder = None if source in SOURCES else _discovery_folder(source).absolute()
    return {
        "source": source,
        "path": None if folder is None else str(folder),
        "discovery_sha256": None if folder is None else file_sha256(folder / "discovery.json"),
        "symmetries": [s.name for s in symmetries],
    }


def op_net(config: TrainConfig, symmetries: tuple[Symmetry, ...]) -> OtherPlayNet:
    """pi (``config.net`` over ``config.seeds``, initialised as a plain ``Learner``'s net) played through a
    per-actor, per-episode draw from ``symmetries``; on CUDA learned symmetries run ``grouped`` (no host sync, so
    the update compiles and the collection and update are captured as self-play's; ``nets.grouped``)."""
    env = make_env(config, 1, seed=0)
    base = build_net(config.net, config.seeds, env.obs_shape, env.num_actions)
    return OtherPlayNet(base, symmetries, grouped=_on_cuda(config.device))


def _on_cuda(device: str | torch.device) -> bool:
    return torch.device(device).type == "cuda"


def _base(net: ActorCritic) -> ActorCritic:
    if not isinstance(net, OtherPlayNet):
        raise TypeError(f"an other-play learner holds an OtherPlayNet, not {type(net).__name__}")
    return net.base


def _op_score(
    config: TrainConfig, symmetries: tuple[Symmetry, ...], games: int, policy: Policy
) -> dict[str, Any]:
    """``other_play``: E J(phi_1(pi), phi_2(pi)) of a frozen pi, seat i drawing with salt i, on the deals of
    its self-play score (seed 10,000 + seed, as ``train_pool``)."""
    P = make_env(config, 1, seed=0).num_agents
    dev = next(policy.net.parameters()).device
    agents = [
        Agent(OtherPlayNet(policy.net, symmetries, salt=i, grouped=_on_cuda(dev)).to(dev)) for i in range(P)
    ]
    return {"other_play": play(agents, policy.config, games, seed=10_000 + policy.seed)}


def _run_config(out: Path) -> TrainConfig:
    """The config of the run to resume (``ers_deep.train.run.read_run_config``: a damaged config.json is one
    line naming it)."""
    if not (out / "run" / "config.json").is_file():
        raise PoolError(f"{out}: no other-play run to resume (run/config.json missing)")
    return read_run_config(out / "run")[1]


def _recorded(out: Path, source: str | None) -> dict[str, Any]:
    """The run's symmetry record (pool.json's when the pool was finished, else run/other_play.json)."""
    rec: dict[str, Any] | None = None
    for path, key in ((out / "pool.json", "other_play"), (out / "run" / RECORD, None)):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):  # missing, not UTF-8, not JSON
            continue
        rec = (data.get(key) if isinstance(data, dict) else None) if key else data
        if rec is not None:
            break
    if rec is None and (out / "run" / RECORD).is_file():
        raise PoolError(f"{out / 'run' / RECORD}: not an other-play record (not UTF-8 JSON, or damaged)")
    if rec is None:
        raise PoolError(f"{out}: not an other-play pool (no {RECORD} in its run); resume it with train-sp")
    fields: dict[str, type | tuple[type, ...]] = {
        "source": str,
        "path": (str, type(None)),
        "symmetries": list,
        "discovery_sha256": (str, type(None)),
    }
    if not (isinstance(rec, dict) and all(isinstance(rec.get(k), t) for k, t in fields.items())):
        raise PoolError(f"{path}: not an other-play record (no symmetry source, path, names and digest)")
    if source is not None and not _same_source(source, rec):
        raise PoolError(
            f"--symmetries {source}: {out} was trained with symmetries {rec['source']!r}; --resume keeps the "
            "run's symmetries (leave --symmetries out, or train a new pool with --out)"
        )
    return rec


def _same_source(source: str, rec: dict[str, Any]) -> bool:
    """``source`` names the run's recorded Phi: the same none/mdp, or the same discovery folder however it is
    written (a relative path, its discovery.json, a trailing slash)."""
    if source == rec["source"]:
        return True
    if source in SOURCES or rec.get("path") is None:
        return False
    try:
        return _discovery_folder(source).resolve() == Path(rec["path"]).resolve()
    except (OSError, ValueError):
        return False


def train_op_pool(
    config: TrainConfig | None,
    source: str | None,
    out: str | os.PathLike[str],
    *,
    resume_run: bool = False,
    eval_games: int | None = None,
    progress: bool | None = None,
    threads: int | None = None,
    max_updates: int | None = None,
) -> dict[str, Any]:
    """Other-play training of the seeds of ``config`` with Phi = ``op_symmetries(config, source)`` into the
    pool ``out`` (module docstring); returns pool.json. ``resume_run=True`` continues the run in ``out``
    (``config`` and ``source`` may be None: both come from the run's record; a ``source`` given must match).
    ``eval_games``: games per policy of both scores (unset: a resumed pool's own, ``pool_eval_games``)."""
    out = Path(out)
    games = pool_eval_games(out, eval_games, resume_run)  # train_pool resolves eval_games (as given) alike
    if resume_run:
        cfg = _run_config(out)
        rec = _recorded(out, source)
        symmetries = op_symmetries(cfg, rec["path"] or rec["source"])
        now = op_record(cfg, rec["path"] or rec["source"], symmetries)
        if (now["symmetries"], now["discovery_sha256"]) != (rec["symmetries"], rec["discovery_sha256"]):
            raise PoolError(f"{out}: its symmetry source {rec['source']!r} changed since the run started")
        rec = {**now, "source": rec["source"]}
    else:
        if config is None or source is None:
            raise UsageError("train_op_pool: give a config and a symmetry source (or resume_run=True)")
        cfg = config
        if (out / "pool.json").exists() or (out / "run" / "config.json").exists():
            raise PoolError(
                f"{out} already holds a pool; continue it with --resume, pass --force to replace it or choose "
                "another --out"
            )
        symmetries = op_symmetries(cfg, source)
        rec = op_record(cfg, source, symmetries)
    if cfg.advantage == "exact" and len(symmetries) > 1:
        raise UsageError("advantage 'exact' is self-play's all-actions update: use gae for other-play")

    def make(c: TrainConfig) -> Learner:
        learner = Learner(c, net=op_net(c, symmetries))
        if not resume_run:  # once the learner takes the config: a refused one leaves no record behind
            (out / "run").mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(out / "run" / RECORD, dumps(rec, indent=2).encode())
        return learner

    return train_pool(
        cfg,
        out,
        resume_run=resume_run,
        eval_games=eval_games,
        progress=progress,
        threads=threads,
        max_updates=max_updates,
        make_learner=make,
        policy_net=_base,
        score=functools.partial(_op_score, cfg, symmetries, games),
        record={"other_play": rec},
    )


def _train_op_seed(config: TrainConfig, out: str, *, source: str, **kwargs: Any) -> dict[str, Any]:
    """``train_pool``'s signature for one Ray task (``train_pool_ray(..., trainer=...)``)."""
    return train_op_pool(config, source, out, **kwargs)


def train_op_pool_ray(
    config: TrainConfig,
    source: str,
    out: str | os.PathLike[str],
    address: str,
    *,
    eval_games: int | None = None,
    threads: int | None = None,
    max_updates: int | None = None,
    resume_run: bool = False,
) -> dict[str, Any]:
    """``train_op_pool`` as one Ray task per seed (``ers_deep.pools.train_pool_ray``); a discovery source
    must be readable by the workers at its absolute path. Returns the gathered pool.json. ``resume_run``: continue
    the killed Ray pool ``out`` (``config`` and ``source`` as ``read_ray_run`` gives them: ``symmetries``)."""
    symmetries = op_symmetries(config, source)  # refuses a bad source before any task starts
    path = op_record(config, source, symmetries)["path"] or source
    return train_pool_ray(
        config,
        out,
        address,
        eval_games=eval_games,
        threads=threads,
        max_updates=max_updates,
        trainer=functools.partial(_train_op_seed, source=path),
        resume_run=resume_run,
        record={"symmetries": path},
    )
