"""Tabular runs checked by ers-exact: the learned policies as exact joint policies, their J, their Boltzmann
fixed-point residual, and the exact fixed point they converged to.

For seed s of a tabular learner, ``pi_s`` is the network's softmax over legal actions on every local history
(``TabularEnv.split_policy``). ers-exact then gives

* ``J``: the exact expected return J(pi_s) (``ers_exact.model.values.expected_return``);
* ``residual``: max |F(pi_s) - pi_s|, F(pi) = softmax(Q_pi / alpha) (``ers_exact.solve.boltzmann``);
* ``fixed_point``: the Boltzmann fixed point nearest to pi_s, found by ers-exact's solver warm-started at
  pi_s (damped iteration + Newton), with its J, residual, distance to pi_s (max abs over policy entries) and
  whether it is self-play optimal among the points the solver found (multistart from ``n_starts`` starts;
  ``J_star`` is the best of those, not a proven optimum).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import ActorCritic, masked_logits
from ers_exact.model.values import expected_return, local_q_values
from ers_exact.solve.boltzmann import LogitCoordinates, boltzmann_residual
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points

__all__ = ["advantage_table", "exact_report", "tabular_policies"]


@torch.no_grad()
def tabular_policies(net: ActorCritic, env: TabularEnv) -> list[tuple[np.ndarray, ...]]:
    """The exact joint policy of every seed of ``net`` on ``env``'s game."""
    K = env.obs_shape[0]
    obs = env.history_obs().expand(len(net.seeds), 1, K, K)
    first = torch.ones(len(net.seeds), 1, K, dtype=torch.bool, device=env.device)
    logits, _, _ = net(obs, first, net.initial_state(K, env.device))
    probs = torch.softmax(masked_logits(logits[:, 0].double(), env.legal_table()), -1)
    return [env.split_policy(p) for p in probs]


def advantage_table(net: ActorCritic, env: TabularEnv) -> torch.Tensor:
    """[S, K, A] float32 exact advantages Q_pi(tau, a) - V_pi(tau) of every seed's current policy on every local
    history (0 at illegal actions), from ers-exact's local Q-values."""
    rows = []
    for pol in tabular_policies(net, env):
        q = local_q_values(env.tree, pol)
        table = np.zeros((env.obs_shape[0], env.num_actions))
        for i, (qi, pi) in enumerate(zip(q, pol)):
            qi = np.nan_to_num(qi)
            adv = qi - (pi * qi).sum(-1, keepdims=True)
            table[env.offsets[i] : env.offsets[i + 1], : qi.shape[1]] = np.where(
                env.tree.local[i].legal, adv, 0.0
            )
        rows.append(table)
    return torch.as_tensor(np.stack(rows), dtype=torch.float32, device=env.device)


def exact_report(
    net: ActorCritic, env: TabularEnv, alpha: float, n_starts: int | None = None
) -> list[dict[str, Any]]:
    """Per seed: J, Boltzmann residual at ``alpha``, and the nearest exact fixed point (see module doc).
    ``n_starts``: the solver's random starts (default: ``ers-exact solve``'s; 16 left three-lever's best found
    point at J 1.8807 against the solve command's 1.8964). ``J_star`` is the best J among the points found, not
    proven optimal (``ers-exact optimal-set`` proves Pi*_alpha: three-lever's J* is 1.8992923)."""
    n_starts = SolverConfig().n_starts if n_starts is None else n_starts
    tree = env.tree
    policies = tabular_policies(net, env)
    coords = LogitCoordinates(tree)
    warm = np.stack([coords.from_policy(p) for p in policies])
    found = solve_fixed_points(tree, alpha, SolverConfig(n_starts=n_starts), warm_starts=warm)
    out = []
    for seed, pol in zip(net.seeds, policies):
        row: dict[str, Any] = {
            "seed": seed,
            "J": float(expected_return(tree, pol)),
            "residual": float(boltzmann_residual(tree, pol, alpha)),
        }
        if found.points:
            dist = [max(float(np.abs(a - b).max()) for a, b in zip(fp.policy, pol)) for fp in found.points]
            best = int(np.argmin(dist))
            fp = found.points[best]
            row["fixed_point"] = {
                "J": fp.J,
                "residual": fp.residual,
                "distance": dist[best],
                "optimal": fp.optimal,
                "stable": fp.stable,
                "certified": fp.certified,
                "J_star": found.J_star,
            }
            row["J_error"] = abs(row["J"] - fp.J)
        out.append(row)
    return out
