"""Any ers-exact game (a finite Dec-POMDP) as a batched torch env, so the deep path runs on games whose exact
answers are known.

The game is simulated from its arrays (b_0, T, U, R; ``ers_exact.model.game.Game``) and every agent's local
history tau^i_t is tracked as its index in ``ers_exact.model.histories.enumerate_histories(game).local[i]``,
the same index the exact policies use. Shapes: B games, P agents, A = max_i |A^i| actions (agents with fewer
actions have the extra ones illegal), K_i local histories of agent i, K = sum_i K_i.

* observation of agent i: the one-hot of its local history in one shared index space [K] (agent i's
  histories occupy ``offsets[i] .. offsets[i] + K_i``), so one shared network (parameter sharing) still
  tells the agents apart and a bias-free linear layer on it *is* a table over local histories;
* legal mask [B, P, A]: the game's A^i(tau^i);
* reward: R(s, a, s') of the step, the same for every agent (undiscounted; the game's gamma is the
  learner's discount), done after H steps (the game's horizon).

Step order (one joint step): a = joint action of the P local actions, s' ~ T(. | s, a), o ~ U(. | s', a),
r = R(s, a, s'), every tau^i extended by (a^i, o^i). All draws come from ``env.generator``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from os import PathLike
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from ers_deep.envs.base import batch_mask, check_batch_size, make_generator, reseed
from ers_exact.games import load_game
from ers_exact.model.game import Game
from ers_exact.model.histories import HistoryTree, enumerate_histories


class TabularStep(NamedTuple):
    """What ``reset``/``step`` return (after an auto-reset obs/legal describe the new episode)."""

    obs: Tensor  # [B, P, K] float32 one-hot of each agent's local history
    legal: Tensor  # [B, P, A] bool
    reward: Tensor  # [B] float32
    done: Tensor  # [B] bool


class TabularTransition(NamedTuple):
    state: TabularState
    reward: Tensor  # [B] float32
    done: Tensor  # [B] bool


@dataclass
class TabularState:
    """Batched state: hidden world state, time and every agent's local history (global index)."""

    s: Tensor  # [B] long world state
    t: Tensor  # [B] long time step
    history: Tensor  # [B, P] long local history index in the shared space [K]
    done: Tensor  # [B] bool episode over

    def clone(self) -> TabularState:
        return TabularState(**{f.name: getattr(self, f.name).clone() for f in fields(self)})


def _child_table(tree: HistoryTree, agent: int) -> np.ndarray:
    """[K_i, |A^i|, |O^i|] long: the child history (a^i, o^i) of each history, -1 where impossible."""
    hist, game = tree.local[agent], tree.game
    table = np.full((len(hist), game.n_actions[agent], game.n_observations[agent]), -1, dtype=np.int64)
    kids = np.nonzero(hist.parent >= 0)[0]
    table[hist.parent[kids], hist.action[kids], hist.observation[kids]] = kids
    return table


class TabularEnv:
    """B games of one ers-exact game (follows ``ers_deep.envs.base.BatchedEnv``).

    Args:
        game: a ``Game``, a registered name (``"toy-coordination"``, ``"three-lever"``, ...) or a ``.dpomdp``
            path (``ers_exact.games.load_game``).
        horizon, discount: override H and gamma (None: the game's own).
        batch_size, device, seed, auto_reset: the protocol's constructor keywords.
        check_legal: raise ``ValueError`` on an illegal action (one device sync per step).
    """

    def __init__(
        self,
        game: Game | str | PathLike[str] = "dectiger",
        *,
        batch_size: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = 0,
        auto_reset: bool = True,
        horizon: int | None = None,
        discount: float | None = None,
        check_legal: bool = True,
    ) -> None:
        if not isinstance(game, Game):
            game = load_game(game, horizon=horizon, discount=discount)
        self.game = game
        self.tree = enumerate_histories(game)
        self._device = torch.device(device)
        self._batch = check_batch_size(batch_size)
        self.auto_reset, self.check_legal = auto_reset, check_legal
        self.generator = make_generator(seed, self._device)
        dev, P = self._device, game.n_agents
        self.n_histories = self.tree.n_histories
        self.offsets = tuple(int(x) for x in np.concatenate([[0], np.cumsum(self.n_histories)]))
        A = max(game.n_actions)
        legal = np.zeros((self.offsets[-1], A), dtype=bool)
        children = []
        for i, hist in enumerate(self.tree.local):
            legal[self.offsets[i] : self.offsets[i + 1], : game.n_actions[i]] = hist.legal
            child = _child_table(self.tree, i)
            child_pad = np.full((len(hist), A, max(game.n_observations)), -1, dtype=np.int64)
            child_pad[:, : child.shape[1], : child.shape[2]] = np.where(
                child >= 0, child + self.offsets[i], -1
            )
            children.append(child_pad)
        self._legal = torch.as_tensor(legal, device=dev)  # [K, A]
        self._child = torch.as_tensor(np.concatenate(children), device=dev)  # [K, A, O_max]
        self._T = torch.tensor(np.array(game.transition), dtype=torch.float64, device=dev)  # [S, A_joint, S]
        self._U = torch.tensor(np.array(game.observation), dtype=torch.float64, device=dev)  # [A, S, O] joint
        self._R = torch.tensor(np.array(game.reward), dtype=torch.float32, device=dev)  # [S, A_joint, S]
        self._b0 = torch.tensor(np.array(game.initial_belief), dtype=torch.float64, device=dev)
        self._joint_obs = torch.tensor(np.array(game.joint_observations), device=dev)  # [O_joint, P]
        strides = np.cumprod([1, *game.n_actions[::-1]])[:-1][::-1].copy()  # last agent fastest
        self._strides = torch.as_tensor(strides, device=dev)  # [P]
        self._roots = torch.as_tensor(self.offsets[:-1], device=dev)  # [P] the empty history of each agent
        self._agents = P
        self.state = self._fresh(torch.ones(self._batch, dtype=torch.bool, device=dev), None)

    # ---- sizes -------------------------------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        return self._batch

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def num_agents(self) -> int:
        return self._agents

    @property
    def num_actions(self) -> int:
        return int(self._legal.shape[1])

    @property
    def obs_shape(self) -> tuple[int, ...]:
        return (self.offsets[-1],)

    @property
    def horizon(self) -> int:
        return self.game.horizon

    @property
    def min_episode_steps(self) -> int:
        """Every episode lasts exactly H steps (a learner bounds the resets in a rollout by it)."""
        return self.game.horizon

    # ---- protocol ----------------------------------------------------------------------------------------
    def _fresh(self, mask: Tensor, state: TabularState | None) -> TabularState:
        """``state`` with the games where ``mask`` is True restarted (s ~ b_0, t = 0, empty histories)."""
        B, dev = self._batch, self._device
        s0 = torch.multinomial(self._b0.expand(B, -1), 1, generator=self.generator).squeeze(1)
        fresh = TabularState(
            s=s0,
            t=torch.zeros(B, dtype=torch.long, device=dev),
            history=self._roots.expand(B, -1).clone(),
            done=torch.zeros(B, dtype=torch.bool, device=dev),
        )
        if state is None:
            return fresh
        m = mask
        return TabularState(
            s=torch.where(m, fresh.s, state.s),
            t=torch.where(m, fresh.t, state.t),
            history=torch.where(m[:, None], fresh.history, state.history),
            done=torch.where(m, fresh.done, state.done),
        )

    def _output(self, reward: Tensor, done: Tensor) -> TabularStep:
        return TabularStep(self.observe(), self.legal_mask(), reward, done)

    def reset(self, seed: int | None = None) -> TabularStep:
        reseed(self.generator, seed)
        self.state = self._fresh(torch.ones(self._batch, dtype=torch.bool, device=self._device), None)
        zeros = torch.zeros(self._batch, device=self._device)
        return self._output(zeros, self.state.done.clone())

    def reset_games(self, mask: Tensor) -> None:
        self.state = self._fresh(batch_mask(mask, self._batch, self._device), self.state)

    def observe(self, state: TabularState | None = None) -> Tensor:
        s = self.state if state is None else state
        obs = torch.zeros(self._batch, self._agents, self.offsets[-1], device=self._device)
        return obs.scatter_(2, s.history[..., None], 1.0)

    def legal_mask(self, state: TabularState | None = None) -> Tensor:
        s = self.state if state is None else state
        return self._legal[s.history]

    def transition(self, state: TabularState, actions: Tensor) -> TabularTransition:
        actions = actions.to(self._device).long()
        if self.check_legal:
            in_range = (actions >= 0) & (actions < self.num_actions)
            safe = torch.where(in_range, actions, 0)
            ok = self._legal[state.history].gather(2, safe[..., None]).squeeze(2) & in_range
            if not bool(ok.all()):
                b, i = (~ok).nonzero()[0].tolist()
                raise ValueError(
                    f"illegal action {int(actions[b, i])} of agent {i} in game {b} "
                    f"(legal: {self._legal[state.history[b, i]].nonzero().flatten().tolist()})"
                )
        joint = (actions * self._strides).sum(1)  # [B] (only legal actions give a meaningful joint action)
        s_next = torch.multinomial(self._T[state.s, joint], 1, generator=self.generator).squeeze(1)
        o = torch.multinomial(self._U[joint, s_next], 1, generator=self.generator).squeeze(1)
        reward = self._R[state.s, joint, s_next]
        t = state.t + 1
        done = t >= self.game.horizon
        o_i = self._joint_obs[o]  # [B, P]
        child = self._child[state.history, actions, o_i]  # [B, P]
        history = torch.where(done[:, None], state.history, child)
        return TabularTransition(TabularState(s=s_next, t=t, history=history, done=done), reward, done)

    def step(self, actions: Tensor) -> TabularStep:
        tr = self.transition(self.state, actions)
        self.state = tr.state
        if self.auto_reset:
            self.reset_games(tr.done)
        return self._output(tr.reward, tr.done)

    # ---- tables ------------------------------------------------------------------------------------------
    def legal_table(self) -> Tensor:
        """[K, A] bool legal actions of every local history."""
        return self._legal

    def history_obs(self) -> Tensor:
        """[K, K] the observation of every local history (identity): evaluate a network on all histories."""
        return torch.eye(self.offsets[-1], device=self._device)

    @property
    def n_observations(self) -> int:
        """|O^i|, the same for every agent (the size of a per-observation map; see ``history_lift``)."""
        sizes = set(self.game.n_observations)
        if len(sizes) != 1:
            raise ValueError(f"{self.game.name}: agents have different observation counts {sorted(sizes)}")
        return sizes.pop()

    def history_lift(self, obs_maps: Tensor, action_maps: Tensor) -> Tensor:
        """[L, K, K]: per-step maps lifted to local histories, as Psi acts on them (paper: phi(tau) applies
        phi_A to every own action and phi_O to every observation of tau).

        ``obs_maps`` [L, O, O]: row o is phi_O(e_o), a (soft) map of one observation; ``action_maps`` [L, A]
        long: own action a becomes action_maps[a]. Entry (k, k') is the product over the steps of
        [action_maps[a_t] = a'_t] phi_O(e_{o_t})[o'_t] for histories k, k' of the same agent and length (1 on
        the empty history), so ``one_hot @ M`` is the one-hot of phi(tau) when phi_O is a permutation and
        stays differentiable in phi_O otherwise."""
        L, K, dev = obs_maps.shape[0], self.offsets[-1], obs_maps.device
        out = torch.zeros(L, K, K, dtype=obs_maps.dtype, device=dev)
        for i, hist in enumerate(self.tree.local):
            off, cuts = self.offsets[i], hist.offsets
            block = torch.ones(L, 1, 1, dtype=obs_maps.dtype, device=dev)
            out[:, off, off] = 1.0
            for t in range(1, len(cuts) - 1):
                lo, hi, plo = int(cuts[t]), int(cuts[t + 1]), int(cuts[t - 1])
                par = torch.as_tensor(np.array(hist.parent[lo:hi] - plo), device=dev)
                act = torch.as_tensor(np.array(hist.action[lo:hi]), device=dev)
                obs = torch.as_tensor(np.array(hist.observation[lo:hi]), device=dev)
                prev = block[:, par][:, :, par]
                same_action = action_maps[:, act][:, :, None] == act[None, None, :]
                block = prev * same_action * obs_maps[:, obs][:, :, obs]
                out[:, off + lo : off + hi, off + lo : off + hi] = block
        return out

    def split_policy(self, probs: Tensor) -> tuple[np.ndarray, ...]:
        """[K, A] action probabilities on every local history -> the exact joint policy (one float64 array
        [K_i, |A^i|] per agent, illegal entries zeroed and rows renormalised), for ers-exact."""
        p = probs.detach().double().cpu().numpy()
        out = []
        for i in range(self._agents):
            rows = p[self.offsets[i] : self.offsets[i + 1], : self.game.n_actions[i]]
            rows = np.where(self.tree.local[i].legal, rows, 0.0)
            out.append(rows / rows.sum(axis=1, keepdims=True))
        return tuple(out)
