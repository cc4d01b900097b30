"""The interface shared by ers-exact and ers-deep (torch-free): transformations, discovery results and
zero-shot-coordination reports. Frozen dataclasses with a JSON round trip, so a benchmark can run both
halves on the same game and compare their outputs field by field.

* :class:`~ers_exact.model.transformation.Transformation` -- phi = (phi_S, phi_A^i, phi_O^i) as permutations.
* :class:`DiscoveryResult` -- the l best learned transformations with their scores (mean J(phi(pi)) over
  the pool, eq. sp-max) and the paper's Table 2 group metrics: J_1, J_2, J_3 (expected return after
  composing 1-3 random learned transformations) and the relative reconstruction loss.
* :class:`ZSCReport` -- per population the columns of the paper's Table 1: SP, XP mean, XP median
  (XP(*)), XP(*) after symmetrising with Phi_MDP and with Phi_ER, each with a standard error; and the
  OP objective of the deployed policies (mean and standard error), Phi being the set the population
  trains OP with (OP + Phi_MDP: Phi_MDP; OP + learned Phi_ER: each agent's own learned set) and, for
  the self-play population, which trains no OP, Phi_MDP (how much its conventions break the Dec-POMDP
  symmetries). Reports written before the OP column load with ``op = None``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ers_exact.model.transformation import Transformation

__all__ = ["DiscoveryResult", "Estimate", "PopulationRow", "Transformation", "ZSCReport"]


@dataclass(frozen=True)
class DiscoveryResult:
    """Learned transformations, best first, and how well they behave as a group."""

    game: str
    algorithm: str  # "sp-max" (Alg. 1), "sp-max-reg" (Alg. 2), "xp-max" (Alg. 3), or a deep variant
    transformations: tuple[Transformation, ...]
    scores: tuple[float, ...]  # the objective each transformation reached
    pool_return: float  # mean J over the pool, for reference
    J_1: float
    J_2: float
    J_3: float
    reconstruction_loss: float
    config: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "game": self.game,
            "algorithm": self.algorithm,
            "transformations": [t.to_json() for t in self.transformations],
            "scores": list(self.scores),
            "pool_return": self.pool_return,
            "J_1": self.J_1,
            "J_2": self.J_2,
            "J_3": self.J_3,
            "reconstruction_loss": self.reconstruction_loss,
            "config": self.config,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DiscoveryResult:
        return cls(
            game=data["game"],
            algorithm=data["algorithm"],
            transformations=tuple(Transformation.from_json(t) for t in data["transformations"]),
            scores=tuple(data["scores"]),
            pool_return=data["pool_return"],
            J_1=data["J_1"],
            J_2=data["J_2"],
            J_3=data["J_3"],
            reconstruction_loss=data["reconstruction_loss"],
            config=dict(data.get("config", {})),
        )


@dataclass(frozen=True)
class Estimate:
    """A mean (or median) with its standard error."""

    value: float
    se: float

    def __str__(self) -> str:
        return f"{self.value:.3f} ± {self.se:.3f}"


@dataclass(frozen=True)
class PopulationRow:
    """One population's line of Table 1."""

    name: str
    sp: Estimate  # self-play J of the deployed policies
    xp: Estimate  # mean within-population cross-play (pairs of distinct agents)
    xp_median: Estimate  # XP(*): median cross-play
    xp_median_mdp: Estimate  # XP(*) after symmetrising every deployed policy with Phi_MDP
    xp_median_er: Estimate  # XP(*) after symmetrising with the learned Phi_ER
    # mean OP^Phi of the deployed policies, Phi = the population's OP set (SP row: Phi_MDP); None: not given
    op: Estimate | None = None

    COLUMNS = ("sp", "xp", "xp_median", "xp_median_mdp", "xp_median_er")  # required; ``op`` is optional


@dataclass(frozen=True)
class ZSCReport:
    """Within-population cross-play of independently trained agents (the paper's Table 1)."""

    game: str
    rows: tuple[PopulationRow, ...]
    config: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "game": self.game,
            "config": self.config,
            "rows": [
                {
                    "name": r.name,
                    **{
                        c: {"value": getattr(r, c).value, "se": getattr(r, c).se}
                        for c in PopulationRow.COLUMNS
                    },
                    "op": None if r.op is None else {"value": r.op.value, "se": r.op.se},
                }
                for r in self.rows
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ZSCReport:
        rows = tuple(
            PopulationRow(
                name=r["name"],
                **{c: Estimate(r[c]["value"], r[c]["se"]) for c in PopulationRow.COLUMNS},
                op=Estimate(r["op"]["value"], r["op"]["se"]) if r.get("op") else None,
            )
            for r in data["rows"]
        )
        return cls(game=data["game"], rows=rows, config=dict(data.get("config", {})))

    def to_markdown(self) -> str:
        head = (
            "| population | Self-Play | OP | XP | XP(*) | XP(*)+MDP | XP(*)+ER |\n"
            "| --- | --- | --- | --- | --- | --- | --- |\n"
        )
        cells = [
            [
                str(r.sp),
                "-" if r.op is None else str(r.op),
                *(str(getattr(r, c)) for c in PopulationRow.COLUMNS[1:]),
            ]
            for r in self.rows
        ]
        return head + "\n".join(f"| {r.name} | " + " | ".join(c) + " |" for r, c in zip(self.rows, cells))

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)
