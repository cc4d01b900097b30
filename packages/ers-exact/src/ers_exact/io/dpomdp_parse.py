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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ers_exact.model.game import Game, GameError, make_game

__all__ = ["IDENT_RE", "MAX_MODEL_BYTES", "PREAMBLE", "RESERVED", "DpomdpError", "parse_dpomdp"]

IDENT_RE = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*\Z")
_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_UINT_RE = re.compile(r"\d+\Z")
PREAMBLE = ("agents", "discount", "values", "states", "start", "actions", "observations")
#: Words that cannot serve as names (keywords of the format).
RESERVED = frozenset(PREAMBLE) | {
    "T",
    "O",
    "R",
    "uniform",
    "identity",
    "reward",
    "cost",
    "include",
    "exclude",
}
_PREAMBLE_RE = re.compile(rf"({'|'.join(PREAMBLE)})(?:\s+(include|exclude))?\s*:(.*)\Z")
_ENTRY_RE = re.compile(r"([TOR])\s*:(.*)\Z")

Index = int | np.ndarray  # one index, or an array of indices (a wildcard or partial wildcard)

#: A file whose declared sizes need more memory than this for the model arrays (float64 T[s, a, s'],
#: R[s, a, s'], U[a, s', o]) is refused before anything is allocated.
MAX_MODEL_BYTES = 2 * 10**9


class DpomdpError(GameError):
    """Malformed ``.dpomdp`` input (or a game the format cannot express); the message names the line."""

    def __init__(self, reason: str, line: int | None = None, source: str | None = None) -> None:
        self.reason, self.line, self.source = reason, line, source
        parts = [p for p in (source, None if line is None else f"line {line}") if p]
        super().__init__(": ".join([*parts, reason]))


def parse_dpomdp(text: str, horizon: int = 2, name: str = "dpomdp", source: str | None = None) -> Game:
    """Parse ``.dpomdp`` text into a :class:`Game` with horizon ``horizon`` (the format has none).

    Raises :class:`DpomdpError` (line number and reason) for malformed text, and :class:`GameError` when
    the parsed model is not a valid game (e.g. a transition row that does not sum to 1). ``source`` (the
    file the text came from, if any) is named in both errors.
    """
    parser = _Parser(text)
    try:
        parser.preamble()
        parser.body()
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


def _bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _check_model_size(S: int, A: int, O: int, line: int) -> None:
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


class _Parser:
    """Line-oriented recursive-descent parser; arrays are filled in place as entries are read."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.pos = 0
        self.cache: dict[str, dict[str, Index]] = {"action": {}, "observation": {}, "state": {}}
        self.names: dict[str, tuple[tuple[str, ...], ...]] = {}
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
        if _ENTRY_RE.match(line) or _PREAMBLE_RE.match(line):
            raise DpomdpError(f"expected {what}, got {line!r}", ln)
        return item

    @staticmethod
    def number(tok: str, ln: int, what: str = "a number") -> float:
        if _NUMBER_RE.match(tok):
            return float(tok)
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

    # ----- preamble -----
    def preamble(self) -> None:
        for key in PREAMBLE:
            item = self.next_line()
            if item is None:
                raise DpomdpError(f"missing preamble entry '{key}:' (end of file)", len(self.lines))
            ln, line = item
            m = _PREAMBLE_RE.match(line)
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
        if len(toks) == 1 and _UINT_RE.match(toks[0]):
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

    def names_decl(self, rest: str, what: str, ln: int) -> tuple[str, ...]:
        """A count (names '0', '1', ...) or a list of distinct identifiers."""
        toks = rest.split()
        if len(toks) == 1 and _UINT_RE.match(toks[0]):
            if int(toks[0]) < 1:
                raise DpomdpError(f"the number of {what} must be >= 1, got {toks[0]}", ln)
            return tuple(str(i) for i in range(int(toks[0])))
        if not toks:
            raise DpomdpError(f"expected a count or a list of {what}", ln)
        for t in toks:
            if not IDENT_RE.match(t) or t in RESERVED:
                raise DpomdpError(
                    f"invalid {what[:-1]} name {t!r} (a name is a letter followed by letters, "
                    "digits, '_' or '-', and not a keyword)",
                    ln,
                )
        if len(set(toks)) != len(toks):
            dup = next(t for t in toks if toks.count(t) > 1)
            raise DpomdpError(f"{what[:-1]} name {dup!r} is declared twice", ln)
        return tuple(toks)

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
        elif rest == "uniform" or (not rest and self._peek() == "uniform"):
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

    def _peek(self) -> str | None:
        pos = self.pos
        item = self.next_line()
        self.pos = pos
        return None if item is None else item[1]

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
        self.A = int(np.prod(self.sizes["action"]))
        self.O = int(np.prod(self.sizes["observation"]))
        _check_model_size(self.S, self.A, self.O, ln)
        self.T = np.zeros((self.S, self.A, self.S))
        self.U = np.zeros((self.A, self.S, self.O))
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
        elif _UINT_RE.match(tok):
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
        elif len(parts) == 1 and _UINT_RE.match(parts[0]):
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
                elif _UINT_RE.match(t):
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
            m = _ENTRY_RE.match(line)
            if m is None:
                p = _PREAMBLE_RE.match(line)
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
            _assign(T, (self.all["state"], ja, self.all["state"]), mat[:, None, :])
        else:
            raise self._bad_form("T", ln)

    def _entry_O(self, f: list[str], ln: int) -> None:
        O, U = self.O, self.U
        ja = self.resolve_joint(f[0], "action", ln)
        if len(f) == 4 and f[3]:
            sp, jo = self.resolve_state(f[1], ln), self.resolve_joint(f[2], "observation", ln)
            _assign(U, (ja, sp, jo), self.prob(f[3], ln))
        elif len(f) == 3 and not f[2]:
            sp = self.resolve_state(f[1], ln)
            row = self.row(O, "observation probabilities, one per joint observation", ln, True, ("uniform",))
            row = np.full(O, 1.0 / O) if isinstance(row, str) else row
            _assign(U, (ja, sp, self.all["observation"]), row)
        elif len(f) == 2 and not f[1]:
            mat = self.matrix(self.S, O, "the |S|x|JO| observation matrix", ln, True, ("uniform",))
            if isinstance(mat, str):
                mat = np.full((self.S, O), 1.0 / O)
            _assign(U, (ja, self.all["state"], self.all["observation"]), mat)
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
