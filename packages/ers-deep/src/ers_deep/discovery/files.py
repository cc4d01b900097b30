"""A discovery output's learned symmetries on disk: ``save_symmetries`` writes OUT/symmetries.safetensors,
``load_symmetries`` reads them back (hash-checked against discovery.json), ``symmetries_for`` also checks
they are of a given env (its game, observation encoding and shapes) for other-play and sp-max-reg.
``exact_symmetries_for`` reads a discovery result of ers-exact (``ers-exact discover GAME --json`` saved as
FOLDER/discovery.json: the same interface, its transformations exact permutations) as index maps of a
tabular env, each acting on policies as ers-exact's phi does."""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import Tensor

from ers_deep.discovery.net import LearnedSymmetry
from ers_deep.envs.overcooked_v2.layouts import LAYOUT_STRINGS
from ers_deep.envs.symmetry import IndexSymmetry
from ers_deep.envs.tabular import TabularEnv
from ers_deep.envs.tabular.symmetry import exact_symmetry
from ers_deep.nets.phi import ObsMap
from ers_deep.policies import Policy
from ers_deep.pools import PoolError
from ers_deep.train.checkpoint import atomic_write_bytes, checkpoint_bytes, digest, parse_checkpoint
from ers_deep.train.config import TrainConfig, make_env
from ers_exact.interface import DiscoveryResult, LearnedTransformation, Transformation
from ers_exact.util.options import UsageError
from ers_exact.util.output import read_json

__all__ = [
    "POLICIES_FILE",
    "check_run_policies",
    "exact_symmetries_for",
    "learned_game",
    "load_symmetries",
    "policy_record",
    "save_symmetries",
    "symmetries_for",
]

#: OUT/discovery-policies.json: which policies a discovery run trains on and holds out (names and digests)
POLICIES_FILE = "discovery-policies.json"


def _fingerprints(policies: Sequence[Policy]) -> list[list[str]]:
    return [[p.name, digest(p.net.state_dict())] for p in policies]


def policy_record(train_set: Sequence[Policy], test_set: Sequence[Policy]) -> dict[str, list[list[str]]]:
    """What OUT/discovery-policies.json records of a discovery run: the policies it trains on and holds out,
    each by its name and the SHA-256 of its parameters."""
    return {"trained_on": _fingerprints(train_set), "held_out": _fingerprints(test_set)}


def check_run_policies(out: Path, record: dict[str, list[list[str]]]) -> None:
    """Refuse to resume a discovery run with other policies than its OUT/discovery-policies.json records: it
    continues against the pool nets its checkpoints hold, so another ``--pool`` or ``--held-out`` would have
    mixed two pools (trained on the first, ranked and measured on the second; accepted before 2026-12-07).
    ``UsageError`` naming the role that changed; a run started before the record is not checked."""
    path = out / POLICIES_FILE
    if not path.is_file():
        return
    saved = read_json(path, "a discovery run's policies")
    changed = [k for k in record if saved.get(k) != record[k]]
    if changed:
        names = {k: [str(n) for n, _ in saved.get(k, [])] for k in changed}
        label = {"trained_on": "policies it trains on", "held_out": "held-out policies"}
        raise UsageError(
            f"{out}: --resume continues the discovery run against the policies it started with; "
            + "; ".join(f"the {label[k]} differ (the run's: {', '.join(v)})" for k, v in names.items())
            + " (give the run's --pool and --held-out, or start anew with --force)"
        )


def save_symmetries(out: Path, syms: list[LearnedSymmetry], meta: dict[str, Any]) -> tuple[Path, str]:
    """Write the kept phi (their phi_O weights and action maps) into OUT/symmetries.safetensors with ``meta``;
    the file and its SHA-256."""
    tensors: dict[str, Tensor] = {}
    for r, sym in enumerate(syms):
        tensors.update(sym.obs_map.tensors(f"phi/{r}/obs/"))
        tensors[f"phi/{r}/action_map"] = sym.action_map.cpu()
    data = checkpoint_bytes(tensors, {"kind": "symmetries", **meta})
    path = atomic_write_bytes(out / "symmetries.safetensors", data)
    return path, hashlib.sha256(data).hexdigest()  # of the bytes written, not read back


def _folder(path: str | os.PathLike[str]) -> Path:
    """A discovery output's folder, given it or its discovery.json."""
    path = Path(path)
    return path.parent if path.suffix == ".json" else path


def _result(folder: Path) -> DiscoveryResult:
    """The discovery result in FOLDER/discovery.json (``PoolError`` naming the file when there is none)."""
    if not (folder / "discovery.json").is_file():
        what = "a pool, not a discovery output" if (folder / "pool.json").is_file() else "no discovery.json"
        raise PoolError(f"{folder}: {what} (give the --out folder of an ers-deep discover run)")
    data = read_json(folder / "discovery.json", "a discovery result written by ers-deep discover")
    try:
        return DiscoveryResult.from_json(data)
    except (KeyError, TypeError, ValueError) as e:
        raise PoolError(
            f"{folder / 'discovery.json'}: not a discovery result ({type(e).__name__}: {e})"
        ) from None


def load_symmetries(path: str | os.PathLike[str]) -> list[LearnedSymmetry]:
    """The learned symmetries of a discovery output (its folder or its discovery.json), hash-checked: each
    checkpoint a regular file inside the folder (``LearnedTransformation.read_checkpoint``, as ``verify``; each
    file read and hashed once), of the symmetries kind, holding the maps its entry names (``PoolError`` /
    ``ArtifactError`` / ``CheckpointError`` naming the file otherwise; a discovery output may come from a
    stranger)."""
    folder = _folder(path)
    result = _result(folder)
    out: list[LearnedSymmetry] = []
    lift = None
    read: dict[tuple[str, str], tuple[Path, dict[str, Any], dict[str, Any]]] = {}  # every phi names one file
    for t in result.transformations:
        if not isinstance(t, LearnedTransformation):
            raise PoolError(f"{folder}/discovery.json holds exact transformations, not learned ones")
        if (t.checkpoint, t.sha256) not in read:  # verify's read: parsed, not read again
            file, data = t.read_checkpoint(folder)
            read[t.checkpoint, t.sha256] = (file, *parse_checkpoint(file, data))
        file, tensors, meta = read[t.checkpoint, t.sha256]
        env, shape = _symmetries_meta(file, meta)
        if lift is None and env not in ("hanabi", "overcooked-v2"):  # tabular: per-observation maps
            try:
                lift = TabularEnv(env.removeprefix("tabular:")).history_lift
            except (ValueError, OSError) as e:
                raise PoolError(f"{file}: its env {env!r} is no tabular game here ({e})") from None
        out.append(
            LearnedSymmetry(
                _obs_map(file, tensors, t.key), _action_map(file, tensors, t), t.name, shape, lift
            )
        )
    return out


def _symmetries_meta(file: Path, meta: dict[str, Any]) -> tuple[str, tuple[int, ...]]:
    """The env and observation shape a symmetries file records (``save_symmetries``), checked."""
    if meta.get("kind") != "symmetries":
        raise PoolError(f"{file}: not a symmetries file of ers-deep discover (kind {meta.get('kind')!r})")
    env, shape = meta.get("env"), meta.get("obs_shape")
    if not isinstance(env, str) or not (
        isinstance(shape, list) and all(type(n) is int and n > 0 for n in shape)
    ):
        raise PoolError(f"{file}: symmetries metadata lacks a valid 'env' and 'obs_shape' (damaged file)")
    return env, tuple(shape)


def _obs_map(file: Path, tensors: dict[str, Tensor], key: str) -> ObsMap:
    """The phi_O under ``key``/obs/, its tensors' shapes checked before any memory is given to it (``ObsMap``
    allocates its layers from the first weight's shape)."""
    prefix = key + "obs/"
    own = {k[len(prefix) :]: tuple(v.shape) for k, v in tensors.items() if k.startswith(prefix)}
    flag = own.pop("relu_output", ())
    w0 = own.get("weights.0", ())
    layers = sum(1 for k in own if k.startswith("weights."))
    c, n = (w0[0], w0[1]) if len(w0) == 3 else (0, 0)
    want = {f"{k}.{i}": s for i in range(layers) for k, s in (("weights", (c, n, n)), ("biases", (c, 1, n)))}
    if not layers or own != want or min(c, n) < 1 or math.prod(flag) != 1:
        raise PoolError(
            f"{file}: no observation map under {prefix!r} (its entry's key; damaged or foreign file)"
        )
    return ObsMap.from_tensors(tensors, prefix)


def _action_map(file: Path, tensors: dict[str, Tensor], t: LearnedTransformation) -> Tensor:
    """phi_A under ``t.key``: the permutation the entry records (``t.action_map``)."""
    a = tensors.get(t.key + "action_map")
    if a is None or a.dim() != 1 or a.dtype.is_floating_point or a.tolist() != list(t.action_map):
        raise PoolError(
            f"{file}: no action map {list(t.action_map)} under {t.key!r} (damaged or foreign file)"
        )
    return a.long()


def learned_game(folder: Path) -> str | None:
    """The game a discovery output names (None where its discovery.json names none it can be checked by:
    Overcooked outputs written before 2026-12-04 carried the Hanabi preset, not their layout)."""
    return _game_of(_recorded(folder))


def _game_of(recorded: dict[str, Any]) -> str | None:
    game = recorded.get("game")
    if not isinstance(game, str):
        return None
    env, _, layout = game.partition(":")
    return None if env == "overcooked-v2" and layout not in LAYOUT_STRINGS else game


def _recorded(folder: Path) -> dict[str, Any]:
    try:
        return read_json(folder / "discovery.json", "a discovery result")
    except (OSError, ValueError):
        return {}


def symmetries_for(config: TrainConfig, source: str | os.PathLike[str]) -> list[LearnedSymmetry]:
    """The learned symmetries of the discovery output ``source`` (its folder or discovery.json), checked to be
    of the env of ``config``: its game and every phi's observation shape and action count (``PoolError``
    naming ``source`` otherwise). On the CPU; callers move them."""
    folder = _folder(source)
    syms = load_symmetries(folder)
    recorded = _recorded(folder)
    game = _game_of(recorded)
    if game is not None and game != config.game:
        raise PoolError(f"symmetries {str(source)!r} were learned on {game}, not on {config.game}")
    key = (recorded.get("config") or {}).get("env_key")  # recorded since 2026-12-04
    if isinstance(key, list) and tuple(key) != config.env_key:
        raise PoolError(
            f"symmetries {str(source)!r} map the observations of {' '.join(map(str, key))}, not of "
            f"{' '.join(config.env_key)}"
        )
    env = make_env(config, 1, seed=0)
    for s in syms:
        if tuple(s.obs_shape) != tuple(env.obs_shape) or s.action_map.numel() != env.num_actions:
            raise PoolError(
                f"symmetries {str(source)!r}: {s.name} maps observations {tuple(s.obs_shape)} and "
                f"{s.action_map.numel()} actions, the env has {tuple(env.obs_shape)} and {env.num_actions}"
            )
    return syms


def exact_symmetries_for(config: TrainConfig, source: str | os.PathLike[str]) -> list[IndexSymmetry] | None:
    """The transformations of an ers-exact discovery result ``source`` (its folder or discovery.json) as index
    maps of the tabular env of ``config``, in the file's order, each acting on policies as ers-exact's
    ``apply_to_policy(phi, .)`` (``ers_deep.envs.tabular.symmetry.exact_symmetry``); None when the result
    holds learned transformations (ers-deep's: :func:`symmetries_for`). ``PoolError`` naming ``source`` when
    it mixes both, is of another game or env, or a transformation cannot act on the env's policies."""
    folder = _folder(source)
    result = _result(folder)
    exact = [t for t in result.transformations if isinstance(t, Transformation)]
    if not exact:
        return None
    if len(exact) != len(result.transformations):
        raise PoolError(f"symmetries {str(source)!r}: exact and learned transformations mixed in one result")
    if config.env_kind != "tabular":
        raise PoolError(f"symmetries {str(source)!r} are ers-exact transformations: tabular games only")
    env = make_env(config, 1, seed=0)
    assert isinstance(env, TabularEnv)
    if result.game != env.game.name:
        raise PoolError(f"symmetries {str(source)!r} were learned on {result.game}, not on {env.game.name}")
    try:
        return [exact_symmetry(env, phi) for phi in exact]
    except ValueError as e:
        raise PoolError(f"symmetries {str(source)!r}: {e}") from None
