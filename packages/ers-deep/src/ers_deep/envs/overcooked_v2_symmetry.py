"""Dec-POMDP symmetries of Overcooked V2 layouts, as index permutations of observations and actions.

The one family implemented: a *vertical reflection* (y -> H-1-y) combined with a permutation of ingredient
labels, valid when the reflected static grid (with pile labels permuted) equals the grid and the recipe set is
closed under the label permutation. For ``grounded_coord_simple`` this is the flip that swaps rows 1 and 3 and
ingredients 0 <-> 1 (piles 0 and 1 trade places; the distractor 2 stays): together with the action swap
up <-> down it is a Dec-POMDP symmetry (the only non-trivial one of that layout: left/right are not symmetric,
the two agents' rooms differ). ``find_vertical_symmetry`` returns None where no such symmetry exists.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ers_deep.envs import overcooked_v2_layouts as L
from ers_deep.envs.overcooked_v2 import OvercookedState, OvercookedV2Env


@dataclass(frozen=True)
class OvercookedSymmetry:
    """``obs_perm`` [V*V*C]: obs'.flatten() = obs.flatten()[obs_perm] (per agent, [V, V, C] row-major);
    ``action_perm`` [6]: a' = action_perm[a]; ``ingredient_perm`` [n]: ingredient label map."""

    obs_perm: Tensor
    action_perm: Tensor
    ingredient_perm: tuple[int, ...]


def _map_items(x: Tensor, perm: tuple[int, ...]) -> Tensor:
    """Relabel the ingredient count fields of item bitfields ``x`` by ``perm`` (ingredient i -> perm[i])."""
    out = x & 3
    for i, j in enumerate(perm):
        out = out | (((x >> (2 + 2 * i)) & 3) << (2 + 2 * j))
    return out


def find_vertical_symmetry(env: OvercookedV2Env) -> OvercookedSymmetry | None:
    """The vertical-reflection symmetry of ``env``'s layout (first valid ingredient permutation), or None."""
    import itertools

    lay, n = env.layout, env.n
    flipped = lay.static[::-1]
    recipes = {tuple(sorted(r)) for r in lay.recipes}
    for perm in itertools.permutations(range(n)):
        if perm == tuple(range(n)):
            continue  # the plain flip without relabelling is tried below only if no relabelling works
        mapped = np.where(flipped >= L.PILE_BASE, L.PILE_BASE + np.array(perm)[np.clip(flipped - L.PILE_BASE, 0, n - 1)],
                          flipped)
        if np.array_equal(mapped, lay.static) and {tuple(sorted(perm[i] for i in r)) for r in recipes} == recipes:
            return _build(env, perm)
    if np.array_equal(flipped, lay.static):
        return _build(env, tuple(range(n)))
    return None


def _build(env: OvercookedV2Env, perm: tuple[int, ...]) -> OvercookedSymmetry:
    n, C, Vh, Vw = env.n, env.obs_channels, env.view_h, env.view_w
    ch = list(range(env.num_channels))
    F = 7 + n
    for base in (0, F):  # own and other agent blocks: direction UP <-> DOWN, inventory ingredient counts
        ch[base + 1], ch[base + 2] = base + 2, base + 1
        for i, j in enumerate(perm):
            ch[base + 7 + j] = base + 7 + i
    piles = 2 * F + 6
    for i, j in enumerate(perm):
        ch[piles + j] = piles + i
    for base in (2 * F + 6 + n, 2 * F + 6 + n + 2 + n):  # items, recipe layers
        for i, j in enumerate(perm):
            ch[base + 2 + j] = base + 2 + i
    ch = ch[:C]
    if any(c >= C for c in ch):
        raise ValueError("this symmetry moves a channel dropped by the 38-channel (paper) observation")
    yy, xx, cc = np.meshgrid(np.arange(Vh), np.arange(Vw), np.arange(C), indexing="ij")
    src = ((Vh - 1 - yy) * Vw + xx) * C + np.array(ch)[cc]
    return OvercookedSymmetry(torch.as_tensor(src.reshape(-1), device=env.device),
                              torch.tensor([0, 3, 2, 1, 4, 5], device=env.device), perm)


def apply_to_state(env: OvercookedV2Env, sym: OvercookedSymmetry, s: OvercookedState) -> OvercookedState:
    """The reflected, relabelled state (for tests: step and observation commute with the symmetry)."""
    H, W, B = env.H, env.W, s.pos.shape[0]
    pos = torch.stack([s.pos[..., 0], H - 1 - s.pos[..., 1]], -1)
    dir_map = torch.tensor([1, 0, 2, 3], device=env.device)
    flip = lambda g: g.view(B, H, W).flip(1).reshape(B, -1)
    return OvercookedState(pos=pos, dir=dir_map[s.dir], inv=_map_items(s.inv, sym.ingredient_perm),
                           items=_map_items(flip(s.items), sym.ingredient_perm), extra=flip(s.extra),
                           recipe=_map_items(s.recipe, sym.ingredient_perm), step=s.step.clone(),
                           new_correct_delivery=s.new_correct_delivery.clone())
