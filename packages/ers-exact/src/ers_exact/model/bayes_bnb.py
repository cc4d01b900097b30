"""Branch and bound over a two-agent Bayesian game: its best joint decision rule, or all of them best first.

In a two-agent game one agent's rules are enumerated (agent e, classes theta) and the other (the responder r,
classes k) is combined last. Z[theta, a, k, b] is the payoff summed over the joint rows of (theta, k) where e
plays a and r plays b; a rule of e (a_theta for every theta) is worth, with the responder's best response,

    F(a) = sum_k max_b ( sum_theta Z[theta, a_theta, k, b] + mask[k, b] ),      mask = -inf at illegal b.

A partial rule (some classes assigned, their payoffs summed in ``acc``) is bounded by relaxing each (k, b)
alone: sum_k max_b (acc + U + mask), U the sum over unassigned classes of their best option's payoff per
(k, b). The bound is never below any completion's F, and never rises as classes are assigned. Classes are
assigned in :class:`ClassGroup` s (the most consequential first, up to ``group_rules`` joint choices each,
bounded as one vector); the last group, the leaf (up to ``leaf_rules`` joint choices), is valued exactly.

* :func:`best_rule_bnb`: depth-first branch and bound, the exact solution of a last-stage game.
* :class:`BestFirstRules`: e's rules one at a time in decreasing F (k-best by best-first search: a rule is
  returned only when no open bound is higher), what GMAA*-ICE's incremental expansion needs when e has too
  many rules to enumerate (Spaan, Oliehoek & Amato 2011: BaGaBaB over the children of a partial policy).
"""

from __future__ import annotations

import heapq
import itertools
import math

import numpy as np

from ers_exact.model.bayes_game import BayesGame

__all__ = ["BestFirstRules", "ClassGroup", "TwoAgentSplit", "best_rule_bnb"]

_LEAF_RULES = 1024  # the last classes of the enumerated agent are enumerated in blocks of at most this many
_GROUP_RULES = 32  # the branched classes are assigned in groups of at most this many joint choices


_SCRATCH: dict[tuple[int, ...], np.ndarray] = {}  # bound scratch by shape, shared by every split


def _scratch(shape: tuple[int, ...]) -> np.ndarray:
    """A reusable buffer (a bound never holds it across calls): no large temporary per bound."""
    if shape not in _SCRATCH:
        if len(_SCRATCH) > 64:
            _SCRATCH.clear()
        _SCRATCH[shape] = np.empty(shape)
    return _SCRATCH[shape]


class ClassGroup:
    """Classes of the enumerated agent assigned together. Joint choice c picks option ``choice(c)[j]`` of
    ``classes[j]`` (mixed radix, the first class fastest); ``parts[c]`` is its summed payoff  # [C, A_r, K_r]
    (responder action before class: the maximum over b runs over contiguous rows); ``with_rest`` = parts + the
    relaxation of every class after the group + the mask  # [C, A_r, K_r]. The leaf keeps only ``with_rest``
    (parts + mask: exact values)."""

    def __init__(self, classes: list[int], options: list[np.ndarray], rest: np.ndarray, leaf: bool) -> None:
        self.classes, self.sizes = classes, [len(o) for o in options]
        summed = np.zeros((1, *rest.shape))
        for part in options:  # [|options|, A_r, K_r]; each new class varies slowest
            summed = (part[:, None] + summed[None]).reshape(-1, *rest.shape)
        self.with_rest = summed + rest[None]
        self.parts = None if leaf else summed
        C, A_r, K_r = summed.shape
        self._total, self._best = _scratch((C, A_r, K_r)), _scratch((C, K_r))

    @property
    def nbytes(self) -> int:
        return self.with_rest.nbytes * (1 if self.parts is None else 2)

    def choice(self, c: int) -> list[int]:
        """The option index of each class in joint choice c."""
        out = []
        for size in self.sizes:
            c, d = divmod(c, size)
            out.append(d)
        return out

    def bounds(self, acc: np.ndarray) -> np.ndarray:
        """sum_k max_b (acc + with_rest[c]) for every joint choice c.  # [C]"""
        total, best = self._total, self._best
        np.add(self.with_rest, acc[None], out=total)
        np.copyto(best, total[:, 0])
        for b in range(1, total.shape[1]):
            np.maximum(best, total[:, b], out=best)
        return best.sum(axis=1)


class TwoAgentSplit:
    """A two-agent game laid out for branch and bound (module docstring): ``groups`` in the order they are
    assigned, the most consequential classes first; the last group is the leaf, evaluated exactly. Payoffs
    per (responder class k, action b) are held as [A_r, K_r]."""

    def __init__(
        self, game: BayesGame, q: np.ndarray, leaf_rules: int = _LEAF_RULES, group_rules: int = _GROUP_RULES
    ) -> None:
        if len(game.enumerated) != 1:
            raise ValueError("branch and bound solves two-agent Bayesian games; use best_rule")
        e = game.enumerated[0]
        K_r, A_r = game.legal_r.shape
        Z = np.ascontiguousarray(game.pair_payoffs(q).transpose(0, 2, 3, 1))  # [K_e, A_e, A_r, K_r]
        parts = [Z[theta, opts] for theta, opts in enumerate(game.options[e])]  # [|opts|, A_r, K_r]
        totals = Z.sum(axis=(2, 3))  # [K_e, A_e]
        spread = [float(np.ptp(totals[theta, opts])) for theta, opts in enumerate(game.options[e])]
        self.game, self.Z, self.parts, self.spread = game, Z, parts, spread
        self.leaf_rules, self.group_rules = leaf_rules, group_rules
        self.mask = np.where(game.legal_r.T, 0.0, -np.inf)  # [A_r, K_r]
        relaxed = sum((p.max(axis=0) for p in parts), self.mask)
        self.top = float(relaxed.max(axis=0).sum())  # the bound before any choice
        self.zero = np.zeros((A_r, K_r))
        self._groups: list[ClassGroup] | None = None

    @property
    def groups(self) -> list[ClassGroup]:
        """The class groups, built on first use (a game whose ``top`` is below the threshold needs none)."""
        if self._groups is None:
            self._groups = self._build_groups()
        return self._groups

    @property
    def nbytes(self) -> int:
        return self.Z.nbytes + sum(g.nbytes for g in self._groups or [])

    def _build_groups(self) -> list[ClassGroup]:
        parts = self.parts
        order = [int(x) for x in np.argsort(self.spread, kind="stable")[::-1]]  # most consequential first
        leaf: list[int] = []
        while order and math.prod(len(parts[t]) for t in [order[-1], *leaf]) <= self.leaf_rules:
            leaf.insert(0, order.pop())
        chunks: list[list[int]] = []
        for theta in order:
            if chunks and math.prod(len(parts[t]) for t in [*chunks[-1], theta]) <= self.group_rules:
                chunks[-1].append(theta)
            else:
                chunks.append([theta])
        rest = self.mask
        groups: list[ClassGroup] = []
        for classes in reversed([*chunks, leaf]):
            groups.insert(0, ClassGroup(classes, [parts[t] for t in classes], rest, leaf=not groups))
            rest = rest + sum((parts[t].max(axis=0) for t in classes), np.zeros(self.mask.shape))
        return groups

    def option_indices(self, picks: list[int] | tuple[int, ...]) -> list[int]:
        """The option index of every class of the enumerated agent for one joint choice per group."""
        out = [0] * len(self.parts)
        for group, c in zip(self.groups, picks):
            for theta, d in zip(group.classes, group.choice(c)):
                out[theta] = d
        return out

    def actions(self, picks: list[int] | tuple[int, ...]) -> np.ndarray:
        """The enumerated agent's action per class for one joint choice per group."""
        opts = self.game.options[self.game.enumerated[0]]
        return np.array([opts[t][d] for t, d in enumerate(self.option_indices(picks))], dtype=np.int64)

    def rule_index(self, picks: list[int] | tuple[int, ...]) -> int:
        """c_e of :meth:`BayesGame.decode` (mixed radix over e's classes, the first fastest)."""
        c, radix = 0, 1
        for d, part in zip(self.option_indices(picks), self.parts):
            c += d * radix
            radix *= len(part)
        return c

    def responses(self, acts: np.ndarray) -> np.ndarray:
        """The responder's best action per class against the enumerated agent's ``acts``."""
        total = sum((self.Z[theta, a] for theta, a in enumerate(acts)), self.mask)  # [A_r, K_r]
        return np.argmax(total, axis=0).astype(np.int64)


def best_rule_bnb(
    game: BayesGame,
    q: np.ndarray,
    threshold: float = -np.inf,
    leaf_rules: int = _LEAF_RULES,
    group_rules: int = _GROUP_RULES,
) -> tuple[float, list[np.ndarray] | None]:
    """The solution of a two-agent Bayesian game (``max`` of :func:`~ers_exact.model.bayes_game.best_rule`) by
    depth-first branch and bound over the enumerated agent's classes, returning (-inf, None) when no rule is
    worth more than ``threshold``."""
    split = TwoAgentSplit(game, q, leaf_rules, group_rules)
    if split.top <= threshold:
        return -np.inf, None
    groups, last = split.groups, len(split.groups) - 1
    best, best_choice = threshold, None
    choice = [0] * len(groups)

    def search(j: int, acc: np.ndarray) -> None:
        nonlocal best, best_choice
        bounds = groups[j].bounds(acc)
        if j == last:
            k = int(np.argmax(bounds))
            if bounds[k] > best:
                choice[j] = k
                best, best_choice = float(bounds[k]), list(choice)
            return
        parts = groups[j].parts
        assert parts is not None  # only the leaf keeps none
        ranked = np.argsort(-bounds, kind="stable")
        for d, bound in zip(ranked.tolist(), bounds[ranked].tolist()):
            if bound <= best:
                break
            choice[j] = d
            search(j + 1, acc + parts[d])

    search(0, split.zero)
    if best_choice is None:
        return -np.inf, None
    acts_e = split.actions(best_choice)
    out: list[np.ndarray] = [None, None]  # type: ignore[list-item]
    out[game.enumerated[0]], out[game.responder] = acts_e, split.responses(acts_e)
    return best, out


class BestFirstRules:
    """The enumerated agent's rules of a two-agent game in decreasing F, one at a time, never all at once.

    One heap holds partial rules keyed by their bound and open blocks keyed by their next exact value; a rule
    leaves only from the top, so every rule still inside is worth at most the one returned. Memory: the open
    partial rules and blocks, not the game's rule count. The source protocol of
    :class:`~ers_exact.model.bayes_game.LazyChildren`: ``peek`` (an upper bound on the next value), ``pop``."""

    def __init__(
        self, game: BayesGame, q: np.ndarray, leaf_rules: int = _LEAF_RULES, group_rules: int = _GROUP_RULES
    ) -> None:
        self.split = TwoAgentSplit(game, q, leaf_rules, group_rules)
        self.counter = itertools.count()
        # entries: (-key, tie, picks, acc) for a partial rule; (-value, tie, picks, block id) for a block
        root = self.split.zero
        self.heap: list[tuple[float, int, tuple[int, ...], np.ndarray | int]] = [
            (-self.split.top, 0, (), root)
        ]
        self.blocks: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, int]] = {}  # acc, vals, ranked, ptr
        self.evaluated = 0  # rules whose F was computed (the blocks opened)
        self.array_bytes = root.nbytes  # of the open partial rules' sums and the open blocks

    @property
    def nbytes(self) -> int:
        return self.split.nbytes + 200 * len(self.heap) + self.array_bytes

    def peek(self) -> float:
        """An upper bound on the next rule's F, exact once :meth:`resolve` ran (-inf when none is left)."""
        return -self.heap[0][0] if self.heap else -np.inf

    def resolve(self) -> None:
        """Open partial rules until the top of the heap is a rule's exact value (or the heap is empty)."""
        groups = self.split.groups
        last = len(groups) - 1
        while self.heap and isinstance(self.heap[0][3], np.ndarray):
            _, _, picks, acc = heapq.heappop(self.heap)
            assert isinstance(acc, np.ndarray)
            self.array_bytes -= acc.nbytes
            j = len(picks)
            bounds = groups[j].bounds(acc)
            if j == last:  # a block: every leaf choice's exact value
                self.evaluated += len(bounds)
                ranked = np.argsort(-bounds, kind="stable")
                if np.isfinite(bounds[ranked[0]]):
                    bid = next(self.counter)
                    self.blocks[bid] = (acc, bounds, ranked, 0)
                    self.array_bytes += acc.nbytes + bounds.nbytes + ranked.nbytes
                    heapq.heappush(self.heap, (-float(bounds[ranked[0]]), bid, picks, bid))
                continue
            parts = groups[j].parts
            assert parts is not None
            for d in np.flatnonzero(np.isfinite(bounds)).tolist():
                heapq.heappush(
                    self.heap, (-float(bounds[d]), next(self.counter), (*picks, d), acc + parts[d])
                )
                self.array_bytes += acc.nbytes

    def pop(self) -> tuple[float, int, np.ndarray]:
        """(F, rule index c_e, payoff per (responder class, action) with -inf at illegal ones) of the next
        rule.  # [K_r, A_r]"""
        self.resolve()
        if not self.heap:
            raise IndexError("no rule left")
        neg, _, picks, bid = heapq.heappop(self.heap)
        assert isinstance(bid, int)
        acc, vals, ranked, ptr = self.blocks[bid]
        row = int(ranked[ptr])
        if ptr + 1 < len(ranked) and np.isfinite(vals[ranked[ptr + 1]]):
            self.blocks[bid] = (acc, vals, ranked, ptr + 1)
            heapq.heappush(self.heap, (-float(vals[ranked[ptr + 1]]), bid, picks, bid))
        else:
            del self.blocks[bid]
            self.array_bytes -= acc.nbytes + vals.nbytes + ranked.nbytes
        payoff = acc + self.split.groups[-1].with_rest[row]  # the leaf's rest is the mask
        return -neg, self.split.rule_index((*picks, row)), payoff.T
