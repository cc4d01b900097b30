"""Dec-Tiger (Nair et al. 2003), written from its definition.

Two agents stand before two doors; a tiger is behind one, a treasure behind the other.

* States S = (tiger-left, tiger-right); b_0 = (p, 1 - p) with p = ``tiger_left_prob`` (0.5: uniform).
* Actions A^i = (listen, open-left, open-right); observations O^i = (hear-left, hear-right).
* Transition: after (listen, listen) the state is unchanged; after any joint action in which someone
  opens a door the problem resets, T(s' | s, a) = 1/2 for both s'.
* Observation: after (listen, listen) each agent independently hears the tiger's side correctly with
  probability q = ``listen_accuracy`` (0.85), so the joint observation is (q^2, q(1-q), (1-q)q, (1-q)^2)
  for (correct, correct), (correct, wrong), (wrong, correct), (wrong, wrong): 0.7225 / 0.1275 /
  0.1275 / 0.0225. After any other joint action U is uniform, 1/4 per joint observation.
* Reward R(s, a), depending on the state s before the move (broadcast over s'):

  =============================================  =======
  both listen                                       -2
  both open the tiger's door                        -50
  both open the treasure door                       +20
  one opens the tiger's door, the other listens     -101
  one opens the treasure door, the other listens    +9
  they open different doors                         -100
  =============================================  =======

* Horizon H = 2 by default, gamma = 1. The published undiscounted optima are -4 (H = 2), 5.190812
  (H = 3), 4.802755 (H = 4).

Index orders, state, action and observation names match MADP's ``dectiger.dpomdp`` (joint indices with
the last agent fastest), so the default game equals that file read with horizon 2, entry for entry.
Products and complements of the probabilities are formed in decimal arithmetic from the shortest repr
of the inputs, so 0.85 * 0.85 is stored as the double nearest 0.7225 (as in the file), not as the
binary product 0.7224999999999999.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from ers_exact.model.game import Game, GameError, make_game

__all__ = ["DECTIGER_REWARDS", "dectiger"]

STATES: tuple[str, ...] = ("tiger-left", "tiger-right")
ACTIONS: tuple[str, ...] = ("listen", "open-left", "open-right")
OBSERVATIONS: tuple[str, ...] = ("hear-left", "hear-right")

#: The six reward cases of Dec-Tiger, by outcome.
DECTIGER_REWARDS: dict[str, float] = {
    "both-listen": -2.0,
    "both-open-tiger": -50.0,
    "both-open-treasure": 20.0,
    "one-opens-tiger-other-listens": -101.0,
    "one-opens-treasure-other-listens": 9.0,
    "open-different-doors": -100.0,
}


def _dec(x: float) -> Decimal:
    return Decimal(repr(float(x)))


def _outcome(state: int, a1: int, a2: int) -> str:
    """Which of the six reward cases the joint action (a1, a2) is in state ``state``."""
    tiger_door = 1 + state  # open-left (1) hits the tiger in tiger-left (0), open-right (2) in tiger-right
    opened = [a for a in (a1, a2) if a != 0]
    if not opened:
        return "both-listen"
    if len(opened) == 1:
        return (
            "one-opens-tiger-other-listens" if opened[0] == tiger_door else "one-opens-treasure-other-listens"
        )
    if a1 != a2:
        return "open-different-doors"
    return "both-open-tiger" if a1 == tiger_door else "both-open-treasure"


def dectiger(
    horizon: int = 2,
    discount: float = 1.0,
    listen_accuracy: float = 0.85,
    tiger_left_prob: float = 0.5,
) -> Game:
    """Dec-Tiger (Nair et al. 2003) as a :class:`Game`.

    Args:
        horizon: H (default 2).
        discount: gamma (default 1, as in MADP's file and the published optima).
        listen_accuracy: q, each agent's probability of hearing the tiger's side correctly on
            (listen, listen).
        tiger_left_prob: b_0(tiger-left); 0.8 gives MADP's ``dectiger_skewed``.
    """
    for label, p in (("listen_accuracy", listen_accuracy), ("tiger_left_prob", tiger_left_prob)):
        if not 0.0 <= float(p) <= 1.0:
            raise GameError(f"{label} must lie in [0, 1], got {p!r}")
    n_s, n_a, n_o = len(STATES), len(ACTIONS), len(OBSERVATIONS)
    n_ja, n_jo = n_a * n_a, n_o * n_o
    listen_listen = 0  # joint index of (listen, listen)

    transition = np.full((n_s, n_ja, n_s), 0.5)  # [S, A, S]
    transition[:, listen_listen, :] = np.eye(n_s)

    q = _dec(listen_accuracy)
    hear = {True: q, False: Decimal(1) - q}  # correct / wrong
    observation = np.full((n_ja, n_s, n_jo), 0.25)  # [A, S, O]
    for s in range(n_s):
        for o1 in range(n_o):
            for o2 in range(n_o):
                observation[listen_listen, s, o1 * n_o + o2] = float(hear[o1 == s] * hear[o2 == s])

    reward = np.zeros((n_s, n_ja))  # [S, A], broadcast over s' by make_game
    for s in range(n_s):
        for a1 in range(n_a):
            for a2 in range(n_a):
                reward[s, a1 * n_a + a2] = DECTIGER_REWARDS[_outcome(s, a1, a2)]

    p_left = _dec(tiger_left_prob)
    initial_belief = np.array([float(p_left), float(Decimal(1) - p_left)])
    return make_game(
        name="dectiger",
        states=STATES,
        actions=(ACTIONS, ACTIONS),
        observations=(OBSERVATIONS, OBSERVATIONS),
        transition=transition,
        observation=observation,
        reward=reward,
        initial_belief=initial_belief,
        horizon=horizon,
        discount=discount,
        description="Dec-Tiger (Nair et al. 2003): listen for the tiger, then open the treasure door.",
    )
