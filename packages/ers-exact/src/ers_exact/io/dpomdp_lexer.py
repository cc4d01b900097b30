"""The lexical layer of the MADP ``.dpomdp`` format (grammar in :mod:`ers_exact.io.dpomdp_parse`): its
keywords and token patterns, :class:`DpomdpError`, the model-size guard (:data:`MAX_MODEL_BYTES`), and
:class:`DpomdpLexer`, which reads the text line by line (comments and blank lines skipped, the leading
comment block kept as the description) into numbers, probabilities, rows, matrices and name declarations.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ers_exact.model.game import GameError

__all__ = [
    "ENTRY_RE",
    "IDENT_RE",
    "MADP_RESERVED",
    "MAX_MODEL_BYTES",
    "PREAMBLE",
    "PREAMBLE_RE",
    "RESERVED",
    "UINT_RE",
    "DpomdpError",
    "DpomdpLexer",
    "Index",
    "check_model_size",
]

IDENT_RE = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*\Z")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def file_lines(text: str) -> list[str]:
    """The lines of a .dpomdp text, ended by \\n, \\r\\n or \\r only (``str.splitlines`` also breaks at form
    feeds, vertical tabs, U+0085, U+2028, ..., which split a comment and shifted every later line number)."""
    lines = _LINE_BREAK.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines


# ASCII digits only: ``\d`` also matches Arabic-Indic, fullwidth, ... digits, which float() and int() accept
_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
UINT_RE = re.compile(r"[0-9]+\Z")
PREAMBLE = ("agents", "discount", "values", "states", "start", "actions", "observations")
#: The words MADP's grammar (``dpomdp.spirit``, ``reserved_word``) refuses as names: the reader refuses these
#: only, so a state may be called ``start``, ``uniform``, ``reward``, ... (see ``start: uniform`` in
#: :mod:`ers_exact.io.dpomdp_parse`).
MADP_RESERVED = frozenset(("agents", "discount", "actions", "observations", "T", "O", "R"))
#: Every keyword of the format: the names the writer never emits (it generates others), so that what it
#: writes is unambiguous for stricter readers too.
RESERVED = (
    frozenset(PREAMBLE)
    | MADP_RESERVED
    | frozenset(("uniform", "identity", "reward", "cost", "include", "exclude"))
)
PREAMBLE_RE = re.compile(rf"({'|'.join(PREAMBLE)})(?:\s+(include|exclude))?\s*:(.*)\Z")
ENTRY_RE = re.compile(r"([TOR])\s*:(.*)\Z")

Index = int | np.ndarray  # one index, or an array of indices (a wildcard or partial wildcard)

#: A file whose declared sizes need more memory than this for the model arrays (float64 T[s, a, s'],
#: R[s, a, s'], U[a, s', o]) is refused before anything is allocated.
MAX_MODEL_BYTES = 2 * 10**9
#: the most states, actions or observations one declaration may count: the names '0', '1', ... take ~64 bytes
#: each (a Python string and its lookup entry), so more would exceed the model budget before T is allocated
MAX_NAMES = MAX_MODEL_BYTES // 64


class DpomdpError(GameError):
    """Malformed ``.dpomdp`` input (or a game the format cannot express); the message names the line."""

    def __init__(self, reason: str, line: int | None = None, source: str | None = None) -> None:
        self.reason, self.line, self.source = reason, line, source
        parts = [p for p in (source, None if line is None else f"line {line}") if p]
        super().__init__(": ".join([*parts, reason]))


def _bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def check_model_size(S: int, A: int, O: int, line: int) -> None:
    """Refuse sizes whose T, R and U arrays (float64) would exceed :data:`MAX_MODEL_BYTES`."""
    t_bytes = 8.0 * S * A * S
    total = 2 * t_bytes + 8.0 * A * S * O  # T and R[s, a, s'] are both S x A x S
    if total > MAX_MODEL_BYTES:
        raise DpomdpError(
            f"declares {S} states x {A} joint actions x {O} joint observations: T alone needs "
            f"{_bytes(t_bytes)}, the model {_bytes(total)} (> budget MAX_MODEL_BYTES = "
            f"{_bytes(MAX_MODEL_BYTES)})",
            line,
        )


class DpomdpLexer:
    """The text's lines and tokens: numbers, probabilities, data rows and matrices, and name declarations."""

    def __init__(self, text: str) -> None:
        self.lines = file_lines(text)
        self.pos = 0
        head: list[str] = []
        for raw in self.lines:
            stripped = raw.strip()
            if stripped and not stripped.startswith("#"):
                break
            if stripped:
                head.append(stripped[1:].strip())
        self.description = "\n".join(head).strip()

    # ----- lines and tokens -----
    def next_line(self) -> tuple[int, str] | None:
        """The next non-blank line with comments removed, and its 1-based number (None at end of file)."""
        lines = self.lines
        while self.pos < len(lines):
            line = lines[self.pos]
            self.pos += 1
            if "#" in line:
                line = line.split("#", 1)[0]
            line = line.strip()
            if line:
                return self.pos, line
        return None

    def data_line(self, header: int, what: str) -> tuple[int, str]:
        item = self.next_line()
        if item is None:
            raise DpomdpError(f"expected {what} on the next line, got end of file", header)
        ln, line = item
        if ENTRY_RE.match(line) or PREAMBLE_RE.match(line):
            raise DpomdpError(f"expected {what}, got {line!r}", ln)
        return item

    @staticmethod
    def number(tok: str, ln: int, what: str = "a number") -> float:
        if _NUMBER_RE.match(tok):
            value = float(tok)
            if not math.isfinite(value):
                raise DpomdpError(f"expected {what}, got {tok!r} (beyond the largest float)", ln)
            return value
        raise DpomdpError(f"expected {what}, got {tok!r}", ln)

    def prob(self, tok: str, ln: int) -> float:
        x = self.number(tok, ln, "a probability")
        if not 0.0 <= x <= 1.0:
            raise DpomdpError(f"probability {tok} is outside [0, 1]", ln)
        return x

    def row(self, n: int, what: str, header: int, probs: bool, keywords: Sequence[str] = ()) -> Any:
        """One data line: ``n`` numbers, or one of ``keywords`` (returned as the string)."""
        ln, line = self.data_line(header, f"{what} ({n} numbers)")
        if line in keywords:
            return line
        toks = line.split()
        if len(toks) != n:
            raise DpomdpError(f"expected {n} numbers ({what}), got {len(toks)}: {line[:60]!r}", ln)
        conv = self.prob if probs else self.number
        return np.array([conv(t, ln) for t in toks], dtype=np.float64)

    def matrix(
        self, rows: int, cols: int, what: str, header: int, probs: bool, keywords: Sequence[str] = ()
    ) -> Any:
        """``rows`` data lines of ``cols`` numbers (an array), or one of ``keywords`` (a string)."""
        first = self.row(cols, f"row 1 of {what}", header, probs, keywords)
        if isinstance(first, str):
            return first
        rest = [self.row(cols, f"row {r + 1} of {what}", header, probs) for r in range(1, rows)]
        return np.stack([first, *rest])

    def peek(self) -> str | None:
        pos = self.pos
        item = self.next_line()
        self.pos = pos
        return None if item is None else item[1]

    def names_decl(self, rest: str, what: str, ln: int) -> tuple[str, ...]:
        """A count (names '0', '1', ...) or a list of distinct identifiers."""
        toks = rest.split()
        if len(toks) == 1 and UINT_RE.match(toks[0]):
            if int(toks[0]) < 1:
                raise DpomdpError(f"the number of {what} must be >= 1, got {toks[0]}", ln)
            if int(toks[0]) > MAX_NAMES:
                raise DpomdpError(
                    f"declares {toks[0]} {what}: their names alone would need more than "
                    f"{_bytes(64 * int(toks[0]))} (> budget MAX_MODEL_BYTES = {_bytes(MAX_MODEL_BYTES)})",
                    ln,
                )
            return tuple(str(i) for i in range(int(toks[0])))
        if not toks:
            raise DpomdpError(f"expected a count or a list of {what}", ln)
        for t in toks:
            if not IDENT_RE.match(t) or t in MADP_RESERVED:
                raise DpomdpError(
                    f"invalid {what[:-1]} name {t!r} (a name is a letter followed by letters, "
                    f"digits, '_' or '-', and not a keyword: {', '.join(sorted(MADP_RESERVED))})",
                    ln,
                )
        if len(set(toks)) != len(toks):
            dup = next(t for t in toks if toks.count(t) > 1)
            raise DpomdpError(f"{what[:-1]} name {dup!r} is declared twice", ln)
        return tuple(toks)
