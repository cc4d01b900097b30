"""Other-play training on tabular games: maximise OP^Phi(pi) (eq. other-play) over softmax policies.

Policies are softmax(theta) over legal actions at every local history; theta follows Adam on the exact
objective with its exact gradient (:func:`op_gradient`: J is multilinear in the policy entries, and the
partner's transformed policy phi(pi) is differentiated back through the history maps of phi). m seeds are trained; among the seeds whose OP value is best (within 1e-6) the one with the best self-play
J is deployed (the paper keeps the best J; with exact objectives several OP-suboptimal seeds can have a
higher J, so OP optimality comes first). An entropy bonus annealed to 0 over the first half of training
keeps early policies mixed: with parameters shared across agents a coordination term like u^2 (both
agents pick the unused lever) has no first-order pull at u = 0.
A final polish rounds near-deterministic rows to one-hot when that does not lower OP (the optimum of
OP is often deterministic where the symmetry group allows it, e.g. 4/3 in the three-lever game).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.objectives import other_play, seat_assignments
from ers_exact.model.transformation import Transformation, apply_to_policy, history_map
from ers_exact.model.values import expected_return, return_gradient
from ers_exact.zsc.iql import same_local_trees

__all__ = ["OPConfig", "OPResult", "op_gradient", "train_other_play"]


@dataclass(frozen=True)
class OPConfig:
    """Optimiser settings of :func:`train_other_play`."""

    seeds: int = 5  # m
    steps: int = 150
    learning_rate: float = 0.2
    shared: bool = True  # one policy for all agents whose local history trees coincide (parameter sharing)
    init_scale: float = 1.0
    polish_threshold: float = 0.9
    entropy: float = 0.2  # weight of an entropy bonus, annealed linearly to 0 over the first half
    seed: int = 0


@dataclass(frozen=True)
class OPResult:
    """The deployed OP policy (best J among the seeds) and what every seed reached."""

    policy: tuple[np.ndarray, ...]
    op_value: float
    J: float
    seed_op_values: tuple[float, ...]
    seed_J: tuple[float, ...]


def _policy(tree: HistoryTree, theta: np.ndarray, shared: bool) -> tuple[np.ndarray, ...]:
    """theta [P, D] -> per agent [P, K_i, A_i] softmax over legal actions (agent 0's block for all agents
    when ``shared``)."""
    out, offset = [], 0
    for hist in tree.local:
        K, A = hist.legal.shape
        if shared:
            offset = 0
        z = np.where(hist.legal[None], theta[:, offset:offset + K * A].reshape(-1, K, A), -np.inf)
        z = np.exp(z - z.max(axis=2, keepdims=True))
        out.append(z / z.sum(axis=2, keepdims=True))
        offset += K * A
    return tuple(out)


def _polish(tree: HistoryTree, policy: tuple[np.ndarray, ...], threshold: float) -> tuple[np.ndarray, ...]:
    out = []
    for p in policy:
        hard = np.eye(p.shape[-1])[np.argmax(p, axis=-1)]
        out.append(np.where(p.max(axis=-1, keepdims=True) > threshold, hard, p))
    return tuple(out)


def op_gradient(tree: HistoryTree, policy: tuple[np.ndarray, ...], phis: Sequence[Transformation]
                ) -> tuple[np.ndarray, ...]:
    """d OP^Phi(pi) / d pi^i(a | tau), entries as free variables; per agent [K_i, A_i]."""
    n = tree.game.n_agents
    seats = seat_assignments(n)
    maps = [[(history_map(tree, phi, i), np.asarray(phi.actions[i])) for i in range(n)] for phi in phis]
    images = [apply_to_policy(tree, phi, policy) for phi in phis]
    profiles = [tuple(policy[i] if row[i] == 0 else img[i] for i in range(n)) for img in images for row in seats]
    grads = return_gradient(tree, tuple(np.stack([p[i] for p in profiles]) for i in range(n)))
    out = [np.zeros_like(p) for p in policy]
    weight = 1.0 / (len(phis) * len(seats))
    for f, phi_maps in enumerate(maps):
        for s_idx, row in enumerate(seats):
            b = f * len(seats) + s_idx
            for i in range(n):
                g = grads[i][b]
                if row[i] == 0:
                    out[i] += weight * g
                else:  # seat filled by phi(pi): phi(pi)^i[hmap(k), phi(a)] = pi^i[k, a]
                    hmap, act = phi_maps[i]
                    out[i] += weight * g[hmap[:, None], act[None, :]]
    return tuple(out)


def _softmax_grad(policy: tuple[np.ndarray, ...], grads: tuple[np.ndarray, ...], shared: bool) -> np.ndarray:
    """Chain rule through the per-history softmax: d/dtheta = pi * (g - sum_b pi_b g_b), flattened
    (summed over agents when their parameters are shared)."""
    parts = [(p * (g - (p * g).sum(axis=1, keepdims=True))).ravel() for p, g in zip(policy, grads)]
    return np.sum(parts, axis=0) if shared else np.concatenate(parts)


def _entropy_grad(policy: tuple[np.ndarray, ...], shared: bool) -> np.ndarray:
    """d/dtheta of sum over histories of the row entropy H = -sum_a pi_a log pi_a."""
    parts = []
    for p in policy:
        logp = np.log(np.where(p > 0, p, 1.0))
        parts.append((-p * (logp - (p * logp).sum(axis=1, keepdims=True))).ravel())
    return np.sum(parts, axis=0) if shared else np.concatenate(parts)


def train_other_play(tree: HistoryTree, phis: Sequence[Transformation], config: OPConfig = OPConfig()) -> OPResult:
    """Maximise OP^Phi over softmax policies for ``config.seeds`` seeds; keep the best-J seed."""
    rng = np.random.default_rng(config.seed)
    shared = config.shared and same_local_trees(tree)
    D = tree.local[0].legal.size if shared else sum(h.legal.size for h in tree.local)
    results = []
    for _ in range(config.seeds):
        theta = rng.normal(scale=config.init_scale, size=D)
        m, v = np.zeros(D), np.zeros(D)
        for step in range(1, config.steps + 1):
            policy = tuple(p[0] for p in _policy(tree, theta[None], shared))
            grad = _softmax_grad(policy, op_gradient(tree, policy, phis), shared)
            beta = config.entropy * max(0.0, 1.0 - 2.0 * step / config.steps)
            if beta > 0:  # keeps early policies mixed: coordination terms like u^2 have no pull at u = 0
                grad = grad + beta * _entropy_grad(policy, shared)
            m = 0.9 * m + 0.1 * grad
            v = 0.999 * v + 0.001 * grad**2
            theta = theta + config.learning_rate * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
        soft = tuple(p[0] for p in _policy(tree, theta[None], shared))
        hard = _polish(tree, soft, config.polish_threshold)
        op_soft, op_hard = other_play(tree, soft, phis), other_play(tree, hard, phis)
        best = hard if op_hard >= op_soft else soft
        results.append((best, max(op_soft, op_hard), expected_return(tree, best)))
    best_op = max(r[1] for r in results)  # deploy: the best OP value, ties broken by self-play J
    k = max((r[2], -j) for j, r in enumerate(results) if r[1] >= best_op - 1e-6)[1] * -1
    return OPResult(policy=results[k][0], op_value=float(results[k][1]), J=float(results[k][2]),
                    seed_op_values=tuple(float(r[1]) for r in results), seed_J=tuple(float(r[2]) for r in results))
