"""TorchRL env of batched Overcooked V2 (``ers_deep.envs.torchrl_base.BatchedTorchRLEnv`` around
``OvercookedV2Env``).

Layout (one group ``"agents"`` holding the A agents):

* ``("agents", "observation")`` [B, A, V, V, C] float32: each agent's cropped grid observation;
* ``("agents", "action")`` [B, A] long: 0 right, 1 down, 2 left, 3 up, 4 stay, 5 interact;
* ``("agents", "reward")`` [B, A, 1] float32: the sparse (shared) reward;
* ``("agents", "shaped_reward")`` [B, A, 1] float32: each agent's shaped reward (in the observation, "next");
* root ``done`` / ``truncated`` [B, 1] bool (episodes end only by the time limit), ``terminated`` [B, 1]
  (always False).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchrl.data import TensorSpec, Unbounded

from ers_deep.envs.overcooked_v2.env import OvercookedStep, OvercookedV2Env
from ers_deep.envs.torchrl_base import BatchedTorchRLEnv


class OvercookedV2TorchRLEnv(BatchedTorchRLEnv):
    """TorchRL env of B Overcooked V2 games; keyword arguments are those of ``OvercookedV2Env``
    (``auto_reset`` is off: TorchRL resets through ``_reset``)."""

    env: OvercookedV2Env

    def __init__(
        self,
        layout: str = "grounded_coord_simple",
        batch_size: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            OvercookedV2Env(
                layout, batch_size=batch_size, device=device, seed=seed, auto_reset=False, **kwargs
            )
        )

    def _agent_obs_specs(self, B: int, P: int) -> dict[str, TensorSpec]:
        dev = self.device
        return {
            "observation": Unbounded(shape=(B, P, *self.env.obs_shape), dtype=torch.float32, device=dev),
            "shaped_reward": Unbounded(shape=(B, P, 1), dtype=torch.float32, device=dev),
        }

    def _done_keys(self) -> tuple[str, ...]:
        return ("done", "terminated", "truncated")

    def _done_entries(self, done: Tensor) -> dict[str, Tensor]:
        return {"done": done, "truncated": done.clone(), "terminated": torch.zeros_like(done)}

    def _pack(self, out: OvercookedStep) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        return {"observation": out.obs.float(), "shaped_reward": out.shaped_reward[..., None]}, {}

    def _partial_reset_output(self) -> OvercookedStep:
        B, A, dev = self.batch_size[0], self.env.A, self.device
        return OvercookedStep(
            self.env.observe(self.env.state),
            torch.zeros(B, device=dev),
            torch.zeros(B, A, device=dev),
            torch.zeros(B, dtype=torch.bool, device=dev),
        )
