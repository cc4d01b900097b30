"""The Overcooked V2 transition on cell indices and per-cell tables (JaxMARL ``overcooked_v2`` 0.2.0 semantics).

Positions are handled as map cells ``y*W + x``; a move, a facing cell and every property of the faced cell is
one gather from a table built once per layout, so a batched step is a few dozen [B]-sized ops per agent. Order of
one step, as in JaxMARL's ``step_env``:

1. moves: a move action always turns the agent; it moves only onto an EMPTY static cell (clipped to the map);
2. collisions: agents proposing the same cell are reverted, repeated until stable (A rounds reach the fixpoint);
3. swaps: two agents exchanging cells are both reverted (once);
4. interactions, agent 0, 1, ... in turn, each on the grid left by the previous one;
5. pot timers tick (cooked bit when they reach 0), button timers tick (clipped at 0);
6. the recipe is resampled after a correct delivery (``sample_recipe_on_delivery``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ers_deep.envs.overcooked_v2 import layouts as L
from ers_deep.envs.overcooked_v2.layouts import OvercookedLayout

DELIVERY_REWARD, POT_COOK_TIME, INDICATOR_TIME, INDICATOR_COST = 20, 20, 10, 5
SHAPED_PLACEMENT, SHAPED_START, SHAPED_DISH, SHAPED_PLATE = 3, 5, 5, 3
INTERACT = 5


@dataclass(frozen=True)
class Rules:
    """The switches of JaxMARL's ``OvercookedV2`` that change the transition."""

    negative_rewards: bool = True
    start_cooking_interaction: bool = False


class Dynamics:
    """Tables of one layout and the batched interaction step (see the module docstring)."""

    def __init__(self, layout: OvercookedLayout, rules: Rules, device: torch.device) -> None:
        H, W, n = layout.height, layout.width, layout.num_ingredients
        self.A, self.rules = layout.num_agents, rules
        static = layout.static.reshape(-1)
        cy, cx = np.divmod(np.arange(H * W), W)
        nx = np.clip(cx[:, None] + np.array([d[0] for d in L.DIR_VEC]), 0, W - 1)  # [HW, 4] facing cell
        ny = np.clip(cy[:, None] + np.array([d[1] for d in L.DIR_VEC]), 0, H - 1)
        face = ny * W + nx
        self.face = torch.as_tensor(face.reshape(-1), device=device)  # [HW*4]
        move = np.where(static[face] == L.EMPTY, face, np.arange(H * W)[:, None])
        self.move = torch.as_tensor(move.reshape(-1), device=device)  # [HW*4] cell after a move attempt
        self.xy = torch.as_tensor(np.stack([cx, cy], -1), device=device)  # [HW, 2]
        pile_item = np.where(static == L.PLATE_PILE, L.PLATE, 0)
        pile_item = pile_item + np.where(
            static >= L.PILE_BASE, L.ingredient_bits(np.maximum(static - L.PILE_BASE, 0)), 0
        )
        kinds = np.stack(
            [
                static == L.PLATE_PILE,
                static >= L.PILE_BASE,
                static == L.POT,
                static == L.GOAL,
                static == L.WALL,
                static == L.BUTTON_INDICATOR,
            ],
            -1,
        )
        self.kinds = torch.as_tensor(kinds, device=device)  # [HW, 6] bool: what each cell is
        self.pile_item = torch.as_tensor(pile_item, device=device)  # [HW] item a pile hands out
        self.pots = torch.as_tensor(np.flatnonzero(static == L.POT), device=device)  # [P] pot cells
        timed = np.flatnonzero((static == L.POT) | (static == L.BUTTON_INDICATOR))
        self.timed = torch.as_tensor(timed, device=device)  # [Q] cells with a timer (pots, buttons)
        self.timed_is_pot = torch.as_tensor(static[timed] == L.POT, device=device)  # [Q]
        ingredients = L.item_layers(np.arange(1 << (2 + 2 * n)), n)[:, 2:]
        self.count = torch.as_tensor(ingredients.sum(1), device=device)  # [NI] ingredients in an item
        self.action_dir = torch.tensor(L.ACTION_TO_DIR, device=device)  # [6]
        self.not_eye = ~torch.eye(self.A, dtype=torch.bool, device=device)

    # ---- moves ----------------------------------------------------------------------------------------------
    def move_agents(self, cell: Tensor, direction: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """(new cell [B, A], new direction [B, A]) after moves, collisions and swaps."""
        d = self.action_dir[actions]
        moving = d >= 0
        new_dir = torch.where(moving, d, direction)
        prop = torch.where(moving, self.move[cell * 4 + d.clamp(min=0)], cell)
        reverted = torch.zeros_like(moving)
        for _ in range(self.A):
            p = torch.where(reverted, cell, prop)
            reverted = reverted | ((p[:, :, None] == p[:, None, :]) & self.not_eye).any(2)
        new = torch.where(reverted, cell, prop)
        sw = (new[:, :, None] == cell[:, None, :]) & self.not_eye  # sw[b, i, j]: new_i == old_j
        return torch.where((sw & sw.transpose(1, 2)).any(2), cell, new), new_dir

    # ---- interactions ---------------------------------------------------------------------------------------
    def interact(
        self,
        a: int,
        act: Tensor,
        c: Tensor,
        items: Tensor,
        extra: Tensor,
        inv: Tensor,
        recipe: Tensor,
        n_plates: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Agent ``a`` interacts (where ``act`` [B]) with cell ``c`` [B]; ``items``, ``extra`` [B, HW] and ``inv``
        [B, A] are updated in place. Returns (sparse reward [B], shaped reward [B], correct delivery [B])."""
        cc = c[:, None]
        it, ex, iv = items.gather(1, cc)[:, 0], extra.gather(1, cc)[:, 0], inv[:, a]
        plate_pile, ing_pile, pot, goal, wall, button = self.kinds[c].unbind(1)
        no_ing, empty = it == 0, iv == 0
        inv_ing = ((iv >> 2) != 0) & ((iv & L.PLATE) == 0)
        inv_plate, inv_dish = iv == L.PLATE, (iv & L.COOKED) != 0
        merged = it + iv
        cooking, cooked = pot & (ex > 0), pot & ((it & L.COOKED) != 0)
        idle = pot & ~cooking & ~cooked
        plated = recipe | L.PLATE | L.COOKED
        dish_pickup = cooked & inv_plate
        pickup = ((plate_pile | ing_pile) & empty) | dish_pickup | (wall & ~no_ing & empty)
        press = button & empty & no_ing
        placement = idle & inv_ing & (self.count[it] != 3)
        sel = iv | (iv << 1)
        drop = (wall & no_ing & ~empty) | placement
        delivery = goal & inv_dish
        no_effect = ~pickup & ~drop & ~delivery
        new_it = torch.where(drop, merged, torch.where(no_effect, it, 0))
        if self.rules.start_cooking_interaction:  # an empty-handed interaction starts a filled, idle pot
            start = idle & ~no_ing & empty
            use_pot = start
        else:  # the third ingredient starts it
            start, use_pot = None, idle & (self.count[new_it] == 3)
        new_ex = torch.where(use_pot, POT_COOK_TIME, torch.where(press, INDICATOR_TIME, ex))
        new_iv = torch.where(pickup, self.pile_item[c] + merged, torch.where(no_effect, iv, 0))
        correct = iv == plated
        wrong = -1.0 if self.rules.negative_rewards else 0.0
        r = torch.where(delivery, torch.where(correct, DELIVERY_REWARD, wrong * DELIVERY_REWARD), 0.0)
        r = r - press * float(INDICATOR_COST)
        n_pots = (items[:, self.pots] != 0).sum(1)
        no_counter_plates = ~(items == L.PLATE).any(1)
        sh = (dish_pickup & (merged == plated)) * float(SHAPED_DISH)
        sh = sh + (placement & ((it & sel) < (recipe & sel))) * float(SHAPED_PLACEMENT)
        if start is not None:
            sh = sh + (start & (it == recipe)) * float(SHAPED_START)
        sh = sh + (pickup & (new_iv == L.PLATE) & (n_plates < n_pots) & no_counter_plates) * float(
            SHAPED_PLATE
        )
        items.scatter_(1, cc, torch.where(act, new_it, it)[:, None])
        extra.scatter_(1, cc, torch.where(act, new_ex, ex)[:, None])
        inv[:, a] = torch.where(act, new_iv, iv)
        return torch.where(act, r, 0.0), torch.where(act, sh, 0.0), act & delivery & correct

    def tick(self, items: Tensor, extra: Tensor) -> None:
        """Timers after the interactions, in place on the timed cells only: pots count down (cooked bit when they
        reach 0); buttons count down, clipped at 0."""
        it, ex = items[:, self.timed], extra[:, self.timed]
        cooking = self.timed_is_pot & (ex > 0)
        ex = ex - (ex > 0).long()
        items[:, self.timed] = torch.where(cooking & (ex == 0), it | L.COOKED, it)
        extra[:, self.timed] = ex
