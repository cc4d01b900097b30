"""What a :class:`~ers_deep.train.ippo.Learner` settles from its ``TrainConfig`` and env before the first update:
the collection mode and the env it steps (``collect_mode``, ``learner_env``; for the net, ``net_collect_mode``),
the layout of the update's minibatches (``acting_share``, ``minibatch_unit``, ``max_resets_per_rollout``) and
the inductor settings its step and update compile under (``compile_settings``), its CPU product switches, entered
around its collection and update and left as found (``ProductSwitches``); the refusal of an exact-mode run
at a discount other than its game's (``check_exact_discount``). ``ers_deep.train.ippo`` re-exports every name."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from ers_deep.accel import resolve_mode
from ers_deep.envs.base import BatchedEnv
from ers_deep.nets import ActorCritic
from ers_deep.nets.switches import ProductSwitches
from ers_deep.train.config import TrainConfig, make_env
from ers_deep.train.ppo import MinibatchUnit
from ers_exact.util.options import UsageError

__all__ = [
    "CPU_COMPILE_MIN_STEPS",
    "ProductSwitches",
    "acting_share",
    "check_exact_discount",
    "collect_mode",
    "compile_settings",
    "learner_env",
    "max_resets_per_rollout",
    "minibatch_unit",
    "net_collect_mode",
]

#: joint steps a CPU run must take before ``collect_mode="auto"`` compiles its step (compilation takes 10-40 s
#: on the 2-core machine; a compiled step saves at most a few ms per joint step at the batches where it wins)
CPU_COMPILE_MIN_STEPS = 20_000


def collect_mode(cfg: TrainConfig, env: BatchedEnv) -> str:
    """The collection mode of ``cfg`` on ``env``: ``resolve_mode``'s, except that ``"auto"`` does not compile a
    CPU run of fewer than ``CPU_COMPILE_MIN_STEPS`` joint steps (the tests, short analyses)."""
    mode = resolve_mode(cfg.collect_mode, env)
    short = cfg.num_updates * cfg.num_steps < CPU_COMPILE_MIN_STEPS
    if cfg.collect_mode == "auto" and mode == "compile" and env.device.type == "cpu" and short:
        return "eager"
    return mode


def net_collect_mode(cfg: TrainConfig, mode: str, net: ActorCritic) -> str:
    """The collection mode ``mode`` (``collect_mode``'s) for ``net``: a net that is not ``traceable`` (host syncs
    in its forward: other-play with learned symmetries off CUDA, ``OtherPlayNet(grouped=False)``) cannot run inside a captured CUDA graph, so ``"auto"``'s
    graph mode drops the capture (``"compile-graph"`` -> ``"compile"``: the env step still compiles) and an
    explicit graph mode is refused."""
    if not mode.endswith("graph") or net.traceable:
        return mode
    if cfg.collect_mode == "auto":
        return "compile" if mode == "compile-graph" else "eager"
    raise UsageError(
        f"collect_mode={mode!r} captures the policy's steps, but {type(net).__name__}'s forward synchronises "
        "with the host (other-play with learned symmetries, not grouped): use 'auto' or 'compile'"
    )


def max_resets_per_rollout(env: BatchedEnv, num_steps: int) -> int | None:
    """The most resets after t = 0 a rollout sequence of ``num_steps`` steps can hold when every episode of
    ``env`` lasts at least ``env.min_episode_steps`` steps (Overcooked V2: 400; 256-step sequences: 1);
    ``None`` for envs without that attribute."""
    least = getattr(env, "min_episode_steps", None)
    return None if least is None else max(0, (num_steps - 2) // int(least) + 1)


def acting_share(cfg: TrainConfig, env: BatchedEnv, net: ActorCritic) -> int | None:
    """P when the update can run the actor head on acting entries only (``TrainConfig.acting_rows``): the env
    has exactly one acting seat of P per step (``one_actor_per_step``: Hanabi), P divides the rollout's steps,
    the net has ``forward_rows`` and the advantages are sampled; minibatches then hold turn streams
    (``ppo.turn_streams``: each acts at T / P of its steps) or whole games (``minibatch_unit``), T M / P
    acting entries either way. None otherwise (minibatches of actors, the head on every entry)."""
    P = env.num_agents
    ok = cfg.acting_rows and getattr(env, "one_actor_per_step", False) and net.takes_rows and P > 1
    ok = ok and cfg.num_steps % P == 0 and cfg.minibatches <= cfg.num_envs
    return P if ok and cfg.advantage == "gae" else None


def minibatch_unit(cfg: TrainConfig, share: int | None, net: ActorCritic) -> MinibatchUnit:
    """What the update's minibatches are random groups of: ``"actors"`` (each actor's whole sequence) without
    an acting share; with one, ``"turn-streams"`` (``ppo.turn_streams``) where ``cfg.turn_streams`` and the net
    carries no state between steps, else ``"games"`` (both seats' sequences of the games drawn): a carried
    state, such as other-play's actor id and episodes started (which fix its per-episode draws), belongs to
    one seat throughout the rollout, and a turn stream changes seat where a game starts."""
    if share is None:
        return "actors"
    stateless = not net.initial_state(1).tensors()
    return "turn-streams" if cfg.turn_streams and stateless else "games"


def learner_env(cfg: TrainConfig) -> tuple[BatchedEnv, str]:
    """The env of S x B games and the collection mode; branch-free when the collection compiles or captures
    its step (the reference collections then step the same style of env)."""
    S, B = len(cfg.seeds), cfg.num_envs
    env = make_env(cfg, S * B, seed=cfg.seeds[0])
    mode = collect_mode(cfg, env)
    if mode != "eager":
        env = make_env(cfg, S * B, seed=cfg.seeds[0], branch_free=True)
    return env, mode


def compile_settings(cfg: TrainConfig) -> contextlib.AbstractContextManager[Any]:
    """The inductor settings under which the learner's step and update compile (lazily, at their first call
    inside ``train_step``): ``TrainConfig.autotune_pointwise`` and, on CUDA, ``TrainConfig.gemm_autotune``. A
    no-op at torch's defaults."""
    patch: dict[str, Any] = {}
    if not cfg.autotune_pointwise:
        patch["triton.autotune_pointwise"] = False
    if cfg.gemm_autotune and torch.device(cfg.device).type == "cuda":
        patch |= {"max_autotune_gemm": True, "max_autotune_gemm_backends": "ATEN,TRITON"}
    if not patch:
        return contextlib.nullcontext()
    import torch._inductor.config as inductor

    return inductor.patch(patch)


def check_exact_discount(cfg: TrainConfig, game: Any) -> None:
    """Exact mode's actor term is Q_pi at the game's own discount; a different ``cfg.gamma`` would train its
    critic (GAE) at another gamma than its actor, so it is refused."""
    if cfg.advantage == "exact" and cfg.gamma is not None and game is not None and cfg.gamma != game.discount:
        raise UsageError(
            f"TrainConfig.gamma = {cfg.gamma} with advantage = 'exact': the exact advantages are Q_pi at the "
            f"game's discount {game.discount}; give gamma = None (the game's) or {game.discount}"
        )
