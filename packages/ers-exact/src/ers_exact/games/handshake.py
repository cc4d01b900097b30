"""The one-shot handshake / fist-bump coordination game (the paper's Figure 1).

Two agents each choose ``handshake`` or ``fist-bump`` once (H = 1); the common reward is
``match_reward`` when they choose alike and ``mismatch_reward`` otherwise (defaults 1 / 0; the figure's
caption uses +1 / -1). One state ``s`` and one dummy observation ``none`` per agent, so a longer horizon
repeats the game with no information between rounds. Its Dec-POMDP symmetries are the identity and the
simultaneous swap of both agents' actions; self-play conventions "both handshake" and "both fist-bump"
have SP score 1 but XP 0 (the caption's -1 with the +1 / -1 rewards).
"""

from __future__ import annotations

import numpy as np

from ers_exact.model.game import Game, make_game

__all__ = ["handshake"]

ACTIONS: tuple[str, ...] = ("handshake", "fist-bump")


def handshake(
    match_reward: float = 1.0,
    mismatch_reward: float = 0.0,
    horizon: int = 1,
    discount: float = 1.0,
) -> Game:
    """The 2x2 coordination game of Figure 1 as a :class:`Game`.

    Args:
        match_reward: R when a^1 = a^2.
        mismatch_reward: R when a^1 != a^2.
        horizon: H (the figure's game is one-shot, H = 1).
        discount: gamma.

    Joint actions ``a = a^1 * 2 + a^2``: 0 = (handshake, handshake), 3 = (fist-bump, fist-bump).
    """
    n = len(ACTIONS)
    reward = np.full((1, n * n, 1), float(mismatch_reward))  # [S, A, S]
    for k in range(n):
        reward[0, k * n + k, 0] = float(match_reward)
    return make_game(
        name="handshake",
        states=("s",),
        actions=(ACTIONS, ACTIONS),
        observations=(("none",), ("none",)),
        transition=np.ones((1, n * n, 1)),
        observation=np.ones((n * n, 1, 1)),
        reward=reward,
        initial_belief=np.ones(1),
        horizon=horizon,
        discount=discount,
        description=(
            f"One-shot handshake/fist-bump coordination game (paper's Figure 1): reward {match_reward:g} "
            f"on a match, {mismatch_reward:g} otherwise."
        ),
    )
