"""Batched Overcooked V2 in torch: every game of a batch advances in one tensor step, on CPU or GPU.

A port of JaxMARL's ``overcooked_v2`` (0.2.0) transition: simultaneous moves (a move action always turns the
agent; it moves only onto an EMPTY static cell), collisions reverted until stable, pairwise swaps reverted,
then interactions processed sequentially agent 0, 1, ... (each sees the grid left by the previous one), then
pot/button timers tick, then the recipe is resampled after a correct delivery (``sample_recipe_on_delivery``).
Sparse reward (shared): +20 correct delivery, -20 wrong delivery (``negative_rewards``, else 0), -5 per button
press. Shaped rewards (per agent): +3 useful pot placement, +5 useful dish pickup, +3 useful plate pickup
(+5 useful cooking start with ``start_cooking_interaction``). Episodes end after ``max_steps`` (400).

Shapes: B games, A agents, H x W grid, n ingredients, V = 2*agent_view_size+1 (or H, W for full view),
C observation channels = 17 + n + 4(n+2) (40 for n=3), or 18 + 4(n+2) (38 for n=3) with ``paper_obs``:
the ERS paper's JaxMARL copy truncated the observation to its first 18 + 4(n+2) channels (n - 1 fewer; at
n = 3 it drops the recipe layer of the last ingredient and the pot-timer layer).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple

import torch
from torch import Tensor

from ers_deep.envs.base import batch_mask, check_batch_size, make_generator, reseed, whole_number
from ers_deep.envs.overcooked_v2 import layouts as L
from ers_deep.envs.overcooked_v2.dynamics import INTERACT, Dynamics, Rules
from ers_deep.envs.overcooked_v2.layouts import OvercookedLayout, get_layout
from ers_deep.envs.overcooked_v2.obs import ObservationEncoder

NUM_ACTIONS = 6


class OvercookedStep(NamedTuple):
    """What ``reset``/``step`` return. After an auto-reset, obs describes the new episode while reward,
    shaped_reward and done describe the step that ended the old one."""

    obs: Tensor  # [B, A, V, V, C] agent-centred observation of every agent
    reward: Tensor  # [B] float32 sparse reward (shared by all agents)
    shaped_reward: Tensor  # [B, A] float32 shaped reward of every agent
    done: Tensor  # [B] bool the step ended the episode


@dataclass
class OvercookedState:
    """Batched state (every tensor has leading dim B). Grid cells are indexed y*W+x."""

    pos: Tensor  # [B, A, 2] long (x, y)
    dir: Tensor  # [B, A] long 0 UP, 1 DOWN, 2 RIGHT, 3 LEFT
    inv: Tensor  # [B, A] long inventory bitfield
    items: Tensor  # [B, H*W] long item bitfield on each cell (counters, pots)
    extra: Tensor  # [B, H*W] long pot timer / button timer
    recipe: Tensor  # [B] long recipe encoding
    step: Tensor  # [B] long steps taken in the episode
    new_correct_delivery: Tensor  # [B] bool the last step delivered a correct dish

    def clone(self) -> OvercookedState:
        """A deep copy (every tensor cloned)."""
        return OvercookedState(**{f.name: getattr(self, f.name).clone() for f in fields(self)})


class OvercookedTransition(NamedTuple):
    """What the pure ``transition`` returns: the next state (never reset) and the step's outputs."""

    state: OvercookedState  # the next state (a new object)
    reward: Tensor  # [B] float32 sparse reward (shared by all agents)
    shaped_reward: Tensor  # [B, A] float32 shaped reward of every agent
    done: Tensor  # [B] bool the step ended the episode (time limit)


class OvercookedV2Env:
    """A batch of B Overcooked V2 games stepped together (JaxMARL semantics; follows
    ``ers_deep.envs.base.BatchedEnv``).

    Args:
        layout: a layout name (``grounded_coord_simple``, ...) or an ``OvercookedLayout``.
        batch_size: B.
        device: torch device of every tensor.
        seed: seed of the env's generator (resets and recipe resampling; None: a random seed).
            ``reset(seed=s)`` re-seeds it, ``reset()`` continues it.
        max_steps: episode length.
        agent_view_size: view radius (2 gives 5x5 crops, zero-padded outside the map); None (or 0, as in
            JaxMARL) for the full grid.
        negative_rewards, sample_recipe_on_delivery, random_agent_positions, start_cooking_interaction,
        indicate_successful_delivery: as in JaxMARL (defaults are the ERS paper's settings).
        paper_obs: 38-channel observation of the ERS paper (first 18+4(n+2) channels) instead of 40.
        auto_reset: reset finished games inside ``step``.
        obs_dtype: dtype of the observation: uint8 by default (every entry is a count <= 20, a quarter of the
            memory traffic of float32; convert at the network), any torch dtype otherwise.
        branch_free: restart finished games with ``torch.where`` over a full batch of fresh starts drawn every
            step (no device sync, no data-dependent branch: ``step_state``) instead of indexing the finished
            rows. None (default): branch-free everywhere but on CPU. The two draw different numbers.
        check_actions: ``step`` and ``transition`` raise ``ValueError`` on an action outside 0..5 (one device
            sync per step; ``step_state`` never checks). None (default): on CPU only, where it costs no sync.
            The shape [B, A] is always checked.
    """

    def __init__(
        self,
        layout: str | OvercookedLayout = "grounded_coord_simple",
        batch_size: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = 0,
        max_steps: int = 400,
        agent_view_size: int | None = 2,
        negative_rewards: bool = True,
        sample_recipe_on_delivery: bool = True,
        random_agent_positions: bool = True,
        start_cooking_interaction: bool = False,
        indicate_successful_delivery: bool = False,
        paper_obs: bool = False,
        auto_reset: bool = True,
        obs_dtype: torch.dtype = torch.uint8,
        branch_free: bool | None = None,
        check_actions: bool | None = None,
    ) -> None:
        self.layout = lay = get_layout(layout)
        max_steps = whole_number(max_steps, "max_steps")  # a str failed in a comparison, or int('400') passed
        if max_steps < 1:  # min_episode_steps, which bounds a rollout's resets, would be wrong too
            raise ValueError(f"max_steps must be >= 1 (the episode length), not {max_steps}")
        if agent_view_size is not None:
            agent_view_size = whole_number(agent_view_size, "agent_view_size")
        if agent_view_size is not None and agent_view_size < 0:
            raise ValueError(
                f"agent_view_size must be >= 1, or None (0) for the full grid, not {agent_view_size}"
            )
        self.batch_size, self.device = check_batch_size(batch_size), torch.device(device)
        self.max_steps, self.view = int(max_steps), agent_view_size or None  # JaxMARL: 0 is the full grid
        self.negative_rewards, self.sample_recipe_on_delivery = negative_rewards, sample_recipe_on_delivery
        self.random_agent_positions, self.start_cooking = random_agent_positions, start_cooking_interaction
        self.indicate_delivery, self.paper_obs, self.auto_reset = (
            indicate_successful_delivery,
            paper_obs,
            auto_reset,
        )
        self.obs_dtype = obs_dtype
        self.check_actions = self.device.type == "cpu" if check_actions is None else bool(check_actions)
        self.branch_free = self.device.type != "cpu" if branch_free is None else bool(branch_free)
        self.generator = make_generator(seed, self.device)
        dev, n = self.device, lay.num_ingredients
        self.H, self.W, self.A, self.n = lay.height, lay.width, lay.num_agents, n
        self.recipe_codes = torch.as_tensor(lay.recipe_codes, device=dev)  # [R]
        self.start_pos = torch.tensor(lay.agent_positions, device=dev)  # [A, 2]
        spaces = torch.as_tensor(lay.enclosed_spaces.reshape(-1), device=dev)
        own = spaces[self.start_pos[:, 1] * self.W + self.start_pos[:, 0]]  # [A] region of each agent's start
        self.room_mask = spaces[None, :] == own[:, None]  # [A, HW] cells where agent a may be reset
        self.num_channels = 17 + n + 4 * (n + 2) + int(indicate_successful_delivery)
        self.obs_channels = 18 + 4 * (n + 2) if paper_obs else self.num_channels
        self.dynamics = Dynamics(lay, Rules(negative_rewards, start_cooking_interaction), dev)
        self.encoder = ObservationEncoder(
            lay, self.view, self.obs_channels, indicate_successful_delivery, dev
        )
        self.view_h, self.view_w = self.encoder.view_h, self.encoder.view_w
        self.state = self.initial_state(self.batch_size)

    @property
    def min_episode_steps(self) -> int:
        """Every episode lasts exactly ``max_steps`` steps (a learner bounds the resets in a rollout by it)."""
        return self.max_steps

    @property
    def num_agents(self) -> int:
        """A, the agents."""
        return self.A

    @property
    def num_actions(self) -> int:
        """6: right, down, left, up, stay, interact."""
        return NUM_ACTIONS

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """(V, V, C) (or (H, W, C) for the full view), the observation of one agent."""
        return (self.view_h, self.view_w, self.obs_channels)

    # ---- resets ---------------------------------------------------------------------------------------------
    def draw_recipes(self, m: int) -> Tensor:
        """[m] recipes drawn uniformly from the layout's list (the env's generator)."""
        return self.recipe_codes[
            torch.randint(len(self.recipe_codes), (m,), generator=self.generator, device=self.device)
        ]

    def start_noise(self, m: int) -> dict[str, Tensor]:
        """The random numbers of ``m`` fresh episodes (``initial_state``), drawn from the env's generator in
        JaxMARL's order: recipes [m]; with ``random_agent_positions`` a uniform key per cell for every agent
        ``cell_keys`` [A, m, H*W] and directions [m, A]."""
        dev, g, A = self.device, self.generator, self.A
        noise = {"start_recipe": self.draw_recipes(m)}
        if self.random_agent_positions:
            keys = [torch.rand(m, self.H * self.W, generator=g, device=dev) for _ in range(A)]
            noise["cell_keys"] = torch.stack(keys)
            noise["start_dir"] = torch.randint(4, (m, A), generator=g, device=dev)
        return noise

    def initial_state(self, m: int, noise: dict[str, Tensor] | None = None) -> OvercookedState:
        """[m] fresh episodes: random recipe, agents at their starts (or random cells of their own rooms with
        random directions when ``random_agent_positions``), empty hands, counters and pots. The randomness
        comes from ``noise`` (``start_noise``; None: drawn now)."""
        dev, A = self.device, self.A
        noise = self.start_noise(m) if noise is None else noise
        if self.random_agent_positions:
            taken = torch.zeros(m, self.H * self.W, dtype=torch.bool, device=dev)
            cells = []
            for a in range(A):  # sequential like JaxMARL: later agents avoid cells already taken
                ok = self.room_mask[a][None] & ~taken
                u = noise["cell_keys"][a]
                c = torch.where(ok, u, torch.full_like(u, -1.0)).argmax(1)  # uniform over allowed cells
                taken = taken.scatter(1, c[:, None], True)
                cells.append(c)
            cell = torch.stack(cells, 1)  # [m, A]
            pos = torch.stack([cell % self.W, cell // self.W], -1)
            direction = noise["start_dir"]
        else:
            pos = self.start_pos.expand(m, A, 2).clone()
            direction = torch.zeros(m, A, dtype=torch.long, device=dev)
        z = torch.zeros(m, self.H * self.W, dtype=torch.long, device=dev)
        return OvercookedState(
            pos=pos,
            dir=direction,
            inv=torch.zeros(m, A, dtype=torch.long, device=dev),
            items=z,
            extra=z.clone(),
            recipe=noise["start_recipe"],
            step=torch.zeros(m, dtype=torch.long, device=dev),
            new_correct_delivery=torch.zeros(m, dtype=torch.bool, device=dev),
        )

    def draw_noise(self) -> dict[str, Tensor]:
        """Every random number one branch-free step may use, from the env's generator in the eager order: the
        recipe resampled after a delivery ``"recipe"`` [B] (``sample_recipe_on_delivery``), then the fresh
        episodes of ``start_noise(B)`` (``auto_reset``)."""
        noise = {"recipe": self.draw_recipes(self.batch_size)} if self.sample_recipe_on_delivery else {}
        return {**noise, **self.start_noise(self.batch_size)} if self.auto_reset else noise

    def reset(self, seed: int | None = None, *, state: OvercookedState | None = None) -> OvercookedStep:
        """Start every game anew (or from ``state``) and return the first observation. ``seed`` re-seeds the
        env's generator first (None: continue it)."""
        reseed(self.generator, seed)
        self.state = self.initial_state(self.batch_size) if state is None else state.clone()
        B = self.batch_size
        return OvercookedStep(
            self.observe(self.state),
            torch.zeros(B, device=self.device),
            torch.zeros(B, self.A, device=self.device),
            torch.zeros(B, dtype=torch.bool, device=self.device),
        )

    def reset_games(self, mask: Tensor) -> None:
        """Start the games where ``mask`` [B] is True anew (index-based, or ``torch.where`` when branch-free)."""
        s, mask = self.state, batch_mask(mask, self.batch_size, self.device)
        if not self.branch_free:
            rows = mask.nonzero().flatten()
            if rows.numel() == 0:
                return
            new = self.initial_state(rows.numel())
            for f in fields(s):
                getattr(s, f.name)[rows] = getattr(new, f.name)
            return
        self.state = _select(mask, self.initial_state(self.batch_size), s)

    # ---- the step -------------------------------------------------------------------------------------------
    def step(self, actions: Tensor) -> OvercookedStep:
        """Apply ``actions`` [B, A] (0 right, 1 down, 2 left, 3 up, 4 stay, 5 interact) to every game (branch-free:
        by ``step_state``)."""
        actions = self._checked(actions, self.batch_size)
        if self.branch_free:
            return self.step_state(self.state, actions, self.draw_noise())
        self.state, reward, shaped, done = self._transition(self.state, actions)
        if self.auto_reset:
            self.reset_games(done)
        return OvercookedStep(self.observe(self.state), reward, shaped, done)

    def step_state(
        self, state: OvercookedState, actions: Tensor, noise: dict[str, Tensor], observe: bool = True
    ) -> OvercookedStep:
        """One branch-free step of the games of ``state``, whose fields are rebound to the next state (after the
        auto-reset): no device sync, no generator (recipes and fresh episodes come from ``noise``, see
        ``draw_noise``). What ``step`` runs when ``branch_free``, and what ``ers_deep.accel`` compiles and
        captures. ``observe=False``: ``obs`` is empty [B, A, 0] (the state-only rate)."""
        ns, reward, shaped, done = self._transition(state, actions, noise.get("recipe"))
        if self.auto_reset:
            ns = _select(done, self.initial_state(self.batch_size, noise), ns)
        for f in fields(state):
            setattr(state, f.name, getattr(ns, f.name))
        obs = self.observe(state) if observe else torch.zeros(self.batch_size, self.A, 0, device=self.device)
        return OvercookedStep(obs, reward, shaped, done)

    def transition(
        self, s: OvercookedState, actions: Tensor, recipes: Tensor | None = None
    ) -> OvercookedTransition:
        """The pure transition (no reset; ``s`` is unchanged): returns (next state, reward [B], shaped_reward
        [B, A], done [B]). A recipe resampled after a delivery is the game's entry of ``recipes`` [B] (None:
        drawn from the env's generator). ``actions`` [B, A] are checked (``check_actions``)."""
        return self._transition(s, self._checked(actions, s.step.shape[0]), recipes)

    def _checked(self, actions: Tensor, B: int) -> Tensor:
        """``actions`` as a [B, A] long tensor; ``ValueError`` on another shape or (``check_actions``) on an
        action outside 0..5 (a negative one indexed the action tables from the end: -1 stayed, -3 moved up)."""
        a = torch.as_tensor(actions, device=self.device).long()
        if a.shape != (B, self.A):
            raise ValueError(
                f"actions must have shape [B, A] = [{B}, {self.A}] (one per agent), got {tuple(a.shape)}"
            )
        if self.check_actions:
            bad = (a < 0) | (a >= NUM_ACTIONS)
            if bool(bad.any()):
                b, i = (int(x) for x in bad.nonzero()[0])
                raise ValueError(
                    f"action {int(a[b, i])} of agent {i} in game {b} is not one of 0..{NUM_ACTIONS - 1} "
                    "(0 right, 1 down, 2 left, 3 up, 4 stay, 5 interact)"
                )
        return a

    def _transition(
        self, s: OvercookedState, actions: Tensor, recipes: Tensor | None = None
    ) -> OvercookedTransition:
        """``transition`` without the checks (what ``step`` and ``step_state`` run)."""
        actions = torch.as_tensor(actions, device=self.device).long()
        B, dyn = actions.shape[0], self.dynamics
        cell, new_dir = dyn.move_agents(s.pos[..., 1] * self.W + s.pos[..., 0], s.dir, actions)
        face = dyn.face[cell * 4 + new_dir]  # [B, A] the cell each agent faces
        items, extra, inv = s.items.clone(), s.extra.clone(), s.inv.clone()
        act, n_plates = actions == INTERACT, (s.inv == L.PLATE).sum(1)
        reward, shaped, correct_any = torch.zeros(B, device=self.device), [], torch.zeros_like(act[:, 0])
        for a in range(self.A):
            r, sh, ok = dyn.interact(a, act[:, a], face[:, a], items, extra, inv, s.recipe, n_plates)
            reward, correct_any = reward + r, correct_any | ok
            shaped.append(sh)
        dyn.tick(items, extra)
        if self.sample_recipe_on_delivery:  # torch.where: a tensor of the next state's own
            recipe = torch.where(correct_any, self.draw_recipes(B) if recipes is None else recipes, s.recipe)
        else:  # a copy of the next state's own (reset_games writes it in place)
            recipe = s.recipe.clone()
        step = s.step + 1
        ns = OvercookedState(
            pos=dyn.xy[cell],
            dir=new_dir,
            inv=inv,
            items=items,
            extra=extra,
            recipe=recipe,
            step=step,
            new_correct_delivery=correct_any,
        )
        return OvercookedTransition(ns, reward, torch.stack(shaped, 1), step >= self.max_steps)

    # ---- observation and legal actions --------------------------------------------------------------------
    def legal_mask(self, state: OvercookedState | None = None) -> Tensor:
        """[B, A, 6] bool legal actions of every agent: all True (every action is legal in Overcooked)."""
        B = (self.state if state is None else state).step.shape[0]
        return torch.ones(B, self.A, NUM_ACTIONS, dtype=torch.bool, device=self.device)

    def observe(self, state: OvercookedState | None = None) -> Tensor:
        """[B, A, V, V, C] observation of every agent of ``state`` (default ``env.state``; JaxMARL's DEFAULT
        observation cropped to the view, zero outside the map), by table look-up
        (``obs.ObservationEncoder``)."""
        s = self.state if state is None else state
        return self.encoder.encode(
            s.pos, s.dir, s.inv, s.items, s.extra, s.recipe, s.new_correct_delivery, self.obs_dtype
        )


def _select(mask: Tensor, new: OvercookedState, old: OvercookedState) -> OvercookedState:
    """Branch-free: the games of ``new`` where ``mask`` [B], of ``old`` elsewhere."""
    picked = {}
    for f in fields(old):
        o = getattr(old, f.name)
        picked[f.name] = torch.where(mask.view(-1, *([1] * (o.ndim - 1))), getattr(new, f.name), o)
    return OvercookedState(**picked)
