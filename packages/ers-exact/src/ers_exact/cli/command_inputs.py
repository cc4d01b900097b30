"""What the ``ers-exact`` commands (:mod:`ers_exact.cli.commands`, :mod:`ers_exact.cli.zsc_commands`) build
from their options: the game, the files it is read from, its history tree, the solver's config, the game's
sizes, and the ``config`` block and provenance every result carries (:func:`result_json`, the one place they
are assembled). Library modules are imported when used, so a command loads only what it needs."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ers_exact import __version__
from ers_exact.cli.option_groups import GameOptions, SolverOptions
from ers_exact.solve.config import SolverConfig
from ers_exact.util.budget import memory_scope
from ers_exact.util.options import Options

if TYPE_CHECKING:
    from ers_exact.model.game import Game
    from ers_exact.model.histories import HistoryTree

__all__ = [
    "OUTPUT_OPTIONS",
    "game_files",
    "game_json",
    "game_of",
    "provenance",
    "result_config",
    "result_json",
    "solver_config",
    "tree_of",
]

#: options that say where a result is written (or whether an earlier one may be replaced), not what it is:
#: the only ones a result's ``config`` leaves out
OUTPUT_OPTIONS = ("out", "force", "plot", "save_policy")


def provenance() -> dict[str, Any]:
    """The versions a result was computed with (ers_exact, numpy, Python), written beside it."""
    import numpy as np

    return {"ers_exact": __version__, "numpy": np.__version__, "python": platform.python_version()}


def result_config(
    o: Options, game: Game | None = None, recorded: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A result's ``config``: every option of ``o`` as resolved (:data:`OUTPUT_OPTIONS` aside), the game as
    used (its name, and the horizon and discount after ``--horizon`` / ``--discount``, where ``o`` had None
    for "the game's own"), then ``recorded``, the config the library wrote into the result (its names and
    values kept as they were, e.g. ``solve``'s :class:`SolverConfig` with ``n_starts``)."""
    config = {k: v for k, v in o.to_json().items() if k not in OUTPUT_OPTIONS}
    if game is not None:
        config.update(game=game.name, horizon=game.horizon, discount=game.discount)
    return {**config, **(recorded or {})}


def result_json(result: dict[str, Any], o: Options, game: Game | None = None) -> dict[str, Any]:
    """``result`` as a command returns it: with its ``config`` (:func:`result_config`, over the ``config`` it
    holds) and its ``provenance``; every command's JSON is built here."""
    return {**result, "config": result_config(o, game, result.get("config")), "provenance": provenance()}


def game_json(game: Game) -> dict[str, Any]:
    """The game's name, horizon, discount and sizes, as every command's JSON starts."""
    return {
        "game": game.name,
        "horizon": game.horizon,
        "discount": game.discount,
        "n_agents": game.n_agents,
        "n_states": game.n_states,
        "n_actions": list(game.n_actions),
        "n_observations": list(game.n_observations),
    }


def game_files(o: GameOptions) -> list[Path]:
    """The files a game command reads (the .dpomdp file, when GAME is one): outputs never replace them."""
    from ers_exact.games import find_game_file

    path = find_game_file(o.game)
    return [] if path is None else [path]


def game_of(o: GameOptions) -> Game:
    """The game GAME names (a built-in or a .dpomdp file), at ``--horizon`` / ``--discount``."""
    from ers_exact.games import load_game

    return load_game(o.game, horizon=o.horizon, discount=o.discount)


def tree_of(o: GameOptions) -> HistoryTree:
    """The game's joint history tree (refused beyond ``--max-nodes``)."""
    from ers_exact.model.histories import enumerate_histories

    return enumerate_histories(game_of(o), max_nodes=o.max_nodes)


def solver_config(o: SolverOptions) -> SolverConfig:
    """The fixed-point solver's config from the solver options (starts, seed, continuation, memory budget)."""
    return SolverConfig(
        n_starts=o.starts,
        seed=o.seed,
        continuation=o.continuation,
        memory_budget_bytes=int(o.memory_budget * 1e9),
        memory_scope=memory_scope(),  # "process" when the command is its own process
    )
