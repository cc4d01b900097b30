"""ers-exact: exact tabular analysis of expected-return symmetries in Dec-POMDPs (numpy, never torch)."""

from ers_exact.model.game import Game, GameError, make_game

__all__ = ["Game", "GameError", "make_game"]
__version__ = "0.1.0"
