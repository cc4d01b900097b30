"""The shared pieces of ``ers-exact``'s options (:mod:`ers_exact.cli.options`): the option groups several
commands build on (the game, the solver, a temperature grid, a pool, ``--save-policy``), the constants and
checks they use. Only light ``config`` modules are imported here (no numpy, scipy, sympy).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ers_exact.games import DPOMDP_DIR_ENV
from ers_exact.model.config import (
    DEFAULT_MAX_NODES,
)
from ers_exact.solve.config import SolverConfig, parse_alphas
from ers_exact.util.options import (
    Options,
    UsageError,
    at_least,
    between,
    one_of,
    option,
    output_file,
    positive,
    seed_range,
)
from ers_exact.zsc.config import (
    ALGORITHMS,
    POOL_SOURCES,
    DiscoveryConfig,
    PoolConfig,
    PopulationConfig,
)

#: how ``symmetries`` finds Phi_ER (:func:`ers_exact.analysis.report.symmetry_report`'s ``er_method``)
ER_METHODS = ("auto", "exhaustive", "generators")

#: Fresh random starts per alpha of a sweep or atlas (fewer than a single solve's: continuation warm-starts
#: every alpha from the previous alpha's points).
SWEEP_STARTS = 32
#: The demo: exhaustive-search budget, temperature and starts of its per-game analysis.
DEMO_MAX_POLICIES = 200_000
DEMO_ALPHA = 0.25
DEMO_STARTS = 16
#: Environment variable naming the demo's output folder.
RESULTS_DIR_ENV = "ERS_RESULTS_DIR"
#: Image formats a plot may be written in (by its file name's suffix).
PLOT_SUFFIXES = (".png", ".pdf", ".svg")

_SOLVER = SolverConfig()
_POOL = PoolConfig()
_ZSC = PopulationConfig()
_DISCOVERY = DiscoveryConfig()

ALPHA_HELP = "Boltzmann temperature alpha > 0 (the paper's alpha; Gambit's lambda = 1 / alpha)"


def alpha_grid(text: object) -> str | None:
    """Check: a grid of temperatures that :func:`~ers_exact.solve.sweep.parse_alphas` accepts."""
    try:
        parse_alphas(str(text))
    except ValueError as err:
        return str(err).removeprefix(f"alphas {str(text)!r}: ")
    return None


def refuse_unused_force(out: str | None, force: bool) -> None:
    """``--force`` replaces an earlier run in ``--out DIR``; a command that writes nothing without ``--out``
    (``census``, ``zsc``) refuses it alone rather than ignore it."""
    if force and out is None:
        raise UsageError(
            "--force replaces an earlier run in --out DIR; without --out nothing is written: give both"
        )


def default_demo_dir() -> Path:
    """Where ``demo`` writes without ``--out``: ``$ERS_RESULTS_DIR``, else ``$XDG_DATA_HOME/ers/demo``, else
    ``~/.local/share/ers/demo`` (outside the source tree)."""
    if os.environ.get(RESULTS_DIR_ENV):
        return Path(os.environ[RESULTS_DIR_ENV])
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home, "ers", "demo")


# ----- shared groups -----
@dataclass(frozen=True, kw_only=True)
class GameOptions(Options):
    """GAME and the overrides every command that enumerates its histories accepts."""

    game: str = option(
        help=f"a built-in game (list: `ers-exact games`) or a .dpomdp file; a bare file name "
        f"not in the working directory is looked up in ${DPOMDP_DIR_ENV}",
        positional=True,
        metavar="GAME",
    )
    horizon: int | None = option(
        None, help="horizon H >= 1", check=at_least(1), default_text="the game's own; 2 for a .dpomdp file"
    )
    discount: float | None = option(
        None,
        help="discount gamma in [0, 1] (0: only the first stage's reward counts)",
        check=between(0, 1),
        default_text="the game's own",
    )
    max_nodes: int = option(
        DEFAULT_MAX_NODES,
        help="refuse to enumerate more joint history nodes than this "
        "(checked layer by layer, before each is built)",
        check=at_least(1),
    )


@dataclass(frozen=True, kw_only=True)
class SolverOptions(Options):
    """The multistart Boltzmann fixed-point solver's starts and seed."""

    starts: int = option(
        _SOLVER.n_starts,
        help="random starts of the fixed-point search (the uniform start and warm starts come on top)",
        check=at_least(0),
    )
    seed: int = option(_SOLVER.seed, help="seed of the random starts", check=seed_range)
    continuation: bool = option(
        _SOLVER.continuation,
        help="also trace the fixed-point branches from the "
        "high-temperature point (lambda = 0) down to alpha, switching branches at "
        "bifurcations (--no-continuation: multistart only)",
    )
    memory_budget: float = option(
        _SOLVER.memory_budget_bytes / 1e9,
        check=positive,
        metavar="GB",
        help="peak memory of the whole process, in GB: the batched work (evaluations, Newton's "
        "Jacobians, certificates) is chunked under what the tree and its index structures leave, and a game "
        "where one policy's step cannot fit is refused at once with the estimate",
    )


@dataclass(frozen=True, kw_only=True)
class GridOptions(SolverOptions, GameOptions):
    """A grid of temperatures (sweep, atlas), with an optional plot."""

    alphas: str = option(
        help="temperatures: start:stop:step (stop included) or a comma list, at most 1000, each once "
        "(a repeated one is refused)",
        check=alpha_grid,
        metavar="GRID",
    )
    starts: int = option(
        SWEEP_STARTS,
        help="fresh random starts per alpha (sweep also warm-starts each alpha from the previous one's points; "
        "atlas solves each alpha on its own, seeded --seed + its position in the sorted grid)",
        check=at_least(0),
    )
    plot: str | None = option(
        None,
        check=output_file(PLOT_SUFFIXES),
        default_text="no plot",
        metavar="FILE",
        help=f"draw the result into this image file ({', '.join(PLOT_SUFFIXES)}); its folder must exist",
    )


@dataclass(frozen=True, kw_only=True)
class PoolOptions(GameOptions):
    """How pools of self-play policies are built and how symmetries are learned from them (zsc, discover)."""

    alpha: float = option(_POOL.alpha, help=ALPHA_HELP + " of the pool policies", check=positive)
    pool_source: str = option(
        _POOL.source,
        help="where the pool's policies come from: IQL runs (the paper) or the exact solver's self-play-optimal "
        "fixed points",
        check=one_of(POOL_SOURCES),
        renamed_from=("pool",),
    )
    k: int = option(
        _POOL.k,
        help="pool size k (--pool-source exact: at most |Pi*_alpha|, the optimal fixed points found and their "
        "images under the Dec-POMDP symmetries; the result records the size used: pool_size, per agent in "
        "zsc's pool_sizes)",
        check=at_least(1),
    )
    episodes: int = option(
        _POOL.episodes, help="IQL episodes per pool policy (--pool-source iql only)", check=at_least(1)
    )
    algorithm: str = option(
        _DISCOVERY.algorithm,
        help="discovery: Algorithm 1 (sp-max), 2 (sp-max-reg) or 3 (xp-max)",
        check=one_of(ALGORITHMS),
    )
    seed: int = option(_ZSC.seed, help="seed of the run", check=seed_range)

    def check(self) -> None:
        if self.algorithm == "xp-max" and self.k < 2:
            raise UsageError(
                f"--k {self.k}: xp-max (Algorithm 3) cross-plays pairs of pool policies; give --k >= 2"
            )
        if self.pool_source == "exact" and self.episodes != _POOL.episodes:
            raise UsageError(
                f"--episodes {self.episodes}: IQL episodes per pool policy; --pool-source exact trains none "
                "(its pool is the solver's optimal fixed points)"
            )


@dataclass(frozen=True, kw_only=True)
class SavePolicyOptions(Options):
    """``--save-policy FILE`` for the commands that return a policy (``optimal``, ``op``)."""

    save_policy: str | None = option(
        None,
        check=output_file(),
        default_text="not written",
        metavar="FILE",
        help="write the policy found as JSON (input of `value --policy`); its folder must exist",
    )
