"""Random small Dec-POMDPs and policies, as plain functions (for benchmarks) and Hypothesis strategies.

Games: 1-3 agents, 1-3 states, 1-3 actions / observations per agent, H 1-3, gamma in {1, 0.9}; T, U and
b_0 rows are Dirichlet draws with some entries set to exactly zero (so impossible histories get pruned),
rewards on the grid {-1, 0, 1, 2} or uniform floats, optional random legal-action masks with no empty row.

The Hypothesis strategies draw a compact :class:`GameSpec` / :class:`PolicySpec` (structure plus a numpy
seed) rather than a :class:`~ers_exact.model.game.Game`, so a failing example prints as a one-line, pasteable
reproduction: ``GameSpec(...).build()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from ers_exact.model.game import Game, make_game
from ers_exact.model.histories import HistoryTree

__all__ = [
    "POLICY_KINDS",
    "GameSpec",
    "PolicySpec",
    "deterministic_policies",
    "game_specs",
    "policy_specs",
    "random_game",
    "random_policy",
    "tiny_game_specs",
]

REWARD_GRID = (-1.0, 0.0, 1.0, 2.0)
POLICY_KINDS = ("uniform", "full", "boltzmann", "sparse", "deterministic")
FULL_SUPPORT_KINDS = ("uniform", "full", "boltzmann")


def _random_rows(rng: np.random.Generator, shape: tuple[int, ...], sparsity: float) -> np.ndarray:
    """Stochastic rows along the last axis: Dirichlet(1), then each entry zeroed with probability
    ``sparsity`` (one random entry always survives; sparsity >= 1 gives one-hot rows), renormalised."""
    k = shape[-1]
    rows = rng.dirichlet(np.ones(k), size=shape[:-1]) if k > 1 else np.ones(shape)
    rows = rows.reshape(-1, k)
    keep = rng.random(rows.shape) >= sparsity
    keep[np.arange(rows.shape[0]), rng.integers(0, k, size=rows.shape[0])] = True
    rows = np.where(keep, rows, 0.0)
    rows /= rows.sum(axis=1, keepdims=True)
    return rows.reshape(shape)


def _as_tuple(x: int | Sequence[int], n: int) -> tuple[int, ...]:
    return tuple(int(v) for v in x) if isinstance(x, (tuple, list)) else (int(x),) * n


def random_game(
    rng: np.random.Generator,
    n_agents: int = 2,
    n_states: int = 2,
    n_actions: int | Sequence[int] = 2,
    n_observations: int | Sequence[int] = 2,
    horizon: int = 2,
    discount: float = 1.0,
    sparsity: float = 0.3,
    reward_kind: str = "grid",
    legal: bool = False,
    name: str = "random",
) -> Game:
    """A random Dec-POMDP (usable without Hypothesis).

    Args:
        rng: numpy generator; the game is a deterministic function of its state and the other arguments.
        n_agents, n_states: sizes.
        n_actions, n_observations: per-agent sizes, or one int for every agent.
        horizon, discount: H and gamma.
        sparsity: probability that an entry of a T / U / b_0 row is set to exactly zero (>= 1: one-hot).
        reward_kind: ``"grid"`` (R on {-1, 0, 1, 2}) or ``"float"`` (uniform on [-1, 2]).
        legal: draw random legal-action masks (every row keeps at least one action).
    """
    acts = _as_tuple(n_actions, n_agents)
    obs = _as_tuple(n_observations, n_agents)
    S, A, O = n_states, int(np.prod(acts)), int(np.prod(obs))
    transition = _random_rows(rng, (S, A, S), sparsity)
    observation = _random_rows(rng, (A, S, O), sparsity)
    initial_belief = _random_rows(rng, (S,), sparsity)
    if reward_kind == "grid":
        reward = rng.choice(np.array(REWARD_GRID), size=(S, A, S))
    elif reward_kind == "float":
        reward = rng.uniform(-1.0, 2.0, size=(S, A, S))
    else:
        raise ValueError(f"unknown reward_kind {reward_kind!r}")
    legal_actions = None
    if legal:
        legal_actions = []
        for k_a, k_o in zip(acts, obs):
            mask = rng.random((1 + k_o, k_a)) < 0.6
            mask[np.arange(1 + k_o), rng.integers(0, k_a, size=1 + k_o)] = True
            legal_actions.append(mask)
    return make_game(
        name=name,
        states=[f"s{k}" for k in range(S)],
        actions=[[f"a{k}" for k in range(k_a)] for k_a in acts],
        observations=[[f"o{k}" for k in range(k_o)] for k_o in obs],
        transition=transition,
        observation=observation,
        reward=reward,
        initial_belief=initial_belief,
        horizon=horizon,
        discount=discount,
        legal_actions=legal_actions,
    )


def random_policy(rng: np.random.Generator, tree: HistoryTree, kind: str = "full") -> tuple[np.ndarray, ...]:
    """A random joint policy on the tree's histories, [K_i, |A^i|] per agent, mass only on legal actions.

    kinds: ``uniform``; ``full`` (Dirichlet(1) over the legal actions); ``boltzmann`` (softmax of logits
    ~ N(0, 3^2) over the legal actions); ``sparse`` (Dirichlet over a random non-empty subset of the legal
    actions, so some probabilities are exactly zero); ``deterministic`` (one legal action per history).
    The first three have full support over the legal actions."""
    out = []
    for hist in tree.local:
        legal = hist.legal
        K, n_a = legal.shape
        if kind == "uniform":
            pol = legal / legal.sum(axis=1, keepdims=True)
        elif kind == "full":
            pol = np.where(legal, rng.gamma(1.0, size=(K, n_a)) + 1e-3, 0.0)
            pol /= pol.sum(axis=1, keepdims=True)
        elif kind == "boltzmann":
            logits = np.where(legal, rng.normal(0.0, 3.0, size=(K, n_a)), -np.inf)
            logits -= logits.max(axis=1, keepdims=True)
            pol = np.exp(logits)
            pol /= pol.sum(axis=1, keepdims=True)
        elif kind in ("sparse", "deterministic"):
            pol = np.zeros((K, n_a))
            for k in range(K):
                choices = np.flatnonzero(legal[k])
                if kind == "deterministic":
                    pol[k, rng.choice(choices)] = 1.0
                    continue
                keep = choices[rng.random(len(choices)) < 0.5]
                if keep.size == 0:
                    keep = np.array([rng.choice(choices)])
                pol[k, keep] = rng.dirichlet(np.ones(len(keep)))
        else:
            raise ValueError(f"unknown policy kind {kind!r}")
        out.append(pol)
    return tuple(out)


def deterministic_policies(tree: HistoryTree, agent: int) -> np.ndarray:
    """All deterministic policies of one agent over its legal actions, stacked as [P, K_i, |A^i|]."""
    hist = tree.local[agent]
    choices = [np.flatnonzero(hist.legal[k]) for k in range(len(hist))]
    count = int(np.prod([len(c) for c in choices]))
    out = np.zeros((count, len(hist), hist.legal.shape[1]))
    # mixed-radix enumeration of the choice at every history
    idx = np.arange(count)
    for k, c in enumerate(choices):
        out[np.arange(count), k, c[idx % len(c)]] = 1.0
        idx = idx // len(c)
    return out


# ----- Hypothesis -----
@dataclass(frozen=True)
class GameSpec:
    """Structure and seed of a random game; ``build()`` gives the :class:`Game`."""

    n_agents: int
    n_states: int
    n_actions: tuple[int, ...]
    n_observations: tuple[int, ...]
    horizon: int
    discount: float
    sparsity: float
    reward_kind: str
    legal: bool
    seed: int

    def build(self) -> Game:
        return random_game(
            np.random.default_rng(self.seed),
            n_agents=self.n_agents,
            n_states=self.n_states,
            n_actions=self.n_actions,
            n_observations=self.n_observations,
            horizon=self.horizon,
            discount=self.discount,
            sparsity=self.sparsity,
            reward_kind=self.reward_kind,
            legal=self.legal,
            name=f"random-{self.seed}",
        )


@dataclass(frozen=True)
class PolicySpec:
    """Kind and seed of a random policy; ``build(tree)`` gives the per-agent arrays."""

    kind: str
    seed: int

    def build(self, tree: HistoryTree) -> tuple[np.ndarray, ...]:
        return random_policy(np.random.default_rng(self.seed), tree, self.kind)


def _node_bound(n_actions: Sequence[int], n_obs: Sequence[int], horizon: int) -> int:
    branching = int(np.prod(n_actions)) * int(np.prod(n_obs))
    return sum(branching**t for t in range(horizon))


def _sizes(top: int) -> st.SearchStrategy[int]:
    """1..top, roughly uniform (st.integers leans to small values, which makes most games trivial),
    shrinking towards 2 (the smallest size with any structure), then 1."""
    return st.sampled_from([k for k in (2, 3) if k <= top] + list(range(4, top + 1)) + [1])


@st.composite
def game_specs(
    draw: st.DrawFn,
    max_agents: int = 3,
    max_states: int = 3,
    max_actions: int = 3,
    max_observations: int = 3,
    max_horizon: int = 3,
    max_nodes: int = 400,
) -> GameSpec:
    """Random small games. The horizon is drawn first; then the per-agent sizes, which are cut back (largest first) until the joint
    history tree has at most ``max_nodes`` nodes (upper bound sum_t (|A||O|)^t), keeping the slow
    reference at a few milliseconds."""
    horizon = draw(_sizes(max_horizon))
    n = draw(_sizes(max_agents))
    S = draw(_sizes(max_states))
    acts = [draw(_sizes(max_actions)) for _ in range(n)]
    obs = [draw(_sizes(max_observations)) for _ in range(n)]
    while _node_bound(acts, obs, horizon) > max_nodes:
        sizes = acts + obs
        k = max(range(len(sizes)), key=lambda j: sizes[j])
        if sizes[k] == 1:  # only the horizon is left to cut
            horizon -= 1
            continue
        if k < n:
            acts[k] -= 1
        else:
            obs[k - n] -= 1
    return GameSpec(
        n_agents=n,
        n_states=S,
        n_actions=tuple(acts),
        n_observations=tuple(obs),
        horizon=horizon,
        discount=draw(st.sampled_from([1.0, 0.9])),
        sparsity=draw(st.sampled_from([0.3, 0.0, 0.6, 1.0])),
        reward_kind=draw(st.sampled_from(["grid", "float"])),
        legal=draw(st.booleans()),
        seed=draw(st.integers(0, 2**32 - 1)),
    )


def tiny_game_specs(max_policies: int = 2187) -> st.SearchStrategy[GameSpec]:
    """Games small enough that every deterministic policy of one agent can be enumerated (1-2 agents,
    H <= 2, <= 2 observations): at most ``max_policies`` deterministic policies per agent (upper bound)."""

    def small_enough(spec: GameSpec) -> bool:
        for k_a, k_o in zip(spec.n_actions, spec.n_observations):
            histories = sum((k_a * k_o) ** t for t in range(spec.horizon))
            if k_a**histories > max_policies:
                return False
        return True

    return game_specs(max_agents=2, max_observations=2, max_horizon=2).filter(small_enough)


def policy_specs(kinds: Sequence[str] = POLICY_KINDS) -> st.SearchStrategy[PolicySpec]:
    """Random policy kinds and seeds."""
    return st.builds(PolicySpec, kind=st.sampled_from(tuple(kinds)), seed=st.integers(0, 2**32 - 1))
