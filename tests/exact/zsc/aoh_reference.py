"""The relative reconstruction loss of the paper's Table 2 written from its definition, in plain Python, for
the tests of both packages (it shares no code with ``ers_exact.zsc.reconstruction``):

    E_{pi} E_{tau ~ pi} ||tau - phi_O^2(tau)|| / ||tau||,

tau a local AOH (a_0, o_1, ..., a_{t-1}, o_t) as the concatenation over its steps of one-hot action and one-hot
observation, phi_O^2 applying the observation map twice to the observations (actions untouched), tau ~ pi the
non-empty local histories of every agent at the steps t = 1..H-1 it acts, weighed by their probability under pi
(every agent and step weighing the same), the empty history left out (0/0)."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ers_exact.model.game import Game
from ers_exact.model.histories import HistoryTree
from tests.exact.reference import History, policy_fn_from_arrays


def aoh_vector(history: History, n_actions: int, n_observations: int) -> np.ndarray:
    """concat over the steps of (one-hot a_{s-1}, one-hot o_s) of ``history`` = (a_0, o_1, ..., a_{t-1}, o_t)."""
    parts = []
    for a, o in zip(history[0::2], history[1::2]):
        parts += [np.eye(n_actions)[a], np.eye(n_observations)[o]]
    return np.concatenate(parts) if parts else np.zeros(0)


def relative_error(history: History, obs_map: Sequence[int], n_actions: int, n_observations: int) -> float:
    """||tau - phi_O^2(tau)|| / ||tau|| for the map o -> obs_map[o] (NaN for the empty history)."""
    twice = tuple(x if s % 2 == 0 else obs_map[obs_map[x]] for s, x in enumerate(history))
    tau = aoh_vector(history, n_actions, n_observations)
    norm = float(np.linalg.norm(tau))
    if norm == 0:
        return math.nan
    return float(np.linalg.norm(tau - aoh_vector(twice, n_actions, n_observations))) / norm


def history_probabilities(
    game: Game, tree: HistoryTree, policy: Sequence[np.ndarray]
) -> list[dict[History, float]]:
    """Per agent: P_pi(tau^i_t) of every local history at t = 0..H-1, by enumerating plays (b_0, T, U, pi)."""
    pi = policy_fn_from_arrays(tree, policy)
    n = game.n_agents
    T, U, b0 = (np.asarray(x).tolist() for x in (game.transition, game.observation, game.initial_belief))
    joint_a = list(itertools.product(*[range(k) for k in game.n_actions]))  # row-major, last agent fastest
    joint_o = list(itertools.product(*[range(k) for k in game.n_observations]))
    out: list[dict[History, float]] = [defaultdict(float) for _ in range(n)]

    def rec(t: int, s: int, hists: tuple[History, ...], w: float) -> None:
        for i in range(n):
            out[i][hists[i]] += w
        if t + 1 >= game.horizon:
            return
        for ja, a in enumerate(joint_a):
            p = math.prod(pi(i, hists[i])[a[i]] for i in range(n))
            for s2 in range(game.n_states):
                for jo, o in enumerate(joint_o):
                    q = w * p * T[s][ja][s2] * U[ja][s2][jo]
                    if q > 0:
                        rec(t + 1, s2, tuple(h + (a[i], o[i]) for i, h in enumerate(hists)), q)

    for s0, w0 in enumerate(b0):
        if w0 > 0:
            rec(0, s0, ((),) * n, w0)
    return out


def reconstruction_loss(
    game: Game,
    tree: HistoryTree,
    pool: Sequence[Sequence[np.ndarray]],
    obs_maps: Sequence[Sequence[Sequence[int]]],
) -> float:
    """The mean over the phi (``obs_maps[phi][agent]``: phi_O^i as a list), the policies of ``pool`` and the
    agents of the probability-weighted mean relative error over the non-empty local histories."""
    values = []
    for maps in obs_maps:
        for policy in pool:
            for i, probs in enumerate(history_probabilities(game, tree, policy)):
                kept = {h: w for h, w in probs.items() if len(h) > 0}
                if not kept:
                    return math.nan
                err = sum(
                    w * relative_error(h, maps[i], game.n_actions[i], game.n_observations[i])
                    for h, w in kept.items()
                )
                values.append(err / sum(kept.values()))
    return float(np.mean(values))
