"""Policy parts of Psi as permutations of points: agent by agent, its actions then its observations, one
block of points each, [A^0 | O^0 | A^1 | O^1 | ...] (the base order of :mod:`ers_exact.symmetry.er_search`);
orbits of points under generators, and the non-trivial orbits of a group on each agent's labels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ers_exact.model.transformation import Transformation

__all__ = ["from_points", "label_orbits", "point_orbit", "to_points"]


def to_points(phi: Transformation) -> np.ndarray:
    """The policy part of phi as one permutation of the base-order points [A^0 | O^0 | A^1 | O^1 | ...]."""
    out, offset = [], 0
    for acts, obs in zip(phi.actions, phi.observations):
        out += [offset + v for v in acts]
        offset += len(acts)
        out += [offset + v for v in obs]
        offset += len(obs)
    return np.array(out, dtype=np.int64)


def from_points(
    img: Sequence[int] | np.ndarray, n_states: int, sizes: Sequence[tuple[int, int]]
) -> Transformation:
    """The policy part (identity on states) whose point permutation is ``img`` (inverse of ``to_points``)."""
    acts, obs, offset = [], [], 0
    for n_a, n_o in sizes:
        acts.append(tuple(int(v) - offset for v in img[offset : offset + n_a]))
        offset += n_a
        obs.append(tuple(int(v) - offset for v in img[offset : offset + n_o]))
        offset += n_o
    return Transformation(tuple(range(n_states)), tuple(acts), tuple(obs))


def point_orbit(point: int, gens: Sequence[np.ndarray]) -> frozenset[int]:
    """The orbit of ``point`` under the group the point permutations ``gens`` generate."""
    seen, frontier = {point}, [point]
    while frontier:
        nxt = [int(g[x]) for x in frontier for g in gens if int(g[x]) not in seen]
        seen.update(nxt)
        frontier = nxt
    return frozenset(seen)


def label_orbits(
    generators: Sequence[Transformation], sizes: Sequence[tuple[int, int]]
) -> dict[str, list[list[int]]]:
    """Non-trivial orbits of <generators> on each agent's actions and observations (``sizes``: (|A^i|,
    |O^i|) per agent)."""
    gens = [to_points(g) for g in generators]
    out, offset = {}, 0
    for i, (n_a, n_o) in enumerate(sizes):
        for name, size in ((f"actions_{i}", n_a), (f"observations_{i}", n_o)):
            pts, seen = [], set[int]()
            for x in range(offset, offset + size):
                if x not in seen:
                    orb = point_orbit(x, gens)
                    seen |= orb
                    if len(orb) > 1:
                        pts.append(sorted(v - offset for v in orb))
            out[name] = pts
            offset += size
    return out
