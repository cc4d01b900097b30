"""The preamble of the MADP ``.dpomdp`` format and the names it declares (grammar in
:mod:`ers_exact.io.dpomdp_parse`): ``agents``, ``discount``, ``values``, ``states``, ``start``, ``actions``
and ``observations``, each once and in this order, and the resolution of the state and joint action /
observation tokens of the entries to joint indices (row-major, the last agent varying fastest).
"""

from __future__ import annotations

import math

import numpy as np

from ers_exact.io.dpomdp_lexer import (
    IDENT_RE,
    PREAMBLE,
    PREAMBLE_RE,
    UINT_RE,
    DpomdpError,
    DpomdpLexer,
    Index,
    check_model_size,
)
from ers_exact.model.game import ROW_SUM_TOL

__all__ = ["DpomdpPreamble"]


class DpomdpPreamble(DpomdpLexer):
    """The preamble of a ``.dpomdp`` text (``preamble()``: one ``_pre_KEY`` handler per entry, in the order of
    :data:`PREAMBLE`; the last one allocates the zero model arrays T, U, R) and the resolution of a state or
    joint action/observation token (a name, an index, ``*`` or one token per agent) to its indices, cached
    per token. The T/O/R entries that follow are parsed by :mod:`ers_exact.io.dpomdp_parse`."""

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
        if not 0.0 <= self.discount <= 1.0:  # the game's own check would name no line
            raise DpomdpError(f"expected a discount factor in [0, 1], got {rest}", ln)

    def _pre_values(self, rest: str, mod: str | None, ln: int) -> None:
        if rest not in ("reward", "cost"):
            raise DpomdpError(f"expected 'reward' or 'cost', got {rest!r}", ln)
        self.cost = rest == "cost"

    def _pre_states(self, rest: str, mod: str | None, ln: int) -> None:
        self.states = self.names_decl(rest, "states", ln)
        self.S = len(self.states)
        self.lookup = {"state": [{s: i for i, s in enumerate(self.states)}]}

    def _pre_start(self, rest: str, mod: str | None, ln: int) -> None:
        """``start:`` + a vector or ``uniform`` on the next line, ``start: <state>``, or ``start include|exclude:
        <states>``. ``start: uniform`` on one line names the state ``uniform`` when there is one (as MADP's
        grammar reads it: its ``uniform`` keyword follows a line break), else the uniform distribution."""
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
        elif (rest == "uniform" and rest not in self.lookup["state"][0]) or (
            not rest and self.peek() == "uniform"
        ):
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
            total = float(self.b0.sum())
            if abs(total - 1.0) > ROW_SUM_TOL:  # the game's own check would name no line
                raise DpomdpError(
                    f"the start distribution sums to {total!r}, not 1 (tolerance {ROW_SUM_TOL}); ers never "
                    "renormalises silently",
                    self.pos,  # the 1-based number of the vector's line, just read
                )

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
