"""The configuration of a deep discovery run (``DeepDiscoveryConfig``), the sizes that suit tabular pools
(``TABULAR_SETTINGS``) and the paper's discovery hyper-parameters (``paper_discovery_config``).

The dataclass defaults are sized for a CPU (128 games x 32 steps, 400k env steps per candidate, Adam 1e-3);
``paper_discovery_config(env)`` gives the values of the paper's Appendix A ("Experimental Setup"):

==============  ==========================================================================================
env             the paper's discovery run (Appendix A)
==============  ==========================================================================================
hanabi          1024 games per pretrained (training) policy x 128 steps, 2.25e9 env steps per inner loop,
                Adam 1e-5 linearly annealed, lambda_1 = 0.65, lambda_2 = 2.5e-9 (Algorithm 2)
overcooked-v2   256 games x 256 steps, 1.5e8 env steps per inner loop, Adam 1e-5 without annealing
                (Algorithm 3)
==============  ==========================================================================================

The PPO settings (epochs, minibatches, gamma, GAE lambda, clip, value weight, max grad norm) are the pool's
(``discovery_train_config``); a pool trained with ``paper_config`` has the appendix's. Where the official code
differs from the paper's text (``../shared/notes/reference-code-and-jaxmarl.md`` 1.3-1.7), the paper's text is
used: Overcooked V2's learning rate is 2.5e-5 in the code, and the code composes a rollout with probability
0.35 (= 1 - 0.65) where the paper's Algorithm 2 composes with probability lambda_1 = 0.65.
"""

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

__all__ = [
    "PAPER_DISCOVERY",
    "TABULAR_SETTINGS",
    "Algorithm",
    "DeepDiscoveryConfig",
    "DiscoveryLrSchedule",
    "paper_discovery_config",
    "paper_discovery_settings",
]

Algorithm = Literal["sp-max", "sp-max-reg", "xp-max"]
#: the learning rate of the discovery optimiser over the run: annealed linearly to 0, or held constant
DiscoveryLrSchedule = Literal["linear", "constant"]


@dataclass(frozen=True, kw_only=True)
class DeepDiscoveryConfig:
    """One deep discovery run; variants (the three algorithms) are fields."""

    algorithm: Algorithm = "sp-max"
    candidates: int = 8  # L trained together
    top: int = 4  # l kept
    action_set: str = "transpositions"  # tabular: or "permutations"
    lambda1: float = (
        0.35  # sp-max-reg: probability of a composed rollout, in [0, 1) (the official code's 0.35)
    )
    lambda2: float = 0.01  # sp-max-reg: weight of E_o ||o - phi(phi(o))||^2
    earlier: str | None = None  # sp-max-reg: a previous discovery.json (default: run sp-max first)
    num_envs: int = 128
    num_steps: int = 32
    total_env_steps: int = 400_000  # per candidate
    lr: float = 1e-3
    lr_schedule: DiscoveryLrSchedule = "linear"  # the learning rate over the run (constant: never annealed)
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
            lambda1=between(0, 1, open_hi=True),  # the paper's lambda_1 in [0, 1) (eq. sp-max-with-reg)
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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DeepDiscoveryConfig:
        """The config a ``discovery-config.json`` records; a field it lacks (written before the field was
        added) takes the value that run had: ``lr_schedule`` "linear" (every earlier run annealed)."""
        return cls(**{**FILLED_IN, **data})


#: the fields a config written before them lacks, with the value such a run used
FILLED_IN: dict[str, Any] = {"lr_schedule": "linear"}


#: sizes that work on tabular pools (the toy game and three-lever in ~10-20 s on one CPU thread); the
#: dataclass defaults are for Hanabi-sized nets. ``ers-deep discover`` uses these on tabular pools.
TABULAR_SETTINGS: dict[str, Any] = {"num_envs": 256, "num_steps": 4, "lr": 0.01, "total_env_steps": 300_000}


#: the paper's discovery settings per env (Appendix A, "Experimental Setup"); Hanabi's ``num_envs`` is per
#: training policy ("1024 environments per pretrained policy"), multiplied out by ``paper_discovery_settings``
PAPER_DISCOVERY: dict[str, dict[str, Any]] = {
    "hanabi": {
        "num_envs": 1024,  # per pretrained policy
        "num_steps": 128,
        "total_env_steps": 2_250_000_000,  # "each inner loop ... for 2.25e9 timesteps"
        "lr": 1e-5,
        "lr_schedule": "linear",
        "lambda1": 0.65,
        "lambda2": 2.5e-9,
    },
    "overcooked-v2": {
        "num_envs": 256,
        "num_steps": 256,
        "total_env_steps": 150_000_000,  # "each inner loop of Algorithm 3 for 1.5e8 timesteps"
        "lr": 1e-5,  # the paper's text; the official code's config has 2.5e-5
        "lr_schedule": "constant",  # "with no annealing"
    },
}

#: the official Hanabi config's pretrained policies (6 x 1024 = 6,144 games)
OFFICIAL_POLICIES = 6


def paper_discovery_settings(env: str, policies: int = OFFICIAL_POLICIES) -> dict[str, Any]:
    """The paper's discovery fields for ``env`` (``hanabi`` or ``overcooked-v2``) when phi is trained on
    ``policies`` pool policies (Hanabi: 1024 games each; Overcooked V2's 256 games are for the whole run).
    ``UsageError`` for any other env: the paper's tabular discovery is an exhaustive search."""
    if env not in PAPER_DISCOVERY:
        raise UsageError(
            f"the paper gives discovery hyper-parameters for {' and '.join(PAPER_DISCOVERY)} only, not "
            f"{env!r} (its three-lever discovery searches permutations exhaustively: ers-exact discover)"
        )
    if isinstance(policies, bool) or not isinstance(policies, int) or policies < 1:
        raise UsageError(f"policies = {policies!r}: give the number of training policies, an integer >= 1")
    out = dict(PAPER_DISCOVERY[env])
    if env == "hanabi":
        out["num_envs"] *= policies
    return out


def paper_discovery_config(
    env: str, *, policies: int = OFFICIAL_POLICIES, **overrides: Any
) -> DeepDiscoveryConfig:
    """The paper's discovery run on ``env`` (``paper_discovery_settings``), with ``overrides``. The algorithm
    stays the caller's (default sp-max): the paper ran Algorithm 2 (sp-max-reg) on Hanabi and Algorithm 3
    (xp-max) on Overcooked V2. The entropy coefficient stays the pool's (``alpha`` None): the appendix's
    "temperature alpha = 1 (Hanabi), 1.1 (Overcooked V2) for Boltzmann exploration" divides the logits in the
    official code (whose entropy coefficient is 0.01, the pool's), which ers does not do."""
    return DeepDiscoveryConfig(**{**paper_discovery_settings(env, policies), **overrides})
