"""Transformations phi = (phi_S, phi_A^i, phi_O^i) in Psi as permutation arrays, and their action on
games, local histories and policies (paper eq. symm-equiv: phi(pi)^i(phi(a) | phi(tau)) = pi^i(a | tau)).

JSON form (image of index k at position k):
``{"states": [...], "actions": [[...], ...], "observations": [[...], ...]}``.

Convention (DESIGN.md): a policy is defined on possible histories only, so a transformation acts on a
policy only when it is *admissible*: it maps possible histories onto possible histories and legal actions
onto legal actions. Inadmissible ones raise :class:`InadmissibleError`; :func:`is_admissible` reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ers_exact.model.game import Game
from ers_exact.model.histories import HistoryTree
from ers_exact.model.values import Policy, check_policy
from ers_exact.util.errors import InputError
from ers_exact.util.fields import permutation
from ers_exact.util.records import read_record

__all__ = [
    "InadmissibleError",
    "Transformation",
    "apply_to_log_policy",
    "apply_to_policy",
    "distinct_on_policies",
    "history_map",
    "is_admissible",
    "is_decpomdp_symmetry",
    "with_images",
]


class InadmissibleError(InputError, ValueError):
    """phi maps a possible history to an impossible one, or a legal action to an illegal one."""


@dataclass(frozen=True)
class Transformation:
    """phi in Psi: a permutation of states and, per agent, of local actions and local observations.

    Each permutation is a sequence of integers (Python's or numpy's; the image of index k at position k); a
    bool, a float or a string entry (``"1"``) is a ``TypeError`` naming the argument, a sequence that is not a
    permutation of 0..n-1 a ``ValueError``."""

    states: tuple[int, ...]
    actions: tuple[tuple[int, ...], ...]
    observations: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        for name in ("actions", "observations"):  # a string's characters were read as the agents' lists
            if isinstance(getattr(self, name), str | bytes):
                raise TypeError(f"{name} must be one sequence per agent, not {getattr(self, name)!r}")
        object.__setattr__(self, "states", permutation(self.states, "states (phi_S)"))
        object.__setattr__(
            self,
            "actions",
            tuple(permutation(a, f"actions[{i}] (phi_A^{i})") for i, a in enumerate(self.actions)),
        )
        object.__setattr__(
            self,
            "observations",
            tuple(permutation(o, f"observations[{i}] (phi_O^{i})") for i, o in enumerate(self.observations)),
        )
        if len(self.actions) != len(self.observations):
            raise ValueError("actions and observations must list the same number of agents")

    @classmethod
    def identity(cls, game: Game) -> Transformation:
        """The identity phi of ``game`` (every permutation the identity)."""
        return cls(
            tuple(range(game.n_states)),
            tuple(tuple(range(k)) for k in game.n_actions),
            tuple(tuple(range(k)) for k in game.n_observations),
        )

    @classmethod
    def random(cls, game: Game, rng: np.random.Generator) -> Transformation:
        """A uniformly random element of Psi (states, then each agent's actions, then observations)."""
        return cls(
            tuple(rng.permutation(game.n_states)),
            tuple(tuple(rng.permutation(k)) for k in game.n_actions),
            tuple(tuple(rng.permutation(k)) for k in game.n_observations),
        )

    def check_game(self, game: Game) -> None:
        """Raise ValueError when the permutation sizes do not fit ``game``."""
        sizes = (len(self.states), tuple(map(len, self.actions)), tuple(map(len, self.observations)))
        if sizes != (game.n_states, game.n_actions, game.n_observations):
            raise ValueError(
                f"transformation sizes {sizes} do not fit game {game.name!r} "
                f"{(game.n_states, game.n_actions, game.n_observations)}"
            )

    def compose(self, other: Transformation) -> Transformation:
        """(self o other): apply ``other`` first, then ``self``."""

        def comp(p: Sequence[int], q: Sequence[int]) -> tuple[int, ...]:
            return tuple(p[k] for k in q)

        return Transformation(
            comp(self.states, other.states),
            tuple(comp(p, q) for p, q in zip(self.actions, other.actions)),
            tuple(comp(p, q) for p, q in zip(self.observations, other.observations)),
        )

    def inverse(self) -> Transformation:
        """phi^-1: phi o phi^-1 = phi^-1 o phi = Id."""

        def inv(p: Sequence[int]) -> tuple[int, ...]:
            return tuple(int(v) for v in np.argsort(p))

        return Transformation(
            inv(self.states), tuple(map(inv, self.actions)), tuple(map(inv, self.observations))
        )

    def joint_action_map(self, game: Game) -> np.ndarray:
        """phi_A on joint action indices.  # [A]"""
        return _joint_map(game.joint_actions, self.actions, game.n_actions)

    def joint_observation_map(self, game: Game) -> np.ndarray:
        """phi_O on joint observation indices.  # [O]"""
        return _joint_map(game.joint_observations, self.observations, game.n_observations)

    def apply_to_game(self, game: Game) -> Game:
        """The relabelled game phi(G): T'(phi s' | phi s, phi a) = T(s' | s, a), likewise U, R, b_0."""
        self.check_game(game)
        s, a, o = np.array(self.states), self.joint_action_map(game), self.joint_observation_map(game)
        T = np.empty_like(game.transition)
        T[np.ix_(s, a, s)] = game.transition
        U = np.empty_like(game.observation)
        U[np.ix_(a, s, o)] = game.observation
        R = np.empty_like(game.reward)
        R[np.ix_(s, a, s)] = game.reward
        b = np.empty_like(game.initial_belief)
        b[s] = game.initial_belief
        legal = None
        if game.legal_actions is not None:
            masks = []
            for i, mask in enumerate(game.legal_actions):
                rows = np.concatenate([[0], 1 + np.array(self.observations[i])])
                new = np.empty_like(mask)
                new[np.ix_(rows, np.array(self.actions[i]))] = mask
                masks.append(new)
            legal = tuple(masks)
        return replace(game, transition=T, observation=U, reward=R, initial_belief=b, legal_actions=legal)

    def to_json(self) -> dict[str, Any]:
        """``{"states": [...], "actions": [[...] per agent], "observations": [[...] per agent]}``."""
        return {
            "states": list(self.states),
            "actions": [list(a) for a in self.actions],
            "observations": [list(o) for o in self.observations],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Transformation:
        """The inverse of :meth:`to_json`; a missing key, a mistyped value or a list that is not a permutation
        is a ``RecordError`` (a ValueError) naming the keys it expects."""
        return read_record("Transformation", data, cls._build, ("states", "actions", "observations"))

    @classmethod
    def _build(cls, data: Mapping[str, Any]) -> Transformation:
        return cls(
            tuple(data["states"]),
            tuple(tuple(a) for a in data["actions"]),
            tuple(tuple(o) for o in data["observations"]),
        )


def _joint_map(table: np.ndarray, perms: Sequence[Sequence[int]], sizes: Sequence[int]) -> np.ndarray:
    images = np.stack([np.asarray(p)[table[:, i]] for i, p in enumerate(perms)], axis=1)
    return np.ravel_multi_index(tuple(images.T), tuple(sizes))


def is_decpomdp_symmetry(game: Game, phi: Transformation, atol: float = 1e-12) -> bool:
    """Paper eq. decpomdp-invariance: T, U, R (and b_0, legal sets) unchanged by the relabelling."""
    image = phi.apply_to_game(game)
    same_legal = game.legal_actions is None or all(
        np.array_equal(x, y) for x, y in zip(image.legal_actions or (), game.legal_actions)
    )
    return same_legal and all(
        np.allclose(getattr(image, k), getattr(game, k), atol=atol, rtol=0)
        for k in ("transition", "observation", "reward", "initial_belief")
    )


def history_map(tree: HistoryTree, phi: Transformation, agent: int) -> np.ndarray:
    """Index of phi(tau^i) for every possible local history tau^i of ``agent``; -1 where phi(tau^i) is
    not a possible history.  # [K_i]"""
    phi.check_game(tree.game)
    hist = tree.local[agent]
    n_a, n_o = tree.game.n_actions[agent], tree.game.n_observations[agent]
    act, obs = np.asarray(phi.actions[agent]), np.asarray(phi.observations[agent])
    out = np.full(len(hist), -1, dtype=np.int64)
    out[0] = 0
    for t in range(1, len(hist.offsets) - 1):
        lo, hi = hist.offsets[t], hist.offsets[t + 1]
        plo = hist.offsets[t - 1]
        keys = ((hist.parent[lo:hi] - plo) * n_a + hist.action[lo:hi]) * n_o + hist.observation[lo:hi]
        par = out[hist.parent[lo:hi]]
        img = ((par - plo) * n_a + act[hist.action[lo:hi]]) * n_o + obs[hist.observation[lo:hi]]
        pos = np.clip(np.searchsorted(keys, img), 0, hi - lo - 1)
        ok = (par >= 0) & (keys[pos] == img)
        out[lo:hi] = np.where(ok, lo + pos, -1)
    return out


def distinct_on_policies(tree: HistoryTree, transformations: Iterable[Transformation]) -> int:
    """How many distinct maps of policies the ``transformations`` are: phi(pi) is fixed by each agent's
    history map tau -> phi(tau) and action permutation, so two phi with both equal act alike on every policy.
    (At H = 1 no local history holds an observation: observation permutations then act trivially.)"""
    keys = set()
    for phi in transformations:
        parts = [history_map(tree, phi, i).tobytes() for i in range(tree.game.n_agents)]
        keys.add((tuple(parts), phi.actions))
    return len(keys)


def is_admissible(tree: HistoryTree, phi: Transformation) -> bool:
    """phi maps possible histories onto possible histories and legal actions onto legal actions."""
    for i, hist in enumerate(tree.local):
        hmap = history_map(tree, phi, i)
        if np.any(hmap < 0):
            return False
        if not np.array_equal(hist.legal[hmap][:, np.asarray(phi.actions[i])], hist.legal):
            return False
    return True


def apply_to_policy(tree: HistoryTree, phi: Transformation, policy: Policy) -> tuple[np.ndarray, ...]:
    """phi(pi)^i(phi(a) | phi(tau)) = pi^i(a | tau) for every agent (batched policies allowed)."""
    pols, batched = check_policy(tree, policy)
    out = _relabel(tree, phi, pols, lambda p: p > 0)
    return tuple(out) if batched else tuple(p[0] for p in out)


def apply_to_log_policy(
    tree: HistoryTree, phi: Transformation, log_policy: Sequence[np.ndarray]
) -> tuple[np.ndarray, ...]:
    """log phi(pi) from log pi, per agent [P, K_i, A_i] (-inf on illegal actions): the relabelling of
    :func:`apply_to_policy` on log-probabilities, so that it stays exact where pi underflows (at low
    temperature the logits of a fixed point reach 1e3 and exp of them is 0)."""
    return tuple(_relabel(tree, phi, [np.asarray(lp, float) for lp in log_policy], np.isfinite))


def _relabel(
    tree: HistoryTree,
    phi: Transformation,
    pols: Sequence[np.ndarray],
    present: Callable[[np.ndarray], np.ndarray],
) -> list[np.ndarray]:
    """Each agent's [P, K_i, A_i] array moved to (phi(tau), phi(a)); ``present`` marks the entries of legal
    actions (p > 0, or a finite log p)."""
    out = []
    for i, pol in enumerate(pols):
        hmap = history_map(tree, phi, i)
        if np.any(hmap < 0):
            k = int(np.flatnonzero(hmap < 0)[0])
            raise InadmissibleError(
                f"phi maps agent {i}'s possible history {tree.local[i].as_tuple(k)} to an impossible one"
            )
        new = np.empty_like(pol)
        new[:, hmap[:, None], np.asarray(phi.actions[i])[None, :]] = pol
        if np.any(present(new) & ~tree.local[i].legal[None]):
            raise InadmissibleError(f"phi maps a legal action of agent {i} to an illegal one")
        out.append(new)
    return out


def with_images(
    pool: Sequence[Any],
    group: Iterable[Transformation],
    image: Callable[[Transformation, Any], Any],
    key: Callable[[Any], np.ndarray],
    tol: float = 1e-9,
) -> list[Any]:
    """``pool`` with the images ``image(phi, pi)`` of its points under every element of ``group``, distinct: an
    image is kept where ``key`` (a flat array: its probabilities) differs from every kept point's by more than
    ``tol``. For a group this closes the pool (Dec-POMDP symmetries map Pi*_alpha onto itself)."""
    out = list(pool)
    keys = [key(pi) for pi in out]
    for phi in group:
        for pi in pool:
            img = image(phi, pi)
            k = key(img)
            if all(np.abs(k - g).max() > tol for g in keys):
                out.append(img)
                keys.append(k)
    return out
