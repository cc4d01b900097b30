"""A fundamental domain of Dec-POMDP symmetries for the certified optimal-set search.

A relabelling phi in Phi_MDP leaves b_0, T, U and R unchanged, so it maps Boltzmann fixed points to Boltzmann
fixed points with the same J (paper: Phi_MDP is a subgroup of Phi_ER). Take an agent i, its empty history
(fixed by every relabelling) and an orbit O = {o_1 < ... < o_k} of the given relabellings on A^i such that
their restrictions to O include every permutation of O. Then for every policy pi some given phi sorts pi's
first action probabilities on O: phi(pi)^i(o_1 | ()) >= ... >= phi(pi)^i(o_k | ()). So every fixed point x is
phi^{-1}(r) for a fixed point r in the domain

    Delta = { y : y_{o_1} >= y_{o_2} >= ... >= y_{o_k} }   (y_{r(())} = 0: the reference action's logit),

and a search that explores Delta only (boxes contracted by the chain of inequalities) finds every r; the list
is completed by mapping each root through the inverses of the given relabellings, each image certified
again (Krawczyk) before it is listed. Soundness needs each phi to be an exact symmetry: the game's arrays are
compared bit for bit (``np.array_equal``), not to a tolerance, and phi must map possible histories and legal
actions onto possible histories and legal actions; anything else switches the reduction off."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.transformation import Transformation, apply_to_log_policy, is_admissible
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.derivatives import coordinate_index

__all__ = ["OrbitDomain", "contract_chain", "is_exact_symmetry", "orbit_domain", "permutation_orbits"]

#: relabellings accepted at most (each root is mapped through every one)
MAX_RELABELLINGS = 5040


def is_exact_symmetry(tree: HistoryTree, phi: Transformation) -> bool:
    """phi leaves b_0, T, U, R and the legal sets unchanged exactly, and is admissible on the history tree."""
    game = tree.game
    image = phi.apply_to_game(game)
    same = all(
        np.array_equal(getattr(image, k), getattr(game, k))
        for k in ("transition", "observation", "reward", "initial_belief")
    )
    legal = game.legal_actions is None or all(
        np.array_equal(x, y) for x, y in zip(image.legal_actions or (), game.legal_actions)
    )
    return same and legal and is_admissible(tree, phi)


@dataclass(frozen=True)
class OrbitDomain:
    """The chain y_{chain[0]} >= y_{chain[1]} >= ... (coordinate indices; -1 is the reference logit 0) and
    the relabellings whose inverses complete the list of roots."""

    agent: int
    orbit: tuple[int, ...]  # O, actions of ``agent`` at its empty history
    chain: np.ndarray  # [k] coordinate of each o_j (-1: the reference action)
    inverses: tuple[Transformation, ...]

    @property
    def order(self) -> int:
        """How many copies of Delta cover the domain at most (k!)."""
        return int(np.prod(np.arange(1, len(self.chain) + 1)))

    def contract(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Intersect boxes [P, D] with Delta's hull: hi_{j+1} <= hi_j and lo_j >= lo_{j+1} along the chain."""
        return contract_chain(lo, hi, self.chain)

    def images(self, coords: LogitCoordinates, y: np.ndarray) -> np.ndarray:
        """phi^{-1}(y) for every root y [R, D] and every given phi, identity images dropped.  # [R * G', D]"""
        if not len(y):
            return y
        logp = coords.to_log_policy(y)  # in log space: exact where pi underflows (low temperature)
        out = [coords.from_log_policy(apply_to_log_policy(coords.tree, inv, logp)) for inv in self.inverses]
        ys = np.concatenate(out) if out else np.zeros((0, y.shape[1]))
        return ys[np.any(np.abs(ys - np.tile(y, (len(out), 1))) > 0, axis=1)] if out else ys


def orbit_domain(tree: HistoryTree, relabellings: Sequence[Transformation]) -> OrbitDomain | None:
    """The largest usable orbit (module docstring) of exact, admissible relabellings, or None."""
    if not relabellings or len(relabellings) > MAX_RELABELLINGS:
        return None
    if not all(is_exact_symmetry(tree, phi) for phi in relabellings):
        return None
    coords = LogitCoordinates(tree)
    best: OrbitDomain | None = None
    for i, (ks, acts, _) in enumerate(coordinate_index(tree)):
        perms = {tuple(phi.actions[i]) for phi in relabellings}
        legal = tree.local[i].legal[0]
        for orbit in permutation_orbits(perms, len(legal)):
            if len(orbit) < 2 or not all(legal[a] for a in orbit):
                continue
            restricted = {tuple(p[a] for a in orbit) for p in perms}
            if len(restricted & set(itertools.permutations(orbit))) < len(
                list(itertools.permutations(orbit))
            ):
                continue
            where = {int(a): coords.slices[i].start + n for n, (k, a) in enumerate(zip(ks, acts)) if k == 0}
            chain = np.array([where.get(a, -1) for a in orbit], dtype=np.int64)
            if best is None or len(orbit) > len(best.orbit):
                best = OrbitDomain(i, orbit, chain, tuple(phi.inverse() for phi in relabellings))
    return best


def permutation_orbits(perms: set[tuple[int, ...]], n: int) -> list[tuple[int, ...]]:
    """Orbits of a set of permutations of range(n), each sorted."""
    seen: set[int] = set()
    out = []
    for a in range(n):
        if a in seen:
            continue
        orbit, todo = {a}, [a]
        while todo:
            x = todo.pop()
            for p in perms:
                if p[x] not in orbit:
                    orbit.add(p[x])
                    todo.append(p[x])
        seen |= orbit
        out.append(tuple(sorted(orbit)))
    return out


def contract_chain(lo: np.ndarray, hi: np.ndarray, chain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intersect boxes [P, D] with the hull of y_{chain[0]} >= y_{chain[1]} >= ... (-1: the reference logit 0);
    an empty box gets lo = inf."""
    P = len(lo)
    zero = np.zeros(P)
    clo = [lo[:, c] if c >= 0 else zero for c in chain]
    chi = [hi[:, c] if c >= 0 else zero for c in chain]
    for j in range(1, len(chi)):
        chi[j] = np.minimum(chi[j], chi[j - 1])
    for j in range(len(clo) - 2, -1, -1):
        clo[j] = np.maximum(clo[j], clo[j + 1])
    lo, hi = lo.copy(), hi.copy()
    bad = np.zeros(P, dtype=bool)
    for c, a, b in zip(chain, clo, chi):
        if c >= 0:
            lo[:, c], hi[:, c] = a, b
        else:  # the reference logit is 0: a box whose chain excludes 0 there is empty
            bad |= (a > 0) | (b < 0)
    lo[bad] = np.inf
    return lo, hi
