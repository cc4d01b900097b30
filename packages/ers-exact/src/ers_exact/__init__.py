"""ers-exact: exact tabular analysis of expected-return symmetries in Dec-POMDPs (numpy, never torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ers_exact.util.lazy import lazy_exports

if TYPE_CHECKING:  # the names, for mypy and IDEs; at run time each is imported on first use
    from ers_exact.model.game import Game, GameError, make_game

__all__ = ["Game", "GameError", "make_game"]
__version__ = "0.1.0"

if not TYPE_CHECKING:  # hidden from mypy, so that a name missing above is an error, not Any
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Game": "model.game",
            "GameError": "model.game",
            "make_game": "model.game",
        },
    )
