"""TorchRL env of a tabular game (``ers_deep.envs.torchrl_base.BatchedTorchRLEnv`` around ``TabularEnv``).

Group ``"agents"``: ``observation`` [B, P, K] float32 (one-hot local history), ``action_mask`` [B, P, A] bool,
``action`` [B, P] long, ``reward`` [B, P, 1] (team reward); root ``done`` / ``terminated`` [B, 1].
"""

from __future__ import annotations

from os import PathLike

import torch
from torch import Tensor
from torchrl.data import Binary, TensorSpec

from ers_deep.envs.tabular.env import TabularEnv, TabularStep
from ers_deep.envs.torchrl_base import BatchedTorchRLEnv
from ers_exact.model.game import Game


class TabularTorchRLEnv(BatchedTorchRLEnv):
    """TorchRL env of B games of an ers-exact game; arguments as ``TabularEnv`` (``auto_reset`` off)."""

    env: TabularEnv

    def __init__(
        self,
        game: Game | str | PathLike[str] = "dectiger",
        batch_size: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = 0,
    ) -> None:
        super().__init__(TabularEnv(game, batch_size=batch_size, device=device, seed=seed, auto_reset=False))

    def _agent_obs_specs(self, B: int, P: int) -> dict[str, TensorSpec]:
        K, A, dev = self.env.obs_shape[0], self.env.num_actions, self.device
        return {
            "observation": Binary(n=K, shape=(B, P, K), dtype=torch.float32, device=dev),
            "action_mask": Binary(n=A, shape=(B, P, A), dtype=torch.bool, device=dev),
        }

    def _pack(self, out: TabularStep) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        return {"observation": out.obs, "action_mask": out.legal}, {}

    def _partial_reset_output(self) -> TabularStep:
        zeros = torch.zeros(self.batch_size[0], device=self.device)
        return TabularStep(self.env.observe(), self.env.legal_mask(), zeros, self.env.state.done.clone())
