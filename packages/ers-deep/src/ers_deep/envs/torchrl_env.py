"""TorchRL ``EnvBase`` around the batched Hanabi env (natively batched: ``batch_size=[B]``, no ParallelEnv).

Layout (TorchRL multi-agent convention, one group ``"agents"`` holding all P players):

* ``("agents", "observation")`` [B, P, O] float32: HLE's canonical vector of every player;
* ``("agents", "action_mask")`` [B, P, M] bool: the legal moves of the player to move; the rows of the other
  players are all True (PettingZoo's convention, so that ``MaskedCategorical`` can sample for them);
* ``("agents", "mask")`` [B, P, 1] bool: True for the player to move (use it as ``loss.loss_mask_key``);
* ``("agents", "action")`` [B, P] long: every player proposes a move id, only the current player's is played;
* ``("agents", "reward")`` [B, P, 1] float32: the team reward (score change), the same for every player;
* root ``done`` / ``terminated`` [B, 1] bool, ``current_player`` [B, 1] long, ``score`` [B, 1] long.

Finished games are re-dealt by TorchRL's ``_reset`` with a ``"_reset"`` mask (``step_and_maybe_reset``, as
``Collector`` does), so the terminal observation stays visible in ``"next"``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Binary, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from ers_deep.envs.hanabi import HanabiEnv, HanabiStep
from ers_deep.envs.hanabi_config import HanabiConfig

GROUP = "agents"


class HanabiTorchRLEnv(EnvBase):
    """TorchRL env of B Hanabi games; constructor arguments are those of ``HanabiEnv`` (``auto_reset`` is off:
    TorchRL resets through ``_reset``)."""

    batch_locked = True

    def __init__(self, config: HanabiConfig | str | None = None, batch_size: int = 1,
                 device: str | torch.device = "cpu", seed: int | None = 0, players: int = 2,
                 check_legal: bool = True) -> None:
        super().__init__(device=device, batch_size=torch.Size([batch_size]))
        self.game = HanabiEnv(config, batch_size=batch_size, device=device, seed=seed, auto_reset=False,
                              check_legal=check_legal, players=players)
        self.config = self.game.config
        self._make_specs()

    def _make_specs(self) -> None:
        B, P, O, M = self.batch_size[0], self.config.players, self.config.obs_size, self.config.num_moves
        dev = self.device
        agents = Composite(
            observation=Binary(n=O, shape=(B, P, O), dtype=torch.float32, device=dev),
            action_mask=Binary(n=M, shape=(B, P, M), dtype=torch.bool, device=dev),
            mask=Binary(n=1, shape=(B, P, 1), dtype=torch.bool, device=dev),
            shape=(B, P), device=dev)
        self.observation_spec = Composite(
            {GROUP: agents,
             "current_player": Categorical(P, shape=(B, 1), dtype=torch.long, device=dev),
             "score": Unbounded(shape=(B, 1), dtype=torch.long, device=dev)},
            shape=(B,), device=dev)
        self.action_spec = Composite(
            {GROUP: Composite(action=Categorical(M, shape=(B, P), dtype=torch.long, device=dev), shape=(B, P),
                              device=dev)}, shape=(B,), device=dev)
        self.reward_spec = Composite(
            {GROUP: Composite(reward=Unbounded(shape=(B, P, 1), dtype=torch.float32, device=dev), shape=(B, P),
                              device=dev)}, shape=(B,), device=dev)
        self.done_spec = Composite(
            done=Categorical(2, shape=(B, 1), dtype=torch.bool, device=dev),
            terminated=Categorical(2, shape=(B, 1), dtype=torch.bool, device=dev), shape=(B,), device=dev)

    # ---- helpers ------------------------------------------------------------------------------------------------
    def _to_td(self, out: HanabiStep, with_reward: bool) -> TensorDict:
        """Pack a ``HanabiStep`` into the env's TensorDict layout."""
        B, P = self.batch_size[0], self.config.players
        acting = (torch.arange(P, device=self.device) == out.cur_player[:, None])[..., None]  # [B, P, 1]
        mask = out.legal | ~acting  # non-acting players: all moves "allowed" (ignored)
        group = {"observation": out.obs, "action_mask": mask, "mask": acting}
        if with_reward:
            group["reward"] = out.reward[:, None, None].expand(B, P, 1).clone()
        done = out.done[:, None]
        return TensorDict(
            {GROUP: TensorDict(group, batch_size=(B, P), device=self.device), "done": done,
             "terminated": done.clone(), "current_player": out.cur_player[:, None],
             "score": self.game.state.score[:, None].clone()},
            batch_size=(B,), device=self.device)

    # ---- EnvBase API ---------------------------------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: object) -> TensorDictBase:
        if tensordict is not None and "_reset" in tensordict:
            self.game.reset_games(tensordict.get("_reset").reshape(-1))
            zeros = torch.zeros(self.batch_size[0], device=self.device)
            out = self.game._output(zeros, self.game.state.done.clone(), self.game.state.score.clone())
        else:
            out = self.game.reset()
        return self._to_td(out, with_reward=False)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        actions = tensordict.get((GROUP, "action"))  # [B, P]
        move = actions.gather(1, self.game.state.cur[:, None]).squeeze(1)  # [B] the current player's move
        return self._to_td(self.game.step(move), with_reward=True)

    def _set_seed(self, seed: int | None) -> None:
        self.game.generator.manual_seed(int(seed) if seed is not None else 0)

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Uniformly random *legal* moves (the spec's own ``rand`` would ignore the legal mask)."""
        if tensordict is None:
            tensordict = TensorDict(batch_size=self.batch_size, device=self.device)
        mask = tensordict.get((GROUP, "action_mask"), None)
        if mask is None:
            mask = self.game._legal_cur[:, None].expand(-1, self.config.players, -1)
        keys = torch.rand(mask.shape, device=self.device)
        tensordict.set((GROUP, "action"), (keys * mask).argmax(-1))
        return tensordict
