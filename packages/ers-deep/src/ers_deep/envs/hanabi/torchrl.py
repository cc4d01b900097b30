"""TorchRL env of batched Hanabi (``ers_deep.envs.torchrl_base.BatchedTorchRLEnv`` around ``HanabiEnv``).

Layout (one group ``"agents"`` holding all P players):

* ``("agents", "observation")`` [B, P, O] float32: HLE's canonical vector of every player;
* ``("agents", "action_mask")`` [B, P, M] bool: the legal moves of the player to move; the rows of the other
  players are all True (PettingZoo's convention, so that ``MaskedCategorical`` can sample for them);
* ``("agents", "mask")`` [B, P, 1] bool: True for the player to move (use it as ``loss.loss_mask_key``);
* ``("agents", "action")`` [B, P] long: every player proposes a move id, only the current player's is played;
* ``("agents", "reward")`` [B, P, 1] float32: the team reward (score change), the same for every player;
* root ``done`` / ``terminated`` [B, 1] bool, ``current_player`` [B, 1] long, ``score`` [B, 1] long.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torch import Tensor
from torchrl.data import Binary, Categorical, TensorSpec, Unbounded

from ers_deep.envs.hanabi.config import HanabiConfig
from ers_deep.envs.hanabi.env import HanabiEnv
from ers_deep.envs.hanabi.state import HanabiStep, IllegalMoveError
from ers_deep.envs.torchrl_base import GROUP, BatchedTorchRLEnv


class HanabiTorchRLEnv(BatchedTorchRLEnv):
    """TorchRL env of B Hanabi games; constructor arguments are those of ``HanabiEnv`` (``auto_reset`` is off:
    TorchRL resets through ``_reset``)."""

    env: HanabiEnv

    def __init__(
        self,
        config: HanabiConfig | str | None = None,
        batch_size: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = 0,
        players: int | None = None,
        check_legal: bool = True,
    ) -> None:
        env = HanabiEnv(
            config,
            batch_size=batch_size,
            device=device,
            seed=seed,
            auto_reset=False,
            check_legal=check_legal,
            players=players,
        )
        super().__init__(env)
        self.config = env.config

    def _agent_obs_specs(self, B: int, P: int) -> dict[str, TensorSpec]:
        O, M, dev = self.env.obs_size, self.env.num_moves, self.device
        return {
            "observation": Binary(n=O, shape=(B, P, O), dtype=torch.float32, device=dev),
            "action_mask": Binary(n=M, shape=(B, P, M), dtype=torch.bool, device=dev),
            "mask": Binary(n=1, shape=(B, P, 1), dtype=torch.bool, device=dev),
        }

    def _root_specs(self, B: int) -> dict[str, TensorSpec]:
        P, dev = self.env.num_players, self.device
        return {
            "current_player": Categorical(P, shape=(B, 1), dtype=torch.long, device=dev),
            "score": Unbounded(shape=(B, 1), dtype=torch.long, device=dev),
        }

    def _pack(self, out: HanabiStep) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        seats = torch.arange(self.env.num_players, device=self.device)
        acting = (seats == out.cur_player[:, None])[..., None]  # [B, P, 1] the player to move
        mask = out.legal | ~acting  # non-acting players: all moves "allowed" (ignored)
        return (
            {"observation": out.obs, "action_mask": mask, "mask": acting},
            {"current_player": out.cur_player[:, None], "score": self.env.state.score[:, None].clone()},
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        try:
            return super()._step(tensordict)
        except IllegalMoveError as err:
            raise IllegalMoveError(
                f"{err}. The legal moves are the observation's ('agents', 'action_mask'), not the action spec's: "
                "sample from them (e.g. MaskedCategorical) or play random legal moves with policy=env.rand_action "
                "(TorchRL's RandomPolicy, Collector(env, None)'s default, draws from the whole action spec)"
            ) from err

    def _partial_reset_output(self) -> HanabiStep:
        s = self.env.state
        zeros = torch.zeros(self.batch_size[0], device=self.device)
        legal = self.env.legal_mask()  # first: it refreshes the mask step checks, as reset does
        return HanabiStep(self.env.observe(), legal, s.cur.clone(), zeros, s.done.clone(), s.score.clone())

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Uniformly random *legal* moves (the spec's own ``rand`` would ignore the legal mask)."""
        if tensordict is None:
            tensordict = TensorDict(batch_size=self.batch_size, device=self.device)
        mask = tensordict.get((GROUP, "action_mask"), None)
        if mask is None:
            mask = self.env.current_legal[:, None].expand(-1, self.config.players, -1)
        keys = torch.rand(mask.shape, device=self.device)
        tensordict.set((GROUP, "action"), (keys * mask).argmax(-1))
        return tensordict
