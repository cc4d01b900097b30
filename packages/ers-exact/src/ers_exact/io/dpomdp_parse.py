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
keeps only R(s, ja). ``R: ja : s : * : * : r`` *sets* R(s, ja) = r. A line naming s' (with ``jo`` the single
``*``) *adds* T(s'|s, ja) * r, using the T parsed so far. A line (or row / matrix) naming observations adds
sum over the named s', jo of T(s'|s, ja) U(jo|ja, s') r; MADP itself refuses that form ("not
implemented"), so this is the natural extension. Only the single token ``*`` counts as "any observation":
per-agent wildcards such as ``* *`` name every joint observation explicitly and so *add* (as in MADP).
``values: cost`` negates every reward. T and O entries default to 0.

The lines, tokens and name declarations come from :class:`~ers_exact.io.dpomdp_lexer.DpomdpLexer`, which the
parser here extends with the preamble, name and index resolution, and the T/O/R entries.
"""

from __future__ import annotations

import math

import numpy as np

from ers_exact.io.dpomdp_lexer import (
    ENTRY_RE,
    IDENT_RE,
    MAX_MODEL_BYTES,
    PREAMBLE,
    PREAMBLE_RE,
    RESERVED,
    UINT_RE,
    DpomdpError,
    DpomdpLexer,
    Index,
    check_model_size,
)
from ers_exact.model.game import ROW_SUM_TOL, Game, GameError, make_game

__all__ = ["IDENT_RE", "MAX_MODEL_BYTES", "PREAMBLE", "RESERVED", "DpomdpError", "parse_dpomdp"]


def parse_dpomdp(text: str, horizon: int = 2, name: str = "dpomdp", source: str | None = None) -> Game:
    """Parse ``.dpomdp`` text into a :class:`Game` with horizon ``horizon`` (the format has none).

    Raises :class:`DpomdpError` (line number and reason) for malformed text and for a transition or
    observation row that does not sum to 1 (the line that last wrote into it), and :class:`GameError` when
    the parsed model is otherwise not a valid game (e.g. rewards too large). ``source`` (the
    file the text came from, if any) is named in both errors.
    """
    parser = _Parser(text)
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


class _Parser(DpomdpLexer):
    """Line-oriented recursive-descent parser; arrays are filled in place as entries are read."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.cache: dict[str, dict[str, Index]] = {"action": {}, "observation": {}, "state": {}}
        self.names: dict[str, tuple[tuple[str, ...], ...]] = {}

    # ----- preamble -----
    def preamble(self) -> None:
        for key in PREAMBLE:
            item = self.next_line()
            if item is None and not self.lines:  # no line to name
                raise DpomdpError(f"the file is empty: no preamble ({', '.join(PREAMBLE)})")
            if item is None:
                raise DpomdpError(f"missing preamble entry '{key}:' (end of file)", len(self.lines))
            ln, line = item
            m = PREAMBLE_RE.match(line)
            order = ", ".join(PREAMBLE)
            if m is None:
                raise DpomdpError(
                    f"missing preamble entry '{key}:', got {line[:60]!r} (the preamble is "
                    f"{order}, each once, in this order)",
                    ln,
                )
            got, mod, rest = m.group(1), m.group(2), m.group(3).strip()
            if got != key:
                later = PREAMBLE.index(got) > PREAMBLE.index(key)
                problem = (
                    f"missing preamble entry '{key}:' before '{got}:'"
                    if later
                    else f"preamble entry '{got}:' is repeated or out of order (expected '{key}:')"
                )
                raise DpomdpError(f"{problem}; the preamble is {order}, each once, in this order", ln)
            if mod is not None and key != "start":
                raise DpomdpError(f"'{mod}' only follows 'start'", ln)
            getattr(self, f"_pre_{key}")(rest, mod, ln)

    def _pre_agents(self, rest: str, mod: str | None, ln: int) -> None:
        toks = rest.split()
        if len(toks) == 1 and UINT_RE.match(toks[0]):
            self.n = int(toks[0])
        elif toks and all(IDENT_RE.match(t) for t in toks):
            self.n = len(toks)
        else:
            raise DpomdpError(f"expected the number of agents, got {rest!r}", ln)
        if self.n < 1:
            raise DpomdpError("a game needs at least one agent", ln)

    def _pre_discount(self, rest: str, mod: str | None, ln: int) -> None:
        self.discount = self.number(rest, ln, "a discount factor")

    def _pre_values(self, rest: str, mod: str | None, ln: int) -> None:
        if rest not in ("reward", "cost"):
            raise DpomdpError(f"expected 'reward' or 'cost', got {rest!r}", ln)
        self.cost = rest == "cost"

    def _pre_states(self, rest: str, mod: str | None, ln: int) -> None:
        self.states = self.names_decl(rest, "states", ln)
        self.S = len(self.states)
        self.lookup = {"state": [{s: i for i, s in enumerate(self.states)}]}

    def _pre_start(self, rest: str, mod: str | None, ln: int) -> None:
        S = self.S
        if mod is not None:
            toks = rest.split()
            if not toks:
                raise DpomdpError(f"'start {mod}:' needs a list of states", ln)
            listed = sorted({self.state_index(t, ln) for t in toks})
            keep = listed if mod == "include" else sorted(set(range(S)) - set(listed))
            if not keep:
                raise DpomdpError("'start exclude:' excludes every state", ln)
            self.b0 = np.zeros(S)
            self.b0[keep] = 1.0 / len(keep)
        elif rest == "uniform" or (not rest and self.peek() == "uniform"):
            if not rest:
                self.next_line()
            self.b0 = np.full(S, 1.0 / S)
        elif rest:
            if len(rest.split()) != 1:
                raise DpomdpError(
                    f"expected one start state after 'start:' (a vector goes on the next line), got {rest!r}",
                    ln,
                )
            self.b0 = np.zeros(S)
            self.b0[self.state_index(rest, ln)] = 1.0
        else:
            self.b0 = self.row(S, "start distribution over the states", ln, probs=True)

    def _agent_lines(self, rest: str, kind: str, ln: int) -> None:
        plural = f"{kind}s"
        decls = []
        for i in range(self.n):
            if i == 0 and rest:
                line, lni = rest, ln
            else:
                lni, line = self.data_line(ln, f"the {plural} of agent {i} (a count or a list of names)")
            decls.append(self.names_decl(line, plural, lni))
        self.names[kind] = tuple(decls)
        self.lookup[kind] = [{a: j for j, a in enumerate(d)} for d in decls]

    def _pre_actions(self, rest: str, mod: str | None, ln: int) -> None:
        self._agent_lines(rest, "action", ln)

    def _pre_observations(self, rest: str, mod: str | None, ln: int) -> None:
        """The last preamble entry: sizes are known, so the (zero) model arrays are allocated."""
        self._agent_lines(rest, "observation", ln)
        self.sizes = {k: tuple(len(d) for d in self.names[k]) for k in ("action", "observation")}
        self.A = math.prod(self.sizes["action"])  # Python ints: never wraps
        self.O = math.prod(self.sizes["observation"])
        check_model_size(self.S, self.A, self.O, ln)
        self.T = np.zeros((self.S, self.A, self.S))
        self.U = np.zeros((self.A, self.S, self.O))
        # the line that last wrote into each row T(. | s, a) and U(. | a, s') (0: none), named by check_rows
        self.T_line = np.zeros((self.S, self.A), dtype=np.int64)
        self.U_line = np.zeros((self.A, self.S), dtype=np.int64)
        self.R = np.zeros((self.S, self.A))
        self.all = {"state": np.arange(self.S), "action": np.arange(self.A), "observation": np.arange(self.O)}

    # ----- names and indices -----
    def state_index(self, tok: str, ln: int) -> int:
        idx = self.resolve_state(tok, ln)
        if not isinstance(idx, int):
            raise DpomdpError("'*' is not allowed here", ln)
        return idx

    def resolve_state(self, tok: str, ln: int) -> Index:
        hit = self.cache["state"].get(tok)
        if hit is not None:
            return hit
        if tok == "*":
            res: Index = np.arange(self.S)
        elif UINT_RE.match(tok):
            res = int(tok)
            if res >= self.S:
                raise DpomdpError(f"state index {res} is out of range (there are {self.S} states)", ln)
        elif tok in self.lookup["state"][0]:
            res = self.lookup["state"][0][tok]
        elif not tok:
            raise DpomdpError("missing state", ln)
        else:
            raise DpomdpError(f"unknown state {tok!r}", ln)
        self.cache["state"][tok] = res
        return res

    def resolve_joint(self, tok: str, kind: str, ln: int) -> Index:
        """A joint action/observation token -> joint index (int) or array of joint indices."""
        hit = self.cache[kind].get(tok)
        if hit is not None:
            return hit
        parts, sizes, total = tok.split(), self.sizes[kind], self.all[kind].size
        if not parts:
            raise DpomdpError(f"missing joint {kind}", ln)
        if len(parts) == 1 and parts[0] == "*":
            res: Index = np.arange(total)
        elif len(parts) == 1 and UINT_RE.match(parts[0]):
            res = int(parts[0])
            if res >= total:
                raise DpomdpError(f"joint {kind} index {res} is out of range ({total} joint {kind}s)", ln)
        elif len(parts) != self.n:
            raise DpomdpError(
                f"joint {kind} {tok!r} has {len(parts)} component(s), expected a joint index, "
                f"'*', or one {kind} per agent ({self.n})",
                ln,
            )
        else:
            per: list[Index] = []
            for i, t in enumerate(parts):
                if t == "*":
                    per.append(np.arange(sizes[i]))
                elif UINT_RE.match(t):
                    if int(t) >= sizes[i]:
                        raise DpomdpError(
                            f"{kind} index {t} of agent {i} is out of range (agent {i} has "
                            f"{sizes[i]} {kind}s)",
                            ln,
                        )
                    per.append(int(t))
                elif t in self.lookup[kind][i]:
                    per.append(self.lookup[kind][i][t])
                else:
                    raise DpomdpError(f"unknown {kind} {t!r} for agent {i}", ln)
            if all(isinstance(p, int) for p in per):
                res = int(np.ravel_multi_index(tuple(per), sizes))
            else:
                grids = np.meshgrid(*[np.atleast_1d(p) for p in per], indexing="ij")
                res = np.ravel_multi_index(tuple(grids), sizes).ravel()
        self.cache[kind][tok] = res
        return res

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
            if f[2] == "*" and f[3] == "*":  # R: ja : s : * : * : r sets R(s, ja)
                _assign(self.R, (s, ja), r)
                return
            sp = self.resolve_state(f[2], ln)
            if f[3] == "*":  # adds T(s'|s,ja) r
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
