"""``ers-exact``: one CLI with subcommands over the exact toolkit.

Each command is a :class:`~ers_exact.util.cli.Command`: an options dataclass (:mod:`ers_exact.cli.options`:
flags, defaults, help and validation in one place), a thin ``run_*(options) -> dict``
(:mod:`ers_exact.cli.commands`, callable from tests) and a text printer (:mod:`ers_exact.cli.show`); every
command prints JSON with ``--json``. A GAME is a built-in name (``ers-exact games``) or a .dpomdp file
(bare names are also looked up in ``$ERS_DPOMDP_DIR``). Invalid input ends with exit status 2 and one line
on stderr naming the value; budget refusals (history nodes, policies, graph size) count as invalid input.

Registering the commands imports only their options and the light ``config`` modules; each command's run
imports the library modules it uses (``ers-exact games`` loads numpy, never scipy, sympy or networkx).
"""

from __future__ import annotations

from collections.abc import Sequence

from ers_exact import __version__
from ers_exact.cli import commands as c
from ers_exact.cli import options as o
from ers_exact.cli import show as s
from ers_exact.model.config import HistoryBudgetError, PolicyBudgetError
from ers_exact.util.budget import command_process
from ers_exact.util.cli import Command, commands_markdown, run_cli
from ers_exact.util.errors import InputError

__all__ = ["COMMANDS", "DESCRIPTION", "USER_ERRORS", "main", "readme_tables"]

DESCRIPTION = (
    "Exact analysis of expected-return symmetries in small Dec-POMDPs: histories, values, "
    "Boltzmann fixed points, symmetry groups and zero-shot coordination."
)

#: Exceptions that mean "bad input" (exit 2, one line): every error marked :class:`InputError` (invalid
#: values, games, files, policies, and the budgets that refuse a too-large request), paths (``OSError``),
#: and the exact optimum's policy budget. Anything else -- a numpy ``ValueError`` in a solver included --
#: is a bug, reported as an internal error (exit 1).
USER_ERRORS: tuple[type[BaseException], ...] = (InputError, OSError, HistoryBudgetError, PolicyBudgetError)

COMMANDS: tuple[Command, ...] = (
    Command("games", "list the built-in games", o.GamesOptions, c.run_games, s.show_games),
    Command("info", "sizes of a game and of its histories", o.InfoOptions, c.run_info),
    Command("value", "J and root Q values of a policy", o.ValueOptions, c.run_value),
    Command(
        "optimal",
        "exact optimal value over deterministic joint policies",
        o.OptimalOptions,
        c.run_optimal,
        s.show_optimal,
    ),
    Command(
        "solve",
        "all Boltzmann fixed points found at a temperature alpha",
        o.SolveOptions,
        c.run_solve,
        s.show_solve,
    ),
    Command(
        "optimal-set",
        "Pi*_alpha proven complete: certified search for every fixed point with J >= J* - eps",
        o.OptimalSetOptions,
        c.run_optimal_set,
        s.show_optimal_set,
    ),
    Command(
        "sweep",
        "fixed points over a grid of temperatures, with bifurcations and a plot",
        o.SweepOptions,
        c.run_sweep,
        s.show_sweep,
    ),
    Command(
        "symmetries",
        "Phi_MDP and Phi_ER at a temperature alpha",
        o.SymmetriesOptions,
        c.run_symmetries,
        s.show_symmetries,
    ),
    Command(
        "atlas",
        "|Pi*_alpha|, |Phi_ER| and |Phi_MDP| over a grid of alphas",
        o.AtlasOptions,
        c.run_atlas,
        s.show_atlas,
    ),
    Command(
        "census",
        "random small games: how often Phi_ER is strictly larger than Phi_MDP",
        o.CensusOptions,
        c.run_census,
        s.show_census,
    ),
    Command(
        "zsc",
        "zero-shot coordination: SP, OP + Phi_MDP, OP + learned Phi_ER populations (Table 1)",
        o.ZSCOptions,
        c.run_zsc,
        s.show_zsc,
    ),
    Command(
        "op",
        "the other-play optimum OP^Phi found, its J and its policy (Phi = Phi_MDP or {id})",
        o.OPOptions,
        c.run_op,
        s.show_op,
    ),
    Command(
        "discover",
        "learn ER symmetries from a pool (Algorithms 1-3) with Table 2's group metrics",
        o.DiscoverOptions,
        c.run_discover,
        s.show_discover,
    ),
    Command(
        "export-gambit", "write the game as a Gambit .efg file", o.ExportGambitOptions, c.run_export_gambit
    ),
    Command(
        "demo",
        "exact analysis of every built-in game, written as JSON",
        o.DemoOptions,
        c.run_demo,
        s.show_demo,
    ),
)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``ers-exact`` console script; returns the exit status (0, 1 internal error, 2 invalid input). Run as
    the command itself (``argv`` None: ``sys.argv``), a memory budget bounds the whole process; called from
    Python with ``argv``, what the command adds to the calling process (``util.budget.command_process``)."""
    with command_process(argv is None):
        return run_cli("ers-exact", DESCRIPTION, __version__, COMMANDS, argv, user_errors=USER_ERRORS)


def readme_tables() -> str:
    """Every command's options as markdown tables under ``#### ers-exact CMD`` headings (for the README)."""
    return commands_markdown("ers-exact", COMMANDS)
