"""Export a tabular Dec-POMDP to a Gambit extensive-form game (``.efg`` text, format version 2).

The export writes the text directly (pure Python; pygambit is never imported here), so it is fast
(Dec-Tiger H = 3, ~135k nodes, in well under a second) and usable without Gambit installed. It exists
so that Gambit (``pygambit.read_efg``) can serve as an independent oracle for J, Q^i and the agent
logit QRE.

Tree layout, for each stage t = 0 .. H-1 and each explicit state s_t (states are *not* marginalised):

* the root is a chance node over s_0 ~ b_0 (labels ``s<k>``);
* agent 1 .. n decide in turn; agent i's node lies in information set number k + 1 (label ``h<k>``)
  where k indexes ``tree.local[i]``, the local history tau^i_t. Later agents' information sets do not
  distinguish the earlier agents' stage-t actions, so the sequential tree models simultaneous moves
  and has perfect recall. Only the legal actions A^i(tau^i) appear;
* the node *after* the joint action a_t carries the outcome gamma^t * E[R | s_t, a_t] with
  E[R | s, a] = sum_s' T(s'|s, a) R(s, a, s') (every player gets the same payoff: common payoff);
  for t < H-1 it is a chance node over (s_{t+1}, o_{t+1}) with probability T(s'|s, a) U(o|s', a)
  (labels ``s<s'>o<o>``, o the joint observation index), else a terminal node.
* zero-probability chance branches are pruned, so Gambit's information sets are exactly the possible
  local histories of :func:`~ers_exact.model.histories.enumerate_histories` (the export checks this).

Reward and discount conventions. Gambit's ``action_values`` at an information set is the expected payoff
of the subtree below an action, weighted by the belief over the set's nodes; it **excludes** outcomes at
ancestors and at the decision node itself. Since the stage-k outcome sits below the stage-k joint
action, the Gambit value at agent i's information set tau^i_t is

    v^i(tau^i_t, a^i) = sum_{k >= t} gamma^k E[r_{k+1} | ...] = gamma^t Q^i_pi(tau^i_t, a^i),

the paper's reward-to-go Q^i scaled by gamma^t (:meth:`EfgExport.q_scale`); the root payoff equals J(pi).
For gamma < 1 Gambit's agent logit QRE at lambda therefore uses stage temperature alpha_t =
1 / (lambda gamma^t); only for gamma = 1 is it the paper's Boltzmann fixed point at alpha = 1 / lambda.

Gambit requires chance probabilities at a node to sum to *exactly* one. Every probability is written as
the shortest decimal ``repr`` of its float except the largest one at each node, which is written as the
exact decimal 1 - (sum of the others); :attr:`EfgExport.max_prob_adjustment` records the largest change
that caused (float round-off, or up to the game's row-sum tolerance).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ers_exact.model.game import Game
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.util.budget import check_memory
from ers_exact.util.output import write_atomic

__all__ = ["EfgExport", "export_efg", "save_efg", "to_efg"]

TreeOrGame = HistoryTree | Game


@dataclass(frozen=True, eq=False)
class EfgExport:
    """The ``.efg`` text of a game and the maps between Gambit's objects and the history tree.

    Agent i (0-based) is Gambit player ``player_labels[i]`` (``"P<i+1>"``); its information set number
    k + 1 (label ``h<k>``) is local history ``tree.local[i]`` index k; its local action ``a`` has label
    ``action_labels[i][a]``. Chance labels are ``s<k>`` at the root and ``s<s'>o<o>`` afterwards.
    """

    text: str
    tree: HistoryTree
    player_labels: tuple[str, ...]
    action_labels: tuple[tuple[str, ...], ...]
    n_nodes: int
    n_outcomes: int
    max_prob_adjustment: float

    @property
    def game(self) -> Game:
        return self.tree.game

    def q_scale(self, agent: int) -> np.ndarray:
        """gamma^t for each local history of ``agent``: Gambit action value = q_scale * Q^i.  # [K_i]

        With gamma = 0 it is 0 for t >= 1 and Q^i cannot be recovered from Gambit there."""
        return self.game.discount ** self.tree.local[agent].time.astype(np.float64)

    def local_history(self, agent: int, path: Sequence[tuple[str, str]]) -> int:
        """Index in ``tree.local[agent]`` of the local history tau^i read off a root-to-node path.

        ``path`` is the sequence of (player label, action label) moves from the root to a node of one of
        ``agent``'s information sets (Gambit's chance player may have any label not in
        ``player_labels``). Own actions give a^i_k, chance labels ``s<s'>o<o>`` give o^i_k; other agents'
        moves are ignored. Raises ``KeyError`` if the history is not a possible one."""
        me = self.player_labels[agent]
        own = {lab: a for a, lab in enumerate(self.action_labels[agent])}
        table = self.game.joint_observations
        out: list[int] = []
        for player, label in path:
            if player == me:
                out.append(own[label])
            elif player not in self.player_labels and "o" in label:
                out.append(int(table[int(label.split("o", 1)[1]), agent]))
        return self.tree.local[agent].index[tuple(out)]


def to_efg(tree_or_game: TreeOrGame, title: str | None = None) -> str:
    """The Gambit ``.efg`` text of a game (see the module docstring for the layout and conventions)."""
    return export_efg(tree_or_game, title=title).text


def save_efg(
    tree_or_game: TreeOrGame,
    path: str | os.PathLike[str],
    title: str | None = None,
    reads: Sequence[str | os.PathLike[str]] = (),
) -> EfgExport:
    """Write the ``.efg`` text to ``path`` atomically, never over a file in ``reads``; returns the
    :class:`EfgExport` (text and index maps)."""
    export = export_efg(tree_or_game, title=title)
    write_atomic(path, export.text.encode("ascii"), reads=reads)
    return export


#: memory per node of the .efg tree while it is built (its text line, the list entry, index maps), bytes
#: (measured: Dec-Tiger H = 4, 8.3 M nodes, 1.2 GB peak)
EFG_BYTES_PER_NODE = 150


def efg_node_count(tree: HistoryTree) -> int:
    """Nodes of the .efg tree, an upper bound: states are not marginalised, so a joint history node of stage
    t appears once per state trajectory s_0..s_t (at most S^(t+1)), each time with a chance node, agent i's
    decision nodes (one per joint action prefix of the agents before i) and an outcome node per joint action
    (measured within 1.3x on Dec-Tiger H = 2..4)."""
    game = tree.game
    prefixes = sum(math.prod(game.n_actions[:i]) for i in range(game.n_agents + 1))
    return sum(len(layer) * game.n_states ** (t + 1) * (1 + prefixes) for t, layer in enumerate(tree.layers))


def export_efg(tree_or_game: TreeOrGame, title: str | None = None) -> EfgExport:
    """Build the ``.efg`` text and the index maps. A :class:`Game` is enumerated first; a tree whose export
    would not fit the memory budget (:mod:`ers_exact.util.budget`) is refused before any work."""
    tree = tree_or_game if isinstance(tree_or_game, HistoryTree) else enumerate_histories(tree_or_game)
    nodes = efg_node_count(tree)
    check_memory(
        f"{tree.game.name} H={tree.game.horizon}: a Gambit tree of up to {nodes:,} nodes",
        nodes * EFG_BYTES_PER_NODE,
        "lower the horizon",
    )
    return _Writer(tree).run(title)


# ----- text helpers -----
def _quote(text: str) -> str:
    """A quoted .efg string. Backslashes become ``/``: pygambit 17.0.0b2 does not read ``\\\\`` back as one
    backslash (each read of Gambit's own ``to_efg`` text multiplies them), while ``\\"`` round-trips.
    Characters that are not printable ASCII become ``?`` (only titles; labels fall back instead)."""
    text = "".join(c if c.isascii() and c.isprintable() else "?" for c in text)
    return '"' + text.replace("\\", "/").replace('"', '\\"') + '"'


def _labels(names: Sequence[str], prefix: str) -> tuple[str, ...]:
    """Names as Gambit labels when they are distinct, non-empty, printable ASCII without a backslash,
    else ``<prefix><k>`` for all of them."""
    ok = len(set(names)) == len(names) and all(
        n and n.isascii() and n.isprintable() and "\\" not in n for n in names
    )
    return tuple(names) if ok else tuple(f"{prefix}{k}" for k in range(len(names)))


def _num(x: float) -> str:
    return repr(float(x) + 0.0)  # + 0.0 turns -0.0 into 0.0; repr round-trips the double exactly


def _exact_decimal(value: Fraction) -> str:
    """A fraction whose denominator divides a power of ten, as an exact decimal string."""
    den, twos, fives = value.denominator, 0, 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    assert den == 1, "not a finite decimal"
    k = max(twos, fives)
    digits = str(abs(value.numerator) * 10**k // value.denominator).rjust(k + 1, "0")
    sign = "-" if value < 0 else ""
    return sign + (digits[:-k] + "." + digits[-k:] if k else digits)


def _exact_distribution(probs: np.ndarray) -> tuple[list[str], float]:
    """Decimal strings of positive probabilities summing to exactly one, and the largest change made."""
    texts = [_num(p) for p in probs]
    big = int(np.argmax(probs))
    rest = 1 - sum((Fraction(t) for j, t in enumerate(texts) if j != big), Fraction(0))
    if rest <= 0:
        raise ValueError(f"chance probabilities {probs.tolist()} cannot be made to sum to one")
    texts[big] = _exact_decimal(rest)
    return texts, abs(float(rest) - float(probs[big]))


class _Writer:
    """Depth-first writer of the explicit-state game tree (one instance per export)."""

    def __init__(self, tree: HistoryTree) -> None:
        game = tree.game
        self.tree, self.game = tree, game
        self.n = game.n_agents
        self.players = tuple(f"P{i + 1}" for i in range(self.n))
        self.actions = tuple(_labels(names, "a") for names in game.action_names)
        self.lines: list[str] = []
        self.outcomes: dict[str, int] = {}
        self.events = 0
        self.nodes = 0
        self.max_adjust = 0.0
        self.used: list[set[int]] = [set() for _ in range(self.n)]
        # child[i][(k, a^i, o^i)] = index of tau^i_{t+1} = (tau^i_t, a^i, o^i)
        self.child = [
            {
                (int(h.parent[k]), int(h.action[k]), int(h.observation[k])): k
                for k in range(len(h))
                if h.parent[k] >= 0
            }
            for h in tree.local
        ]
        # ' "h<k>" { "a" "b" } 0' : the infoset part of every decision line, per agent and history
        self.infoset_text = [
            [
                f' {k + 1} "h{k}" {{ '
                + " ".join(_quote(self.actions[i][a]) for a in np.flatnonzero(h.legal[k]))
                + " } 0"
                for k in range(len(h))
            ]
            for i, h in enumerate(tree.local)
        ]
        self.legal = [[np.flatnonzero(h.legal[k]).tolist() for k in range(len(h))] for h in tree.local]
        self.expected_reward = np.einsum("sap,sap->sa", game.transition, game.reward)  # E[R | s, a]
        self.branch_cache: dict[tuple[int, int], tuple[str, list[tuple[int, int]]]] = {}

    # ----- pieces -----
    def _outcome(self, value: float) -> str:
        """Outcome reference ``<id>`` (first use: with label and payoffs); ``0`` for a zero payoff."""
        if value == 0.0:
            return "0"
        key = _num(value)
        if key in self.outcomes:
            return str(self.outcomes[key])
        ident = len(self.outcomes) + 1
        self.outcomes[key] = ident
        return f'{ident} "r={key}" {{ ' + ", ".join([key] * self.n) + " }"

    def _chance_line(self, labels: list[str], probs: np.ndarray, outcome: str) -> str:
        texts, adjust = _exact_distribution(probs)
        self.max_adjust = max(self.max_adjust, adjust)
        self.events += 1
        body = " ".join(f"{_quote(lab)} {p}" for lab, p in zip(labels, texts))
        return f'c "" {self.events} "" {{ {body} }} {outcome}'

    def _branches(self, s: int, a: int) -> tuple[str, list[tuple[int, int]]]:
        """Chance body and children (s', o) after joint action a in state s, zero branches pruned."""
        key = (s, a)
        if key not in self.branch_cache:
            g = self.game
            probs = g.transition[s, a, :, None] * g.observation[a]  # [S', O]
            sp, ob = np.nonzero(probs > 0)
            texts, adjust = _exact_distribution(probs[sp, ob])
            self.max_adjust = max(self.max_adjust, adjust)
            body = " ".join(f'"s{x}o{y}" {p}' for x, y, p in zip(sp, ob, texts))
            self.branch_cache[key] = (body, list(zip(sp.tolist(), ob.tolist())))
        return self.branch_cache[key]

    # ----- traversal -----
    def run(self, title: str | None) -> EfgExport:
        g = self.game
        name = title if title is not None else g.name
        self.lines.append(f"EFG 2 R {_quote(name)} {{ " + " ".join(_quote(p) for p in self.players) + " }")
        self.lines.append(
            _quote(
                f"ers export of {g.name}: H={g.horizon}, gamma={g.discount!r}; stage-t outcome gamma^t E[R|s,a] "
                "after the joint action; Gambit action value = gamma^t * reward-to-go Q^i"
            )
        )
        self.lines.append("")
        states = np.flatnonzero(g.initial_belief > 0)
        self.nodes += 1
        self.lines.append(self._chance_line([f"s{s}" for s in states], g.initial_belief[states], "0"))
        root_locals = tuple(int(h.offsets[0]) for h in self.tree.local)
        for s in states.tolist():
            self._stage(0, s, root_locals)
        self._check_infosets()
        return EfgExport(
            text="\n".join(self.lines) + "\n",
            tree=self.tree,
            player_labels=self.players,
            action_labels=self.actions,
            n_nodes=self.nodes,
            n_outcomes=len(self.outcomes),
            max_prob_adjustment=self.max_adjust,
        )

    def _stage(self, t: int, s: int, locs: tuple[int, ...]) -> None:
        self._decide(t, s, locs, 0, [])

    def _decide(self, t: int, s: int, locs: tuple[int, ...], i: int, acts: list[int]) -> None:
        if i == self.n:
            self._after(t, s, locs, acts)
            return
        k = locs[i]
        self.used[i].add(k)
        self.nodes += 1
        self.lines.append(f'p "" {i + 1}' + self.infoset_text[i][k])
        for a in self.legal[i][k]:
            acts.append(a)
            self._decide(t, s, locs, i + 1, acts)
            acts.pop()

    def _after(self, t: int, s: int, locs: tuple[int, ...], acts: list[int]) -> None:
        g = self.game
        a = 0
        for i, a_i in enumerate(acts):
            a = a * g.n_actions[i] + a_i
        outcome = self._outcome(g.discount**t * float(self.expected_reward[s, a]))
        self.nodes += 1
        if t == g.horizon - 1:
            self.lines.append(f't "" {outcome}')
            return
        body, children = self._branches(s, a)
        self.events += 1
        self.lines.append(f'c "" {self.events} "" {{ {body} }} {outcome}')
        joint_obs = g.joint_observations
        for s_next, o in children:
            try:
                nxt = tuple(self.child[i][(locs[i], acts[i], int(joint_obs[o, i]))] for i in range(self.n))
            except KeyError as exc:  # the tree pruned a branch the game says is possible
                raise RuntimeError(f"history tree lacks a possible history: {exc}") from None
            self._stage(t + 1, s_next, nxt)

    def _check_infosets(self) -> None:
        """Every possible local history must have become an information set (and only those)."""
        for i, h in enumerate(self.tree.local):
            if self.used[i] != set(range(len(h))):
                missing = sorted(set(range(len(h))) - self.used[i])[:5]
                raise RuntimeError(
                    f"agent {i}: local histories {missing} of the tree never occur in the "
                    "Gambit tree (tree and game disagree on which histories are possible)"
                )
