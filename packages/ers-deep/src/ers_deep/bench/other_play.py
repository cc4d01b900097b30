"""Other-play nets for throughput rows (``scripts/gpu_train_table.py``'s ``phi`` row variant) and tests: Phi by
name, with stand-ins for learned symmetries (random ``ObsMap`` s near the identity: the cost of learned phi_O
without a discovery run).

    bench_op_net(config, "mdp")         # the env's Dec-POMDP symmetries (Hanabi: 120 colour permutations)
    bench_op_net(config, "learned:12")  # the identity and 12 stand-ins (grouped on CUDA, nets.grouped)
"""

from __future__ import annotations

import math

import torch

from ers_deep.discovery import LearnedSymmetry
from ers_deep.envs.symmetry import Symmetry
from ers_deep.nets.other_play import OtherPlayNet
from ers_deep.nets.phi import ObsMap
from ers_deep.other_play import identity_symmetry, op_net, op_symmetries
from ers_deep.train.config import TrainConfig, make_env
from ers_exact.util.options import UsageError

__all__ = ["bench_op_net", "near_identity_map", "near_identity_symmetries"]


def near_identity_map(size: int, seed: int, relu_output: bool = True, scale: float = 0.05) -> ObsMap:
    """A one-candidate ``ObsMap`` with every layer I + N(0, scale^2) and biases N(0, scale^2) (seeded): real-valued
    outputs, as a trained map's."""
    g = torch.Generator().manual_seed(seed)
    out = ObsMap(1, size, relu_output=relu_output)
    with torch.no_grad():
        for p in [*out.weights, *out.biases]:
            p.add_(scale * torch.randn(p.shape, generator=g))
    return out


def near_identity_symmetries(config: TrainConfig, count: int) -> tuple[Symmetry, ...]:
    """Phi = (identity, phi_1..phi_count) on ``config``'s env: phi_k = (``near_identity_map`` seeded k, the
    actions rolled by k + 1), on ``config.device``, as ``op_symmetries`` loads a discovery output's."""
    env, dev = make_env(config, 1, seed=0), config.device
    n, A = math.prod(env.obs_shape), env.num_actions
    learned = (
        LearnedSymmetry(
            near_identity_map(n, k).to(dev),
            torch.arange(A, device=dev).roll(k + 1),
            f"phi{k}",
            tuple(env.obs_shape),
        )
        for k in range(count)
    )
    return (identity_symmetry(config), *learned)


def bench_op_net(config: TrainConfig, phi: str) -> OtherPlayNet | None:
    """The other-play net of ``config`` with Phi named ``phi``: ``"none"`` (None: self-play's own net), ``"mdp"``
    or ``"learned:K"`` (K stand-ins, ``near_identity_symmetries``); a ``UsageError`` naming it otherwise."""
    if phi == "none":
        return None
    if phi == "mdp":
        return op_net(config, op_symmetries(config, "mdp"))
    kind, _, count = phi.partition(":")
    if kind != "learned" or not count.isdigit() or int(count) < 1:
        raise UsageError(f"phi={phi!r}: choose none, mdp or learned:K (K >= 1 stand-in symmetries)")
    return op_net(config, near_identity_symmetries(config, int(count)))
