"""Parser for the MADP toolbox ``.dpomdp`` format (Oliehoek 2006; see MADP ``problems/example.dpomdp``).

The format in short (case- and newline-sensitive, ``#`` starts a comment, blank lines are skipped):

* a preamble with, exactly once and in this order, ``agents: N``, ``discount: f``,
  ``values: reward|cost``, ``states: N | names``, ``start:`` (next line a vector or ``uniform``;
  or ``start: <state>``, ``start include: <states>``, ``start exclude: <states>``), ``actions:`` and
  ``observations:`` (then one line per agent: a count or a list of names);
* then ``T``/``O``/``R`` entries, later ones overwriting earlier ones::

      T: ja : s : s' : p        T: ja : s :  + row or uniform    T: ja :  + |S|x|S| matrix, uniform, identity
      O: ja : s' : jo : p       O: ja : s' : + row or uniform    O: ja :  + |S|x|JO| matrix or uniform
      R: ja : s : s' : jo : r   R: ja : s : s' : + row over JO   R: ja : s : + |S|x|JO| matrix

  A joint action/observation is one joint index, a single ``*``, or one token per agent (a name, an index
  or ``*``); joint indices are row-major with the last agent varying fastest.

Rewards follow MADP (``ParserDPOMDPFormat_Spirit::ProcessR`` and ``DecPOMDPDiscrete::SetReward``): the model
keeps only R(s, ja). ``R: ja : s : * : * : r`` *sets* R(s, ja) = r. A line naming s' (with ``jo`` "any
observation") *adds* T(s'|s, ja) * r, using the T parsed so far. A line (or row / matrix) naming
observations adds sum over the named s', jo of T(s'|s, ja) U(jo|ja, s') r, with the T and O parsed so far
(MADP's five-argument ``SetReward``). "Any observation" is ``*`` or one ``*`` per agent (``* *``): MADP's
grammar reads ``* * ... *`` as the wildcard joint observation, not as the list of every joint observation
(which would add T U r with the O parsed so far). A partial wildcard such as ``x *`` names observations.

Names are identifiers (a letter, then letters, digits, ``_`` or ``-``); as in MADP only ``agents``,
``discount``, ``actions``, ``observations``, ``T``, ``O`` and ``R`` are reserved, so a state may be called
``start`` or ``uniform``. ``start: uniform`` on one line then names that state (MADP's ``uniform`` keyword
follows a line break); with no state of that name it is the uniform distribution (an extension), as is
``uniform`` on the line after ``start:``. Numbers and indices use ASCII digits only. A leading UTF-8
byte-order mark is ignored. ``values: cost`` negates every reward. T and O entries default to 0.

The lines, tokens and name declarations come from :class:`~ers_exact.io.dpomdp_lexer.DpomdpLexer`; the
preamble and the resolution of names and indices from its subclass
:class:`~ers_exact.io.dpomdp_preamble.DpomdpPreamble`, which the parser here extends with the T/O/R entries.
"""

from __future__ import annotations

import numpy as np

from ers_exact.io.dpomdp_lexer import (
    ENTRY_RE,
    IDENT_RE,
    MAX_MODEL_BYTES,
    PREAMBLE,
    PREAMBLE_RE,
    RESERVED,
    DpomdpError,
    Index,
)
from ers_exact.io.dpomdp_preamble import DpomdpPreamble
from ers_exact.model.game import ROW_SUM_TOL, Game, GameError, make_game

__all__ = ["IDENT_RE", "MAX_MODEL_BYTES", "PREAMBLE", "RESERVED", "DpomdpError", "parse_dpomdp"]


def parse_dpomdp(text: str, horizon: int = 2, name: str = "dpomdp", source: str | None = None) -> Game:
    """Parse ``.dpomdp`` text into a :class:`Game` with horizon ``horizon`` (the format has none).

    Raises :class:`DpomdpError` (line number and reason) for malformed text and for a transition or
    observation row that does not sum to 1 (the line that last wrote into it), and :class:`GameError` when
    the parsed model is otherwise not a valid game (e.g. rewards too large). ``source`` (the
    file the text came from, if any) is named in both errors. A leading byte-order mark is dropped.
    """
    parser = _Parser(text[1:] if text.startswith("\ufeff") else text)
    try:
        parser.preamble()
        parser.body()
        parser.check_rows()
    except DpomdpError as e:
        if source is None:
            raise
        raise DpomdpError(e.reason, e.line, source) from None
    reward = -parser.R if parser.cost else parser.R
    try:
        return make_game(
            name,
            parser.states,
            parser.names["action"],
            parser.names["observation"],
            parser.T,
            parser.U,
            reward,
            parser.b0,
            horizon,
            parser.discount,
            description=parser.description,
        )
    except GameError as e:
        if source is None or isinstance(e, DpomdpError):
            raise
        raise GameError(f"{source}: {e}") from e


class _Parser(DpomdpPreamble):
    """Line-oriented recursive-descent parser; arrays are filled in place as entries are read."""

    # ----- body -----
    def body(self) -> None:
        while (item := self.next_line()) is not None:
            ln, line = item
            m = ENTRY_RE.match(line)
            if m is None:
                p = PREAMBLE_RE.match(line)
                if p is not None:
                    raise DpomdpError(f"preamble entry '{p.group(1)}:' repeated or after T/O/R entries", ln)
                raise DpomdpError(f"expected a 'T:', 'O:' or 'R:' entry, got {line[:60]!r}", ln)
            fields = [f.strip() for f in m.group(2).split(":")]
            getattr(self, f"_entry_{m.group(1)}")(fields, ln)

    @staticmethod
    def _bad_form(kind: str, ln: int) -> DpomdpError:
        forms = {
            "T": "'T: ja : s : s' : p', 'T: ja : s :' + row, or 'T: ja :' + matrix/uniform/identity",
            "O": "'O: ja : s' : jo : p', 'O: ja : s' :' + row, or 'O: ja :' + matrix/uniform",
            "R": "'R: ja : s : s' : jo : r', 'R: ja : s : s' :' + row, or 'R: ja : s :' + matrix",
        }
        return DpomdpError(f"malformed {kind} entry: expected {forms[kind]}", ln)

    def _entry_T(self, f: list[str], ln: int) -> None:
        S, T = self.S, self.T
        ja = self.resolve_joint(f[0], "action", ln)
        if len(f) == 4 and f[3]:
            s, sp = self.resolve_state(f[1], ln), self.resolve_state(f[2], ln)
            _assign(T, (s, ja, sp), self.prob(f[3], ln))
        elif len(f) == 3 and not f[2]:
            s = self.resolve_state(f[1], ln)
            row = self.row(S, "transition probabilities, one per state", ln, True, ("uniform",))
            _assign(T, (s, ja, self.all["state"]), np.full(S, 1.0 / S) if isinstance(row, str) else row)
        elif len(f) == 2 and not f[1]:
            mat = self.matrix(S, S, "the |S|x|S| transition matrix", ln, True, ("uniform", "identity"))
            if isinstance(mat, str):
                mat = np.eye(S) if mat == "identity" else np.full((S, S), 1.0 / S)
            s = self.all["state"]
            _assign(T, (s, ja, self.all["state"]), mat[:, None, :])
        else:
            raise self._bad_form("T", ln)
        _assign(self.T_line, (s, ja), ln)

    def _entry_O(self, f: list[str], ln: int) -> None:
        O, U = self.O, self.U
        ja = self.resolve_joint(f[0], "action", ln)
        if len(f) == 4 and f[3]:
            sp, jo = self.resolve_state(f[1], ln), self.resolve_joint(f[2], "observation", ln)
            _assign(U, (ja, sp, jo), self.prob(f[3], ln))
            _assign(self.U_line, (ja, sp), ln)
        elif len(f) == 3 and not f[2]:
            sp = self.resolve_state(f[1], ln)
            row = self.row(O, "observation probabilities, one per joint observation", ln, True, ("uniform",))
            row = np.full(O, 1.0 / O) if isinstance(row, str) else row
            _assign(U, (ja, sp, self.all["observation"]), row)
            _assign(self.U_line, (ja, sp), ln)
        elif len(f) == 2 and not f[1]:
            mat = self.matrix(self.S, O, "the |S|x|JO| observation matrix", ln, True, ("uniform",))
            if isinstance(mat, str):
                mat = np.full((self.S, O), 1.0 / O)
            _assign(U, (ja, self.all["state"], self.all["observation"]), mat)
            _assign(self.U_line, (ja, self.all["state"]), ln)
        else:
            raise self._bad_form("O", ln)

    def _entry_R(self, f: list[str], ln: int) -> None:
        S, O = self.S, self.O
        if len(f) not in (3, 4, 5) or bool(f[-1]) != (len(f) == 5):
            raise self._bad_form("R", ln)
        ja, s = self.resolve_joint(f[0], "action", ln), self.resolve_state(f[1], ln)
        if len(f) == 5:
            r = self.number(f[4], ln, "a reward")
            any_obs = self._any_observation(f[3])
            if f[2] == "*" and any_obs:  # R: ja : s : * : * : r sets R(s, ja)
                _assign(self.R, (s, ja), r)
                return
            sp = self.resolve_state(f[2], ln)
            if any_obs:  # adds T(s'|s,ja) r
                self._add_reward(s, ja, sp, None, r)
                return
            vals = np.zeros(O)
            vals[self.resolve_joint(f[3], "observation", ln)] = r
            self._add_reward(s, ja, sp, np.broadcast_to(vals, (np.atleast_1d(sp).size, O)), None)
        elif len(f) == 4:
            sp = self.resolve_state(f[2], ln)
            row = self.row(O, "rewards, one per joint observation", ln, False)
            self._add_reward(s, ja, sp, np.broadcast_to(row, (np.atleast_1d(sp).size, O)), None)
        else:
            mat = self.matrix(S, O, "the |S|x|JO| reward matrix", ln, False)
            self._add_reward(s, ja, self.all["state"], mat, None)

    def _any_observation(self, tok: str) -> bool:
        """``*`` or one ``*`` per agent: MADP's wildcard joint observation (another count of stars is left
        to :meth:`resolve_joint`, which refuses it)."""
        parts = tok.split()
        return len(parts) in (1, self.n) and all(p == "*" for p in parts)

    def check_rows(self) -> None:
        """Every row T(. | s, a) and U(. | a, s') sums to 1 (within the game's ROW_SUM_TOL), else a
        :class:`DpomdpError` at the line that last wrote into the offending row (the game's own check names
        only its indices); a row no entry wrote into sums to 0 and is named without a line."""
        rows = (
            ("transition", "T(. | s, a)", self.T, self.T_line, ("s", "a")),
            ("observation", "O(. | a, s')", self.U, self.U_line, ("a", "s'")),
        )
        for name, what, arr, lines, labels in rows:
            sums = arr.sum(axis=-1)
            bad = np.argwhere(np.abs(sums - 1.0) > ROW_SUM_TOL)
            if not len(bad):
                continue
            idx = tuple(int(i) for i in bad[0])
            where = ", ".join(f"{k}={v}" for k, v in zip(labels, idx))
            line = int(lines[idx])
            told = "last written by the entry on this line" if line else "written by no entry"
            raise DpomdpError(
                f"{name}[{where}] sums to {float(sums[idx])!r}, not 1 (tolerance {ROW_SUM_TOL}): the row "
                f"{what} is {told}; ers never renormalises silently",
                line or None,
            )

    def _add_reward(self, s: Index, ja: Index, sp: Index, vals: np.ndarray | None, r: float | None) -> None:
        """R(s, ja) += sum_s' T(s'|s,ja) [r, or sum_jo U(jo|ja,s') vals[s', jo]], T and U as parsed so far."""
        s_, ja_, sp_ = np.atleast_1d(s), np.atleast_1d(ja), np.atleast_1d(sp)
        t = self.T[np.ix_(s_, ja_, sp_)]  # [s, ja, s']
        if vals is None:
            contrib = t.sum(axis=-1) * r
        else:
            u = self.U[np.ix_(ja_, sp_, self.all["observation"])]  # [ja, s', jo]
            contrib = np.einsum("sap,ap->sa", t, np.einsum("apo,po->ap", u, vals))
        self.R[np.ix_(s_, ja_)] += contrib


def _assign(arr: np.ndarray, idx: tuple[Index, ...], value: float | np.ndarray) -> None:
    """arr[outer product of idx] = value, with a fast path when every index is a single int."""
    if all(isinstance(i, int) for i in idx):
        arr[idx] = value
    else:
        arr[np.ix_(*[np.atleast_1d(i) for i in idx])] = value
