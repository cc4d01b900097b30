"""Union-find: the classes of range(n) that a set of joined pairs generates (orbits of permutations, connected
components of histories)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["class_roots", "classes"]


def class_roots(n: int, pairs: Iterable[tuple[int, int]]) -> list[int]:
    """The root of each of range(n) once every pair (a, b) is joined: the smallest member of its class."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(int(a)), find(int(b))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [find(x) for x in range(n)]


def classes(n: int, pairs: Iterable[tuple[int, int]]) -> list[list[int]]:
    """The classes of range(n) under the joined ``pairs``, singletons included, each in increasing order, ordered
    by their smallest member."""
    groups: dict[int, list[int]] = {}
    for x, root in enumerate(class_roots(n, pairs)):
        groups.setdefault(root, []).append(x)
    return list(groups.values())
