"""The zero-shot coordination commands of ``ers-exact``: ``zsc`` (the population pipeline, Table 1), ``op``
(the other-play optimum) and ``discover`` (one agent's discovery, Table 2's metrics). Each ``run_*(options)
-> dict`` is what ``--json`` prints (its ``config``: the report's or discovery's own, with the resolved options
and the game as used, :func:`~ers_exact.cli.command_inputs.result_json`); re-exported by
:mod:`ers_exact.cli.commands`, which holds the others. Library modules are imported when a command runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ers_exact.cli.command_inputs import game_files, game_json, result_json, tree_of
from ers_exact.cli.zsc_options import DiscoverOptions, OPOptions, ZSCOptions
from ers_exact.util.output import claim_folder, write_json

__all__ = ["run_discover", "run_op", "run_zsc"]


def run_zsc(o: ZSCOptions) -> dict[str, Any]:
    """The population pipeline: SP, OP + Phi_MDP and OP + learned Phi_ER; Table 1 as JSON and markdown."""
    from ers_exact.zsc.config import PopulationConfig
    from ers_exact.zsc.pipeline import population_pools
    from ers_exact.zsc.pipeline import run_zsc as pipeline

    cfg = PopulationConfig(
        agents=o.agents,
        seed=o.seed,
        pool_source=o.pool_source,
        alpha=o.alpha,
        k=o.k,
        top=o.top,
        m=o.m,
        select_by=o.select_by,
        episodes=o.episodes,
        algorithm=o.algorithm,
    )
    tree = tree_of(o)
    if o.out:
        claim_folder(o.out, force=o.force, command="ers-exact zsc", reads=game_files(o))
    pools = population_pools(tree, cfg)
    report, discoveries = pipeline(tree, cfg, pools=pools)
    sizes = [len(pool) for pool, _ in pools]  # --pool-source exact: at most |Pi*_alpha| each, below --k
    result = {
        **report.to_json(),
        "pool_sizes": sizes[: o.agents],
        "unseen_pool_sizes": sizes[o.agents :],
        "markdown": report.to_markdown(),
        "discovery": [d.to_json() for d in discoveries],
    }
    result = result_json(result, o, tree.game)
    if o.out:
        write_json(Path(o.out, f"zsc-{tree.game.name}-seed{o.seed}.json"), result)
    return result


def run_op(o: OPOptions) -> dict[str, Any]:
    """The other-play optimum found over Phi (``--symmetries``): op_value, J, the policy, how it was found."""
    from ers_exact.cli.files import write_policy_file
    from ers_exact.zsc.config import OPConfig
    from ers_exact.zsc.other_play import solve_other_play

    cfg = OPConfig(
        seed=o.seed, seeds=o.seeds, share=o.share, steps=o.steps, restarts=o.restarts, exhaustive=o.exhaustive
    )
    tree = tree_of(o)
    result = solve_other_play(tree, o.symmetries, cfg)
    if o.save_policy:
        write_policy_file(o.save_policy, tree, result.policy, reads=game_files(o))
    return result_json({**game_json(tree.game), **result.to_json()}, o, tree.game)


def run_discover(o: DiscoverOptions) -> dict[str, Any]:
    """One agent's discovery (Algorithm 1, 2 or 3) with Table 2's group metrics on an unseen pool."""
    from ers_exact.zsc.config import UNSEEN_POOL_SEED_OFFSET, DiscoveryConfig, PoolConfig
    from ers_exact.zsc.discovery import discover
    from ers_exact.zsc.pools import build_pools

    cfg = PoolConfig(source=o.pool_source, alpha=o.alpha, k=o.k, episodes=o.episodes)
    discovery = DiscoveryConfig(algorithm=o.algorithm, search=o.search, top=o.top, seed=o.seed)
    tree = tree_of(o)
    (train, _), (unseen, _) = build_pools(tree, cfg, [o.seed, o.seed + UNSEEN_POOL_SEED_OFFSET])
    result = discover(tree, train, discovery, unseen_pool=unseen)
    found = {
        **result.to_json(),
        "pool_source": o.pool_source,
        "alpha": o.alpha,
        "k": o.k,
        "pool_size": len(train),  # --pool-source exact: at most |Pi*_alpha|, below --k
        "unseen_pool_size": len(unseen),
    }
    return result_json(found, o, tree.game)
