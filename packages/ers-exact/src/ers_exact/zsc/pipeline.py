"""The paper's zero-shot-coordination pipeline on tabular games, computed exactly where the paper samples.

Each of P independent agents (own seeds) and each population:
* ``SP``: trains k self-play policies (IQL, or exact Boltzmann fixed points) and deploys its best one
  (greedy w.r.t. Q for IQL: the trained convention; the Boltzmann point itself for exact pools);
* ``OP+MDP``: trains m OP^{Phi_MDP} policies (Phi_MDP from the exact search) and deploys one of them by
  ``config.select_by`` (:func:`~ers_exact.deployment.deploy_index`): the paper's best self-play return
  J(pi_{i,k}) by default (ties by OP value), or the best OP value (ties by J);
* ``OP+ER``: trains its pool of k policies, discovers l symmetries (Algorithm 1/2/3), trains m OP
  policies with them and deploys one of them by the same rule.
An ER agent's Phi (:func:`~ers_exact.zsc.discovery.learned_phi`) is {Id} united with its l learned
symmetries, as in the official code (OP and the symmetriser draw from the loaded symmetries plus an
appended identity) and ers-deep (``ers_deep.other_play.op_symmetries``): the paper's OP averages XP over
[pi], which holds pi itself, and Algorithm 3 can learn a set without Id (the toy game's xp-max learns the
swap alone).
Within each population every pair of distinct agents is cross-played (XP, eq. XP). XP(*) is the median;
"+MDP" / "+ER" symmetrise every deployed policy first, with Phi_MDP / with the Phi of the OP+ER agent of
the same index. The OP column is the mean OP^Phi of the deployed policies, Phi being the set each agent
trains OP with (Phi_MDP; its own Phi); the SP population trains no OP and reports OP^{Phi_MDP}, how much
its conventions break the Dec-POMDP symmetries. OP^Phi is eq. other-play with eq. XP's n-agent reading (the
mean over the 2^n - 2 seatings of pi and phi(pi)); the report's config names it twice, as the reading the
agents train on and ``op_value`` ranks by (``op_reading: "seatings"``; ers-deep's is ``"per-seat"``) and as the
OP column's (``op_column_reading: "seatings"``, as ers-deep's: :data:`~ers_exact.deployment.OP_READINGS`),
beside ``select_by``. Standard errors: SD / sqrt(n) for means, seeded bootstrap for medians.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ers_exact.deployment import deploy_index
from ers_exact.interface import DiscoveryResult, Estimate, PopulationRow, ZSCReport
from ers_exact.model.histories import HistoryTree, check_tree
from ers_exact.model.objectives import cross_play, other_play, symmetrise
from ers_exact.model.transformation import Transformation
from ers_exact.model.values import expected_return
from ers_exact.symmetry.search import decpomdp_symmetries
from ers_exact.util.deprecation import deprecated_names
from ers_exact.util.progress import Progress
from ers_exact.zsc.config import DiscoveryConfig, OPConfig, PopulationConfig
from ers_exact.zsc.discovery import discover, learned_phi
from ers_exact.zsc.op_ascent import ascent_work
from ers_exact.zsc.other_play import OPResult, train_other_play
from ers_exact.zsc.pools import UNSEEN_POOL_SEED_OFFSET, Pool, build_pools

__all__ = [
    "AGENT_SEED_STRIDE",
    "PopulationConfig",
    "deployed_policy",
    "learned_phi",
    "population_pools",
    "run_zsc",
]


# Agent a of a run with seed s trains with seed s * AGENT_SEED_STRIDE + a, so runs with different seeds
# never share an agent seed (for fewer than AGENT_SEED_STRIDE agents).
AGENT_SEED_STRIDE = 1000


def _xp_values(tree: HistoryTree, policies: Sequence[tuple[np.ndarray, ...]]) -> np.ndarray:
    pairs = [(a, b) for a in range(len(policies)) for b in range(len(policies)) if a < b]
    if not pairs:
        return np.array([])
    first = tuple(np.stack([policies[a][i] for a, _ in pairs]) for i in range(tree.game.n_agents))
    second = tuple(np.stack([policies[b][i] for _, b in pairs]) for i in range(tree.game.n_agents))
    return np.asarray(cross_play(tree, first, second))


def _row(
    tree: HistoryTree,
    name: str,
    deployed: Sequence[tuple[np.ndarray, ...]],
    mdp: Sequence[Transformation],
    er_phis: Sequence[Sequence[Transformation]],
    *,
    seed: int,
    op_sets: Sequence[Sequence[Transformation]],
) -> PopulationRow:
    sp = np.array([expected_return(tree, p) for p in deployed])
    op = np.array([other_play(tree, p, phis) for p, phis in zip(deployed, op_sets)])
    xp = _xp_values(tree, deployed)
    sym_mdp = [symmetrise(tree, p, mdp) for p in deployed]
    sym_er = [symmetrise(tree, p, phis) for p, phis in zip(deployed, er_phis)]
    return PopulationRow(
        name=name,
        sp=Estimate.of(sp, False, seed),
        xp=Estimate.of(xp, False, seed),
        xp_median=Estimate.of(xp, True, seed),
        xp_median_mdp=Estimate.of(_xp_values(tree, sym_mdp), True, seed),
        xp_median_er=Estimate.of(_xp_values(tree, sym_er), True, seed),
        op=Estimate.of(op, False, seed),
    )


def deployed_policy(result: OPResult, select_by: str) -> tuple[np.ndarray, ...]:
    """The seed an agent deploys of its m OP seeds in ``result``, by rule ``select_by``
    (:func:`~ers_exact.deployment.deploy_index` over the seeds' J and OP^Phi). A ``result`` without a policy
    per seed (``seed_policies``, as :func:`~ers_exact.zsc.other_play.train_other_play` fills it) is a
    :class:`ValueError`."""
    if len(result.seed_policies) != len(result.seed_J):
        raise ValueError(
            f"deployed_policy needs OPResult.seed_policies, one policy per seed: this result has "
            f"{len(result.seed_policies)} for {len(result.seed_J)} seeds (build it with seed_policies=...)"
        )
    k = deploy_index(result.seed_J, result.seed_op_values, select_by)
    return result.seed_policies[k]


def _agent_seeds(config: PopulationConfig) -> list[int]:
    return [config.seed * AGENT_SEED_STRIDE + agent for agent in range(config.agents)]


def population_pools(tree: HistoryTree, config: PopulationConfig, progress: bool | None = None) -> list[Pool]:
    """Every agent's training pool, then every agent's unseen pool (2P pools), all at once (IQL: one batch of
    runs, each as if trained alone). A pool holds ``config.k`` policies, or, with ``pool_source="exact"``,
    fewer where Pi*_alpha has fewer points (``len`` of its list)."""
    seeds = _agent_seeds(config)
    unseen_seeds = [s + UNSEEN_POOL_SEED_OFFSET for s in seeds]
    return build_pools(tree, config.pool_config, seeds + unseen_seeds, progress=progress)


def run_zsc(
    tree: HistoryTree,
    config: PopulationConfig = PopulationConfig(),  # noqa: B008 (frozen: renamed_fields hides it from ruff)
    progress: bool | None = None,
    pools: Sequence[Pool] | None = None,
) -> tuple[ZSCReport, list[DiscoveryResult]]:
    """Run the three populations; return Table 1 and every ER agent's discovery result. ``progress``: the
    bars of the IQL pools and of the other-play phase, every agent's two OP trainings' Adam start-steps in one
    bar (None: when stderr is a terminal). ``pools``: :func:`population_pools` of this config, when the caller
    built them (to report their sizes); by default built here."""
    mdp = decpomdp_symmetries(check_tree(tree).game)
    op_cfg = OPConfig(seeds=config.m, steps=config.op_steps)
    sp_deployed, mdp_deployed, er_deployed, er_phis, discoveries = [], [], [], [], []
    seeds = _agent_seeds(config)
    pools = population_pools(tree, config, progress) if pools is None else pools
    if len(pools) != 2 * config.agents:
        raise ValueError(f"run_zsc needs 2 x {config.agents} pools (population_pools), not {len(pools)}")
    desc = f"zsc {tree.game.name}: other-play of {config.agents} agents (OP + Phi_MDP, OP + Phi_ER)"
    with Progress(config.agents * 2 * ascent_work(op_cfg), desc, enabled=progress) as bar:
        for agent, seed in enumerate(seeds):
            pool, sp_policy = pools[agent]
            unseen, _ = pools[config.agents + agent]
            disc_cfg = DiscoveryConfig(algorithm=config.algorithm, top=config.top, seed=seed)
            result = discover(tree, pool, disc_cfg, unseen_pool=unseen)
            discoveries.append(result)
            er_phis.append(learned_phi(tree, result.permutations()))
            sp_deployed.append(sp_policy)
            mdp_op = train_other_play(tree, mdp, replace(op_cfg, seed=seed), progress=bar)
            mdp_deployed.append(deployed_policy(mdp_op, config.select_by))
            er_op = train_other_play(tree, er_phis[-1], replace(op_cfg, seed=seed), progress=bar)
            er_deployed.append(deployed_policy(er_op, config.select_by))
    mdp_sets = [mdp] * config.agents
    seed = config.seed
    rows = (
        _row(tree, f"SP ({config.pool_source})", sp_deployed, mdp, er_phis, seed=seed, op_sets=mdp_sets),
        _row(tree, "OP + Phi_MDP", mdp_deployed, mdp, er_phis, seed=seed, op_sets=mdp_sets),
        _row(
            tree,
            f"OP + learned Phi_ER ({config.algorithm})",
            er_deployed,
            mdp,
            er_phis,
            seed=seed,
            op_sets=er_phis,
        ),
    )
    report = ZSCReport(
        game=tree.game.name,
        rows=rows,
        config={
            **config.to_json(),
            "op_reading": "seatings",
            "op_column_reading": "seatings",
            "mdp_order": len(mdp),
            "horizon": tree.game.horizon,
        },
    )
    return report, discoveries


if (
    not TYPE_CHECKING
):  # ``from ers_exact.zsc.pipeline import ZSCConfig`` (its old name) still works, and warns
    __getattr__ = deprecated_names(__name__, {"ZSCConfig": ("PopulationConfig", lambda: PopulationConfig)})
