"""Dec-POMDP symmetries of Overcooked V2 layouts, as ``IndexSymmetry`` (index permutations of observations and
actions).

The one family implemented: a *vertical reflection* (y -> H-1-y) combined with a permutation of ingredient
labels, valid when the reflected static grid (with pile labels permuted) equals the grid and the recipe set is
closed under the label permutation. For ``grounded_coord_simple`` this is the flip that swaps rows 1 and 3 and
ingredients 0 <-> 1 (piles 0 and 1 trade places; the distractor 2 stays): together with the action swap
up <-> down it is a Dec-POMDP symmetry (the only non-trivial one of that layout: left/right are not symmetric,
the two agents' rooms differ). ``find_vertical_symmetry`` returns None where no such symmetry exists.

Every map is derived in one place: directions and actions from ``layouts.DIR_VEC`` / ``ACTION_TO_DIR`` (the
reflection negates dy), observation indices by relabelling ``obs.channel_labels`` at every window cell.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ers_deep.envs.overcooked_v2 import layouts as L
from ers_deep.envs.overcooked_v2.env import OvercookedState, OvercookedV2Env
from ers_deep.envs.overcooked_v2.obs import channel_labels
from ers_deep.envs.symmetry import IndexSymmetry, relabel_index

# direction d -> its reflection (d indexes DIR_VEC); action a -> its reflection (actions index ACTION_TO_DIR)
FLIP_DIR = tuple(L.DIR_VEC.index((dx, -dy)) for dx, dy in L.DIR_VEC)
FLIP_ACTION = tuple(a if d < 0 else L.ACTION_TO_DIR.index(FLIP_DIR[d]) for a, d in enumerate(L.ACTION_TO_DIR))


def _map_items(x: Tensor, perm: tuple[int, ...]) -> Tensor:
    """Relabel the ingredient count fields of item bitfields ``x`` by ``perm`` (ingredient i -> perm[i])."""
    out = x & 3
    for i, j in enumerate(perm):
        out = out | (((x >> (2 + 2 * i)) & 3) << (2 + 2 * j))
    return out


def _relabel_channel(label: tuple[Any, ...], perm: tuple[int, ...]) -> tuple[Any, ...]:
    """The channel label after the reflection (direction) and ingredient relabelling ``perm``."""
    if len(label) == 3 and label[1] == "dir":
        return (label[0], "dir", FLIP_DIR[label[2]])
    if len(label) >= 2 and label[-2] == "ingredient":
        return (*label[:-1], perm[label[-1]])
    if label[0] == "static" and label[1] >= L.PILE_BASE:
        return ("static", L.PILE_BASE + perm[label[1] - L.PILE_BASE])
    return label


def find_vertical_symmetry(env: OvercookedV2Env) -> IndexSymmetry | None:
    """The vertical-reflection symmetry of ``env``'s layout (first valid ingredient permutation), or None."""
    lay, n = env.layout, env.n
    flipped = lay.static[::-1]
    recipes = {tuple(sorted(r)) for r in lay.recipes}
    for perm in itertools.permutations(range(n)):
        if perm == tuple(range(n)):
            continue  # the plain flip without relabelling is tried below only if no relabelling works
        piles = L.PILE_BASE + np.array(perm)[np.clip(flipped - L.PILE_BASE, 0, n - 1)]
        mapped = np.where(flipped >= L.PILE_BASE, piles, flipped)
        closed = {tuple(sorted(perm[i] for i in r)) for r in recipes} == recipes
        if np.array_equal(mapped, lay.static) and closed:
            return _build(env, perm)
    if np.array_equal(flipped, lay.static):
        return _build(env, tuple(range(n)))
    return None


def _build(env: OvercookedV2Env, perm: tuple[int, ...]) -> IndexSymmetry:
    """The reflection with ingredient relabelling ``perm`` as index maps of env's [V, V, C] observation."""
    Vh, Vw, C = env.obs_shape
    channels = channel_labels(env.n, env.indicate_delivery)[:C]
    labels = [(y, x, ch) for y in range(Vh) for x in range(Vw) for ch in channels]

    def relabel(lab: tuple[Any, ...]) -> tuple[Any, ...]:
        return (Vh - 1 - lab[0], lab[1], _relabel_channel(lab[2], perm))

    try:
        obs_index = relabel_index(labels, relabel)
    except ValueError:
        msg = "this symmetry moves a channel dropped by the 38-channel (paper) observation"
        raise ValueError(msg) from None
    action_index = torch.argsort(torch.tensor(FLIP_ACTION))
    return IndexSymmetry(
        torch.as_tensor(obs_index, device=env.device),
        action_index.to(env.device),
        f"vertical-flip{perm}",
        (Vh, Vw, C),
        perm,
    )


def apply_to_state(env: OvercookedV2Env, sym: IndexSymmetry, s: OvercookedState) -> OvercookedState:
    """The reflected, relabelled state (for tests: step and observation commute with the symmetry)."""
    H, W, B, perm = env.H, env.W, s.pos.shape[0], sym.label_perm
    pos = torch.stack([s.pos[..., 0], H - 1 - s.pos[..., 1]], -1)
    dir_map = torch.tensor(FLIP_DIR, device=env.device)

    def flip(g: Tensor) -> Tensor:
        return g.view(B, H, W).flip(1).reshape(B, -1)

    return OvercookedState(
        pos=pos,
        dir=dir_map[s.dir],
        inv=_map_items(s.inv, perm),
        items=_map_items(flip(s.items), perm),
        extra=flip(s.extra),
        recipe=_map_items(s.recipe, perm),
        step=s.step.clone(),
        new_correct_delivery=s.new_correct_delivery.clone(),
    )
