"""The population protocol's configuration (the paper's Table 1 and Table 2 experiments), one frozen dataclass.

P agents per population; each ER agent trains k self-play seeds (its pool: the first half trains the
symmetries, the rest is held out), learns ``candidates`` symmetries and keeps l (``top``), then trains m OP seeds with
them and deploys one by ``select_by`` (``ers_exact.deployment``, the same field as ers-exact's ``PopulationConfig``):
the paper's best self-play return argmax_k J(pi_{i,k}) by default, or the best OP score (pool.json's
``other_play``: the per-seat draw). The OP-MDP population trains m OP seeds per agent with the env's
Dec-POMDP symmetries and deploys by the same rule; the IPPO population deploys the best self-play seed of each
agent's pool under either rule (it has no OP score). The paper's Hanabi scale:
P = 5, k = 6, 64 candidates, l = 11, m = 5, sp-max-reg (``scripts/table1-gpu.sh``); its Overcooked V2 scale
(``grounded_coord_simple``, the CNN + GRU policies): P = 5, k = 12, l = 16 by xp-max (Algorithm 3), m = 3
(``scripts/analyses-gpu.sh``). Every size is a field, so the reduced CPU run and the paper's GPU scale are the
same code path.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ers_deep.discovery import DeepDiscoveryConfig
from ers_deep.envs.hanabi.config import canonical_preset
from ers_deep.nets import NetConfig
from ers_deep.seed_layout import (  # the seed layout's bounds (its docstring)
    MAX_AGENTS,
    MAX_K,
    MAX_M,
    MAX_UNSEEN,
)
from ers_deep.train.config import TrainConfig, paper_config
from ers_deep.train.evaluate import AVERAGES
from ers_exact.deployment import DEFAULT_SELECT_BY, SELECT_BY
from ers_exact.util.deprecation import renamed_fields
from ers_exact.util.options import (
    UsageError,
    at_least,
    between,
    check_fields,
    check_types,
    non_negative,
    one_of,
)

__all__ = ["MAX_AGENTS", "MAX_K", "MAX_M", "MAX_UNSEEN", "PopulationConfig"]


@renamed_fields(l="top")
@dataclass(frozen=True, kw_only=True)
class PopulationConfig:
    """Sizes and budgets of one population experiment (Table 1; Table 2 reuses its pools). ``top`` is the
    paper's l (was ``l``: the old keyword and attribute still work and warn; a ``config.json`` written with
    ``l`` is read through :func:`~ers_exact.util.deprecation.upgrade_keys`)."""

    env: str = "hanabi"  # "hanabi", "overcooked-v2" or "tabular:NAME"
    preset: str = "Hanabi-Very-Small"  # Hanabi
    agents: int = 3  # P, agents per population
    k: int = 4  # self-play seeds per ER agent (its pool)
    # self-play seeds per agent held out of discovery, for Table 2's metrics only (the paper's Pi_unseen): then the
    # agent's k seeds are all its Pi' (the paper's protocol); None: its k seeds split, the first ceil(k / 2) its Pi'
    # and the rest held out (the layout of runs before 2026-12-07)
    unseen: int | None = None
    candidates: int = 8  # symmetries trained per agent
    top: int = 4  # symmetries kept (the paper's l)
    m: int = 1  # OP seeds per agent (the one ``select_by`` picks is deployed)
    select_by: str = DEFAULT_SELECT_BY  # "sp_return" (the paper: argmax_k J(pi_{i,k})) or "op_value"
    algorithm: str = "sp-max"  # discovery algorithm of the ER population
    sp_steps: int = 600_000  # env steps per self-play seed
    op_steps: int = 600_000  # env steps per OP seed
    discovery_steps: int = 300_000  # env steps per candidate symmetry
    num_envs: int = 256
    num_steps: int = 32
    hidden: int = 128  # Hanabi: MLP width; Overcooked V2: dense, GRU and head width
    conv: int = 128  # Overcooked V2: width of the two wide 1x1 convolutions (the official 128)
    minibatches: int | None = (
        None  # PPO minibatches (None: the paper's, at most 2 x num_envs actor sequences)
    )
    lr: float | None = None  # IPPO learning rate (None: the paper's)
    discovery_lr: float = 1e-3
    alpha: float | None = None  # IPPO entropy = temperature (None: the paper's)
    games: int = 500  # cross-play games per pair and seat order
    # cross-play (SP, XP, XP(*), the symmetrised columns) by each policy's most probable legal action, as the
    # official code's cross_play.py plays, where True; False (the default, and every run before 2026-12-07):
    # actions sampled
    greedy: bool = False
    symmetriser: str = (
        "logits"  # XP(*)+MDP / +ER: average "logits" (official code) or "probabilities" (paper)
    )
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "preset", canonical_preset(self.preset))  # an alias is HLE's name
        check_types(self)
        check_fields(
            self,
            agents=between(2, MAX_AGENTS),
            k=between(2, MAX_K),
            candidates=at_least(1),
            top=at_least(1),
            m=between(1, MAX_M),
            select_by=one_of(SELECT_BY),
            algorithm=one_of(("sp-max", "sp-max-reg", "xp-max")),
            sp_steps=at_least(1),
            op_steps=at_least(1),
            discovery_steps=at_least(1),
            num_envs=at_least(1),
            num_steps=at_least(1),
            hidden=at_least(1),
            conv=at_least(1),
            games=at_least(1),
            symmetriser=one_of(AVERAGES),
            seed=non_negative,
        )
        if self.unseen is not None and not 1 <= self.unseen <= MAX_UNSEEN:
            raise UsageError(f"PopulationConfig.unseen = {self.unseen}: choose 1 .. {MAX_UNSEEN} (or None)")
        if self.top > self.candidates:
            raise UsageError(f"PopulationConfig.top = {self.top} is more than candidates = {self.candidates}")
        if self.minibatches is not None and not 1 <= self.minibatches <= 2 * self.num_envs:
            raise UsageError(
                f"PopulationConfig.minibatches = {self.minibatches}: choose 1 .. 2 x num_envs = {2 * self.num_envs}"
            )

    def train_config(self, seeds: tuple[int, ...], steps: int) -> TrainConfig:
        """The IPPO config of ``seeds`` (self-play and OP share it; OP adds its symmetries)."""
        base = paper_config(self.env)
        over: dict[str, Any] = {
            "seeds": seeds,
            "total_env_steps": steps,
            "hanabi_preset": self.preset,
            "device": self.device,
        }
        if base.env_kind != "tabular":
            over |= {
                "num_envs": self.num_envs,
                "num_steps": self.num_steps,
                "minibatches": self.minibatches or min(base.minibatches, 2 * self.num_envs),
                "net": NetConfig(kind=base.net.kind, hidden=self.hidden, conv=self.conv),
            }
        if self.lr is not None:
            over["lr"] = self.lr
        if self.alpha is not None:
            over["alpha"] = self.alpha
        return paper_config(self.env, **over)

    def sp_seeds(self, agent: int) -> tuple[int, ...]:
        return tuple(self.seed * 10_000 + agent * 100 + s for s in range(self.k))

    def unseen_seeds(self, agent: int) -> tuple[int, ...]:
        """Agent ``agent``'s unseen self-play seeds (none where ``unseen`` is None; ``seed_layout``)."""
        return tuple(self.seed * 10_000 + agent * 100 + 90 + s for s in range(self.unseen or 0))

    def op_seeds(self, agent: int, population: str) -> tuple[int, ...]:
        offset = {"mdp": 50, "er": 70}[population]
        return tuple(self.seed * 10_000 + agent * 100 + offset + s for s in range(self.m))

    def discovery_config(self, agent: int, algorithm: str | None = None) -> DeepDiscoveryConfig:
        """Agent ``agent``'s discovery run of ``algorithm`` (default: the population's). Its seed draws the
        candidates' action transpositions and initial maps: sp-max-reg composes with the agent's own sp-max
        symmetries, so it draws from another seed ("another set of random transpositions", Algorithm 2), as
        ``discover`` gives its own earlier sp-max run seed + 1."""
        tabular = not self.env.startswith(("hanabi", "overcooked"))
        algorithm = algorithm or self.algorithm
        offset = 50 if algorithm == "sp-max-reg" else 0  # as op_seeds: apart from every agent's (< 50 agents)
        return DeepDiscoveryConfig(
            algorithm=algorithm,  # type: ignore[arg-type]
            candidates=self.candidates,
            top=self.top,
            total_env_steps=self.discovery_steps,
            num_envs=self.num_envs if not tabular else 256,
            num_steps=self.num_steps if not tabular else 4,
            lr=self.discovery_lr,
            alpha=None,  # the pool's alpha: on three-lever 26/27 kept symmetries exact, against 20/27 at 0
            eval_games=self.games,
            seed=self.seed * 100 + agent + offset,
        )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
