"""Symmetry sets as permutation groups (sympy.combinatorics) on the disjoint union of all label sets:
states, then each agent's actions, then each agent's observations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sympy.combinatorics import Permutation, PermutationGroup

from ers_exact.model.transformation import Transformation

__all__ = ["GroupSummary", "is_subset", "summarise", "to_permutation"]


def to_permutation(phi: Transformation, include_states: bool = True) -> Permutation:
    """phi as one permutation of the points [states | A^1 | ... | A^n | O^1 | ... | O^n]."""
    parts = ([phi.states] if include_states else []) + list(phi.actions) + list(phi.observations)
    image, offset = [], 0
    for part in parts:
        image += [offset + v for v in part]
        offset += len(part)
    return Permutation(image)


@dataclass(frozen=True)
class GroupSummary:
    """Order, closure and a small generating set of a found set of transformations."""

    size: int  # number of distinct elements found
    order: int  # order of the group they generate
    closed: bool  # the found set is the whole group it generates
    generators: tuple[Transformation, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "generated_order": self.order,
            "closed": self.closed,
            "generators": [g.to_json() for g in self.generators],
        }


def summarise(elements: Sequence[Transformation], include_states: bool = True) -> GroupSummary:
    """Greedy small generating set (add an element when it is not yet generated) and closure check."""
    if not elements:
        raise ValueError("no transformations to summarise")
    perms = [to_permutation(e, include_states) for e in elements]
    gens: list[int] = []
    group = PermutationGroup([Permutation(list(range(perms[0].size)))])
    for k, p in enumerate(perms):
        if not group.contains(p):
            gens.append(k)
            group = PermutationGroup([perms[j] for j in gens])
    order = int(group.order())
    distinct = len({tuple(p.array_form) for p in perms})
    return GroupSummary(
        size=distinct, order=order, closed=order == distinct, generators=tuple(elements[k] for k in gens)
    )


def is_subset(small: Sequence[Transformation], big: Sequence[Transformation]) -> bool:
    """Every element of ``small`` (its policy part) is in ``big`` (policy parts)."""
    key = lambda t: (t.actions, t.observations)  # noqa: E731
    return {key(t) for t in small} <= {key(t) for t in big}
