"""Expected-return symmetries Phi_ER (paper, Definition "Expected Return Symmetries"), exactly.

phi is in Phi_ER w.r.t. a pool Pi' subset of Pi*_alpha when for every pi in Pi', phi(pi) is a Boltzmann
fixed point (max |F(phi(pi)) - phi(pi)| <= tol) and J(phi(pi)) = J* within tol; an inadmissible phi
(DESIGN.md) is not a member and is counted as such. The test is vectorised over all candidates of the
policy part of Psi (action and observation permutations) and over the pool; Phi_ER = S_{|S|} x members.
With the pool equal to the solver's whole optimal set this is the paper's Phi_ER *relative to the
fixed points found*; results say whether that set was certified complete.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.transformation import Transformation
from ers_exact.model.values import expected_return
from ers_exact.solve.boltzmann import boltzmann_residual
from ers_exact.symmetry.candidates import CandidateSpace, stack_pool

__all__ = ["ERResult", "er_symmetries"]

_BATCH = 200_000  # policy-array entries per agent per evaluation chunk / 10


@dataclass(frozen=True)
class ERResult:
    """The ER symmetries found against a pool, with the pool's orbits under them."""

    game: str
    alpha: float
    J_star: float
    pool_size: int
    pool_is_whole_optimal_set: bool
    pool_complete: bool  # the solver proved its fixed-point list complete
    members: tuple[Transformation, ...] = field(repr=False)  # policy parts (identity on states)
    n_candidates: int
    n_inadmissible: int
    orbits: tuple[tuple[int, ...], ...]
    images_outside_pool: int  # phi(pi) in Pi*_alpha but not among the pool's points
    tol: float

    @property
    def order_on_policies(self) -> int:
        return len(self.members)

    def order(self, n_states: int) -> int:
        """|Phi_ER| as a subgroup of Psi (every state permutation acts trivially on policies)."""
        return math.factorial(n_states) * len(self.members)

    def to_json(self, n_states: int, max_elements: int = 10_000) -> dict[str, Any]:
        members = [m.to_json() for m in self.members[:max_elements]]
        return {"alpha": self.alpha, "J_star": self.J_star, "pool_size": self.pool_size,
                "pool_is_whole_optimal_set": self.pool_is_whole_optimal_set, "pool_complete": self.pool_complete,
                "order": self.order(n_states), "order_on_policies": self.order_on_policies,
                "elements": members, "elements_truncated": len(self.members) > max_elements,
                "elements_note": "policy parts; every state permutation may be composed with each",
                "n_candidates": self.n_candidates, "n_inadmissible": self.n_inadmissible,
                "orbits_on_pool": [list(o) for o in self.orbits], "images_outside_pool": self.images_outside_pool,
                "tol": self.tol}


def er_symmetries(tree: HistoryTree, pool: Sequence[Sequence[np.ndarray]], alpha: float, J_star: float,
                  tol: float = 1e-8, pool_is_whole_optimal_set: bool = True, pool_complete: bool = False
                  ) -> ERResult:
    """Every policy-part transformation phi with phi(pi) in Pi*_alpha for all pi in ``pool``."""
    game = tree.game
    space = CandidateSpace(tree)
    pols = list(stack_pool(pool))  # [P, K, A] per agent
    P = pols[0].shape[0]
    combos = space.admissible_combos()
    members, images = [], []
    width = max(1, _BATCH * 10 // max(1, P * sum(p[0].size for p in pols)))
    for lo in range(0, len(combos), width):
        chunk = combos[lo:lo + width]
        C = len(chunk)
        batch = space.apply(chunk, pols)
        res = np.asarray(boltzmann_residual(tree, batch, alpha)).reshape(C, P)
        J = np.asarray(expected_return(tree, batch)).reshape(C, P)
        good = np.all(res <= tol, axis=1) & np.all(np.abs(J - J_star) <= tol, axis=1)
        for c in np.flatnonzero(good):
            members.append(space.transformation(chunk[c]))
            images.append([b.reshape(C, P, *b.shape[1:])[c] for b in batch])
    total = space.size
    orbits, outside = _orbits(pols, images)
    return ERResult(game=game.name, alpha=float(alpha), J_star=float(J_star), pool_size=P,
                    pool_is_whole_optimal_set=pool_is_whole_optimal_set, pool_complete=pool_complete,
                    members=tuple(members), n_candidates=total, n_inadmissible=total - len(combos),
                    orbits=orbits, images_outside_pool=outside, tol=tol)


def _orbits(pols: list[np.ndarray], images: list[list[np.ndarray]], tol: float = 1e-6
            ) -> tuple[tuple[tuple[int, ...], ...], int]:
    """Union-find of pool points mapped onto each other by the members; count images outside the pool."""
    P = pols[0].shape[0]
    flat = np.concatenate([p.reshape(P, -1) for p in pols], axis=1)
    parent = list(range(P))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    outside = 0
    for img in images:
        img_flat = np.concatenate([m.reshape(P, -1) for m in img], axis=1)
        dist = np.abs(img_flat[:, None, :] - flat[None, :, :]).max(axis=2)  # [P, P]
        for p in range(P):
            q = int(np.argmin(dist[p]))
            if dist[p, q] < tol:
                parent[find(p)] = find(q)
            else:
                outside += 1
    groups: dict[int, list[int]] = {}
    for p in range(P):
        groups.setdefault(find(p), []).append(p)
    return tuple(tuple(g) for g in groups.values()), outside
