"""OP^Phi(pi) = mean_{phi in Phi} XP(pi, phi(pi)) (eq. other-play), exact and batched over policies.

Each phi acts on a policy through its history and action maps, phi(pi)^i[hmap_i(k), act_i(a)] = pi^i[k, a]
(:func:`policy_image`); :func:`symmetry_maps` computes them once per Phi and refuses inadmissible phi.
Every (phi, seat assignment) profile of a batch is one joint policy of a single expected-return call
(:func:`batch_op_values`); J is multilinear in the policy entries, so the exact gradient of OP^Phi reads
the partner's phi(pi) back through the same maps (:func:`batch_op_gradient`). :func:`op_values` and
:func:`op_gradient` are the checked entry points. Also here: Phi by name (:func:`symmetry_set`) and the
histories a policy reaches in other-play (:func:`played_histories`). The training on these values is
:mod:`ers_exact.zsc.other_play`; the search over deterministic policies is :mod:`ers_exact.zsc.op_search`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.objectives import seat_assignments
from ers_exact.model.sequence_form import sequence_form
from ers_exact.model.transformation import InadmissibleError, Transformation, history_map
from ers_exact.model.values import Policy, check_policy, expected_return, local_history_reach, return_gradient
from ers_exact.symmetry.search import decpomdp_symmetries
from ers_exact.util.options import UsageError
from ers_exact.zsc.config import SYMMETRY_SETS

__all__ = [
    "SymmetryMaps",
    "batch_op_gradient",
    "batch_op_values",
    "op_gradient",
    "op_values",
    "played_histories",
    "policies_per_batch",
    "policy_image",
    "symmetry_maps",
    "symmetry_set",
]

SymmetryMaps = list[list[tuple[np.ndarray, np.ndarray]]]  # per phi, per agent: (history map, action map)
_BATCH_POLICIES = 4096  # joint policies per exact evaluation when scoring deterministic profiles


# --- symmetry sets -------------------------------------------------------------------------------------


def symmetry_set(tree: HistoryTree, name: str) -> list[Transformation]:
    """Phi by name: ``"mdp"`` = Phi_MDP (every Dec-POMDP symmetry, exact search), ``"none"`` = {id}
    (OP^{id} = SP)."""
    if name == "mdp":
        return decpomdp_symmetries(tree.game)
    if name == "none":
        return [Transformation.identity(tree.game)]
    raise UsageError(f"unknown symmetry set {name!r}: use one of {', '.join(SYMMETRY_SETS)}")


# --- exact OP values and gradients, batched ------------------------------------------------------------


def symmetry_maps(tree: HistoryTree, phis: Sequence[Transformation]) -> SymmetryMaps:
    """Per phi and agent: (history map [K_i], action permutation [A_i]); refuses inadmissible phi."""
    if len(phis) == 0:
        raise ValueError("the set of transformations Phi is empty")
    out = []
    for phi in phis:
        row = []
        for i in range(tree.game.n_agents):
            hmap = history_map(tree, phi, i)
            if np.any(hmap < 0):
                k = int(np.flatnonzero(hmap < 0)[0])
                raise InadmissibleError(
                    f"phi maps agent {i}'s possible history {tree.local[i].as_tuple(k)} to an impossible one"
                )
            act = np.asarray(phi.actions[i])
            if not np.array_equal(tree.local[i].legal[hmap][:, act], tree.local[i].legal):
                raise InadmissibleError(f"phi maps a legal action of agent {i} to an illegal one")
            row.append((hmap, act))
        out.append(row)
    return out


def policy_image(pol: np.ndarray, hmap: np.ndarray, act: np.ndarray) -> np.ndarray:
    """phi(pi)^i[hmap(k), act(a)] = pi^i[k, a] for a batch [B, K, A]."""
    new = np.empty_like(pol)
    new[:, hmap[:, None], act[None, :]] = pol
    return new


def _profiles(tree: HistoryTree, pols: tuple[np.ndarray, ...], maps: SymmetryMaps) -> tuple[np.ndarray, ...]:
    """Every (phi, seat assignment) profile of a batch: per agent [F * M * B, K_i, A_i], phi-major."""
    seats = seat_assignments(tree.game.n_agents)
    return tuple(
        np.concatenate(
            [pols[i] if row[i] == 0 else policy_image(pols[i], *m[i]) for m in maps for row in seats]
        )
        for i in range(tree.game.n_agents)
    )


def _profile_values(tree: HistoryTree, profiles: tuple[np.ndarray, ...]) -> np.ndarray:
    """J of the joint profiles built here (valid by construction: the sequence form without the checks of
    :func:`~ers_exact.model.values.expected_return`, whose numbers they are).  # [B]"""
    form = sequence_form(tree)
    return form.value(profiles) if form is not None else np.asarray(expected_return(tree, profiles))


def _profile_gradients(tree: HistoryTree, profiles: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """dJ/dpi of the joint profiles built here (as :func:`_profile_values`).  # per agent [B, K_i, A_i]"""
    form = sequence_form(tree)
    return form.gradient(profiles) if form is not None else return_gradient(tree, profiles)


def policies_per_batch(tree: HistoryTree, maps: SymmetryMaps) -> int:
    """Policies per chunk of an exact OP evaluation: each makes |Phi| x (seat assignments) joint policies,
    and a chunk has at most _BATCH_POLICIES of those (at least one policy)."""
    return max(1, _BATCH_POLICIES // (len(maps) * len(seat_assignments(tree.game.n_agents))))


def batch_op_values(tree: HistoryTree, pols: tuple[np.ndarray, ...], maps: SymmetryMaps) -> np.ndarray:
    """OP^Phi of a batch pols (per agent [B, K_i, A_i]) under the maps of Phi: [B], evaluated in chunks of
    :func:`policies_per_batch` policies."""
    B = pols[0].shape[0]
    chunk = policies_per_batch(tree, maps)
    out = np.empty(B)
    for lo in range(0, B, chunk):
        part = tuple(p[lo : lo + chunk] for p in pols)
        out[lo : lo + chunk] = (
            _profile_values(tree, _profiles(tree, part, maps)).reshape(-1, len(part[0])).mean(axis=0)
        )
    return out


def op_values(tree: HistoryTree, policy: Policy, phis: Sequence[Transformation]) -> np.ndarray | float:
    """OP^Phi(pi) for one policy or a batch ([P]); the same number as
    :func:`ers_exact.model.objectives.other_play`, with the history maps computed once."""
    pols, batched = check_policy(tree, policy)
    out = batch_op_values(tree, pols, symmetry_maps(tree, phis))
    return out if batched else float(out[0])


def batch_op_gradient(
    tree: HistoryTree, pols: tuple[np.ndarray, ...], maps: SymmetryMaps
) -> tuple[np.ndarray, ...]:
    """d OP^Phi / d pi^i(a | tau) of a batch (per agent [B, K_i, A_i]), entries as free variables: the seat
    pi fills reads its own entry, the seat phi(pi) fills reads the image's entry [hmap(k), act(a)]."""
    n, seats = tree.game.n_agents, seat_assignments(tree.game.n_agents)
    F, M, B = len(maps), len(seats), pols[0].shape[0]
    grads = _profile_gradients(tree, _profiles(tree, pols, maps))
    out = []
    for i in range(n):
        g = grads[i].reshape(F, M, B, *pols[i].shape[1:])
        own, other = seats[:, i] == 0, seats[:, i] == 1
        total = g[:, own].sum(axis=(0, 1))
        for f, m in enumerate(maps):  # seat filled by phi(pi): d/d pi[k, a] reads the image's entry
            hmap, act = m[i]
            total = total + g[f, other].sum(axis=0)[:, hmap[:, None], act[None, :]]
        out.append(total / (F * M))
    return tuple(out)


def op_gradient(tree: HistoryTree, policy: Policy, phis: Sequence[Transformation]) -> tuple[np.ndarray, ...]:
    """d OP^Phi(pi) / d pi^i(a | tau), entries as free variables; per agent [K_i, A_i] (or [P, K_i, A_i]
    for a batch)."""
    pols, batched = check_policy(tree, policy)
    out = batch_op_gradient(tree, pols, symmetry_maps(tree, phis))
    return out if batched else tuple(g[0] for g in out)


# --- what a policy plays -------------------------------------------------------------------------------


def played_histories(
    tree: HistoryTree, policy: Policy, phis: Sequence[Transformation] = (), tol: float = 1e-12
) -> tuple[dict[str, Any], ...]:
    """Per agent, every local history the policy reaches with probability > ``tol`` -- in other-play
    against phi(pi), phi in ``phis`` (either seat; the mean reach), or in self-play when ``phis`` is empty:
    ``{"agent", "history": [a_0, o_1, ...] as names, "reach", "policy": {action name: probability > tol}}``.
    A readable summary of a policy; histories it never reaches are left out."""
    pols, _ = check_policy(tree, policy)
    game, n, out = tree.game, tree.game.n_agents, []
    if phis:
        profiles = _profiles(tree, pols, symmetry_maps(tree, phis))  # [F * M, ...], seat rows inner
        seats = np.tile(seat_assignments(n), (len(phis), 1))
        reaches = local_history_reach(tree, profiles)
        reach_of = [reaches[i][seats[:, i] == 0].mean(axis=0) for i in range(n)]
    else:
        reach_of = list(local_history_reach(tree, tuple(p[0] for p in pols)))
    for i, reach in enumerate(reach_of):
        for k in np.flatnonzero(reach > tol):
            names = [
                game.action_names[i][x] if j % 2 == 0 else game.observation_names[i][x]
                for j, x in enumerate(tree.local[i].as_tuple(int(k)))
            ]
            row = pols[i][0, k]
            actions = {game.action_names[i][a]: float(row[a]) for a in np.flatnonzero(row > tol)}
            out.append({"agent": i, "history": names, "reach": float(reach[k]), "policy": actions})
    return tuple(out)
