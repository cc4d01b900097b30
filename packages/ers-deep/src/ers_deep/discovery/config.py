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

import contextlib
import contextvars
import dataclasses
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
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
from ers_exact.util.output import read_json

__all__ = [
    "PAPER_DISCOVERY",
    "TABULAR_SETTINGS",
    "Algorithm",
    "DeepDiscoveryConfig",
    "DiscoveryLrSchedule",
    "paper_discovery_config",
    "paper_discovery_settings",
    "read_saved_config",
    "training_count",
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
            # the paper's lambda_1 in [0, 1) (eq. sp-max-with-reg); a saved run's config: [0, 1], as accepted
            # before the paper's range was enforced (``from_json``)
            lambda1=between(0, 1, open_hi=not _SAVED.get()),
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
    def from_json(cls, data: dict[str, Any], *, warn: bool = True) -> DeepDiscoveryConfig:
        """The config a ``discovery-config.json`` records; a field it lacks (written before the field was
        added) takes the value that run had: ``lr_schedule`` "linear" (every earlier run annealed). lambda_1 = 1,
        accepted before the paper's range [0, 1) was enforced, is kept (the run continues as it started), with
        one warning line (``warn``) saying it is outside the paper's range."""
        with _saved():
            config = cls(**{**FILLED_IN, **data})
        if warn and not 0 <= config.lambda1 < 1:
            warnings.warn(
                f"discovery-config.json: lambda1 = {config.lambda1!r} is outside the paper's range [0, 1) "
                "(accepted before the range was enforced); the run continues with it",
                UserWarning,
                stacklevel=2,
            )
        return config

    def replace(self, **changes: Any) -> DeepDiscoveryConfig:
        """``dataclasses.replace`` that keeps a saved run's lambda_1 = 1 (``from_json``): the sp-max run an
        sp-max-reg run starts with carries the parent's fields."""
        with _saved(self.lambda1 == 1):
            return dataclasses.replace(self, **changes)


#: whether a config being built is a saved run's (``from_json``): lambda_1 may then be 1
_SAVED: contextvars.ContextVar[bool] = contextvars.ContextVar("saved_discovery_config", default=False)


@contextlib.contextmanager
def _saved(on: bool = True) -> Iterator[None]:
    token = _SAVED.set(on)
    try:
        yield
    finally:
        _SAVED.reset(token)


#: the fields a config written before them lacks, with the value such a run used
FILLED_IN: dict[str, Any] = {"lr_schedule": "linear"}


def read_saved_config(out: str | Path, *, warn: bool = True) -> DeepDiscoveryConfig | None:
    """The config a discovery run in ``out`` was started with (``OUT/discovery-config.json``, read by
    ``DeepDiscoveryConfig.from_json``: fields added since filled in, a saved lambda_1 = 1 kept), or None when
    the run has not written it. The one reader of a saved config (``discover``'s resume check, the CLI's
    ``--resume``)."""
    path = Path(out) / "discovery-config.json"
    if not path.is_file():
        return None
    return DeepDiscoveryConfig.from_json(read_json(path, "the config of a discovery run"), warn=warn)


def training_count(policies: int) -> int:
    """How many of a pool's ``policies`` phi trains on when no held-out pool is given: the first
    ceil(n / 2) (Algorithms 1-3's Pi'); the rest are held out to score and keep candidates (``discover``)."""
    return (policies + 1) // 2


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
    official code (whose entropy coefficient is 0.01, the pool's), which ers does not do. The parameterisation
    of phi_A is not the paper's on Overcooked V2: there phi_{A,theta} "is a learned affine map" (Appendix A),
    while ers keeps each candidate's phi_A fixed (``rounding.action_candidates``: the identity on Overcooked
    V2, one transposition on Hanabi, as the paper's "fixed action transposition"); this gives the paper's
    hyper-parameters, not that parameterisation."""
    return DeepDiscoveryConfig(**{**paper_discovery_settings(env, policies), **overrides})
