"""The TorchRL ``EnvBase`` shared by every batched env (natively batched: ``batch_size=[B]``, no ParallelEnv).

Layout (TorchRL multi-agent convention, one group ``"agents"`` holding the P agents of ``env``, the wrapped
batched env; ``game`` is its deprecated name, the glossary's game being a Dec-POMDP spec):

* ``("agents", "observation")`` [B, P, *O] float32 (and whatever else ``_agent_obs_specs`` declares);
* ``("agents", "action")`` [B, P] long, categorical over ``env.num_actions``, passed to ``env.step``;
* ``("agents", "reward")`` [B, P, 1] float32: the team reward, the same for every agent;
* root ``done`` and the other done keys of ``_done_keys`` [B, 1] bool, plus the env's root entries
  (``_root_specs``).

Finished games are reset by TorchRL's ``_reset`` with a ``"_reset"`` mask (``step_and_maybe_reset``, as
``Collector`` does) through ``env.reset_games``, so the terminal observation stays visible in ``"next"``;
the wrapped env runs with ``auto_reset=False``. A subclass builds its batched env and declares what differs: the
agent and root observation specs, the done keys, how a step output is packed, the output after a partial
reset.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torch import Tensor
from torchrl.data import Categorical, Composite, TensorSpec, Unbounded
from torchrl.envs import EnvBase

from ers_deep.envs.base import BatchedEnv, Step, torch_rl_seed
from ers_exact.util.deprecation import warn_renamed

GROUP = "agents"


class BatchedTorchRLEnv(EnvBase):
    """TorchRL env around a batched env ``env`` (``auto_reset`` off); see the module docstring."""

    batch_locked = True

    def __init__(self, env: BatchedEnv) -> None:
        super().__init__(device=env.device, batch_size=torch.Size([env.batch_size]))
        self.env = env
        B, P, dev = env.batch_size, env.num_agents, self.device
        self.observation_spec = Composite(
            {GROUP: Composite(self._agent_obs_specs(B, P), shape=(B, P), device=dev), **self._root_specs(B)},
            shape=(B,),
            device=dev,
        )
        action = Categorical(env.num_actions, shape=(B, P), dtype=torch.long, device=dev)
        self.action_spec = Composite(
            {GROUP: Composite(action=action, shape=(B, P), device=dev)}, shape=(B,), device=dev
        )
        reward = Unbounded(shape=(B, P, 1), dtype=torch.float32, device=dev)
        self.reward_spec = Composite(
            {GROUP: Composite(reward=reward, shape=(B, P), device=dev)}, shape=(B,), device=dev
        )
        self.done_spec = Composite(
            {key: Categorical(2, shape=(B, 1), dtype=torch.bool, device=dev) for key in self._done_keys()},
            shape=(B,),
            device=dev,
        )

    @property
    def game(self) -> BatchedEnv:
        """Deprecated name of :attr:`env`, the wrapped batched env (the glossary's game is a Dec-POMDP spec)."""
        warn_renamed(f"{type(self).__name__}.game", f"{type(self).__name__}.env")
        return self.env

    # ---- what a subclass declares --------------------------------------------------------------------------
    def _agent_obs_specs(self, B: int, P: int) -> dict[str, TensorSpec]:
        """Per-agent observation entries of the ``"agents"`` group (shapes [B, P, ...])."""
        raise NotImplementedError

    def _root_specs(self, B: int) -> dict[str, TensorSpec]:
        """Root observation entries (shapes [B, ...]); none by default."""
        return {}

    def _done_keys(self) -> tuple[str, ...]:
        """The done entries, in order (``done`` first)."""
        return ("done", "terminated")

    def _done_entries(self, done: Tensor) -> dict[str, Tensor]:
        """Every done entry from ``done`` [B, 1]: by default episodes end by termination."""
        return {"done": done, "terminated": done.clone()}

    def _pack(self, out: Any) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """(``"agents"`` group entries [B, P, ...], root entries [B, ...]) of a step output (no reward)."""
        raise NotImplementedError

    def _partial_reset_output(self) -> Step:
        """The step output of ``env.state`` right after ``env.reset_games`` (zero reward)."""
        raise NotImplementedError

    # ---- EnvBase API ---------------------------------------------------------------------------------------
    def _to_td(self, out: Step, with_reward: bool) -> TensorDict:
        """Pack a step output into the env's TensorDict layout."""
        B, P = self.batch_size[0], self.env.num_agents
        group, root = self._pack(out)
        if with_reward:
            group["reward"] = out.reward[:, None, None].expand(B, P, 1).clone()
        entries = {
            GROUP: TensorDict(group, batch_size=(B, P), device=self.device),
            **self._done_entries(out.done[:, None]),
            **root,
        }
        return TensorDict(entries, batch_size=(B,), device=self.device)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: object) -> TensorDictBase:
        if tensordict is not None and "_reset" in tensordict:
            self.env.reset_games(tensordict.get("_reset").reshape(-1))
            out = self._partial_reset_output()
        else:
            out = self.env.reset()
        return self._to_td(out, with_reward=False)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._to_td(self.env.step(tensordict.get((GROUP, "action"))), with_reward=True)

    def _set_seed(self, seed: int | None) -> None:
        torch_rl_seed(self.env.generator, seed)
