"""The symmetry layer: Psi (all transformations of a game) and its subgroups. Phi_MDP, the Dec-POMDP
symmetries, by exhaustive or pruned search (``search``; the pruning invariants, signatures and colour
refinement, in ``refinement``) or as automorphisms of a coloured graph
(``graph``, networkx); Phi_ER, the expected-return symmetries w.r.t. a pool of Boltzmann fixed points
(``er``), tested over the admissible candidate transformations of a pool (``candidates``), or found by
generators and order without listing (``er_group``, a base-point subgroup search in ``er_search``); and group
structure via sympy (``groups``). ``graph`` and ``groups`` are not re-exported here, so that importing
the layer does not import networkx and sympy. It imports ``solve`` and the layers below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ers_exact.util.lazy import lazy_exports

if TYPE_CHECKING:  # the names, for mypy and IDEs; at run time each is imported on first use
    from ers_exact.symmetry.candidates import CandidateSpace, stack_pool
    from ers_exact.symmetry.er import ERResult, er_symmetries
    from ers_exact.symmetry.er_group import ERGroup, er_group
    from ers_exact.symmetry.search import decpomdp_symmetries, policy_part_order, psi_order

__all__ = [
    "CandidateSpace",
    "ERGroup",
    "ERResult",
    "decpomdp_symmetries",
    "er_group",
    "er_symmetries",
    "policy_part_order",
    "psi_order",
    "stack_pool",
]

if not TYPE_CHECKING:  # hidden from mypy, so that a name missing above is an error, not Any
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "CandidateSpace": "candidates",
            "stack_pool": "candidates",
            "ERResult": "er",
            "er_symmetries": "er",
            "ERGroup": "er_group",
            "er_group": "er_group",
            "decpomdp_symmetries": "search",
            "policy_part_order": "search",
            "psi_order": "search",
        },
    )
