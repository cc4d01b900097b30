"""The game: a finite, frozen, validated Dec-POMDP spec (S, n, A^i, O^i, T, R, U^i, H, gamma).

Joint actions and joint observations are flat indices in row-major order with the **last agent
varying fastest** (the .dpomdp convention): for n = 2, ``a = a^1 * |A^2| + a^2``.

Arrays (all float64, read-only after construction):

* ``transition``      T[s, a, s']  = T(s' | s, a)                      # [S, A, S]
* ``observation``     U[a, s', o]  = U(o | s', a), o a joint observation  # [A, S, O]
* ``reward``          R[s, a, s']  = R(s, a, s')                        # [S, A, S]
  The paper's R(s_{t+1}, a_t) is R[s, a, s'] = R(s', a) for every s; the .dpomdp file's R(s, a) is
  R[s, a, s'] = R(s, a) for every s'. Both are exact special cases.
* ``initial_belief``  b_0[s]                                           # [S]
* ``legal_actions``   optional, per agent a bool array [1 + |O^i|, |A^i|]: row 0 is the legal set of the
  empty history (t = 0), row 1 + o the legal set of every history whose last observation is o. This is
  the paper's A^i(tau^i) restricted to depend on the last local observation.

Validation raises :class:`GameError` naming the offending entry (also a state name, or one agent's action or
observation name, given twice). Nothing is renormalised.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import cast

import numpy as np

from ers_exact.util.errors import InputError

__all__ = ["REWARD_TO_GO_LIMIT", "ROW_SUM_TOL", "Game", "GameError", "check_game", "make_game"]

ROW_SUM_TOL = 1e-9
#: max |R| * H above this is refused (returns, Q-values and their interval enclosures must stay finite)
REWARD_TO_GO_LIMIT = 1e100


class GameError(InputError, ValueError):
    """A game spec is malformed; the message names the offending entry."""


def _frozen(x: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    arr: np.ndarray = np.array(x, dtype=dtype, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Game:
    """A finite Dec-POMDP. Build with :func:`make_game` or the constructor; validated on construction."""

    name: str
    state_names: tuple[str, ...]
    action_names: tuple[tuple[str, ...], ...]
    observation_names: tuple[tuple[str, ...], ...]
    transition: np.ndarray
    observation: np.ndarray
    reward: np.ndarray
    initial_belief: np.ndarray
    horizon: int
    discount: float = 1.0
    legal_actions: tuple[np.ndarray, ...] | None = None
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "state_names", tuple(str(s) for s in self.state_names))
        set_(self, "action_names", tuple(tuple(str(a) for a in acts) for acts in self.action_names))
        set_(self, "observation_names", tuple(tuple(str(o) for o in obs) for obs in self.observation_names))
        for name in ("transition", "observation", "reward", "initial_belief"):
            set_(self, name, _frozen(getattr(self, name)))
        if self.legal_actions is not None:
            set_(self, "legal_actions", tuple(_frozen(m, bool) for m in self.legal_actions))
        set_(self, "discount", float(self.discount))
        _validate(self)

    # ----- sizes (derived, never stored) -----
    @property
    def n_agents(self) -> int:
        return len(self.action_names)

    @property
    def n_states(self) -> int:
        return len(self.state_names)

    @property
    def n_actions(self) -> tuple[int, ...]:
        return tuple(len(a) for a in self.action_names)

    @property
    def n_observations(self) -> tuple[int, ...]:
        return tuple(len(o) for o in self.observation_names)

    @property
    def n_joint_actions(self) -> int:
        return math.prod(self.n_actions)

    @property
    def n_joint_observations(self) -> int:
        return math.prod(self.n_observations)

    @cached_property
    def joint_actions(self) -> np.ndarray:
        """Table [A, n]: row ``a`` holds the local actions of joint action ``a``."""
        return _index_table(self.n_actions)

    @cached_property
    def joint_observations(self) -> np.ndarray:
        """Table [O, n]: row ``o`` holds the local observations of joint observation ``o``."""
        return _index_table(self.n_observations)

    @cached_property
    def expected_reward(self) -> np.ndarray:
        """E[R | s, a] = sum_s' T(s'|s,a) R(s,a,s').  # [S, A]"""
        return np.einsum("sat,sat->sa", self.transition, self.reward)

    def legal_mask(self, agent: int) -> np.ndarray:
        """Legal-action table of one agent, [1 + |O^i|, |A^i|] (all True when the game has none)."""
        if self.legal_actions is None:
            return np.ones((1 + self.n_observations[agent], self.n_actions[agent]), dtype=bool)
        return self.legal_actions[agent]

    def with_horizon(self, horizon: int) -> Game:
        """The same game with another horizon H."""
        return replace(self, horizon=_plain_horizon(horizon))

    def with_discount(self, discount: float) -> Game:
        """The same game with another discount gamma."""
        return replace(self, discount=float(discount))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Game):
            return NotImplemented
        mine, theirs = self.legal_actions, other.legal_actions
        same_legal = (mine is None and theirs is None) or (
            mine is not None
            and theirs is not None
            and all(np.array_equal(a, b) for a, b in zip(mine, theirs))
        )
        return (
            self.state_names == other.state_names
            and self.action_names == other.action_names
            and self.observation_names == other.observation_names
            and self.horizon == other.horizon
            and self.discount == other.discount
            and same_legal
            and all(
                np.array_equal(getattr(self, k), getattr(other, k))
                for k in ("transition", "observation", "reward", "initial_belief")
            )
        )

    __hash__ = object.__hash__


def check_game(game: object) -> Game:
    """``game`` itself when it is a :class:`Game`; else a ``TypeError`` naming the ``game`` argument (a game's
    name or its enumerated :class:`~ers_exact.model.histories.HistoryTree` there failed on a missing
    attribute)."""
    if isinstance(game, Game):
        return game
    hint = (
        ": pass tree.game"
        if hasattr(game, "layers") and isinstance(getattr(game, "game", None), Game)
        else ""
    )
    raise TypeError(
        f"game must be a Game (get_game(name), make_game, read_dpomdp), got {type(game).__name__}{hint}"
    )


def _index_table(sizes: Sequence[int]) -> np.ndarray:
    grids = np.meshgrid(*[np.arange(k) for k in sizes], indexing="ij")
    table = np.stack([g.reshape(-1) for g in grids], axis=1).astype(np.int64)
    table.setflags(write=False)
    return table


def _check_stochastic(name: str, arr: np.ndarray, labels: Sequence[str]) -> None:
    """Every row along the last axis must be non-negative and sum to 1 within ROW_SUM_TOL."""
    if not np.all(np.isfinite(arr)):
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise GameError(f"{name}{_fmt(idx, labels)} is not finite")
    if np.any(arr < 0):
        idx = tuple(int(i) for i in np.argwhere(arr < 0)[0])
        raise GameError(f"{name}{_fmt(idx, labels)} = {float(arr[idx])} is negative")
    sums = arr.sum(axis=-1)
    bad = np.abs(sums - 1.0) > ROW_SUM_TOL
    if np.any(bad):
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise GameError(
            f"{name}{_fmt(idx, labels[:-1])} sums to {float(sums[idx])!r}, not 1 (tolerance {ROW_SUM_TOL}); "
            "ers never renormalises silently"
        )


def _fmt(idx: tuple[int, ...], labels: Sequence[str]) -> str:
    if not idx:
        return ""
    return "[" + ", ".join(f"{lab}={i}" for lab, i in zip(labels, idx)) + "]"


def _check_unique(names: Sequence[str], what: str) -> None:
    """Names key policies ({action name: probability}) and reports, so a duplicate would merge two entries."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise GameError(f"{what} has the name {name!r} twice; names must be unique")
        seen.add(name)


def _validate(g: Game) -> None:
    n = g.n_agents
    if n < 1:
        raise GameError("a game needs at least one agent (n >= 1)")
    if len(g.observation_names) != n:
        raise GameError(f"observation_names has {len(g.observation_names)} agents, action_names has {n}")
    if g.n_states < 1:
        raise GameError("a game needs at least one state")
    _check_unique(g.state_names, "state_names")
    for i, (acts, obs) in enumerate(zip(g.action_names, g.observation_names)):
        if len(acts) < 1:
            raise GameError(f"agent {i} has an empty action set")
        if len(obs) < 1:
            raise GameError(f"agent {i} has an empty observation set")
        _check_unique(acts, f"action_names[{i}] (agent {i})")
        _check_unique(obs, f"observation_names[{i}] (agent {i})")
    if isinstance(g.horizon, bool) or not isinstance(g.horizon, (int, np.integer)) or g.horizon < 1:
        raise GameError(f"horizon H must be an integer >= 1, got {g.horizon!r}")
    if not 0.0 <= g.discount <= 1.0:
        raise GameError(f"discount gamma must lie in [0, 1], got {g.discount}")
    S, A, O = g.n_states, g.n_joint_actions, g.n_joint_observations
    expected = {
        "transition": (S, A, S),
        "observation": (A, S, O),
        "reward": (S, A, S),
        "initial_belief": (S,),
    }
    for name, shape in expected.items():
        got = getattr(g, name).shape
        if got != shape:
            raise GameError(f"{name} has shape {got}, expected {shape} (S={S}, A={A} joint, O={O} joint)")
    _check_stochastic("transition", g.transition, ("s", "a", "s'"))
    _check_stochastic("observation", g.observation, ("a", "s'", "o"))
    _check_stochastic("initial_belief", g.initial_belief, ("s",))
    if not np.all(np.isfinite(g.reward)):
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(g.reward))[0])
        raise GameError(f"reward{_fmt(idx, ('s', 'a', 's_next'))} is not finite")
    top = float(np.abs(g.reward).max(initial=0.0))
    if top * g.horizon > REWARD_TO_GO_LIMIT:
        idx = tuple(int(i) for i in np.unravel_index(int(np.abs(g.reward).argmax()), g.reward.shape))
        raise GameError(
            f"reward{_fmt(idx, ('s', 'a', 's_next'))} = {top:.3g}: over H = {g.horizon} steps returns could "
            f"reach {top * g.horizon:.3g}, beyond the {REWARD_TO_GO_LIMIT:.0e} that values, logits and their "
            "intervals are computed within; rescale the rewards"
        )
    if g.legal_actions is not None:
        if len(g.legal_actions) != n:
            raise GameError(f"legal_actions has {len(g.legal_actions)} entries, expected one per agent ({n})")
        for i, mask in enumerate(g.legal_actions):
            shape = (1 + g.n_observations[i], g.n_actions[i])
            if mask.shape != shape:
                raise GameError(f"legal_actions[{i}] has shape {mask.shape}, expected {shape}")
            empty = np.flatnonzero(~mask.any(axis=1))
            if empty.size:
                row = int(empty[0])
                where = (
                    "the empty history" if row == 0 else f"observation {g.observation_names[i][row - 1]!r}"
                )
                raise GameError(f"agent {i} has an empty legal action set after {where}")


def _plain_horizon(horizon: object) -> int:
    """A numpy integer horizon as a Python int; anything else as given, for ``Game``'s check to refuse (a
    float or bool is never truncated into another game's H)."""
    return int(horizon) if isinstance(horizon, np.integer) else cast(int, horizon)


def make_game(
    name: str,
    states: Sequence[str],
    actions: Sequence[Sequence[str]],
    observations: Sequence[Sequence[str]],
    transition: np.ndarray,
    observation: np.ndarray,
    reward: np.ndarray,
    initial_belief: np.ndarray,
    horizon: int,
    discount: float = 1.0,
    legal_actions: Sequence[np.ndarray] | None = None,
    description: str = "",
) -> Game:
    """Build a :class:`Game`. ``reward`` may be R[s, a, s'] (3-d) or the .dpomdp R[s, a] (2-d, broadcast)."""
    reward = np.asarray(reward, dtype=np.float64)
    if reward.ndim == 2:
        reward = np.repeat(reward[:, :, None], len(states), axis=2)
    return Game(
        name=name,
        state_names=tuple(states),
        action_names=tuple(tuple(a) for a in actions),
        observation_names=tuple(tuple(o) for o in observations),
        transition=np.asarray(transition),
        observation=np.asarray(observation),
        reward=reward,
        initial_belief=np.asarray(initial_belief),
        horizon=_plain_horizon(horizon),
        discount=discount,
        legal_actions=None if legal_actions is None else tuple(legal_actions),
        description=description,
    )
