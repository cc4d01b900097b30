"""The options of ``ers-exact``'s zero-shot coordination commands: ``zsc`` (the population pipeline),
``op`` (the other-play optimum) and ``discover`` (one agent's symmetry discovery). Re-exported by
:mod:`ers_exact.cli.options`, which holds every other command's; defaults come from
:mod:`ers_exact.zsc.config` (only light ``config`` modules are imported here).
"""

from __future__ import annotations

from dataclasses import dataclass

from ers_exact.cli.option_groups import GameOptions, PoolOptions, SavePolicyOptions, refuse_unused_force
from ers_exact.deployment import SELECT_BY
from ers_exact.util.deprecation import renamed_fields
from ers_exact.util.options import at_least, between, force_option, one_of, option, output_folder, seed_range
from ers_exact.zsc.config import (
    SEARCHES,
    SYMMETRY_SETS,
    UNSEEN_POOL_SEED_OFFSET,
    DiscoveryConfig,
    OPConfig,
    PopulationConfig,
)

__all__ = ["DiscoverOptions", "OPOptions", "ZSCOptions"]

_ZSC = PopulationConfig()
_DISCOVERY = DiscoveryConfig()
_OP = OPConfig()


@renamed_fields(l="top", pool="pool_source")
@dataclass(frozen=True, kw_only=True)
class ZSCOptions(PoolOptions):
    """``zsc``: the population pipeline (Table 1)."""

    agents: int = option(
        _ZSC.agents,
        help=f"independent agents P per population, 2 to {UNSEEN_POOL_SEED_OFFSET} (cross-play needs two)",
        check=between(2, UNSEEN_POOL_SEED_OFFSET),
    )
    top: int = option(
        _ZSC.top,
        help="learned symmetries kept per agent (the paper's l)",
        check=at_least(1),
        renamed_from=("l",),
    )
    m: int = option(_ZSC.m, help="other-play seeds m per agent", check=at_least(1))
    select_by: str = option(
        _ZSC.select_by,
        help="which of its m OP seeds an agent deploys: sp_return (the paper: the best self-play return J, ties "
        "by OP) or op_value (the best OP value, ties by J); recorded in the report's config",
        check=one_of(SELECT_BY),
    )
    out: str | None = option(
        None,
        help="folder for the JSON result (created)",
        check=output_folder,
        default_text="not written",
        metavar="DIR",
    )
    force: bool = force_option()

    def check(self) -> None:
        super().check()
        refuse_unused_force(self.out, self.force)


@dataclass(frozen=True, kw_only=True)
class OPOptions(SavePolicyOptions, GameOptions):
    """``op``: the other-play optimum OP^Phi over a named symmetry set."""

    symmetries: str = option(
        "mdp",
        check=one_of(SYMMETRY_SETS),
        metavar="SET",
        help="Phi: 'mdp' (every Dec-POMDP symmetry, exact search) or 'none' ({id}: OP = self-play)",
    )
    seed: int = option(_OP.seed, help="seed of the run", check=seed_range)
    seeds: int = option(
        _OP.seeds,
        help="independent trainings m; the best OP value is reported (ties by J)",
        check=at_least(1),
    )
    share: bool = option(
        _OP.share,
        help="parameter sharing: one policy for agents whose local history "
        "trees coincide (--no-share: one policy per agent)",
    )
    steps: int = option(_OP.steps, help="Adam steps of every gradient start", check=at_least(0))
    restarts: int = option(
        _OP.restarts,
        help="gradient starts per seed (random, symmetrised, warm from the deterministic optimum)",
        check=at_least(1),
    )
    exhaustive: int = option(
        _OP.exhaustive,
        check=at_least(0),
        help="also search every deterministic policy profile exactly when there are at "
        "most this many (0: never)",
    )


@renamed_fields(pool="pool_source")
@dataclass(frozen=True, kw_only=True)
class DiscoverOptions(PoolOptions):
    """``discover``: one agent's symmetry discovery with Table 2's metrics."""

    search: str = option(
        _DISCOVERY.search,
        check=one_of(SEARCHES),
        help="candidate search: every admissible transformation, or REINFORCE over observation permutations",
    )
    top: int = option(_DISCOVERY.top, help="transformations kept (the paper's l)", check=at_least(1))
