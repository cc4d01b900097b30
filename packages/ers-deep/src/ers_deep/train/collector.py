"""IPPO collection through TorchRL's ``Collector`` (``TrainConfig.collector = "torchrl"``).

The learner's own batched env (the *same* object the native loop steps) is wrapped in a TorchRL env
(``LearnerEnv``), its stacked network in a TensorDict-in/TensorDict-out policy (``StackedPolicy``), and one
``torchrl.collectors.Collector`` batch (``num_steps x S x num_envs`` frames, shaped [S*B, T]) becomes one
``Rollout`` of the native loop, field for field: same seeds and config give bit-equal rollouts, so GAE and the
PPO update are unchanged (``tests/deep/train/test_collector.py``).

How equality is kept:

* **RNG order.** The policy samples with the learner's generator, one ``nets.sample`` over [S, N, A] per step
  as the native loop does; the env draws from its own generator. ``LearnerEnv._step`` restarts the games
  that ended *right after the step* (``reset_games(done)``, the env's auto-reset, whatever its
  ``auto_reset`` flag says, which is switched off only for the step itself) so the env generator sees the
  native sequence of draws (a tabular env draws a start state on every ``reset_games`` call, also when no
  game ended, which TorchRL's ``maybe_reset`` would skip). A branch-free env (the fast collection's compiled and
  captured modes) restarts its games inside its own step, drawing the fresh deals every step; there the
  ``"next"`` observation of a finished game is already the new episode's (the rollout never reads it). The TensorDict of the step still shows the
  terminal observation in ``"next"``; the partial ``_reset`` that ``step_and_maybe_reset`` then asks for only
  reports the restarted games (``is_init`` True).
* **No re-deal by the collector.** ``Collector`` resets its env at construction and, with
  ``reset_at_each_iter=True``, before every batch. ``LearnerEnv.attach(first)`` makes the next *full* reset
  return the games as they stand (``is_init`` = ``first``) instead of starting new ones, so the collector
  picks up the learner's env state at every update. Hence resume is exact with this path too: the
  checkpoint restores the env state, both generators, the recurrent state and ``first`` on the learner, and
  the next batch starts from them (the Collector itself holds nothing that a resume needs).
* **Recurrent nets** (``cnn-gru``) work: the episode starts reach the policy as TorchRL's ``is_init``
  entry (True on a reset), and the policy carries the GRU state of the S x N actors between steps (it
  starts each batch from the runner state's ``hidden`` and hands the last state back), resetting it before
  a first step as the native loop does. The state is not stored in the TensorDict (a ``Rollout`` only needs the
  state before step 0).
* Overcooked V2's shaped reward is a second reward entry, ``("agents", "shaped_reward")`` [B, P, 1].

Layout of ``LearnerEnv`` (group ``"agents"`` of the P agents, root entries [B, ...]): ``observation``
[B, P, *O] (the env's own dtype), ``action_mask`` [B, P, A] (the legal moves; all True for an agent not to
move), ``mask`` [B, P, 1] (the agent's move is played), ``action`` [B, P], ``reward`` [B, P, 1] (team
reward); root ``done`` / ``terminated`` [B, 1] and ``is_init`` [B, 1].
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import Tensor
from torchrl.collectors import Collector
from torchrl.data import Binary, Categorical, Composite, TensorSpec, Unbounded

from ers_deep.envs.base import BatchedEnv
from ers_deep.envs.torchrl_base import GROUP, BatchedTorchRLEnv
from ers_deep.nets import ActorCritic, policy_mask, sample
from ers_deep.train.collect import Rollout, RunnerState, bootstrap_value, per_actor, running_returns
from ers_deep.train.config import TrainConfig

__all__ = ["LearnerEnv", "StackedPolicy", "TorchRLCollection"]


class _Out(NamedTuple):
    """What ``LearnerEnv`` packs: one step's (or reset's) outputs of every game."""

    obs: Tensor  # [B, P, *O]
    legal: Tensor  # [B, P, A] bool
    reward: Tensor  # [B]
    done: Tensor  # [B] bool
    is_init: Tensor  # [B] bool
    shaped: Tensor | None  # [B, P] float32


class LearnerEnv(BatchedTorchRLEnv):
    """TorchRL env around an existing batched env ``env`` (any ``auto_reset``); see the module docstring.

    ``shaped_reward``: the env's step outputs carry ``shaped_reward`` [B, P] (Overcooked V2), exposed as a
    second reward entry."""

    def __init__(self, env: BatchedEnv, *, shaped_reward: bool = False) -> None:
        self._shaped = shaped_reward
        self._attached: Tensor | None = None
        super().__init__(env)
        if shaped_reward:
            B, P, dev = env.batch_size, env.num_agents, self.device
            reward = Unbounded(shape=(B, P, 1), dtype=torch.float32, device=dev)
            self.reward_spec = Composite(
                {GROUP: Composite(reward=reward, shaped_reward=reward.clone(), shape=(B, P), device=dev)},
                shape=(B,),
                device=dev,
            )

    def attach(self, first: Tensor) -> None:
        """Make the next full reset (no ``"_reset"`` mask) return the games as they stand, with ``is_init`` =
        ``first`` [B] bool, instead of starting new ones (the owner reset and seeded the env itself)."""
        self._attached = first.reshape(-1).to(self.device, torch.bool).clone()

    # ---- specs and packing ---------------------------------------------------------------------------------
    def _agent_obs_specs(self, B: int, P: int) -> dict[str, TensorSpec]:
        A, dev = self.env.num_actions, self.device
        dtype = self.env.observe().dtype
        return {
            "observation": Unbounded(shape=(B, P, *self.env.obs_shape), dtype=dtype, device=dev),
            "action_mask": Binary(n=A, shape=(B, P, A), dtype=torch.bool, device=dev),
            "mask": Binary(n=1, shape=(B, P, 1), dtype=torch.bool, device=dev),
        }

    def _root_specs(self, B: int) -> dict[str, TensorSpec]:
        return {"is_init": Categorical(2, shape=(B, 1), dtype=torch.bool, device=self.device)}

    def _pack(self, out: _Out) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        acting = out.legal.any(-1, keepdim=True)  # [B, P, 1]
        group = {"observation": out.obs, "action_mask": out.legal | ~acting, "mask": acting}
        if out.shaped is not None:  # a step's shaped reward (a reward entry: step outputs only)
            group["shaped_reward"] = out.shaped.to(torch.float32)[..., None]
        return group, {"is_init": out.is_init[:, None]}

    def _current(self, is_init: Tensor) -> _Out:
        """The games as they stand (zero reward, not done)."""
        B, dev = self.batch_size[0], self.device
        zeros = torch.zeros(B, device=dev)
        return _Out(self.env.observe(), self.env.legal_mask(), zeros, zeros.bool(), is_init, None)

    # ---- EnvBase API ---------------------------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: object) -> TensorDictBase:
        B, dev = self.batch_size[0], self.device
        if tensordict is not None and "_reset" in tensordict:  # those games were restarted in ``_step``
            return self._to_td(self._current(torch.ones(B, dtype=torch.bool, device=dev)), with_reward=False)
        if self._attached is not None:
            first, self._attached = self._attached, None
            return self._to_td(self._current(first), with_reward=False)
        self.env.reset()
        return self._to_td(self._current(torch.ones(B, dtype=torch.bool, device=dev)), with_reward=False)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        env, auto = self.env, self.env.auto_reset
        branch_free = getattr(env, "branch_free", False)
        env.auto_reset = branch_free  # a branch-free env restarts inside its step, in its order of draws
        try:
            out = env.step(tensordict.get((GROUP, "action")))
        finally:
            env.auto_reset = auto
        legal = getattr(out, "legal", None)
        done = out.done.clone()
        packed = _Out(
            out.obs,
            env.legal_mask() if legal is None else legal,
            out.reward,
            done,
            torch.zeros_like(done),
            getattr(out, "shaped_reward", None) if self._shaped else None,
        )
        td = self._to_td(packed, with_reward=True)
        if not branch_free:
            env.reset_games(done)  # the env's auto-reset, in its order of draws
        return td


class StackedPolicy(TensorDictModuleBase):
    """The learner's stacked network as a TorchRL policy: reads ``("agents", "observation")`` [S*B, P, *O],
    ``("agents", "action_mask")`` and ``is_init``; writes ``("agents", "action")``, ``("agents", "logp")``
    [S*B, P] and ``("agents", "state_value")`` [S*B, P, 1]. Actions are drawn with ``generator`` exactly as the native
    loop draws them ([S*B, P, ...] is viewed as [S, B*P, ...], seed-major). ``hidden`` (a ``NetState``, fields
    [S, B*P, ...]) is the net's state, carried from call to call."""

    def __init__(self, net: ActorCritic, generator: torch.Generator, batch: int, agents: int) -> None:
        super().__init__()
        # a plain tuple, not a submodule: the collector must never copy or cast the learner's parameters
        self._parts = (net, generator)
        self.S, self.batch, self.agents = len(net.seeds), batch, agents
        self.in_keys = [(GROUP, "observation"), (GROUP, "action_mask"), "is_init"]
        self.out_keys = [(GROUP, "action"), (GROUP, "logp"), (GROUP, "state_value")]
        self.hidden = net.initial_state(batch * agents // self.S)
        B, P = batch, agents
        self.spec = Composite(
            {
                GROUP: Composite(
                    action=Categorical(net.num_actions, shape=(B, P), dtype=torch.long),
                    logp=Unbounded(shape=(B, P), dtype=torch.float32),
                    state_value=Unbounded(shape=(B, P, 1), dtype=torch.float32),
                    shape=(B, P),
                )
            },
            shape=(B,),
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        net, generator = self._parts
        obs = tensordict.get((GROUP, "observation"))
        SB, P = obs.shape[:2]
        S, N = self.S, SB // self.S * P
        obs = obs.reshape(S, N, *obs.shape[2:])
        legal = tensordict.get((GROUP, "action_mask")).reshape(S, N, -1)
        first = tensordict.get("is_init").expand(SB, P).reshape(S, N)
        logits, value, self.hidden = net(obs[:, None], first[:, None], self.hidden)
        action, logp = sample(logits[:, 0], policy_mask(legal), generator)
        tensordict.set((GROUP, "action"), action.view(SB, P))
        tensordict.set((GROUP, "logp"), logp.view(SB, P))
        tensordict.set((GROUP, "state_value"), value[:, 0].reshape(SB, P, 1))
        return tensordict


class Runner(Protocol):
    """What ``TorchRLCollection`` reads from the learner (``ers_deep.train.ippo.Learner``)."""

    config: TrainConfig
    env: BatchedEnv
    net: ActorCritic
    generator: torch.Generator
    S: int
    B: int
    P: int
    N: int


class TorchRLCollection:
    """One ``Collector`` over the learner's env and network; ``collect(state, coef)`` returns what
    ``FastCollection.collect`` returns (see the module docstring)."""

    def __init__(self, learner: Runner) -> None:
        self.learner = lr = learner
        cfg, S, B, P = lr.config, lr.S, lr.B, lr.P
        self.shaped = cfg.env_kind == "overcooked-v2"
        self.env = LearnerEnv(lr.env, shaped_reward=self.shaped)
        self.policy = StackedPolicy(lr.net, lr.generator, S * B, P)
        self.env.attach(torch.ones(S * B, dtype=torch.bool, device=self.env.device))
        self.collector = Collector(
            self.env,
            self.policy,
            frames_per_batch=cfg.num_steps * S * B,
            total_frames=-1,
            reset_at_each_iter=True,  # every batch starts from the learner's env state (``attach``)
            track_traj_ids=False,
            trust_policy=True,
            auto_register_policy_transforms=False,
            return_same_td=True,  # read once into a Rollout before the next batch
            compact_obs=True,  # "next" observations are not stored (the next step's root has them)
        )
        self._batches = iter(self.collector)

    @torch.no_grad()
    def collect(self, state: RunnerState, coef: float) -> tuple[Rollout, RunnerState, dict[str, Tensor]]:
        """One batch from ``state``: the rollout [S, T, N, ...], the state after it and the returns of the
        episodes that ended in it (``coef``: the weight of the shaped reward)."""
        lr = self.learner
        S, B, P, N, T = lr.S, lr.B, lr.P, lr.N, lr.config.num_steps
        self.policy.hidden = state.hidden
        self.env.attach(state.first)
        td = self.last_batch = next(self._batches)  # [S*B, T] (kept for inspection until the next batch)

        def seat(x: Tensor) -> Tensor:  # [S*B, T, P, *r] -> [S, T, N, *r] (the learner's layout)
            rest = x.shape[3:]
            return x.reshape(S, B, T, P, *rest).transpose(1, 2).reshape(S, T, N, *rest)

        def per_step(x: Tensor) -> Tensor:  # [S*B, T] -> [T, S*B]
            return x.transpose(0, 1)

        done = per_step(td.get(("next", "done"))[..., 0])
        team = per_step(td.get(("next", GROUP, "reward"))[..., 0, 0])
        shaped = None
        if self.shaped:
            shaped = seat(td.get(("next", GROUP, "shaped_reward"))[..., 0]).view(S, T, B, P)
        reward = per_actor(team, S, P)
        if shaped is not None:
            reward = reward + coef * shaped.reshape(S, T, N)
        stats, after = running_returns(
            state,
            team.view(T, S, B),
            None if shaped is None else shaped.sum(-1).transpose(0, 1),
            done.view(T, S, B),
        )
        first_next = done[-1].clone()
        ro = Rollout(
            obs=seat(td.get((GROUP, "observation"))),
            legal=seat(td.get((GROUP, "action_mask"))),
            acting=seat(td.get((GROUP, "mask"))[..., 0]),
            first=seat(td.get("is_init").expand(S * B, T, P)),
            hidden0=state.hidden,
            action=seat(td.get((GROUP, "action"))),
            logp=seat(td.get((GROUP, "logp"))),
            value=seat(td.get((GROUP, "state_value"))[..., 0]),
            reward=reward,
            done=per_actor(done, S, P),
            last_value=bootstrap_value(lr.net, lr.env.observe(), first_next, self.policy.hidden),
        )
        return ro, RunnerState(first_next, self.policy.hidden, after.ep_return, after.ep_shaped), stats
