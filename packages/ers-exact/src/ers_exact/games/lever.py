"""The iterated lever game (Treutlein et al. 2021; the paper's Section "Iterated Three-Lever Game").

Two agents pull one of L levers simultaneously for ``rounds`` rounds (the horizon H); each round pays
r_{t+1} = ``match_reward`` if a_t^1 = a_t^2 and ``mismatch_reward`` otherwise, and each agent then
observes its partner's lever: o_{t+1}^1 = a_t^2, o_{t+1}^2 = a_t^1.

Encoding:

* One state ``s`` (|S| = 1, T = 1, b_0 = 1).
* A^i = O^i = (L1, ..., LL), the lever names; observation labels are lever names.
* Joint action a = a^1 * L + a^2; the joint observation after a is o = (a^2, a^1), i.e. index
  a^2 * L + a^1, with probability 1 (U does not depend on the state).
* R[s, a, s'] = match_reward if a^1 = a^2 else mismatch_reward.
* There is no observation at t = 0 (empty history); the observation emitted after the last round is
  never acted upon.

The paper states the reward both as "+1 for a match and -1 otherwise" and as r = 1{a^1 = a^2}; the
defaults here follow the latter (1 / 0), and both are a keyword away. With L = 3, rounds = 2 and reward
1{a^1 = a^2}, the optimal other-play policy (uniform lever, then repeat on a match or switch to the
unique unused lever) scores 4/3.
"""

from __future__ import annotations

import numpy as np

from ers_exact.model.game import Game, GameError, make_game

__all__ = ["lever_game", "lever_names"]

_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}


def lever_names(levers: int) -> tuple[str, ...]:
    """The labels of the L levers, used for both actions and observations: ``("L1", ..., "LL")``."""
    return tuple(f"L{k + 1}" for k in range(levers))


def lever_game(
    levers: int = 3,
    rounds: int = 2,
    match_reward: float = 1.0,
    mismatch_reward: float = 0.0,
    discount: float = 1.0,
) -> Game:
    """The iterated L-lever coordination game as a :class:`Game`.

    Args:
        levers: L = |A^i| = |O^i|, the number of levers (3 for the paper's game, 2 for its failure case).
        rounds: H, the number of rounds (the paper plays 2).
        match_reward: reward when a^1 = a^2.
        mismatch_reward: reward when a^1 != a^2.
        discount: gamma.

    The name is ``"<L in words>-lever"`` (``three-lever``, ``two-lever``, ...), the registry's key for
    L = 3 and L = 2.
    """
    if isinstance(levers, bool) or not isinstance(levers, (int, np.integer)) or levers < 1:
        raise GameError(f"levers must be an integer >= 1, got {levers!r}")
    L = int(levers)
    names = lever_names(L)
    n_ja = L * L

    transition = np.ones((1, n_ja, 1))  # [S, A, S]
    reward = np.full((1, n_ja, 1), float(mismatch_reward))  # [S, A, S]
    observation = np.zeros((n_ja, 1, n_ja))  # [A, S, O]
    for a1 in range(L):
        for a2 in range(L):
            ja = a1 * L + a2
            if a1 == a2:
                reward[0, ja, 0] = float(match_reward)
            observation[ja, 0, a2 * L + a1] = 1.0  # o^1 = a^2, o^2 = a^1

    label = f"{_NUMBER_WORDS.get(L, str(L))}-lever"
    return make_game(
        name=label,
        states=("s",),
        actions=(names, names),
        observations=(names, names),
        transition=transition,
        observation=observation,
        reward=reward,
        initial_belief=np.ones(1),
        horizon=rounds,
        discount=discount,
        description=(
            f"Iterated {L}-lever game (Treutlein et al. 2021): {rounds} rounds, reward {match_reward:g} "
            f"on a match and {mismatch_reward:g} otherwise; each agent sees its partner's last lever."
        ),
    )
