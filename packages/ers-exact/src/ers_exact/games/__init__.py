"""Built-in games: a plain registry of factories, plus name/file lookup.

``GAMES`` maps a name to a factory ``(**config) -> Game``; every factory has keyword defaults that give
the game as the paper (or its source) states it. Nothing registers itself on import: to add a game,
write its module and add one line to ``GAMES`` in :mod:`~ers_exact.games.registry` (re-exported here, like
every name of this package, on first use). The games layer sits above ``model`` and ``io`` (a GAME may be
a ``.dpomdp`` path); :mod:`ers_exact.games.random` generates random small games and planted symmetries.

===================  ==========================================================================
name                 game
===================  ==========================================================================
toy-coordination     the paper's Example "Toy coordination game" (rerouted coordination)
three-lever          iterated lever game, L = 3 levers, 2 rounds (paper's Section on it)
two-lever            the same with L = 2 (the paper's failure case for OP)
handshake            one-shot 2x2 handshake / fist-bump coordination game (paper's Figure 1)
dectiger             Dec-Tiger (Nair et al. 2003), H = 2
===================  ==========================================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ers_exact.util.lazy import lazy_exports

if TYPE_CHECKING:  # the names, for mypy and IDEs; at run time each is imported on first use
    from ers_exact.games.dectiger import dectiger
    from ers_exact.games.handshake import handshake
    from ers_exact.games.lever import lever_game
    from ers_exact.games.registry import GAMES, UnknownGameError, find_game_file, get_game, load_game
    from ers_exact.games.toy_coordination import toy_coordination

__all__ = [
    "DPOMDP_DIR_ENV",
    "GAMES",
    "UnknownGameError",
    "dectiger",
    "find_game_file",
    "get_game",
    "handshake",
    "lever_game",
    "load_game",
    "toy_coordination",
]

#: Environment variable naming a folder of .dpomdp files, searched for bare file names (``GridSmall.dpomdp``).
DPOMDP_DIR_ENV = "ERS_DPOMDP_DIR"

if not TYPE_CHECKING:  # hidden from mypy, so that a name missing above is an error, not Any
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "GAMES": "registry",
            "UnknownGameError": "registry",
            "find_game_file": "registry",
            "get_game": "registry",
            "load_game": "registry",
            "dectiger": "dectiger",
            "handshake": "handshake",
            "lever_game": "lever",
            "toy_coordination": "toy_coordination",
        },
    )
