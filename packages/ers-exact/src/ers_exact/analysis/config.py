"""The analysis layer's configuration readable without loading the analysis (numpy, the solver, sympy):
the census of random small games (:class:`CensusConfig`, re-exported by :mod:`~ers_exact.analysis.census`).
The command line builds its options from these defaults."""

from __future__ import annotations

from dataclasses import dataclass

from ers_exact.util.options import at_least, check_fields, check_types, non_negative, positive, probability

__all__ = ["CensusConfig"]


@dataclass(frozen=True)
class CensusConfig:
    """Parameters of :func:`census` (recorded in its output)."""

    games: int = 20
    seed: int = 0
    alpha: float = 0.25
    planted_share: float = 0.5
    starts: int = 16
    out: str | None = None  # folder for .dpomdp examples and census.json

    def __post_init__(self) -> None:
        check_types(self)
        check_fields(
            self,
            games=at_least(1),
            seed=non_negative,
            alpha=positive,
            planted_share=probability,
            starts=non_negative,
        )
