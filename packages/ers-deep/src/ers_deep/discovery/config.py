"""The configuration of a deep discovery run (``DeepDiscoveryConfig``) and the sizes that suit tabular pools."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from ers_deep.train.config import TrainConfig
from ers_exact.util.options import (
    UsageError,
    at_least,
    between,
    check_fields,
    check_types,
    non_negative,
    one_of,
)

__all__ = ["TABULAR_SETTINGS", "Algorithm", "DeepDiscoveryConfig"]

Algorithm = Literal["sp-max", "sp-max-reg", "xp-max"]


@dataclass(frozen=True, kw_only=True)
class DeepDiscoveryConfig:
    """One deep discovery run; variants (the three algorithms) are fields."""

    algorithm: Algorithm = "sp-max"
    candidates: int = 8  # L trained together
    top: int = 4  # l kept
    action_set: str = "transpositions"  # tabular: or "permutations"
    lambda1: float = 0.35  # sp-max-reg: probability of a composed rollout (the official 0.35)
    lambda2: float = 0.01  # sp-max-reg: weight of E_o ||o - phi(phi(o))||^2
    earlier: str | None = None  # sp-max-reg: a previous discovery.json (default: run sp-max first)
    num_envs: int = 128
    num_steps: int = 32
    total_env_steps: int = 400_000  # per candidate
    lr: float = 1e-3
    alpha: float | None = None  # entropy coefficient (None: the pool's alpha; see ``entropy``)
    eval_games: int = 500  # sampled games per held-out policy for every score (not with exact scores)
    exact_scores: bool = True  # tabular envs: score and keep candidates by their exact return (ers-exact)
    seed: int = 0

    def __post_init__(self) -> None:
        check_types(self)
        check_fields(
            self,
            algorithm=one_of(("sp-max", "sp-max-reg", "xp-max")),
            candidates=at_least(1),
            top=at_least(1),
            action_set=one_of(("transpositions", "permutations")),
            lambda1=between(0, 1),
            lambda2=non_negative,
            num_envs=at_least(1),
            num_steps=at_least(1),
            total_env_steps=at_least(1),
            lr=non_negative,
            eval_games=at_least(1),
            seed=non_negative,
        )
        if self.top > self.candidates:
            raise UsageError(
                f"DeepDiscoveryConfig.top = {self.top} is more than candidates = {self.candidates}"
            )

    def entropy(self, pool: TrainConfig) -> float:
        """The entropy coefficient of the discovery run on a pool trained with ``pool``: ``alpha`` when given,
        otherwise the pool's own alpha (tabular pools: the Boltzmann temperature, 0.25 by default; Hanabi: the
        paper's 0.01, which is also the official discovery config's ``ENT_COEF``).

        Measured on three-lever (9 candidates, 3 kept, candidates scored exactly; a pool of 8 seeds at 2.46M
        steps with 300k discovery steps, discovery seeds 0-4, and one of 4 seeds at 600k with 150k steps,
        seeds 0-3): with the pool's 0.25, 26 of 27 kept candidates rounded to an exact ER symmetry (all at
        distance <= 0.01 but the one, kept third of 3 when only 2 of 9 candidates had converged); with 0, 20 of
        27, the seven misses at distance ~2/3 (one observation's row on another observation). Without the bonus
        fewer candidates converge: on the 8-seed pool 11 of 45 came within 0.03 of the pool's return, against
        20 of 45 at 0.25. At the pool's temperature the objective is the soft return the pool's Boltzmann
        policies (approximately) maximise, and an ER symmetry keeps both J and the entropy."""
        return pool.alpha if self.alpha is None else self.alpha

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: sizes that work on tabular pools (the toy game and three-lever in ~10-20 s on one CPU thread); the
#: dataclass defaults are for Hanabi-sized nets. ``ers-deep discover`` uses these on tabular pools.
TABULAR_SETTINGS: dict[str, Any] = {"num_envs": 256, "num_steps": 4, "lr": 0.01, "total_env_steps": 300_000}
