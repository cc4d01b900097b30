"""The options of every ``ers-exact`` command: one frozen dataclass each, built from shared groups
(the zero-shot coordination commands' -- ``zsc``, ``op``, ``discover`` -- are in
:mod:`ers_exact.cli.zsc_options`, re-exported here).

Defaults come from the library's own configs (:class:`~ers_exact.solve.config.SolverConfig`,
:class:`~ers_exact.zsc.config.PopulationConfig`, ...), so the command line and Python callers agree.
Only the light ``config`` modules are imported here (no numpy, scipy, sympy): ``--help`` and the README's
option tables never load the solver. Values are validated when an options object is built (from argv or
from Python), so bad input is refused before any computation, with a message naming the flag and the value.
Paths written to are checked up front too: an output FILE's folder must exist; an output folder is created,
and must not be a file.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ers_exact.analysis.config import CensusConfig
from ers_exact.cli.option_groups import (
    ALPHA_HELP,
    DEMO_ALPHA,
    DEMO_MAX_POLICIES,
    DEMO_STARTS,
    ER_METHODS,
    PLOT_SUFFIXES,
    RESULTS_DIR_ENV,
    SWEEP_STARTS,
    GameOptions,
    GridOptions,
    PoolOptions,
    SavePolicyOptions,
    SolverOptions,
    alpha_grid,
    default_demo_dir,
    refuse_unused_force,
)
from ers_exact.cli.zsc_options import DiscoverOptions, OPOptions, ZSCOptions
from ers_exact.model.config import (
    AUTO_EXHAUSTIVE_MAX,
    DEFAULT_MAX_CHILDREN,
    DEFAULT_MAX_NODES,
    DEFAULT_MAX_POLICIES,
    HEURISTICS,
    METHODS,
)
from ers_exact.solve.config import OptimalSetConfig
from ers_exact.util.budget import MEMORY_BUDGET_ENV
from ers_exact.util.options import (
    Options,
    UsageError,
    at_least,
    flag_name,
    force_option,
    one_of,
    option,
    output_file,
    output_folder,
    positive,
    seed_range,
)

__all__ = [
    "DEMO_ALPHA",
    "DEMO_MAX_POLICIES",
    "DEMO_STARTS",
    "ER_METHODS",
    "PLOT_SUFFIXES",
    "RESULTS_DIR_ENV",
    "SWEEP_STARTS",
    "AtlasOptions",
    "CensusOptions",
    "DemoOptions",
    "DiscoverOptions",
    "ExportGambitOptions",
    "GameOptions",
    "GamesOptions",
    "GridOptions",
    "InfoOptions",
    "OPOptions",
    "OptimalOptions",
    "OptimalSetOptions",
    "PoolOptions",
    "SolveOptions",
    "SolverOptions",
    "SweepOptions",
    "SymmetriesOptions",
    "ValueOptions",
    "ZSCOptions",
    "alpha_grid",
    "default_demo_dir",
]

_OPTIMAL_SET = OptimalSetConfig()
_CENSUS = CensusConfig()
#: ``optimal``'s options that only some methods read (a search by another method refuses them)
_METHOD_OPTIONS = {
    "heuristic": ("gmaa", "ice"),
    "max_children": ("gmaa", "ice"),
    "max_policies": ("exhaustive",),
    "memory_budget": ("ice",),
    "max_seconds": ("ice",),
}


# ----- one class per command -----
@dataclass(frozen=True, kw_only=True)
class GamesOptions(Options):
    """``games``: no options."""


@dataclass(frozen=True, kw_only=True)
class InfoOptions(GameOptions):
    """``info``: the game's sizes and its history counts."""


@dataclass(frozen=True, kw_only=True)
class ValueOptions(GameOptions):
    """``value``: J and root Q^i of one joint policy."""

    policy: str = option(
        "uniform",
        metavar="uniform|FILE",
        help="'uniform' (uniform over legal actions) or a JSON file {\"policy\": [one "
        "histories x actions array per agent]}, as `ers-exact optimal --save-policy` "
        "writes it (the JSON of `optimal --json` is one too where it lists `policy`)",
    )


@dataclass(frozen=True, kw_only=True)
class OptimalOptions(SavePolicyOptions, GameOptions):
    """``optimal``: J* over deterministic joint policies."""

    method: str = option(
        "auto",
        check=one_of(METHODS),
        metavar="METHOD",
        help="'exhaustive' (every policy tree of agents 0..n-2 + the last agent's best "
        "response: the reference), 'gmaa' (GMAA*-ICE on the enumerated history tree, exact), 'ice' "
        "(GMAA*-ICE with incremental clustering on the distinct joint beliefs: no history tree, "
        "memory follows the search), or "
        f"'auto' (exhaustive for small games up to {AUTO_EXHAUSTIVE_MAX} policy trees, else ice)",
    )
    heuristic: str = option(
        "Q_BG",
        check=one_of(HEURISTICS),
        metavar="BOUND",
        help="GMAA*'s admissible upper bound (gmaa, ice): Q_BG (tightest), Q_POMDP or Q_MDP",
    )
    max_policies: int = option(
        DEFAULT_MAX_POLICIES,
        check=at_least(1),
        help="refuse an exhaustive search over more deterministic policies than this",
    )
    max_children: int = option(
        DEFAULT_MAX_CHILDREN,
        check=at_least(1),
        help="refuse a GMAA* expansion (or last-stage Bayesian game) over more joint "
        "decision rules than this (ice: stop there and report the bounds found)",
    )
    memory_budget: float | None = option(
        None,
        check=positive,
        metavar="GB",
        help="ice: memory of the search in GB; the belief graph is refused beyond it and the search "
        "stops there with the best policy and bounds found",
        default_text=f"${MEMORY_BUDGET_ENV}, else half this machine's memory (at most 8 GB)",
    )
    max_seconds: float | None = option(
        None,
        check=positive,
        help="ice: stop after this many seconds and report the best policy and bounds found",
        default_text="no limit",
    )

    def check(self) -> None:
        """Refuse an option that the chosen ``--method`` never reads (``auto`` may pick any method)."""
        if self.method == "auto":
            return
        for f in fields(self):
            users = _METHOD_OPTIONS.get(f.name, ())
            value = getattr(self, f.name)
            if users and self.method not in users and value != f.default:
                raise UsageError(
                    f"{flag_name(f.name)} {value}: only --method {' or '.join(users)} (or auto) reads it, "
                    f"not --method {self.method}"
                )


@dataclass(frozen=True, kw_only=True)
class SolveOptions(SolverOptions, GameOptions):
    """``solve``: every Boltzmann fixed point found at one alpha."""

    alpha: float = option(help=ALPHA_HELP, check=positive)
    with_policy: bool = option(False, help="include every fixed point's policy in the JSON")


@dataclass(frozen=True, kw_only=True)
class OptimalSetOptions(SolverOptions, GameOptions):
    """``optimal-set``: Pi*_alpha proven complete by a certified branch-and-bound."""

    alpha: float = option(help=ALPHA_HELP, check=positive)
    eps: float = option(
        _OPTIMAL_SET.eps,
        check=positive,
        help="prove complete the set of fixed points with J >= J* - eps",
    )
    max_boxes: int = option(
        _OPTIMAL_SET.max_boxes,
        check=at_least(1),
        help="stop after examining this many boxes and report what is left unexplored (the box stack's memory, "
        "estimated from it, is checked before the search against $ERS_MEMORY_BUDGET, not --memory-budget, "
        "which bounds the candidates' solve)",
    )
    max_seconds: float = option(
        _OPTIMAL_SET.max_seconds,
        check=positive,
        help="stop the search (closed blocks, branch-and-bound) after this many seconds and report what is left "
        "unexplored; listing the images of the optimal points afterwards stops after as long again (images left "
        "uncertified are reported: not proven complete)",
    )
    workers: int = option(
        _OPTIMAL_SET.workers,
        check=at_least(1),
        help="worker processes of the branch-and-bound (each contracts and tests one batch of boxes at a time; "
        "the proof is the same, the box count and order differ from one process's)",
    )
    with_policy: bool = option(False, help="include every certified point's policy in the JSON")


@dataclass(frozen=True, kw_only=True)
class ProofOptions(Options):
    """Phi_ER against Pi*_alpha proven complete (``symmetries``, ``atlas``)."""

    prove_optimal_set: float = option(
        0.0,
        check=at_least(0),
        metavar="SECONDS",
        default_text="0 (off)",
        help="first prove Pi*_alpha complete as `optimal-set` does, for at most this many seconds (per alpha); "
        "where it is proven, Phi_ER is claimed against all of Pi*_alpha (the points it lists within 1e-8 of "
        "J*), else against the solver's points as without it",
    )
    prove_workers: int = option(
        1,
        check=at_least(1),
        help="worker processes of that proof (`optimal-set --workers`; only with --prove-optimal-set)",
    )

    def check(self) -> None:
        if self.prove_workers != 1 and not self.prove_optimal_set:
            raise UsageError(
                f"--prove-workers {self.prove_workers}: the workers run the proof of --prove-optimal-set SECONDS, "
                "which is off; give both"
            )


@dataclass(frozen=True, kw_only=True)
class SymmetriesOptions(ProofOptions, SolverOptions, GameOptions):
    """``symmetries``: Phi_MDP and Phi_ER at one alpha."""

    alpha: float = option(help=ALPHA_HELP, check=positive)
    max_elements: int = option(
        10_000,
        check=at_least(0),
        help="list the elements of Phi_MDP (and Phi_ER's policy parts) only up to this many; orders, "
        "generators and orbits are reported at any size",
    )
    er_method: str = option(
        "auto",
        check=one_of(ER_METHODS),
        metavar="METHOD",
        help="how Phi_ER is found: 'exhaustive' (test every admissible action/observation permutation, "
        "then list the members), 'generators' (a base-point subgroup search seeded by Phi_MDP: generators, "
        "order and orbits, no listing) or 'auto' (exhaustive up to 300,000 candidates, else generators)",
    )


@dataclass(frozen=True, kw_only=True)
class SweepOptions(GridOptions):
    """``sweep``: fixed points over a grid of alphas."""


@dataclass(frozen=True, kw_only=True)
class AtlasOptions(ProofOptions, GridOptions):
    """``atlas``: |Pi*_alpha|, |Phi_ER| and |Phi_MDP| over a grid of alphas."""


@dataclass(frozen=True, kw_only=True)
class CensusOptions(Options):
    """``census``: random small games."""

    games: int = option(_CENSUS.games, help="number of random games", check=at_least(1))
    seed: int = option(_CENSUS.seed, help="seed of the game generator and of the solver", check=seed_range)
    alpha: float = option(_CENSUS.alpha, help=ALPHA_HELP, check=positive)
    starts: int = option(
        _CENSUS.starts, help="random starts of the fixed-point search per game", check=at_least(0)
    )
    out: str | None = option(
        None,
        check=output_folder,
        default_text="not written",
        metavar="DIR",
        help="folder for census.json and the games with Phi_ER > Phi_MDP (created)",
    )
    force: bool = force_option()

    def check(self) -> None:
        refuse_unused_force(self.out, self.force)


@dataclass(frozen=True, kw_only=True)
class ExportGambitOptions(GameOptions):
    """``export-gambit``: the game as a Gambit extensive form."""

    out: str = option(
        help="the .efg file to write; its folder must exist",
        positional=True,
        check=output_file((".efg",)),
        metavar="OUT",
    )


@dataclass(frozen=True, kw_only=True)
class DemoOptions(Options):
    """``demo``: exact analysis of every built-in game."""

    out: str | None = option(
        None,
        help="folder for demo.json (created)",
        check=output_folder,
        metavar="DIR",
        default_text=f"${RESULTS_DIR_ENV}, else $XDG_DATA_HOME/ers/demo, else ~/.local/share/ers/demo",
    )
    max_policies: int = option(
        DEMO_MAX_POLICIES,
        help="exhaustive-search budget of J* per game (a game over it gets J* = null and a note)",
        check=at_least(1),
    )
    alpha: float = option(DEMO_ALPHA, help=ALPHA_HELP + " of the fixed points", check=positive)
    starts: int = option(
        DEMO_STARTS, help="random starts of the fixed-point search per game", check=at_least(0)
    )
    max_nodes: int = option(
        DEFAULT_MAX_NODES, help="refuse to enumerate more joint history nodes than this", check=at_least(1)
    )
    force: bool = force_option()
