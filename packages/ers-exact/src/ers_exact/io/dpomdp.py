"""Read and write Dec-POMDPs in the MADP toolbox ``.dpomdp`` format.

:func:`read_dpomdp` / :func:`parse_dpomdp` turn a file (or its text) into a
:class:`~ers_exact.model.game.Game`; the grammar and the MADP reward semantics are described in
:mod:`ers_exact.io.dpomdp_parse`.
:func:`write_dpomdp` / :func:`save_dpomdp` go the other way.

Round trip. The format stores only R(s, a), so a game whose reward does not depend on s' is written with
``R: ja : s : * : * : r`` lines and ``read_dpomdp(write_dpomdp(g), horizon=g.horizon, name=g.name) == g``
holds exactly (floats are written with ``repr``, names are kept). When R[s, a, s'] does depend on s', the
writer emits one ``R: ja : s : s' : * : r`` line per s' with T(s'|s, a) != 0; the reader's fold gives
R(s, a) = sum_s' T(s'|s, a) R(s, a, s'), the same ``expected_reward`` (up to float rounding), so the game read
back is J-equivalent (same value for every policy) but its ``reward`` array is not equal to the original.
Horizon and legal-action sets are not part of the format: the horizon is passed to the reader, and a game
with ``legal_actions`` is refused by the writer.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from ers_exact.io.dpomdp_parse import IDENT_RE, RESERVED, DpomdpError, parse_dpomdp
from ers_exact.model.game import Game
from ers_exact.util.output import write_atomic

__all__ = ["DpomdpError", "parse_dpomdp", "read_dpomdp", "save_dpomdp", "write_dpomdp"]


def read_dpomdp(source: str | os.PathLike[str], horizon: int = 2, name: str | None = None) -> Game:
    """Read a ``.dpomdp`` game from a path (``.gz`` is decompressed) or, if ``source`` is a ``str`` that
    contains a line break (``\n`` or ``\r``), from the text itself.

    ``name`` defaults to the file name without ``.dpomdp`` (``"dpomdp"`` for text). A file is read as UTF-8;
    a leading byte-order mark is ignored. Errors in the file raise :class:`DpomdpError` naming the file and
    line; an invalid model raises ``GameError``.
    """
    if isinstance(source, str) and ("\n" in source or "\r" in source):
        return parse_dpomdp(source, horizon, "dpomdp" if name is None else name)
    path = Path(source)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8-sig") as fh:
                text = fh.read()
            stem = Path(path.stem).stem if path.stem.endswith(".dpomdp") else path.stem
        else:
            text = path.read_text(encoding="utf-8-sig")
            stem = path.stem
    except UnicodeDecodeError as e:
        raise DpomdpError(
            f"not a UTF-8 text file (byte 0x{e.object[e.start]:02x} at offset {e.start}); a "
            ".dpomdp file is plain text",
            source=str(path),
        ) from None
    except (gzip.BadGzipFile, EOFError) as e:
        raise DpomdpError(f"not a readable gzip file ({e})", source=str(path)) from None
    except IsADirectoryError:
        raise DpomdpError("is a folder, not a .dpomdp file", source=str(path)) from None
    return parse_dpomdp(text, horizon, stem if name is None else name, source=str(path))


def save_dpomdp(game: Game, path: str | os.PathLike[str]) -> None:
    """Write ``game`` to ``path`` in the ``.dpomdp`` format (see :func:`write_dpomdp`)."""
    write_atomic(path, write_dpomdp(game))


def write_dpomdp(game: Game) -> str:
    """The ``.dpomdp`` text of ``game``: preamble, then T, O and R entries (T and O before R, as the
    reader's reward fold needs them).

    Names that are valid identifiers (a letter followed by letters, digits, ``_`` or ``-``; not a keyword;
    not a duplicate) are kept; others are replaced by generated ones (``s3``, ``a1``, ``o0``, ...). Names
    ``'0', '1', ...`` are written as a count. Probabilities and rewards use ``repr(float)``, so values
    read back bit-exactly. See the module docstring for the s'-dependent-reward case.

    Raises :class:`DpomdpError` when ``game.legal_actions`` is set (the format cannot express it).
    """
    if game.legal_actions is not None:
        raise DpomdpError(
            f"game {game.name!r} has legal-action sets, which .dpomdp cannot express; "
            "write a copy with legal_actions=None if dropping them is intended"
        )
    S, A, O = game.n_states, game.n_joint_actions, game.n_joint_observations
    states_decl, st = _declare(game.state_names, "s")
    acts = [_declare(names, "a") for names in game.action_names]
    obs = [_declare(names, "o") for names in game.observation_names]
    ja = [" ".join(acts[i][1][k] for i, k in enumerate(row)) for row in game.joint_actions.tolist()]
    jo = [" ".join(obs[i][1][k] for i, k in enumerate(row)) for row in game.joint_observations.tolist()]

    # the leading comment block is what the reader returns as the description
    out = [f"# {line}".rstrip() for line in (game.description or game.name).splitlines()]
    out += [
        f"agents: {game.n_agents}",
        f"discount: {game.discount!r}",
        "values: reward",
        f"states: {states_decl}",
        "start:",
    ]
    b0 = game.initial_belief
    out.append("uniform" if np.all(b0 == 1.0 / S) else _fmt(b0))
    out += ["actions:", *(decl for decl, _ in acts), "observations:", *(decl for decl, _ in obs)]
    out.append(
        f"# game {game.name!r} written by ers_exact.io.dpomdp; its horizon H = {game.horizon} is not "
        "part of the format"
    )

    T, U = game.transition, game.observation
    eye = np.eye(S)
    for a in range(A):
        Ta = T[:, a, :]
        if np.array_equal(Ta, eye):
            out += [f"T: {ja[a]} :", "identity"]
        elif np.all(Ta == 1.0 / S):
            out += [f"T: {ja[a]} :", "uniform"]
        else:
            for s in range(S):
                _rows(out, f"T: {ja[a]} : {st[s]} :", Ta[s], st)
    for a in range(A):
        if np.all(U[a] == 1.0 / O):
            out += [f"O: {ja[a]} :", "uniform"]
        else:
            for s in range(S):
                _rows(out, f"O: {ja[a]} : {st[s]} :", U[a, s], jo)

    R = game.reward
    flat = np.all(R[:, :, :1] == R, axis=2)  # [S, A]: R(s, a, .) constant in s'
    for s in range(S):
        for a in range(A):
            if flat[s, a]:
                if R[s, a, 0] != 0.0:
                    out.append(f"R: {ja[a]} : {st[s]} : * : * : {float(R[s, a, 0])!r}")
            else:  # s'-dependent: the reader folds sum_s' T(s'|s,a) r into R(s, a)
                for sp in np.flatnonzero((T[s, a] != 0.0) & (R[s, a] != 0.0)):
                    out.append(f"R: {ja[a]} : {st[s]} : {st[sp]} : * : {float(R[s, a, sp])!r}")
    return "\n".join(out) + "\n"


def _fmt(values: np.ndarray) -> str:
    return " ".join(repr(x) for x in values.tolist())


def _rows(out: list[str], head: str, row: np.ndarray, labels: list[str] | tuple[str, ...]) -> None:
    """A probability row as single entries when sparse (entries default to 0), else as a row line."""
    nz = np.flatnonzero(row)
    if 4 * nz.size <= row.size:
        out.extend(f"{head} {labels[j]} : {float(row[j])!r}" for j in nz)
    else:
        out += [head, _fmt(row)]


def _declare(names: tuple[str, ...], prefix: str) -> tuple[str, tuple[str, ...]]:
    """(declaration text, names as written): a count for names '0'..'k-1', else a name list in which
    only invalid, reserved or duplicate names are replaced by fresh ``prefix<i>`` names."""
    if names == tuple(str(i) for i in range(len(names))):
        return str(len(names)), names
    kept: list[str | None] = []
    taken: set[str] = set()
    for n in names:
        ok = IDENT_RE.match(n) is not None and n not in RESERVED and n not in taken
        kept.append(n if ok else None)
        if ok:
            taken.add(n)
    result: list[str] = []
    for i, name in enumerate(kept):
        if name is None:
            name, k = f"{prefix}{i}", 0
            while name in taken:
                k += 1
                name = f"{prefix}{i}_{k}"
            taken.add(name)
        result.append(name)
    return " ".join(result), tuple(result)
