"""Phi_MDP by graph automorphisms: an independent second method for the Dec-POMDP symmetries of a game
(paper, Definition "Dec-POMDP Symmetries", eq. decpomdp-invariance).

The game is encoded as an **undirected** graph with coloured nodes and labelled edges, and its
automorphisms are found with networkx's VF2 ``GraphMatcher`` with ``node_match`` / ``edge_match`` (the
directed matcher and vf2pp stall or lose edge labels on these graphs; see
``notes/exact-solver-anchors.md`` section 3).

Encoding (node -> colour; edge -> role):

* **element nodes**
  - state ``s``                      -> ``("S", class of b_0[s])``            (b_0 is preserved)
  - local action ``a`` of agent i    -> ``("A", i, legal at t = 0?)``         (the flag only with legal sets)
  - local observation ``o`` of i     -> ``("O", i)``
* **transition facts**: one node for EVERY ``(s, joint a, s')``, zero T included (R must be invariant on
  all entries), colour ``("T", class of T[s, a, s'], class of R[s, a, s'])``, joined to ``s`` (role
  ``"from"``), ``s'`` (``"to"``) and each agent's local action node (``"act<i>"``).
* **observation facts**: one node for every ``(joint a, s', joint o)`` with ``U[a, s', o]`` outside the
  zero class, colour ``("U", class of U)``, joined to the action nodes (``"act<i>"``), ``s'``
  (``"state"``) and each agent's observation node (``"obs<i>"``). Absent facts mean U = 0.
* **legal sets** (only when ``game.legal_actions`` is not None): an edge ``("legal<i>",)`` between the
  observation node ``o`` and the action node ``a`` of agent i whenever ``a`` is legal after ``o``;
  legality at t = 0 is the flag in the action colour.

An edge whose two roles hit the same node (``s == s'``) carries the sorted tuple of both roles, so no
information is lost; every edge label is such a tuple. Values are compared through **tolerance classes**:
the sorted distinct values of one table are split wherever two neighbours differ by more than ``atol``,
so values within ``atol`` of each other (e.g. float noise from averaging) always share a class. Each
fact node is determined by its neighbours, so automorphisms correspond one-to-one to transformations
phi = (phi_S, phi_A^i, phi_O^i) in Psi (the pointwise stabiliser of the element nodes is trivial).

Search. Node colours are refined to the coarsest stable partition (1-WL colour refinement over the edge
roles; automorphism-invariant, so nothing is lost). ``method="transversal"`` (default) walks the
point-stabiliser chain of the element nodes: at level k, with the first k element nodes individualised,
each candidate image w of the next one (same refined cell) is tested by refining two individualised copies
jointly and asking VF2 for ONE isomorphism between them; the found maps are coset representatives, and
Aut = {u_0 o u_1 o ... o u_m}. ``method="enumerate"`` lets VF2 enumerate every automorphism directly
(simple, but each automorphism costs a full VF2 descent and dead ends multiply on large groups). Either
way each decoded phi is re-checked with :func:`~ers_exact.model.transformation.is_decpomdp_symmetry` (networkx
issue #8891) and the list deduplicated.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import networkx as nx
import numpy as np
from networkx.algorithms import isomorphism as iso

from ers_exact.model.game import Game
from ers_exact.model.transformation import Transformation, is_decpomdp_symmetry
from ers_exact.util.errors import InputError

__all__ = [
    "DEFAULT_MAX_NODES",
    "GraphTooLargeError",
    "decpomdp_graph",
    "decpomdp_symmetries_graph",
    "graph_size",
]

DEFAULT_MAX_NODES = 20_000


class GraphTooLargeError(InputError, ValueError):
    """The symmetry graph of a game would exceed the node budget."""


def _classes(values: np.ndarray, atol: float) -> np.ndarray:
    """Tolerance class of every entry: sorted distinct values split where neighbours differ by > atol."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    uniq, inverse = np.unique(flat, return_inverse=True)
    cls = np.concatenate([[0], np.cumsum(np.diff(uniq) > atol)])
    return cls[inverse].reshape(np.shape(values))


def _u_present(game: Game, atol: float) -> np.ndarray:
    """Mask of the U entries that get a fact node: those not in the tolerance class of 0."""
    u_cls = _classes(np.concatenate([[0.0], game.observation.reshape(-1)]), atol)
    return (u_cls[1:] != u_cls[0]).reshape(game.observation.shape)


def graph_size(game: Game, atol: float = 1e-12) -> int:
    """Number of nodes of :func:`decpomdp_graph` for ``game`` (computed without building it)."""
    S, A = game.n_states, game.n_joint_actions
    return S + sum(game.n_actions) + sum(game.n_observations) + S * A * S + int(_u_present(game, atol).sum())


def decpomdp_graph(
    game: Game, atol: float = 1e-12, max_nodes: int = DEFAULT_MAX_NODES
) -> tuple[nx.Graph, dict[str, Any]]:
    """The coloured, edge-labelled undirected graph of ``game`` (module docstring) and the node ids of
    its element nodes: ``{"states": [...], "actions": [[...] per agent], "observations": [[...]]}``.

    Raises :class:`GraphTooLargeError` when the graph would have more than ``max_nodes`` nodes."""
    size = graph_size(game, atol)
    if size > max_nodes:
        raise GraphTooLargeError(
            f"the symmetry graph of game {game.name!r} would have {size} nodes, over the budget of "
            f"{max_nodes} (S={game.n_states}, A={game.n_joint_actions} joint, O={game.n_joint_observations} "
            "joint); raise max_nodes or use the exhaustive search"
        )
    n, S = game.n_agents, game.n_states
    G = nx.Graph()
    G.add_nodes_from(range(size))  # node ids 0..size-1 in this order; colours are set below
    counter = iter(range(size))
    states = [next(counter) for _ in range(S)]
    actions = [[next(counter) for _ in range(k)] for k in game.n_actions]
    observations = [[next(counter) for _ in range(k)] for k in game.n_observations]

    b_cls = _classes(game.initial_belief, atol)
    for s, node in enumerate(states):
        G.add_node(node, colour=("S", int(b_cls[s])))
    for i in range(n):
        row0 = game.legal_mask(i)[0]
        for a, node in enumerate(actions[i]):
            flag = bool(row0[a]) if game.legal_actions is not None else None
            G.add_node(node, colour=("A", i, flag))
        for node in observations[i]:
            G.add_node(node, colour=("O", i))

    def join(fact: int, targets: list[tuple[int, str]]) -> None:
        roles: dict[int, list[str]] = {}
        for node, role in targets:
            roles.setdefault(node, []).append(role)
        for node, rs in roles.items():
            G.add_edge(fact, node, role=tuple(sorted(rs)))

    ja, jo = game.joint_actions, game.joint_observations
    act_roles = [[(actions[i][int(ja[a, i])], f"act{i}") for i in range(n)] for a in range(len(ja))]
    t_cls, r_cls = _classes(game.transition, atol), _classes(game.reward, atol)
    for s, a, s2 in np.ndindex(game.transition.shape):
        fact = next(counter)
        G.add_node(fact, colour=("T", int(t_cls[s, a, s2]), int(r_cls[s, a, s2])))
        join(fact, [(states[s], "from"), (states[s2], "to"), *act_roles[a]])

    u_cls = _classes(game.observation, atol)
    for a, s2, o in np.argwhere(_u_present(game, atol)):
        fact = next(counter)
        G.add_node(fact, colour=("U", int(u_cls[a, s2, o])))
        obs = [(observations[i][int(jo[o, i])], f"obs{i}") for i in range(n)]
        join(fact, [*act_roles[a], (states[s2], "state"), *obs])

    if game.legal_actions is not None:
        for i, mask in enumerate(game.legal_actions):
            for o, a in np.argwhere(mask[1:]):
                G.add_edge(observations[i][o], actions[i][a], role=(f"legal{i}",))
    return G, {"states": states, "actions": actions, "observations": observations}


class _Refiner:
    """Colour refinement (1-WL over the edge roles) of a graph and of the disjoint union of two copies."""

    def __init__(self, G: nx.Graph) -> None:
        self.n = G.number_of_nodes()
        assert list(G) == list(range(self.n))
        roles: dict[tuple[str, ...], int] = {}
        self.adj = [[(w, roles.setdefault(G.edges[v, w]["role"], len(roles))) for w in G[v]] for v in G]
        colours = sorted({repr(G.nodes[v]["colour"]) for v in G})
        index = {c: k for k, c in enumerate(colours)}
        self.base = [index[repr(G.nodes[v]["colour"])] for v in G]

    def cells(self, marks: dict[int, int], twin_marks: dict[int, int] | None = None) -> list[int]:
        """Coarsest stable refinement of the base colours, with node v also coloured by ``marks[v]``
        (individualisation). With ``twin_marks``: the refinement of two disjoint copies (nodes of the
        second shifted by n, marked by ``twin_marks``), whose cells are comparable across the copies."""
        copies = [marks] if twin_marks is None else [marks, twin_marks]
        adj = [[(w + c * self.n, r) for w, r in row] for c in range(len(copies)) for row in self.adj]
        init = [(self.base[v], m.get(v, -1)) for m in copies for v in range(self.n)]
        keys = {c: k for k, c in enumerate(sorted(set(init)))}
        cell = [keys[c] for c in init]
        while True:
            sig = [(cell[v], tuple(sorted((r, cell[w]) for w, r in adj[v]))) for v in range(len(adj))]
            ids = {c: k for k, c in enumerate(sorted(set(sig)))}
            if len(ids) == len(keys):
                return cell
            keys, cell = ids, [ids[c] for c in sig]  # type: ignore[assignment]


def _matcher(G: nx.Graph, cells1: list[int], cells2: list[int]) -> iso.GraphMatcher:
    """VF2 on two copies of ``G`` whose nodes must keep their (refined) cells and edges their roles."""
    G1, G2 = G.copy(), G.copy()
    nx.set_node_attributes(G1, dict(enumerate(cells1)), "cell")
    nx.set_node_attributes(G2, dict(enumerate(cells2)), "cell")
    return iso.GraphMatcher(
        G1,
        G2,
        node_match=iso.categorical_node_match("cell", None),
        edge_match=iso.categorical_edge_match("role", None),
    )


def _transversals(G: nx.Graph, base: list[int]) -> list[list[dict[int, int]]]:
    """Coset representatives along the point-stabiliser chain of ``base``: level k holds, for every
    image w of base[k] under the automorphisms fixing base[:k], one such automorphism mapping base[k]
    to w (VF2 between two individualised copies). Aut(G) = {u_0 o u_1 o ... : u_k in level k} when the
    pointwise stabiliser of ``base`` is trivial."""
    refiner, levels = _Refiner(G), []
    fixed: dict[int, int] = {}
    for k, v in enumerate(base):
        cell = refiner.cells(fixed)
        if len(set(cell)) == len(cell):  # discrete: only the identity fixes base[:k]
            break
        level = [{x: x for x in G}]
        for w in base:
            if w == v or cell[w] != cell[v]:
                continue
            pair = refiner.cells({**fixed, v: len(base)}, {**fixed, w: len(base)})
            c1, c2 = pair[: refiner.n], pair[refiner.n :]
            if sorted(c1) != sorted(c2):
                continue
            found = next(_matcher(G, c1, c2).isomorphisms_iter(), None)
            if found is not None:
                level.append(found)
        levels.append(level)
        fixed[v] = k
    return levels


def decpomdp_symmetries_graph(
    game: Game, atol: float = 1e-12, max_nodes: int = DEFAULT_MAX_NODES, method: str = "transversal"
) -> list[Transformation]:
    """All Dec-POMDP symmetries of ``game`` (Phi_MDP), found as automorphisms of :func:`decpomdp_graph`.

    Args:
        game: the Dec-POMDP.
        atol: values within ``atol`` count as equal (the tolerance of ``is_decpomdp_symmetry``).
        max_nodes: node budget; a larger graph raises :class:`GraphTooLargeError` naming its size.
        method: ``"transversal"`` (default): VF2 finds one automorphism per coset of the point-stabiliser
            chain of the element nodes, and the group is the set of their products (fast on large
            groups); ``"enumerate"``: VF2 enumerates every automorphism directly (simple, slow when the
            group is large).

    Returns the distinct transformations phi with phi(G) = G, each verified by
    :func:`~ers_exact.model.transformation.is_decpomdp_symmetry`, sorted by their JSON form (identity first).
    """
    G, ids = decpomdp_graph(game, atol, max_nodes)
    elements = [*ids["states"], *itertools.chain(*ids["actions"]), *itertools.chain(*ids["observations"])]

    def decode(mapping: dict[int, int]) -> Transformation:
        def image(nodes: list[int]) -> tuple[int, ...]:
            pos = {node: k for k, node in enumerate(nodes)}
            return tuple(pos[mapping[node]] for node in nodes)

        return Transformation(
            image(ids["states"]),
            tuple(image(a) for a in ids["actions"]),
            tuple(image(o) for o in ids["observations"]),
        )

    if method == "enumerate":
        cells = _Refiner(G).cells({})
        candidates: Iterable[Transformation] = map(decode, _matcher(G, cells, cells).isomorphisms_iter())
    elif method == "transversal":
        group = [Transformation.identity(game)]
        for level in reversed(_transversals(G, elements)):  # u_0 o (u_1 o (... o u_m))
            reps = [decode(m) for m in level]
            group = [u.compose(g) for u in reps for g in group]
        candidates = group
    else:
        raise ValueError(f"unknown method {method!r}: use 'transversal' or 'enumerate'")
    seen = {phi for phi in candidates if is_decpomdp_symmetry(game, phi, atol=atol)}
    return sorted(seen, key=lambda p: (p.states, p.actions, p.observations))
