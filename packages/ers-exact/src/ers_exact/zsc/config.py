"""The zero-shot-coordination layer's configurations, readable without loading the layer (numpy, the
solver): how pools are built (:class:`PoolConfig`), symmetries discovered (:class:`DiscoveryConfig`, the
paper's Algorithms 1-3), other-play trained (:class:`OPConfig`) and the population pipeline run
(:class:`PopulationConfig`, ers-deep's ``ers_deep.zsc.PopulationConfig`` names the same role), with the names
they accept. Each is re-exported by the module that uses it; the command line builds its options from these
defaults. Deprecated names (root README, "Names across the packages"): ``ZSCConfig`` for
:class:`PopulationConfig`, and its fields ``l`` (now ``top``) and ``pool`` (now ``pool_source``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ers_exact.deployment import DEFAULT_SELECT_BY, SELECT_BY
from ers_exact.util.deprecation import deprecated_names, renamed_fields
from ers_exact.util.options import (
    UsageError,
    at_least,
    between,
    check_fields,
    check_types,
    non_negative,
    one_of,
    positive,
)

__all__ = [
    "ALGORITHMS",
    "DEFAULT_EXHAUSTIVE",
    "POOL_SOURCES",
    "SEARCHES",
    "SYMMETRY_SETS",
    "UNSEEN_POOL_SEED_OFFSET",
    "DiscoveryConfig",
    "OPConfig",
    "PoolConfig",
    "PopulationConfig",
]

#: Algorithm 1 (SP-max), 2 (SP-max with the regulariser) and 3 (XP-max) of the paper.
ALGORITHMS = ("sp-max", "sp-max-reg", "xp-max")
#: How candidates are searched: every admissible transformation, or REINFORCE over observation permutations.
SEARCHES = ("exhaustive", "gradient")


@dataclass(frozen=True)
class DiscoveryConfig:
    """One code path for Algorithms 1-3; variants are fields."""

    algorithm: str = "sp-max"  # "sp-max" (Alg. 1), "sp-max-reg" (Alg. 2), "xp-max" (Alg. 3)
    top: int = 6  # l, transformations kept
    action_set: str = "permutations"  # or "transpositions" (identity included)
    search: str = "exhaustive"  # or "gradient" (REINFORCE over observation permutations)
    lambda1: float = 0.65
    lambda2: float = 0.1
    steps: int = 200  # gradient search
    learning_rate: float = 1.0
    samples: int = 32
    max_pairs: int = 40  # Algorithm 3: ordered pool pairs used (seeded sample when more)
    seed: int = 0

    def __post_init__(self) -> None:
        check_types(self)
        check_fields(
            self,
            algorithm=one_of(ALGORITHMS),
            search=one_of(SEARCHES),
            top=at_least(1),
            action_set=one_of(("permutations", "transpositions")),
            steps=at_least(1),
            samples=at_least(1),
            max_pairs=at_least(1),
            seed=non_negative,
        )
        if self.search == "gradient" and self.algorithm != "sp-max":
            raise UsageError(
                f"DiscoveryConfig.search = 'gradient' (REINFORCE) learns Algorithm 1's sp-max objective only; "
                f"{self.algorithm} scores every candidate exactly (search = 'exhaustive')"
            )

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


#: Where a pool's policies come from: independent IQL runs, or the exact solver's Boltzmann fixed points.
POOL_SOURCES = ("iql", "exact")

# The unseen pool, on which Table 2's group metrics are measured, is built with seed + 500: a seed that no
# agent's training pool uses (agent seeds are s * 1000 + a, a < 500), so discovery never saw its policies.
UNSEEN_POOL_SEED_OFFSET = 500


@dataclass(frozen=True)
class PoolConfig:
    """How a pool is built (defaults: the paper's three-lever appendix)."""

    source: str = "iql"  # "iql" or "exact" (Boltzmann fixed points from the solver)
    k: int = 20  # pool size
    alpha: float = 1.0  # Boltzmann temperature of the pool policies
    episodes: int = 10_000  # IQL
    epsilon: float = 0.1  # IQL
    learning_rate: float = 0.1  # IQL

    def __post_init__(self) -> None:
        check_types(self)
        check_fields(
            self,
            source=one_of(POOL_SOURCES),
            k=at_least(1),
            alpha=positive,
            episodes=at_least(1),
            epsilon=between(0, 1),
            learning_rate=positive,
        )


DEFAULT_EXHAUSTIVE = 20_000  # deterministic joint profiles enumerated at most (each costs |Phi| x seats J's)
SYMMETRY_SETS = ("mdp", "none")  # names :func:`symmetry_set` resolves: Phi_MDP, {id} (OP = SP)


@dataclass(frozen=True)
class OPConfig:
    """Settings of :func:`~ers_exact.zsc.other_play.train_other_play`."""

    seeds: int = 5  # m independent trainings; the best is deployed
    steps: int = 150  # Adam steps of every gradient start
    restarts: int = 4  # gradient starts per seed: random, symmetrised, warm (deterministic optimum), ...
    learning_rate: float = 0.2
    share: bool = True  # one policy for all agents whose local history trees coincide (parameter sharing)
    init_scale: float = 1.0  # standard deviation of the random initial logits
    polish_threshold: float = 0.9
    row_search: int = 32  # rounds of single-row local search after the polish (0: none)
    entropy: float = 0.2  # weight of an entropy bonus, annealed linearly to 0 over the first half
    exhaustive: int = DEFAULT_EXHAUSTIVE  # enumerate deterministic profiles when at most this many; 0: never
    seed: int = 0

    def __post_init__(self) -> None:
        check_types(self)
        check_fields(
            self,
            seeds=at_least(1),
            restarts=at_least(1),
            steps=at_least(0),
            exhaustive=at_least(0),
            row_search=at_least(0),
            learning_rate=positive,
            init_scale=non_negative,
            polish_threshold=between(0, 1),
            entropy=non_negative,
            seed=at_least(0),
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@renamed_fields(l="top", pool="pool_source")
@dataclass(frozen=True, kw_only=True)
class PopulationConfig:
    """The population pipeline's parameters (defaults: the paper's three-lever appendix). ``top`` is the paper's
    l (was ``l``), ``pool_source`` where pool policies come from (was ``pool``); the old keywords and
    attributes still work and warn. Keywords only (as ers-deep's): fields were inserted (``select_by``)."""

    agents: int = 5  # P
    k: int = 20  # pool size per agent
    top: int = 6  # l, learned symmetries kept
    m: int = 5  # OP seeds per agent
    select_by: str = DEFAULT_SELECT_BY  # which OP seed an agent deploys (ers_exact.deployment): the paper's
    # "sp_return" (argmax_k J(pi_{i,k})) or "op_value" (the best OP^Phi, ties by J)
    alpha: float = 1.0
    pool_source: str = "iql"  # "iql" or "exact" (Boltzmann fixed points from the solver)
    episodes: int = 10_000
    epsilon: float = 0.1
    learning_rate: float = 0.1
    algorithm: str = "sp-max"  # discovery: "sp-max", "sp-max-reg", "xp-max"
    op_steps: int = 300
    seed: int = 0

    def __post_init__(self) -> None:
        # XP needs two agents; more than UNSEEN_POOL_SEED_OFFSET would reuse the unseen pools' seeds
        check_types(self)
        check_fields(
            self,
            agents=between(2, UNSEEN_POOL_SEED_OFFSET),
            top=at_least(1),
            m=at_least(1),
            select_by=one_of(SELECT_BY),
            algorithm=one_of(ALGORITHMS),
            op_steps=at_least(1),
            seed=non_negative,
        )
        _ = self.pool_config  # PoolConfig validates k, alpha, pool_source, episodes, epsilon, learning_rate

    @property
    def pool_config(self) -> PoolConfig:
        """How each agent's pool is built (the fields :func:`~ers_exact.zsc.pools.build_pool` reads)."""
        return PoolConfig(
            source=self.pool_source,
            k=self.k,
            alpha=self.alpha,
            episodes=self.episodes,
            epsilon=self.epsilon,
            learning_rate=self.learning_rate,
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


if not TYPE_CHECKING:  # hidden from mypy, so that the library's own code cannot use a deprecated name
    __getattr__ = deprecated_names(__name__, {"ZSCConfig": ("PopulationConfig", lambda: PopulationConfig)})
