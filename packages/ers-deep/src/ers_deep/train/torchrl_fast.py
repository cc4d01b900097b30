"""``FastCollector``: the fast collection (``ers_deep.train.collect``) behind TorchRL's collector interface.

A ``torchrl.collectors.BaseCollector`` whose batches are TensorDicts of batch size ``[T, S*B]`` (steps, games)
built from one ``FastCollection.collect`` (compiled / CUDA-graph-captured on CUDA), with the entries of the
reference path ``ers_deep.train.collector`` (``torchrl.collectors.Collector`` over ``LearnerEnv``):

* ``("agents", "observation")`` [T, S*B, P, *O], ``("agents", "action_mask")`` [T, S*B, P, A] (the policy's
  mask), ``("agents", "mask")`` [T, S*B, P, 1] (the move is played), ``("agents", "action")``,
  ``("agents", "logp")``, ``("agents", "state_value")`` [T, S*B, P], ``"is_init"`` [T, S*B, 1];
* ``("next", "done")`` / ``("next", "terminated")`` [T, S*B, 1], ``("next", "agents", "reward")``
  [T, S*B, P, 1] (the training reward: team + annealed shaped).

So TorchRL's losses, advantage modules and replay buffers take it as they take the reference collector's
batches (which are [S*B, T]: transpose one to compare). The learner itself reads the ``Rollout`` directly
(``rollout`` after each batch): one collection path, two views. ``state_dict`` / ``load_state_dict`` hold the
env state, both generators and the runner state (exact resume, as the learner's checkpoints).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tensordict import TensorDict, TensorDictBase
from torch import Tensor
from torchrl.collectors import BaseCollector

from ers_deep.train.collect import FastCollection, Rollout, RunnerState


def rollout_tensordict(ro: Rollout, P: int) -> TensorDict:
    """A ``Rollout`` [S, T, N, ...] as the [T, S*B] TensorDict of the module docstring (N = B x P)."""
    S, T, N = ro.action.shape
    B = N // P

    def games(x: Tensor) -> Tensor:  # [S, T, N, *r] -> [T, S*B, P, *r]
        return x.transpose(0, 1).reshape(T, S * B, P, *x.shape[3:])

    def per_game(x: Tensor) -> Tensor:  # [S, T, N] -> [T, S*B, 1] (the entry of agent 0: equal for all)
        return games(x)[..., :1]

    done = per_game(ro.done)
    agents = {
        "observation": games(ro.obs),
        "action_mask": games(ro.legal),
        "mask": games(ro.acting)[..., None],
        "action": games(ro.action),
        "logp": games(ro.logp),
        "state_value": games(ro.value),
    }
    nxt = {"done": done, "terminated": done.clone(), "agents": {"reward": games(ro.reward)[..., None]}}
    return TensorDict(
        {"agents": agents, "is_init": per_game(ro.first), "next": nxt},
        batch_size=[T, S * B],
        device=ro.obs.device,
    )


class FastCollector(BaseCollector):
    """TorchRL collector over a ``FastCollection`` (the learner's ``fast``); ``total_batches`` < 0: endless.
    ``shaped_coef`` (a callable of the batch index; None: always 1) weights Overcooked V2's shaped reward in
    the batches' rewards, e.g. ``lambda i: ippo.shaped_coef(config, i * config.steps_per_update)``, the
    learner's annealing."""

    def __init__(
        self,
        collection: FastCollection,
        state: RunnerState,
        total_batches: int = -1,
        shaped_coef: Callable[[int], float] | None = None,
    ) -> None:
        super().__init__()
        self.collection, self.runner, self.total_batches = collection, state, int(total_batches)
        self.shaped_coef = shaped_coef
        self.rollout: Rollout | None = None
        self.stats: dict[str, Tensor] = {}
        self.batches = 0
        steps = collection.fast.steps
        self.requested_frames_per_batch = steps * collection.env.batch_size
        self.total_frames = self.total_batches * self.requested_frames_per_batch
        self.trajs_per_batch = None
        self._iterator = None

    def iterator(self) -> Iterator[TensorDictBase]:
        while self.total_batches < 0 or self.batches < self.total_batches:
            if self.pre_collect_hook is not None:
                self.pre_collect_hook()
            coef = 1.0 if self.shaped_coef is None else float(self.shaped_coef(self.batches))
            self.rollout, self.runner, self.stats = self.collection.collect(self.runner, coef)
            self.batches += 1
            td = rollout_tensordict(self.rollout, self.collection.P)
            if self.post_collect_hook is not None:
                self.post_collect_hook(td)
            yield td

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Re-seed the env's generator (its seeding rule) and restart every game."""
        self.collection.env.reset(seed=seed)
        self.collection.fast.restart()
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
