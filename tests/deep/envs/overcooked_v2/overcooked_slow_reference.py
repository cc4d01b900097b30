"""Slow references of the Overcooked V2 transition and observation: the first torch port, written line by line from
JaxMARL's ``step_env`` / ``get_obs_default`` (elementwise ops on (x, y) coordinates and item bitfields, one channel
group at a time) and checked against JaxMARL itself. The table-driven fast paths of ``ers_deep.envs`` must equal
them on every state."""

from __future__ import annotations

import torch
from torch import Tensor

from ers_deep.envs.overcooked_v2 import OvercookedState, OvercookedV2Env
from ers_deep.envs.overcooked_v2 import layouts as L
from ers_deep.envs.overcooked_v2.dynamics import (
    DELIVERY_REWARD,
    INDICATOR_COST,
    INDICATOR_TIME,
    POT_COOK_TIME,
    SHAPED_DISH,
    SHAPED_PLACEMENT,
    SHAPED_PLATE,
    SHAPED_START,
)


def _layers(x: Tensor, n: int) -> Tensor:
    shift = torch.tensor([0, 1] + [2 * (i + 1) for i in range(n)])
    mask = torch.tensor([1, 1] + [3] * n)
    return (x[..., None] >> shift) & mask


def observe_reference(env: OvercookedV2Env, s: OvercookedState) -> Tensor:
    """[B, A, V, V, C] long observation of every agent, computed channel group by channel group."""
    lay, n, A, H, W = env.layout, env.n, env.A, env.H, env.W
    B, p, u8 = s.pos.shape[0], env.view or 0, torch.long
    codes = torch.tensor(
        [L.WALL, L.GOAL, L.POT, L.RECIPE_INDICATOR, L.BUTTON_INDICATOR, L.PLATE_PILE]
        + [L.PILE_BASE + i for i in range(n)]
    )
    Hp, Wp = H + 2 * p, W + 2 * p
    pad = torch.full((Hp, Wp), -1, dtype=torch.long)
    pad[p : p + H, p : p + W] = torch.as_tensor(lay.static)
    static_pad = pad.reshape(-1)
    wy, wx = torch.meshgrid(torch.arange(env.view_h), torch.arange(env.view_w), indexing="ij")
    win = torch.stack([wx.reshape(-1), wy.reshape(-1)], -1)
    origin = s.pos - p if p else torch.zeros_like(s.pos)
    if p:
        idx = (s.pos[..., 1] * Wp + s.pos[..., 0])[..., None] + (win[:, 1] * Wp + win[:, 0])
    else:
        idx = (win[:, 1] * W + win[:, 0]).expand(B, A, -1)
    idx = idx.reshape(B, -1)
    st = static_pad[idx]
    planes = torch.zeros(2, B, Hp, Wp, dtype=torch.long)
    planes[0, :, p : p + H, p : p + W] = s.items.view(B, H, W)
    planes[1, :, p : p + H, p : p + W] = s.extra.view(B, H, W)
    planes = planes.view(2, B, Hp * Wp)
    it, ex = planes[0].gather(1, idx), planes[1].gather(1, idx)
    rec = torch.where(
        (st == L.RECIPE_INDICATOR) | ((st == L.BUTTON_INDICATOR) & (ex > 0)), s.recipe[:, None], 0
    )
    parts = [
        (st[..., None] == codes).to(u8),
        _layers(it, n),
        _layers(rec, n),
        torch.where(st == L.POT, ex, 0)[..., None],
    ]
    if env.indicate_delivery:
        parts.append(((st == L.GOAL) & s.new_correct_delivery[:, None]).to(u8)[..., None])
    feat = torch.cat(
        [torch.ones(B, A, 1, dtype=torch.long), torch.nn.functional.one_hot(s.dir, 4), _layers(s.inv, n)], -1
    )
    VV, F = env.view_h * env.view_w, feat.shape[-1]
    agents = torch.zeros(B, A, 2, VV, F, dtype=u8)
    arA, ar = torch.arange(A), torch.arange(B)
    for o in range(A):
        rel = s.pos[:, o, None, :] - origin
        vis = (
            (rel[..., 0] >= 0) & (rel[..., 0] < env.view_w) & (rel[..., 1] >= 0) & (rel[..., 1] < env.view_h)
        )
        cell = rel[..., 1].clamp(0, env.view_h - 1) * env.view_w + rel[..., 0].clamp(0, env.view_w - 1)
        block = (arA != o).long().expand(B, A)
        agents.index_put_(
            (ar[:, None].expand(B, A), arA.expand(B, A), block, cell),
            feat[:, o, None, :] * vis[..., None],
            accumulate=True,
        )
    grid = torch.cat(parts, -1).view(B, A, VV, -1)
    obs = torch.cat([agents[:, :, 0], agents[:, :, 1], grid], -1)[..., : env.obs_channels]
    return obs.reshape(B, A, env.view_h, env.view_w, -1)


def _ingredient_count(env: OvercookedV2Env, items: Tensor) -> Tensor:
    return sum(((items >> (2 + 2 * i)) & 3) for i in range(env.n))


def transition_reference(
    env: OvercookedV2Env, s: OvercookedState, actions: Tensor
) -> tuple[OvercookedState, Tensor, Tensor, Tensor]:
    """The pure transition (no reset): returns (next state, reward [B], shaped_reward [B, A], done [B])."""
    actions = torch.as_tensor(actions, device=env.device).long()
    B, A, H, W = actions.shape[0], env.A, env.H, env.W
    ar = torch.arange(B, device=env.device)
    static = torch.as_tensor(env.layout.static.reshape(-1), device=env.device)  # [HW] static object codes
    dir_vec = torch.tensor(L.DIR_VEC, device=env.device)  # [4, 2] (dx, dy) of UP, DOWN, RIGHT, LEFT
    action_dir = torch.tensor(L.ACTION_TO_DIR, device=env.device)  # [6] direction of an action, -1 none
    # 1. moves: a move action always turns; move only onto an EMPTY static cell (bounds-clipped)
    d = action_dir[actions]  # [B, A]
    moving = d >= 0
    new_dir = torch.where(moving, d, s.dir)
    tgt = s.pos + dir_vec[d.clamp(min=0)]
    tgt = torch.stack([tgt[..., 0].clamp(0, W - 1), tgt[..., 1].clamp(0, H - 1)], -1)
    free = static[tgt[..., 1] * W + tgt[..., 0]] == L.EMPTY
    prop = torch.where((moving & free)[..., None], tgt, s.pos)  # [B, A, 2]
    # 2. collisions: revert agents sharing a cell until stable (A rounds reach the fixpoint)
    eye = torch.eye(A, dtype=torch.bool, device=env.device)
    reverted = torch.zeros(B, A, dtype=torch.bool, device=env.device)
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
    reward = torch.zeros(B, device=env.device)
    shaped = torch.zeros(B, A, device=env.device)
    correct_any = torch.zeros(B, dtype=torch.bool, device=env.device)
    plated = s.recipe | L.PLATE | L.COOKED
    n_plates = (inv_before == L.PLATE).sum(1)
    is_pot_cell = static == L.POT
    for a in range(A):
        act = actions[:, a] == 5
        f = pos[:, a] + dir_vec[new_dir[:, a]]
        c = f[:, 1].clamp(0, H - 1) * W + f[:, 0].clamp(0, W - 1)
        st, it, ex, iv = static[c], items[ar, c], extra[ar, c], inv[:, a]
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
        placement = idle & inv_ing & (_ingredient_count(env, it) != 3)
        sel = iv | (iv << 1)
        sh = sh + (placement & ((it & sel) < (s.recipe & sel))).float() * SHAPED_PLACEMENT
        drop = (wall & no_ing & ~empty) | placement
        delivery = goal & inv_dish
        no_effect = ~pickup & ~drop & ~delivery
        pile_item = torch.where(plate_pile, L.PLATE, 0) + torch.where(
            ing_pile, 4 << (2 * (st - L.PILE_BASE).clamp(min=0)), 0
        )
        new_it = torch.where(drop, merged, torch.where(no_effect, it, 0))
        start = idle & ~no_ing & empty & env.start_cooking
        sh = sh + (start & (it == s.recipe)).float() * SHAPED_START
        auto = idle & (_ingredient_count(env, new_it) == 3) & (not env.start_cooking)
        use_pot = start | auto
        new_ex = torch.where(use_pot, POT_COOK_TIME, torch.where(press, INDICATOR_TIME, ex))
        new_iv = torch.where(pickup, pile_item + merged, torch.where(no_effect, iv, 0))
        correct = iv == plated
        r = (
            delivery.float()
            * torch.where(correct, 1.0, -1.0 if env.negative_rewards else 0.0)
            * DELIVERY_REWARD
        )
        r = r - press.float() * INDICATOR_COST
        n_pots = (is_pot_cell & (items != 0)).sum(1)
        no_counter_plates = (items == L.PLATE).sum(1) == 0
        sh = (
            sh
            + (pickup & (new_iv == L.PLATE) & (n_plates < n_pots) & no_counter_plates).float() * SHAPED_PLATE
        )
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
    extra = torch.where((static == L.BUTTON_INDICATOR)[None], (extra - 1).clamp(min=0), extra)
    # 6. recipe resampling after a correct delivery
    recipe = s.recipe
    if env.sample_recipe_on_delivery:  # the same draw from the env's generator as the fast path
        recipe = torch.where(correct_any, env.draw_recipes(B), recipe)
    step = s.step + 1
    done = step >= env.max_steps
    ns = OvercookedState(
        pos=pos,
        dir=new_dir,
        inv=inv,
        items=items,
        extra=extra,
        recipe=recipe,
        step=step,
        new_correct_delivery=correct_any,
    )
    return ns, reward, shaped, done
