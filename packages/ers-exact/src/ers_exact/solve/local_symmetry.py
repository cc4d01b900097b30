"""Relabellings of the last stage's actions history by history, and a fundamental domain of them for the
certified optimal-set search (:mod:`ers_exact.solve.optimal_set`).

At the last decision stage t = H - 1 an action only earns its immediate reward: nothing after it is ever
acted upon. Join two last-stage local histories when some joint node holds both; each connected *component*
C of that relation is a set of local histories of every agent that only ever meet one another. Take one
action permutation sigma_j per agent and apply it to agent j's actions at the histories of C only (identity
elsewhere). If every joint action a satisfies, bit for bit,

    T[s, a, :] = T[s, sigma(a), :]  and  R[s, a, :] = R[s, sigma(a), :]   for every state s,

(sigma(a) = (sigma_1(a_1), ..., sigma_n(a_n))) and sigma_j keeps the legal actions of agent j's histories in C,
then every node of C earns the same expected reward under pi and under the relabelled policy, earlier stages
see the same values, and so the relabelling maps Boltzmann fixed points to Boltzmann fixed points with the
same J. Such component groups act on disjoint coordinates and fix every earlier-stage logit, so a fundamental
domain of their product, and of Phi_MDP's on the first actions (:mod:`~ers_exact.solve.orbit_domain`), is the
intersection of the chains

    pi(o_1 | tau*_C) >= ... >= pi(o_k | tau*_C)     (one history tau*_C of C, O an orbit on which the group
                                                     restricts to every permutation)

with that of Phi_MDP: every fixed point has an image there (sort the first actions by Phi_MDP, then each
component by its own group, which leaves the first actions alone). The search explores the domain; each
optimal root is then mapped through the whole group (orbit closure under the generators, at most
:data:`MAX_IMAGES` images) and every image certified again before it is listed.

Found: three-lever (each pair of histories (a, b) / (b, a) after the first round, S_3 on both agents' levers
at once: 9 components), two-lever likewise; none on dectiger, recycling, broadcastChannel, GridSmall H=2."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.derivatives import coordinate_index
from ers_exact.solve.orbit_domain import contract_chain, permutation_orbits
from ers_exact.util.partition import class_roots

__all__ = ["MAX_IMAGES", "LocalDomain", "components", "contract_chain", "local_domain"]

#: images of one root listed at most (a larger orbit leaves the list incomplete: ``unmapped``)
MAX_IMAGES = 20_000
#: joint permutations tried at most (prod_j |A_j|!)
MAX_JOINT_PERMUTATIONS = 5040


@dataclass(frozen=True)
class Component:
    """One component: its histories per agent (indices into ``tree.local[j]``), the joint permutations that
    are exact symmetries there, and the chain of the fundamental domain (coordinates; empty: none)."""

    histories: tuple[np.ndarray, ...]
    perms: tuple[tuple[tuple[int, ...], ...], ...]  # each: one permutation of A_j per agent
    chain: np.ndarray


@dataclass(frozen=True)
class LocalDomain:
    """The components with a usable chain (module docstring)."""

    components: tuple[Component, ...]

    def __len__(self) -> int:
        return len(self.components)

    def contract(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        for comp in self.components:
            lo, hi = contract_chain(lo, hi, comp.chain)
        return lo, hi

    def apply(self, coords: LogitCoordinates, y: np.ndarray, comp: Component, perm: tuple) -> np.ndarray:
        """The relabelled points: pi'^j(sigma_j(a) | tau) = pi^j(a | tau) at the component's histories.  # [R, D]"""
        pol = list(coords.to_log_policy(y))  # log space: exact where pi underflows (low temperature)
        for j, (hist, sigma) in enumerate(zip(comp.histories, perm)):
            if len(hist):
                new = pol[j][:, hist].copy()
                new[:, :, np.asarray(sigma)] = pol[j][:, hist]
                pol[j][:, hist] = new
        return coords.from_log_policy(tuple(pol))

    def orbit(
        self,
        coords: LogitCoordinates,
        y: np.ndarray,
        more: Callable[[np.ndarray], np.ndarray] | None = None,
        limit: int = MAX_IMAGES,
        deadline: float | None = None,
    ) -> tuple[np.ndarray, bool]:
        """The orbit of one point y [D] under the components' groups and the extra generators ``more``
        (images of a batch [R, D]), closed by breadth-first search; (points [K, D] with y first, whether it
        closed within ``limit`` points and before ``deadline``, a ``time.perf_counter()`` value). Points within
        1e-9 (max abs of the policies) are one."""
        seen = [y]
        keys = {_key(coords, y[None])[0]}
        frontier = y[None]
        while len(frontier):
            if deadline is not None and time.perf_counter() > deadline:
                return np.array(seen), False
            imgs = [self.apply(coords, frontier, c, p) for c in self.components for p in c.perms]
            if more is not None:
                imgs.append(more(frontier))
            cand = np.concatenate(imgs) if imgs else np.zeros((0, len(y)))
            new = []
            for k, key in zip(range(len(cand)), _key(coords, cand)):
                if key not in keys:
                    keys.add(key)
                    new.append(cand[k])
                    if len(seen) + len(new) > limit:
                        return np.array(seen + new), False
            seen += new
            frontier = np.array(new).reshape(len(new), len(y))
        return np.array(seen), True


def _key(coords: LogitCoordinates, y: np.ndarray) -> list[bytes]:
    pol = np.concatenate([p.reshape(len(y), -1) for p in coords.to_policy(y)], axis=1) if len(y) else y
    return [row.tobytes() for row in np.round(pol, 9)]


def _invariant_perms(tree: HistoryTree) -> list[tuple[tuple[int, ...], ...]]:
    """Joint permutations (one per agent) that leave T[s, a, :] and R[s, a, :] unchanged bit for bit."""
    game = tree.game
    na = [int(a) for a in game.n_actions]
    choices = [list(itertools.permutations(range(a))) for a in na]
    if int(np.prod([len(c) for c in choices])) > MAX_JOINT_PERMUTATIONS:
        return []
    ja = np.asarray(game.joint_actions)  # [A, n]
    index = {tuple(int(x) for x in row): k for k, row in enumerate(ja)}
    T, R = np.asarray(game.transition), np.asarray(game.reward)
    out = []
    for perm in itertools.product(*choices):
        if all(p == tuple(range(len(p))) for p in perm):
            continue
        image = np.array([index[tuple(perm[j][int(a)] for j, a in enumerate(row))] for row in ja])
        if np.array_equal(T[:, image], T) and np.array_equal(R[:, image], R):
            out.append(perm)
    return out


def components(tree: HistoryTree) -> list[tuple[np.ndarray, ...]]:
    """Connected components of the last stage's local histories (joined where a joint node holds both)."""
    t = len(tree.layers) - 1
    loc = tree.layers[t].local  # [N, n] global local-history index of each agent at each node
    n = loc.shape[1]
    offsets = [0, *np.cumsum([len(h) for h in tree.local])]
    pairs = ((offsets[0] + int(row[0]), offsets[j] + int(row[j])) for row in loc for j in range(1, n))
    root = class_roots(offsets[-1], pairs)
    groups: dict[int, list[list[int]]] = {}
    for j in range(n):
        for h in np.unique(loc[:, j]):
            groups.setdefault(root[offsets[j] + int(h)], [[] for _ in range(n)])[j].append(int(h))
    return [tuple(np.array(g, dtype=np.int64) for g in per) for per in groups.values()]


def local_domain(tree: HistoryTree) -> LocalDomain | None:
    """The last stage's components with a usable chain (module docstring), or None (none, or H = 1, where
    the last stage is the first and :mod:`~ers_exact.solve.orbit_domain` covers it)."""
    if len(tree.layers) < 2:
        return None
    perms = _invariant_perms(tree)
    if not perms:
        return None
    coords = LogitCoordinates(tree)
    index = coordinate_index(tree)
    comps = []
    for hists in components(tree):
        ok = [
            p
            for p in perms
            if all(
                np.array_equal(tree.local[j].legal[h][:, list(p[j])], tree.local[j].legal[h])
                for j, h in enumerate(hists)
            )
        ]
        chain = _chain(coords, index, hists, ok)
        if chain is not None:
            comps.append(Component(hists, tuple(ok), chain))
    return LocalDomain(tuple(comps)) if comps else None


def _chain(
    coords: LogitCoordinates,
    index: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    hists: tuple[np.ndarray, ...],
    perms: list[tuple[tuple[int, ...], ...]],
) -> np.ndarray | None:
    """The longest orbit O of one agent's permutations on which they restrict to every permutation of O,
    at that agent's first history in the component whose actions in O are all legal: its coordinates."""
    best: np.ndarray | None = None
    for j, hist in enumerate(hists):
        if not len(hist) or not perms:
            continue
        own = {p[j] for p in perms} | {tuple(range(len(perms[0][j])))}
        for orbit in permutation_orbits(own, len(perms[0][j])):
            full = set(itertools.permutations(orbit))
            if len(orbit) < 2 or len({tuple(p[a] for a in orbit) for p in own} & full) < len(full):
                continue
            legal = coords.tree.local[j].legal
            tau = next((int(h) for h in hist if all(legal[h][a] for a in orbit)), None)
            if tau is None:
                continue
            ks, acts, _ = index[j]
            where = {int(a): coords.slices[j].start + n for n, (k, a) in enumerate(zip(ks, acts)) if k == tau}
            chain = np.array([where.get(a, -1) for a in orbit], dtype=np.int64)
            if best is None or len(chain) > len(best):
                best = chain
    return best
