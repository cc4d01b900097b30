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
the ERS paper's JaxMARL copy truncated the observation to its first 38 channels (it drops the recipe layer
of the last ingredient and the pot-timer layer).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple

import torch
from torch import Tensor

from ers_deep.envs import overcooked_v2_layouts as L
from ers_deep.envs.overcooked_v2_layouts import OvercookedLayout, get_layout

DELIVERY_REWARD, POT_COOK_TIME, INDICATOR_TIME, INDICATOR_COST = 20, 20, 10, 5
SHAPED_PLACEMENT, SHAPED_START, SHAPED_DISH, SHAPED_PLATE = 3, 5, 5, 3
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
        return OvercookedState(**{f.name: getattr(self, f.name).clone() for f in fields(self)})


class OvercookedV2Env:
    """A batch of B Overcooked V2 games stepped together (JaxMARL semantics).

    Args:
        layout: a layout name (``grounded_coord_simple``, ...) or an ``OvercookedLayout``.
        batch_size: B.
        device: torch device of every tensor.
        seed: seed of the env's generator (resets and recipe resampling).
        max_steps: episode length.
        agent_view_size: view radius (2 gives 5x5 crops, zero-padded outside the map); None for the full grid.
        negative_rewards, sample_recipe_on_delivery, random_agent_positions, start_cooking_interaction,
        indicate_successful_delivery: as in JaxMARL (defaults are the ERS paper's settings).
        paper_obs: 38-channel observation of the ERS paper (first 18+4(n+2) channels) instead of 40.
        auto_reset: reset finished games inside ``step``.
        obs_dtype: dtype of the observation.
    """

    def __init__(self, layout: str | OvercookedLayout = "grounded_coord_simple", batch_size: int = 1,
                 device: str | torch.device = "cpu", seed: int | None = 0, max_steps: int = 400,
                 agent_view_size: int | None = 2, negative_rewards: bool = True,
                 sample_recipe_on_delivery: bool = True, random_agent_positions: bool = True,
                 start_cooking_interaction: bool = False, indicate_successful_delivery: bool = False,
                 paper_obs: bool = False, auto_reset: bool = True, obs_dtype: torch.dtype = torch.float32) -> None:
        self.layout = lay = get_layout(layout)
        self.batch_size, self.device = int(batch_size), torch.device(device)
        self.max_steps, self.view = int(max_steps), agent_view_size
        self.negative_rewards, self.sample_recipe_on_delivery = negative_rewards, sample_recipe_on_delivery
        self.random_agent_positions, self.start_cooking = random_agent_positions, start_cooking_interaction
        self.indicate_delivery, self.paper_obs, self.auto_reset = indicate_successful_delivery, paper_obs, auto_reset
        self.obs_dtype = obs_dtype
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(seed) if seed is not None else int(torch.seed()) % 2**63)
        dev, n = self.device, lay.num_ingredients
        self.H, self.W, self.A, self.n = lay.height, lay.width, lay.num_agents, n
        self.static = torch.as_tensor(lay.static.reshape(-1), device=dev)  # [HW]
        self.recipe_codes = torch.as_tensor(lay.recipe_codes, device=dev)  # [R]
        self.dir_vec = torch.tensor(L.DIR_VEC, device=dev)  # [4, 2]
        self.action_dir = torch.tensor(L.ACTION_TO_DIR, device=dev)  # [6]
        self.start_pos = torch.tensor(lay.agent_positions, device=dev)  # [A, 2]
        spaces = torch.as_tensor(lay.enclosed_spaces.reshape(-1), device=dev)
        own = spaces[self.start_pos[:, 1] * self.W + self.start_pos[:, 0]]  # [A] region of each agent's start
        self.room_mask = spaces[None, :] == own[:, None]  # [A, HW] cells where agent a may be reset
        self._shift = torch.tensor([0, 1] + [2 * (i + 1) for i in range(n)], device=dev)  # item layers
        self._mask = torch.tensor([1, 1] + [3] * n, device=dev)
        codes = [L.WALL, L.GOAL, L.POT, L.RECIPE_INDICATOR, L.BUTTON_INDICATOR, L.PLATE_PILE]
        codes += [L.PILE_BASE + i for i in range(n)]
        self._codes = torch.tensor(codes, device=dev)  # static codes of the static and pile layers
        p = agent_view_size or 0
        pad = torch.full((lay.height + 2 * p, lay.width + 2 * p), -1, dtype=torch.long)
        pad[p:p + lay.height, p:p + lay.width] = torch.as_tensor(lay.static)
        self._static_pad = pad.reshape(-1).to(dev)  # [(H+2p)(W+2p)] static codes, -1 outside the map
        self.num_channels = 17 + n + 4 * (n + 2) + int(indicate_successful_delivery)
        self.obs_channels = 18 + 4 * (n + 2) if paper_obs else self.num_channels
        self.view_h, self.view_w = (self.H, self.W) if agent_view_size is None else (2 * agent_view_size + 1,) * 2
        self._ar = torch.arange(self.batch_size, device=dev)
        wy, wx = torch.meshgrid(torch.arange(self.view_h, device=dev), torch.arange(self.view_w, device=dev),
                                indexing="ij")
        self._win = torch.stack([wx.reshape(-1), wy.reshape(-1)], -1)  # [VV, 2] (x, y) offsets in a window
        self.state = self.initial_state(self.batch_size)

    # ---- resets ---------------------------------------------------------------------------------------------
    def initial_state(self, m: int) -> OvercookedState:
        """[m] fresh episodes: random recipe, agents at their starts (or random cells of their own rooms with
        random directions when ``random_agent_positions``), empty hands, counters and pots."""
        dev, g, A = self.device, self.generator, self.A
        recipe = self.recipe_codes[torch.randint(len(self.recipe_codes), (m,), generator=g, device=dev)]
        if self.random_agent_positions:
            taken = torch.zeros(m, self.H * self.W, dtype=torch.bool, device=dev)
            cells = []
            for a in range(A):  # sequential like JaxMARL: later agents avoid cells already taken
                ok = self.room_mask[a][None] & ~taken
                u = torch.rand(m, self.H * self.W, generator=g, device=dev)
                c = torch.where(ok, u, torch.full_like(u, -1.0)).argmax(1)  # uniform over allowed cells
                taken[torch.arange(m, device=dev), c] = True
                cells.append(c)
            cell = torch.stack(cells, 1)  # [m, A]
            pos = torch.stack([cell % self.W, cell // self.W], -1)
            direction = torch.randint(4, (m, A), generator=g, device=dev)
        else:
            pos = self.start_pos.expand(m, A, 2).clone()
            direction = torch.zeros(m, A, dtype=torch.long, device=dev)
        z = torch.zeros(m, self.H * self.W, dtype=torch.long, device=dev)
        return OvercookedState(pos=pos, dir=direction, inv=torch.zeros(m, A, dtype=torch.long, device=dev),
                               items=z, extra=z.clone(), recipe=recipe,
                               step=torch.zeros(m, dtype=torch.long, device=dev),
                               new_correct_delivery=torch.zeros(m, dtype=torch.bool, device=dev))

    def reset(self, seed: int | None = None, state: OvercookedState | None = None) -> OvercookedStep:
        """Start every game anew (or from ``state``) and return the first observation."""
        if seed is not None:
            self.generator.manual_seed(int(seed))
        self.state = self.initial_state(self.batch_size) if state is None else state.clone()
        B = self.batch_size
        return OvercookedStep(self.observe(self.state), torch.zeros(B, device=self.device),
                              torch.zeros(B, self.A, device=self.device),
                              torch.zeros(B, dtype=torch.bool, device=self.device))

    def reset_games(self, mask: Tensor) -> None:
        """Start the games where ``mask`` [B] is True anew (index-based on CPU, ``torch.where`` elsewhere)."""
        s = self.state
        if self.device.type == "cpu":
            rows = mask.nonzero().flatten()
            if rows.numel() == 0:
                return
            new = self.initial_state(rows.numel())
            for f in fields(s):
                getattr(s, f.name)[rows] = getattr(new, f.name)
            return
        new = self.initial_state(self.batch_size)
        for f in fields(s):
            old = getattr(s, f.name)
            setattr(s, f.name, torch.where(mask.view(-1, *([1] * (old.ndim - 1))), getattr(new, f.name), old))

    # ---- the step -------------------------------------------------------------------------------------------
    def step(self, actions: Tensor) -> OvercookedStep:
        """Apply ``actions`` [B, A] (0 right, 1 down, 2 left, 3 up, 4 stay, 5 interact) to every game."""
        self.state, reward, shaped, done = self.transition(self.state, actions)
        if self.auto_reset:
            self.reset_games(done)
        return OvercookedStep(self.observe(self.state), reward, shaped, done)

    def _ingredient_count(self, items: Tensor) -> Tensor:
        return sum(((items >> (2 + 2 * i)) & 3) for i in range(self.n))

    def transition(self, s: OvercookedState, actions: Tensor) -> tuple[OvercookedState, Tensor, Tensor, Tensor]:
        """The pure transition (no reset): returns (next state, reward [B], shaped_reward [B, A], done [B])."""
        actions = torch.as_tensor(actions, device=self.device).long()
        B, A, H, W = actions.shape[0], self.A, self.H, self.W
        ar = torch.arange(B, device=self.device)
        # 1. moves: a move action always turns; move only onto an EMPTY static cell (bounds-clipped)
        d = self.action_dir[actions]  # [B, A]
        moving = d >= 0
        new_dir = torch.where(moving, d, s.dir)
        tgt = s.pos + self.dir_vec[d.clamp(min=0)]
        tgt = torch.stack([tgt[..., 0].clamp(0, W - 1), tgt[..., 1].clamp(0, H - 1)], -1)
        free = self.static[tgt[..., 1] * W + tgt[..., 0]] == L.EMPTY
        prop = torch.where((moving & free)[..., None], tgt, s.pos)  # [B, A, 2]
        # 2. collisions: revert agents sharing a cell until stable (A rounds reach the fixpoint)
        eye = torch.eye(A, dtype=torch.bool, device=self.device)
        reverted = torch.zeros(B, A, dtype=torch.bool, device=self.device)
        for _ in range(A):
            p = torch.where(reverted[..., None], s.pos, prop)
            same = (p[:, :, None, :] == p[:, None, :, :]).all(-1) & ~eye
            reverted = reverted | same.any(2)
        pos = torch.where(reverted[..., None], s.pos, prop)
        # 3. swaps: two agents exchanging cells are both reverted (once, as JaxMARL)
        sw = (pos[:, :, None, :] == s.pos[:, None, :, :]).all(-1) & ~eye  # sw[b,i,j]: new_i == old_j
        swapped = (sw & sw.transpose(1, 2)).any(1)
        pos = torch.where(swapped[..., None], s.pos, pos)
        # 4. interactions, agent by agent
        items, extra, inv = s.items.clone(), s.extra.clone(), s.inv.clone()
        inv_before = s.inv
        reward = torch.zeros(B, device=self.device)
        shaped = torch.zeros(B, A, device=self.device)
        correct_any = torch.zeros(B, dtype=torch.bool, device=self.device)
        plated = s.recipe | L.PLATE | L.COOKED
        n_plates = (inv_before == L.PLATE).sum(1)
        is_pot_cell = self.static == L.POT
        for a in range(A):
            act = actions[:, a] == 5
            f = pos[:, a] + self.dir_vec[new_dir[:, a]]
            c = f[:, 1].clamp(0, H - 1) * W + f[:, 0].clamp(0, W - 1)
            st, it, ex, iv = self.static[c], items[ar, c], extra[ar, c], inv[:, a]
            plate_pile, ing_pile = st == L.PLATE_PILE, st >= L.PILE_BASE
            pot, goal, wall, button = st == L.POT, st == L.GOAL, st == L.WALL, st == L.BUTTON_INDICATOR
            no_ing, empty = it == 0, iv == 0
            inv_ing = ((iv >> 2) != 0) & ((iv & L.PLATE) == 0)
            inv_plate, inv_dish = iv == L.PLATE, (iv & L.COOKED) != 0
            merged = it + iv
            cooking = pot & (ex > 0)
            cooked = pot & ((it & L.COOKED) != 0)
            idle = pot & ~cooking & ~cooked
            dish_pickup = cooked & inv_plate
            sh = (dish_pickup & (merged == plated)).float() * SHAPED_DISH
            pickup = ((plate_pile | ing_pile) & empty) | dish_pickup | (wall & ~no_ing & empty)
            press = button & empty & no_ing
            placement = idle & inv_ing & (self._ingredient_count(it) != 3)
            sel = iv | (iv << 1)
            sh = sh + (placement & ((it & sel) < (s.recipe & sel))).float() * SHAPED_PLACEMENT
            drop = (wall & no_ing & ~empty) | placement
            delivery = goal & inv_dish
            no_effect = ~pickup & ~drop & ~delivery
            pile_item = torch.where(plate_pile, L.PLATE, 0) + torch.where(
                ing_pile, 4 << (2 * (st - L.PILE_BASE).clamp(min=0)), 0)
            new_it = torch.where(drop, merged, torch.where(no_effect, it, 0))
            start = idle & ~no_ing & empty & self.start_cooking
            sh = sh + (start & (it == s.recipe)).float() * SHAPED_START
            auto = idle & (self._ingredient_count(new_it) == 3) & (not self.start_cooking)
            use_pot = start | auto
            new_ex = torch.where(use_pot, POT_COOK_TIME, torch.where(press, INDICATOR_TIME, ex))
            new_iv = torch.where(pickup, pile_item + merged, torch.where(no_effect, iv, 0))
            correct = iv == plated
            r = delivery.float() * torch.where(correct, 1.0, -1.0 if self.negative_rewards else 0.0) * DELIVERY_REWARD
            r = r - press.float() * INDICATOR_COST
            n_pots = (is_pot_cell & (items != 0)).sum(1)
            no_counter_plates = (items == L.PLATE).sum(1) == 0
            sh = sh + (pickup & (new_iv == L.PLATE) & (n_plates < n_pots) & no_counter_plates).float() * SHAPED_PLATE
            # apply where the agent interacted
            items[ar, c] = torch.where(act, new_it, it)
            extra[ar, c] = torch.where(act, new_ex, ex)
            inv[:, a] = torch.where(act, new_iv, iv)
            reward = reward + torch.where(act, r, 0.0)
            shaped[:, a] = torch.where(act, sh, 0.0)
            correct_any = correct_any | (act & delivery & correct)
        # 5. timers: pots count down (cooked bit at 0); buttons count down, clipped at 0
        pot_cell = is_pot_cell[None]
        cooking = pot_cell & (extra > 0)
        extra = torch.where(cooking, extra - 1, extra)
        items = torch.where(cooking & (extra == 0), items | L.COOKED, items)
        extra = torch.where((self.static == L.BUTTON_INDICATOR)[None], (extra - 1).clamp(min=0), extra)
        # 6. recipe resampling after a correct delivery
        recipe = s.recipe
        if self.sample_recipe_on_delivery:
            new_recipe = self.recipe_codes[torch.randint(len(self.recipe_codes), (B,), generator=self.generator,
                                                         device=self.device)]
            recipe = torch.where(correct_any, new_recipe, recipe)
        step = s.step + 1
        done = step >= self.max_steps
        ns = OvercookedState(pos=pos, dir=new_dir, inv=inv, items=items, extra=extra, recipe=recipe, step=step,
                             new_correct_delivery=correct_any)
        return ns, reward, shaped, done

    # ---- observation ----------------------------------------------------------------------------------------
    def _layers(self, x: Tensor) -> Tensor:
        """[..., 2+n] plate bit, cooked bit, ingredient counts of item bitfields ``x`` [...]."""
        return (x[..., None] >> self._shift) & self._mask

    def observe(self, s: OvercookedState) -> Tensor:
        """[B, A, V, V, C] observation of every agent (JaxMARL's DEFAULT observation, cropped to the view, zero
        outside the map). The scalar cell fields are cropped first and expanded into channels per window."""
        B, A, H, W = s.pos.shape[0], self.A, self.H, self.W
        dev, u8, p = self.device, torch.uint8, self.view or 0
        Hp, Wp = H + 2 * p, W + 2 * p
        ar = torch.arange(B, device=dev)
        origin = s.pos - p if p else torch.zeros_like(s.pos)  # [B, A, 2] window origin in map coords
        if p:  # window cells in padded coordinates (padded origin = agent position)
            idx = (s.pos[..., 1] * Wp + s.pos[..., 0])[..., None] + (self._win[:, 1] * Wp + self._win[:, 0])
        else:
            idx = (self._win[:, 1] * W + self._win[:, 0]).expand(B, A, -1)
        idx = idx.reshape(B, -1)  # [B, A*VV]
        st = self._static_pad[idx]  # [B, A*VV] static code (-1 outside the map)
        planes = torch.zeros(2, B, Hp, Wp, dtype=s.items.dtype, device=dev)
        planes[0, :, p:p + H, p:p + W] = s.items.view(B, H, W)
        planes[1, :, p:p + H, p:p + W] = s.extra.view(B, H, W)
        planes = planes.view(2, B, Hp * Wp)
        it, ex = planes[0].gather(1, idx), planes[1].gather(1, idx)
        rec = torch.where((st == L.RECIPE_INDICATOR) | ((st == L.BUTTON_INDICATOR) & (ex > 0)), s.recipe[:, None], 0)
        parts = [(st[..., None] == self._codes).to(u8), self._layers(it).to(u8), self._layers(rec).to(u8),
                 torch.where(st == L.POT, ex, 0).to(u8)[..., None]]
        if self.indicate_delivery:
            parts.append(((st == L.GOAL) & s.new_correct_delivery[:, None]).to(u8)[..., None])
        # agent layers: agent o's features placed at its cell of observer a's window (own block if o == a)
        feat = torch.cat([torch.ones(B, A, 1, dtype=torch.long, device=dev),
                          torch.nn.functional.one_hot(s.dir, 4), self._layers(s.inv)], -1).to(u8)  # [B, A, F]
        VV, F = self.view_h * self.view_w, feat.shape[-1]
        agents = torch.zeros(B, A, 2, VV, F, dtype=u8, device=dev)  # [.., 0 own / 1 other, ..]
        arA = torch.arange(A, device=dev)
        for o in range(A):
            rel = s.pos[:, o, None, :] - origin  # [B, A, 2] agent o in every observer's window
            vis = (rel[..., 0] >= 0) & (rel[..., 0] < self.view_w) & (rel[..., 1] >= 0) & (rel[..., 1] < self.view_h)
            cell = rel[..., 1].clamp(0, self.view_h - 1) * self.view_w + rel[..., 0].clamp(0, self.view_w - 1)
            block = (arA != o).long().expand(B, A)
            agents.index_put_((ar[:, None].expand(B, A), arA.expand(B, A), block, cell),
                              feat[:, o, None, :] * vis[..., None].to(u8), accumulate=True)
        grid = torch.cat(parts, -1).view(B, A, VV, -1)
        obs = torch.cat([agents[:, :, 0], agents[:, :, 1], grid], -1)[..., : self.obs_channels]
        return obs.reshape(B, A, self.view_h, self.view_w, -1).to(self.obs_dtype)
