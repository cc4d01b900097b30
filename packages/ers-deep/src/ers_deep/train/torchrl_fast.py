"""``FastCollector``: the fast collection (``ers_deep.train.collect``) behind TorchRL's collector interface.

A ``torchrl.collectors.BaseCollector`` whose batches are TensorDicts of batch size ``[S*B, T]`` (games, steps;
dims named ``[None, "time"]``, TorchRL's collector layout) built from one ``FastCollection.collect``
(compiled / CUDA-graph-captured on CUDA), with the entries and layout of the reference path
``ers_deep.train.collector`` (``torchrl.collectors.Collector`` over ``LearnerEnv``):

* ``("agents", "observation")`` [S*B, T, P, *O], ``("agents", "action_mask")`` [S*B, T, P, A] (the policy's
  mask), ``("agents", "mask")`` [S*B, T, P, 1] (the move is played), ``("agents", "action")``,
  ``("agents", "logp")`` [S*B, T, P], ``("agents", "state_value")`` [S*B, T, P, 1] (a ``ValueOperator``'s
  shape), ``"is_init"`` [S*B, T, 1];
* ``("next", "done")`` / ``("next", "terminated")`` [S*B, T, 1], ``("next", "agents", "reward")``
  [S*B, T, P, 1] (the training reward: team + annealed shaped);
* beyond the reference (whose ``Collector`` runs with ``compact_obs=True``): ``("next", "agents",
  "state_value")`` [S*B, T, P, 1], the critic at the next step (at the last step the learner's bootstrap
  value of the games as they stand), and, unless ``compact_obs``, ``("next", "agents", "observation")``
  (at the last step the observation the next batch starts from). Where a game ended, both are the fresh
  game's (a branch-free env deals it inside its step): ``terminated`` masks them out.

So TorchRL's losses, advantage modules (time is the dim named ``"time"``; ``GAE`` with ``value_network=None``
reads both values, with a feed-forward value network the next observation, and gives ers's ``ppo.gae``) and
replay buffers (an ``ndim=2`` storage holds ``[batch, time]``; ``SliceSampler`` slices along time) take it
as they take the reference collector's batches. Each batch is fresh memory: in graph modes the rollout's tensors are the capture's static
buffers, which the next batch rewrites, so the batch copies them out. The learner itself reads the ``Rollout``
directly (``rollout`` after each batch): one collection path, two views. ``state_dict`` / ``load_state_dict``
hold the env state, both generators and the runner state (exact resume, as the learner's checkpoints).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torch import Tensor, nn
from torchrl.collectors import BaseCollector

from ers_deep.train.collect import FastCollection, Rollout, RunnerState


def rollout_tensordict(ro: Rollout, P: int, next_obs: Tensor | None = None) -> TensorDict:
    """A ``Rollout`` [S, T, N, ...] as the [S*B, T] TensorDict of the module docstring (N = B x P), in memory
    of its own (never a view of the rollout's buffers). ``next_obs`` [S*B, P, *O], the observation after the
    last step, adds ``("next", "agents", "observation")`` (the next step's observation; None: left out)."""
    S, T, N = ro.action.shape
    B = N // P

    def games(x: Tensor) -> Tensor:  # [S, T, N, *r] -> [S*B, T, P, *r], copied
        r = x.shape[3:]
        moved = x.reshape(S, T, B, P, *r).transpose(1, 2)
        return moved.clone(memory_format=torch.contiguous_format).view(S * B, T, P, *r)

    def per_game(x: Tensor) -> Tensor:  # [S, T, N] -> [S*B, T, 1] (the entry of agent 0: equal for all)
        return games(x[..., None])[..., 0, :].clone()

    done = per_game(ro.done)
    agents = {
        "observation": games(ro.obs),
        "action_mask": games(ro.legal),
        "mask": games(ro.acting)[..., None],
        "action": games(ro.action),
        "logp": games(ro.logp),
        "state_value": games(ro.value)[..., None],
    }
    next_value = torch.cat([ro.value[:, 1:], ro.last_value[:, None]], 1)  # V(s_{t+1}); V(s_T): the bootstrap
    next_agents = {"reward": games(ro.reward)[..., None], "state_value": games(next_value)[..., None]}
    if next_obs is not None:
        last = next_obs.reshape(S * B, 1, P, *next_obs.shape[2:])
        next_agents["observation"] = torch.cat([agents["observation"][:, 1:], last.to(ro.obs.dtype)], 1)
    nxt = {"done": done, "terminated": done.clone(), "agents": next_agents}
    td = TensorDict(
        {"agents": agents, "is_init": per_game(ro.first), "next": nxt},
        batch_size=[S * B, T],
        device=ro.obs.device,
    )
    return td.refine_names(None, "time")


class FastCollector(BaseCollector):
    """TorchRL collector over a ``FastCollection`` (the learner's ``fast``); ``total_batches`` < 0: endless
    (``total_frames`` -1, as TorchRL's). Or ``total_frames``, as TorchRL's ``Collector``: frames are env steps
    (games x steps, each holding the P agents' entries), and it stops after the first batch that reaches
    ``total_frames`` (rounded up to whole batches of ``frames_per_batch``). ``shaped_coef`` (a callable of the batch index; None: always 1)
    weights Overcooked V2's shaped reward in the batches' rewards, e.g.
    ``lambda i: ippo.shaped_coef(config, i * config.steps_per_update)``, the learner's annealing.
    ``compact_obs`` (as TorchRL's ``Collector``): leave ``("next", "agents", "observation")`` out.
    ``episode_stats`` holds the ended-episode statistics of the last batch (``stats()`` is TorchRL's
    progress snapshot). The policy is the collection's net itself, so ``update_policy_weights_()`` has
    nothing to send; given weights (a module or a state dict) are copied into the net."""

    def __init__(
        self,
        collection: FastCollection,
        state: RunnerState,
        total_batches: int = -1,
        shaped_coef: Callable[[int], float] | None = None,
        compact_obs: bool = False,
        *,
        total_frames: int | None = None,
    ) -> None:
        super().__init__()
        self.collection, self.runner, self.total_batches = collection, state, int(total_batches)
        self.shaped_coef, self.compact_obs = shaped_coef, bool(compact_obs)
        self.rollout: Rollout | None = None
        self.episode_stats: dict[str, Tensor] = {}
        self.batches = 0
        self.requested_frames_per_batch = frames = collection.fast.steps * collection.env.batch_size
        if total_frames is not None:  # TorchRL's budget: whole batches until at least total_frames
            if total_batches != -1:
                raise ValueError("FastCollector: give total_batches or total_frames, not both")
            self.total_batches = -1 if total_frames < 0 else -(-int(total_frames) // frames)
        endless = self.total_batches < 0
        self.total_frames = -1 if endless else self.total_batches * frames
        if total_frames is not None and not endless:
            self.total_frames = int(total_frames)
        self.trajs_per_batch = None
        self._iterator = None

    @property
    def frames_per_batch(self) -> int:
        """Env steps per batch: ``num_steps`` x the env's games (S x B)."""
        return self.requested_frames_per_batch

    @property
    def _frames(self) -> int:  # read by BaseCollector.stats()
        return self.batches * self.requested_frames_per_batch

    @property
    def _iter(self) -> int:  # read by BaseCollector.stats(): the index of the last batch
        return self.batches - 1

    def iterator(self) -> Iterator[TensorDictBase]:
        while self.total_batches < 0 or self.batches < self.total_batches:
            if self.pre_collect_hook is not None:
                self.pre_collect_hook()
            coef = 1.0 if self.shaped_coef is None else float(self.shaped_coef(self.batches))
            self.rollout, self.runner, self.episode_stats = self.collection.collect(self.runner, coef)
            self.batches += 1
            next_obs = None if self.compact_obs else self.collection.fast.carry["obs"]
            td = rollout_tensordict(self.rollout, self.collection.P, next_obs)
            if self.post_collect_hook is not None:
                self.post_collect_hook(td)
            yield td

    def update_policy_weights_(
        self, policy_or_weights: nn.Module | Mapping[str, Tensor] | None = None, **kwargs: Any
    ) -> None:
        """Nothing to do for the collection's own net (None, or the net itself); other weights (a module, a
        state dict of the net's parameters or TorchRL's ``TensorDict.from_module(net)``) are copied into it, in
        place (a captured collection reads them)."""
        net = self.collection.net
        weights = kwargs.get("weights", kwargs.get("policy", policy_or_weights))
        if weights is None or weights is net:
            return
        if isinstance(weights, nn.Module):
            state = weights.state_dict()
        elif isinstance(weights, TensorDictBase):
            # from_module holds the non-persistent buffers too (derived tables, the int8 limbs), which a state
            # dict leaves out: the net keeps its own
            transient = {name for name, _ in net.named_buffers()} - set(net.state_dict())
            state = {k: v for k, v in weights.flatten_keys(".").items() if k not in transient}
        else:
            state = dict(weights)
        net.load_state_dict(state)

    def reset(self, index: Any = None, **kwargs: Any) -> None:
        """Start every game anew (TorchRL's ``Collector.reset()``: a new deal from the env's generator, not
        re-seeded; running returns and the net's state restarted; frame count kept). Partial resets
        (``index``) are not supported."""
        if index is not None:
            raise ValueError(
                "FastCollector.reset: partial resets (index) are not supported; reset every game"
            )
        self.collection.env.reset()
        self.collection.restart()
        self.runner = self.collection.state

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Re-seed the env's generator (its seeding rule) and restart every game (running returns zeroed)."""
        self.collection.env.reset(seed=seed)
        self.collection.restart()
        self.runner = self.collection.state
        return seed

    def state_dict(self) -> dict[str, Any]:
        env = self.collection.env
        return {
            "env": {k: v.clone() for k, v in vars(env.state).items()},
            "rng_env": env.generator.get_state(),
            "rng_policy": self.collection.fast.actor.generators[0].get_state(),
            "runner": {k: v.clone() for k, v in self.runner.tensors().items()},
            "batches": self.batches,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        env = self.collection.env
        env.state = type(env.state)(**state_dict["env"])
        env.generator.set_state(state_dict["rng_env"])
        self.collection.fast.actor.generators[0].set_state(state_dict["rng_policy"])
        self.runner = RunnerState.from_tensors(state_dict["runner"])
        self.collection.load(self.runner)
        self.batches = int(state_dict["batches"])

    def shutdown(
        self, timeout: float | None = None, close_env: bool = True, raise_on_error: bool = True
    ) -> None:
        """Nothing to release: the collection runs in this process."""
