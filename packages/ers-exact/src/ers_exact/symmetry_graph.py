"""Phi_MDP by graph automorphisms: an independent second method for the Dec-POMDP symmetries of a game
(paper, Definition "Dec-POMDP Symmetries", eq. decpomdp-invariance).

The game is encoded as an **undirected** graph with coloured nodes and labelled edges, and the
automorphisms of that graph are enumerated with networkx's VF2 ``GraphMatcher(G, G, node_match,
edge_match)`` (the directed matcher and vf2pp stall or lose edge labels on these graphs; see
``notes/exact-solver-anchors.md`` section 3). The node colours are first refined to the coarsest stable
partition (1-WL colour refinement over the edge roles), which is automorphism-invariant and prunes VF2.

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
* **legal sets** (only when ``game.legal_actions`` is not None): an edge ``("legal", i)`` between the
  observation node ``o`` and the action node ``a`` of agent i whenever ``a`` is legal after ``o``;
  legality at t = 0 is the flag in the action colour.

An edge whose two roles hit the same node (``s == s'``) carries the sorted tuple of both roles, so no
information is lost; every edge label is such a tuple. Values are compared through **tolerance classes**:
the sorted distinct values of one table are split wherever two neighbours differ by more than ``atol``,
so values within ``atol`` of each other (e.g. float noise from averaging) always share a class. Each
fact node is determined by its neighbours, so automorphisms correspond one-to-one to transformations
phi = (phi_S, phi_A^i, phi_O^i) in Psi; each decoded phi is re-checked with
:func:`~ers_exact.transformation.is_decpomdp_symmetry` (networkx issue #8891) and the list deduplicated.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
from networkx.algorithms import isomorphism as iso

from ers_exact.game import Game
from ers_exact.transformation import Transformation, is_decpomdp_symmetry

__all__ = ["DEFAULT_MAX_NODES", "GraphTooLargeError", "decpomdp_graph", "decpomdp_symmetries_graph",
           "graph_size"]

DEFAULT_MAX_NODES = 20_000


class GraphTooLargeError(ValueError):
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
    return (S + sum(game.n_actions) + sum(game.n_observations) + S * A * S
            + int(_u_present(game, atol).sum()))


def decpomdp_graph(game: Game, atol: float = 1e-12,
                   max_nodes: int = DEFAULT_MAX_NODES) -> tuple[nx.Graph, dict[str, Any]]:
    """The coloured, edge-labelled undirected graph of ``game`` (module docstring) and the node ids of
    its element nodes: ``{"states": [...], "actions": [[...] per agent], "observations": [[...]]}``.

    Raises :class:`GraphTooLargeError` when the graph would have more than ``max_nodes`` nodes."""
    size = graph_size(game, atol)
    if size > max_nodes:
        raise GraphTooLargeError(
            f"the symmetry graph of game {game.name!r} would have {size} nodes, over the budget of "
            f"{max_nodes} (S={game.n_states}, A={game.n_joint_actions} joint, O={game.n_joint_observations} "
            "joint); raise max_nodes or use the exhaustive search")
    n, S = game.n_agents, game.n_states
    G = nx.Graph()
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


def _refine(G: nx.Graph) -> dict[int, int]:
    """Colour refinement (1-WL with edge roles) to the coarsest stable partition: the cell of a node is
    invariant under every automorphism, so matching on cells loses nothing and prunes VF2 early."""
    keys = {c: k for k, c in enumerate(sorted({repr(G.nodes[v]["colour"]) for v in G}))}
    cell = {v: keys[repr(G.nodes[v]["colour"])] for v in G}
    while True:
        sig = {v: (cell[v], tuple(sorted((G.edges[v, w]["role"], cell[w]) for w in G[v]))) for v in G}
        ids = {c: k for k, c in enumerate(sorted(set(sig.values())))}
        if len(ids) == len(set(cell.values())):
            return cell
        cell = {v: ids[sig[v]] for v in G}


def decpomdp_symmetries_graph(game: Game, atol: float = 1e-12,
                              max_nodes: int = DEFAULT_MAX_NODES) -> list[Transformation]:
    """All Dec-POMDP symmetries of ``game`` (Phi_MDP), found as automorphisms of :func:`decpomdp_graph`.

    Args:
        game: the Dec-POMDP.
        atol: values within ``atol`` count as equal (the tolerance of ``is_decpomdp_symmetry``).
        max_nodes: node budget; a larger graph raises :class:`GraphTooLargeError` naming its size.

    Returns the distinct transformations phi with phi(G) = G, each verified by
    :func:`~ers_exact.transformation.is_decpomdp_symmetry`, sorted by their JSON form (identity first).
    """
    G, ids = decpomdp_graph(game, atol, max_nodes)
    nx.set_node_attributes(G, _refine(G), "cell")
    matcher = iso.GraphMatcher(G, G, node_match=iso.categorical_node_match("cell", None),
                               edge_match=iso.categorical_edge_match("role", None))
    seen: set[Transformation] = set()
    for mapping in matcher.isomorphisms_iter():
        def image(nodes: list[int]) -> tuple[int, ...]:
            pos = {node: k for k, node in enumerate(nodes)}
            return tuple(pos[mapping[node]] for node in nodes)
        try:
            phi = Transformation(image(ids["states"]), tuple(image(a) for a in ids["actions"]),
                                 tuple(image(o) for o in ids["observations"]))
        except (KeyError, ValueError):  # a mapping that leaves the element nodes: never an automorphism
            continue
        if phi not in seen and is_decpomdp_symmetry(game, phi, atol=atol):
            seen.add(phi)
    return sorted(seen, key=lambda p: (p.states, p.actions, p.observations))
