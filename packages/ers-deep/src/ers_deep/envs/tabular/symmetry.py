"""Phi_MDP of a tabular game as ``IndexSymmetry`` maps of its batched env (``TabularEnv``).

ers-exact finds the game's Dec-POMDP symmetries (``ers_exact.symmetry.mdp_group.decpomdp_group``; its
``policy_parts``, one element per distinct action / observation part: what acts on policies). On the env
phi = (phi_A, phi_O) acts on the one-hot local history of each agent (the shared index [K] of
``TabularEnv``: agent i's histories at ``offsets[i] ..``) through phi's history map (phi(tau^i) applies
phi_A^i to every own action and phi_O^i to every observation, ``ers_exact.model.transformation.history_map``)
and on the shared action slots [A] through phi_A. One ``IndexSymmetry`` has one action map for every agent (a
shared network's action head), so the elements whose agents' action maps differ (after padding each agent's
|A^i| actions to A with fixed slots) are left out; those kept are a subgroup (composing two elements with
one action map each gives one with one action map). For the index convention see
``ers_deep.envs.symmetry``: the mapped game's one-hot of history k is at phi(k), its legal entry of
phi_A(a) is the original's of a, so ``obs_index`` and ``action_index`` are the inverse maps.

Convention: such a map acts on a policy as pi(phi_A(a) | phi(tau)) (``ers_deep.envs.symmetry.Symmetry``),
which is ers-exact's phi^-1(pi) (``phi(pi)(phi(a) | phi(tau)) = pi(a | tau)``). Over a group the two readings
give the same set; a single transformation read from ers-exact (a discovery result's ``Transformation``) is
built from phi^-1 by :func:`exact_symmetry`, so that it acts as ers-exact's phi.
"""

from __future__ import annotations

import numpy as np
import torch

from ers_deep.envs.symmetry import IndexSymmetry
from ers_deep.envs.tabular.env import TabularEnv
from ers_exact.interface import Transformation
from ers_exact.model.transformation import history_map, is_admissible
from ers_exact.symmetry.mdp_group import decpomdp_group
from ers_exact.util.options import UsageError

__all__ = ["MAX_TABULAR_SYMMETRIES", "exact_symmetry", "tabular_symmetries"]

#: the most Dec-POMDP symmetries other-play and the symmetrised cross-play draw from (Hanabi-Full has 120)
MAX_TABULAR_SYMMETRIES = 1024


def _shared_action_map(phi: Transformation, A: int) -> tuple[int, ...] | None:
    """phi_A as one map of the A action slots (each agent's own map, padded with fixed slots), or None when
    the agents' maps differ."""
    padded = {tuple(a) + tuple(range(len(a), A)) for a in phi.actions}
    return padded.pop() if len(padded) == 1 else None


def _as_index_symmetry(env: TabularEnv, phi: Transformation, actions: tuple[int, ...]) -> IndexSymmetry:
    image = np.arange(env.offsets[-1])  # [K] history k -> phi(k), in the shared index
    for i in range(env.num_agents):
        h = history_map(env.tree, phi, i)
        if (h < 0).any():  # a Dec-POMDP symmetry maps possible histories onto possible histories
            raise ValueError(f"{env.game.name}: {phi} maps a possible history of agent {i} onto none")
        image[env.offsets[i] : env.offsets[i + 1]] = env.offsets[i] + h
    name = f"decpomdp(actions {actions}, observations {tuple(phi.observations)})"
    obs_index, action_index = torch.as_tensor(np.argsort(image)), torch.as_tensor(np.argsort(actions))
    return IndexSymmetry(obs_index, action_index, name, env.obs_shape)


def tabular_symmetries(env: TabularEnv, max_symmetries: int = MAX_TABULAR_SYMMETRIES) -> list[IndexSymmetry]:
    """Phi_MDP of ``env``'s game on policies, as index maps with one action map for every agent (identity
    first; module docstring). ``UsageError`` when more than ``max_symmetries`` act on policies."""
    parts = decpomdp_group(env.game).policy_parts
    if len(parts) > max_symmetries:
        raise UsageError(
            f"{env.game.name}: Phi_MDP has {len(parts):,} elements on policies, more than the "
            f"{max_symmetries:,} other-play and the symmetrised cross-play draw from"
        )
    A, out = env.num_actions, []
    for phi in parts:
        actions = _shared_action_map(phi, A)
        if actions is not None:
            out.append(_as_index_symmetry(env, phi, actions))
    return sorted(out, key=lambda s: not s.is_identity())


def exact_symmetry(env: TabularEnv, phi: Transformation) -> IndexSymmetry:
    """ers-exact's transformation phi as an index map of ``env`` that acts on policies as ers-exact's
    ``apply_to_policy(phi, pi)``: phi(pi)(a | tau) = pi(phi_A^-1(a) | phi^-1(tau)) (module docstring: the map
    of phi^-1). ``ValueError`` when phi does not fit the game, is not admissible (DESIGN.md) or its agents'
    action maps differ (one action map for every agent: a shared network's action head)."""
    phi.check_game(env.game)
    if not is_admissible(env.tree, phi):
        raise ValueError(f"{env.game.name}: {phi} maps a possible history or a legal action onto none")
    inverse = phi.inverse()
    actions = _shared_action_map(inverse, env.num_actions)
    if actions is None:
        raise ValueError(
            f"{env.game.name}: {phi} permutes the agents' actions differently {list(phi.actions)}; other-play "
            "here plays one action map for every agent"
        )
    sym = _as_index_symmetry(env, inverse, actions)
    name = f"exact(actions {tuple(phi.actions)}, observations {tuple(phi.observations)})"
    return IndexSymmetry(sym.obs_index, sym.action_index, name, sym.obs_shape)
