"""TorchRL ``EnvBase`` around the batched Overcooked V2 env (natively batched: ``batch_size=[B]``).

Layout (TorchRL multi-agent convention, one group ``"agents"`` holding the A agents):

* ``("agents", "observation")`` [B, A, V, V, C] float32: each agent's cropped grid observation;
* ``("agents", "action")`` [B, A] long: 0 right, 1 down, 2 left, 3 up, 4 stay, 5 interact;
* ``("agents", "reward")`` [B, A, 1] float32: the sparse (shared) reward;
* ``("agents", "shaped_reward")`` [B, A, 1] float32: each agent's shaped reward (in the observation, "next");
* root ``done`` / ``truncated`` [B, 1] bool (episodes end only by the time limit), ``terminated`` [B, 1] (False).

Finished games are reset by TorchRL's ``_reset`` with a ``"_reset"`` mask (``step_and_maybe_reset``).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from ers_deep.envs.overcooked_v2 import NUM_ACTIONS, OvercookedStep, OvercookedV2Env

GROUP = "agents"


class OvercookedV2TorchRLEnv(EnvBase):
    """TorchRL env of B Overcooked V2 games; keyword arguments are those of ``OvercookedV2Env`` (``auto_reset``
    is off: TorchRL resets through ``_reset``)."""

    batch_locked = True

    def __init__(self, layout: str = "grounded_coord_simple", batch_size: int = 1,
                 device: str | torch.device = "cpu", seed: int | None = 0, **kwargs: object) -> None:
        super().__init__(device=device, batch_size=torch.Size([batch_size]))
        self.game = OvercookedV2Env(layout, batch_size=batch_size, device=device, seed=seed, auto_reset=False,
                                    **kwargs)  # type: ignore[arg-type]
        B, A, g, dev = batch_size, self.game.A, self.game, self.device
        obs_shape = (B, A, g.view_h, g.view_w, g.obs_channels)
        self.observation_spec = Composite(
            {GROUP: Composite(observation=Unbounded(shape=obs_shape, dtype=torch.float32, device=dev),
                              shaped_reward=Unbounded(shape=(B, A, 1), dtype=torch.float32, device=dev),
                              shape=(B, A), device=dev)}, shape=(B,), device=dev)
        self.action_spec = Composite(
            {GROUP: Composite(action=Categorical(NUM_ACTIONS, shape=(B, A), dtype=torch.long, device=dev),
                              shape=(B, A), device=dev)}, shape=(B,), device=dev)
        self.reward_spec = Composite(
            {GROUP: Composite(reward=Unbounded(shape=(B, A, 1), dtype=torch.float32, device=dev), shape=(B, A),
                              device=dev)}, shape=(B,), device=dev)
        self.done_spec = Composite(
            done=Categorical(2, shape=(B, 1), dtype=torch.bool, device=dev),
            terminated=Categorical(2, shape=(B, 1), dtype=torch.bool, device=dev),
            truncated=Categorical(2, shape=(B, 1), dtype=torch.bool, device=dev), shape=(B,), device=dev)

    def _to_td(self, out: OvercookedStep, with_reward: bool) -> TensorDict:
        B, A = self.batch_size[0], self.game.A
        group = {"observation": out.obs.float(), "shaped_reward": out.shaped_reward[..., None]}
        if with_reward:
            group["reward"] = out.reward[:, None, None].expand(B, A, 1).clone()
        done = out.done[:, None]
        return TensorDict({GROUP: TensorDict(group, batch_size=(B, A), device=self.device), "done": done,
                           "truncated": done.clone(), "terminated": torch.zeros_like(done)},
                          batch_size=(B,), device=self.device)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: object) -> TensorDictBase:
        B, dev = self.batch_size[0], self.device
        if tensordict is not None and "_reset" in tensordict:
            self.game.reset_games(tensordict.get("_reset").reshape(-1))
            out = OvercookedStep(self.game.observe(self.game.state), torch.zeros(B, device=dev),
                                 torch.zeros(B, self.game.A, device=dev), torch.zeros(B, dtype=torch.bool, device=dev))
        else:
            out = self.game.reset()
        return self._to_td(out, with_reward=False)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._to_td(self.game.step(tensordict.get((GROUP, "action"))), with_reward=True)

    def _set_seed(self, seed: int | None) -> None:
        self.game.generator.manual_seed(int(seed) if seed is not None else 0)
