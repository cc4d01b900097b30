"""The paper's toy (rerouted) coordination game (Example "Toy coordination game").

Two agents, full observability, H = 2, gamma = 1, start state s_0, local actions A^1 = A^2 = {0, 1}:

* t = 0, from s_0: joint action (0, 0) -> x with reward 1; (1, 1) -> m with reward 0; a mismatch -> b
  with reward 0.
* t = 1: in m every joint action yields reward 1; in x and b every joint action yields reward 0.

Encoding choices (the paper says only that the game "terminates" after t = 1):

* States S = (s0, x, m, b); b_0 = delta(s0). x, m and b are absorbing: T(s' = s | s, a) = 1 for
  s in {x, m, b} and every joint action a. So under a longer horizon (``horizon=3``, ...) m keeps
  paying 1 per step, x and b pay nothing. s0 is never re-entered.
* Rewards are transition-attached, R[s, a, s'] (the t = 0 reward belongs to the move s0 -> x):
  R(s0, (0,0), x) = 1 and R(m, a, m) = 1 for every joint a; R is 0 elsewhere, in particular on every
  transition of probability 0. (The paper's R(s_{t+1}, a_t) cannot express this game: it would pay the
  x-reward again at t = 1.)
* Observations: each agent observes the state reached, O^1 = O^2 = (x, m, b); the joint observation
  after reaching s' in {x, m, b} is (s', s') with probability 1. s' = s0 is unreachable; its row
  U(. | s0, a) is uniform over all 9 joint observations, which is invariant under every relabelling of
  observations, so it breaks no symmetry.

Values (for the record): writing q_a = pi^{-i}(a | s_0), Q^i(s_0, 0) = q_0 and Q^i(s_0, 1) = q_1, the
Q-structure of the symmetric 2x2 coordination game; the double action swap is in Phi_ER \\ Phi_MDP.
"""

from __future__ import annotations

import numpy as np

from ers_exact.model.game import Game, make_game

__all__ = ["toy_coordination"]

STATES: tuple[str, ...] = ("s0", "x", "m", "b")
ACTIONS: tuple[str, ...] = ("0", "1")
OBSERVATIONS: tuple[str, ...] = ("x", "m", "b")


def toy_coordination(horizon: int = 2, discount: float = 1.0) -> Game:
    """The rerouted coordination game of the paper's Example, as a :class:`Game`.

    Args:
        horizon: H, the number of decision steps (the paper's H = 2).
        discount: gamma (the paper's gamma = 1).

    Joint actions are ``a = a^1 * 2 + a^2``: 0 = (0,0), 1 = (0,1), 2 = (1,0), 3 = (1,1).
    """
    s0, x, m, b = range(len(STATES))
    n_a, n_o = len(ACTIONS), len(OBSERVATIONS)
    n_s, n_ja, n_jo = len(STATES), n_a * n_a, n_o * n_o

    transition = np.zeros((n_s, n_ja, n_s))  # [S, A, S]
    reward = np.zeros((n_s, n_ja, n_s))  # [S, A, S]
    for a1 in range(n_a):
        for a2 in range(n_a):
            ja = a1 * n_a + a2
            target = b if a1 != a2 else (x if a1 == 0 else m)
            transition[s0, ja, target] = 1.0
    for s in (x, m, b):
        transition[s, :, s] = 1.0
    reward[s0, 0 * n_a + 0, x] = 1.0
    reward[m, :, m] = 1.0

    observation = np.zeros((n_ja, n_s, n_jo))  # [A, S, O]
    observation[:, s0, :] = 1.0 / n_jo  # unreachable: uninformative and relabelling-invariant
    for s in (x, m, b):
        k = OBSERVATIONS.index(STATES[s])
        observation[:, s, k * n_o + k] = 1.0

    initial_belief = np.zeros(n_s)
    initial_belief[s0] = 1.0
    return make_game(
        name="toy-coordination",
        states=STATES,
        actions=(ACTIONS, ACTIONS),
        observations=(OBSERVATIONS, OBSERVATIONS),
        transition=transition,
        observation=observation,
        reward=reward,
        initial_belief=initial_belief,
        horizon=horizon,
        discount=discount,
        description="Paper's toy rerouted coordination game: (0,0) pays 1 now, (1,1) pays 1 one step later.",
    )
