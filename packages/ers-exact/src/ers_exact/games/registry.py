"""The registry of built-in games (:data:`GAMES`, a plain dict of factories) and the lookup of a GAME by
name or ``.dpomdp`` file. Re-exported by :mod:`ers_exact.games`, which documents the games."""

from __future__ import annotations

import difflib
import inspect
import os
from collections.abc import Callable
from functools import partial
from os import PathLike
from pathlib import Path

from ers_exact.games import DPOMDP_DIR_ENV
from ers_exact.games.dectiger import dectiger
from ers_exact.games.handshake import handshake
from ers_exact.games.lever import lever_game
from ers_exact.games.toy_coordination import toy_coordination
from ers_exact.model.game import Game
from ers_exact.util.errors import InputError

__all__ = ["DPOMDP_DIR_ENV", "GAMES", "UnknownGameError", "find_game_file", "get_game", "load_game"]

GAMES: dict[str, Callable[..., Game]] = {
    "toy-coordination": toy_coordination,
    "three-lever": partial(lever_game, levers=3),
    "two-lever": partial(lever_game, levers=2),
    "handshake": handshake,
    "dectiger": dectiger,
}


class UnknownGameError(InputError, ValueError, KeyError):
    """No built-in game has this name. A ``ValueError`` that ``except KeyError`` also catches.

    Attributes: ``name`` (what was asked for) and ``suggestions`` (the closest registered names).
    """

    def __init__(self, name: str, suggestions: list[str]) -> None:
        self.name = name
        self.suggestions = list(suggestions)
        if suggestions:
            hint = "did you mean " + " or ".join(repr(s) for s in suggestions) + "?"
        else:
            hint = "known games: " + ", ".join(sorted(GAMES))
        super().__init__(f"unknown game {name!r}; {hint}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])

    def __reduce__(self) -> tuple[type[UnknownGameError], tuple[str, list[str]]]:  # picklable
        return (type(self), (self.name, self.suggestions))


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def get_game(name: str, **overrides: object) -> Game:
    """Build the built-in game ``name`` (case and ``_``/``-`` insensitive) with config ``overrides``.

    Raises :class:`UnknownGameError` (suggesting the closest names) for an unknown name, and
    ``TypeError`` naming the accepted keywords for an unknown config key.
    """
    key = _normalise(name)
    if key not in GAMES:
        raise UnknownGameError(name, difflib.get_close_matches(key, list(GAMES), n=3, cutoff=0.6))
    factory = GAMES[key]
    params = inspect.signature(factory).parameters
    unknown = sorted(set(overrides) - set(params))
    if unknown:
        raise TypeError(f"game {key!r} has no option(s) {unknown}; options: {sorted(params)}")
    return factory(**overrides)


def load_game(spec: str | PathLike[str], horizon: int | None = None, discount: float | None = None) -> Game:
    """A built-in game by name, or a ``.dpomdp`` file by path, with optional H and gamma overrides.

    ``spec`` is read as a path when it is a ``PathLike``, or a string that is not a registered name and
    names an existing file or ends in ``.dpomdp`` (so a stray file called ``dectiger`` in the working
    directory never shadows the built-in); otherwise as a registry name (see :func:`get_game`).
    A bare file name (no folder) that is not in the working directory is looked up in the folder named by
    ``$ERS_DPOMDP_DIR`` (see :func:`find_game_file`).
    ``horizon`` and ``discount`` replace H and gamma (via :meth:`Game.with_horizon` /
    :meth:`Game.with_discount`); ``None`` keeps the game's own (for a file: the reader's default
    horizon and the file's discount).
    """
    text = str(spec)
    path = find_game_file(spec)
    if path is not None:
        from ers_exact.io.dpomdp import read_dpomdp  # lazy: the reader is optional for built-ins

        game = read_dpomdp(path) if horizon is None else read_dpomdp(path, horizon=horizon)
    else:
        game = get_game(text)
    if horizon is not None and game.horizon != horizon:
        game = game.with_horizon(horizon)
    if discount is not None and game.discount != discount:
        game = game.with_discount(discount)
    return game


def find_game_file(spec: str | PathLike[str]) -> Path | None:
    """The ``.dpomdp`` file ``spec`` names, or ``None`` when it names a built-in game (see :func:`load_game`).

    A bare file name that does not exist in the working directory is looked up in ``$ERS_DPOMDP_DIR``
    (:data:`DPOMDP_DIR_ENV`). Raises ``FileNotFoundError`` for a ``.dpomdp`` name found in neither place and
    ``IsADirectoryError`` for a folder, both naming the path."""
    text = str(spec)
    if not isinstance(spec, PathLike) and (not text or _normalise(text) in GAMES):
        return None  # a built-in name, or an empty one (an unset "$GAME"): not the working directory, "."
    path = Path(text)
    folder = os.environ.get(DPOMDP_DIR_ENV)
    if not path.exists() and folder and path.name == text and Path(folder, text).exists():
        path = Path(folder, text)
    if path.is_dir():
        raise IsADirectoryError(
            f"{path} is a folder; GAME is a built-in name (ers-exact games) or a .dpomdp file"
        )
    if path.is_file():
        return path
    if isinstance(spec, PathLike) or text.lower().endswith((".dpomdp", ".dpomdp.gz")):
        where = ""
        if path.name == text:
            where = (
                f" in the working directory nor in ${DPOMDP_DIR_ENV} = {folder}"
                if folder
                else f" in the working directory (set ${DPOMDP_DIR_ENV} to a folder to look bare names up "
                "there)"
            )
        raise FileNotFoundError(f"{text}: no such file{where}")
    return None
