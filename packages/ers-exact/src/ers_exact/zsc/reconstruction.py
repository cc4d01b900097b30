"""The relative reconstruction loss of the paper's Table 2 on tabular games, one definition for ers-exact
(:func:`reconstruction_loss`, exact) and ers-deep's tabular envs (``ers_deep.discovery.reconstruction``,
sampled), which share :func:`observation_counts` and :func:`history_ratios`:

    E_{pi ~ Pi_unseen} E_{tau ~ pi} ||tau - phi_O^2(tau)|| / ||tau||,   reported as its mean over the kept phi.

* tau, the AOH vector: agent i's local action-observation history tau^i_t = (a_0, o_1, ..., a_{t-1}, o_t) as
  the concatenation over its steps s = 1..t of the one-hot e_{a_{s-1}} (|A^i| entries) and the one-hot
  e_{o_s} (|O^i| entries), so ||tau||^2 = 2t.
* phi_O^2 acts on the observation blocks only: e_o -> e_{sigma(sigma(o))} with sigma = phi_{O^i}
  (``Transformation.observations[i]``); a soft map with rows R (ers-deep's tabular phi_O: e_o -> R[o]) sends
  e_o to e_o R R. phi_A (and phi_S) never enter. Hence ||tau - phi_O^2(tau)||^2 = sum_s err[o_s] with
  err[o] = ||e_o - phi_O^2(e_o)||^2 (for a permutation: 2 if sigma^2 moves o, else 0), and the ratio is
  sqrt(c / t) for the c observations of tau that sigma^2 moves: 0 wherever phi_O is an involution, whatever
  phi_A, and 1 where sigma^2 moves every observation.
* tau ~ pi: the local histories of every agent at the steps t = 1..H-1 at which it acts, as play under pi
  reaches them (weight P_pi(tau^i_t), ``local_history_reach``): every agent, step and policy weighs the same.
  The empty history (t = 0, ||tau|| = 0) is left out, 0/0 being undefined; with none left (H = 1), or with
  no phi, the loss is NaN.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.transformation import Transformation
from ers_exact.model.values import Policy, local_history_reach

__all__ = ["history_ratios", "observation_counts", "reconstruction_loss", "step_errors"]


def observation_counts(tree: HistoryTree, agent: int) -> np.ndarray:
    """[K_i, |O^i|]: how often each observation occurs in each local history of ``agent`` (row 0, the empty
    history, is 0); its row sums are the histories' lengths t."""
    hist = tree.local[agent]
    out = np.zeros((len(hist), tree.game.n_observations[agent]))
    for k in range(1, len(hist)):  # a parent precedes its children
        out[k] = out[hist.parent[k]]
        out[k, hist.observation[k]] += 1.0
    return out


def step_errors(sigma: Sequence[int]) -> np.ndarray:
    """[|O|] err[o] = ||e_o - phi_O^2(e_o)||^2 of the observation permutation ``sigma`` (o -> sigma[o]):
    2 where sigma(sigma(o)) != o, else 0."""
    s = np.asarray(sigma)
    return 2.0 * (s[s] != np.arange(len(s)))


def history_ratios(
    tree: HistoryTree, agent: int, errors: np.ndarray, counts: np.ndarray | None = None
) -> np.ndarray:
    """[K_i] ||tau - phi_O^2(tau)|| / ||tau|| of every local history of ``agent``, given the per-observation
    squared errors ``errors`` [|O^i|] (:func:`step_errors`); NaN on the empty history (0/0). ``counts``:
    ``observation_counts(tree, agent)`` where the caller has it (it does not depend on phi)."""
    t = tree.local[agent].time
    counts = observation_counts(tree, agent) if counts is None else counts
    sq = counts @ np.asarray(errors, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(t > 0, np.sqrt(sq / (2.0 * t)), np.nan)


def reconstruction_loss(tree: HistoryTree, phis: Sequence[Transformation], policy: Policy) -> float:
    """The mean over ``phis`` of E_pi E_{tau ~ pi} ||tau - phi_O^2(tau)|| / ||tau|| (module docstring) over the
    joint policies ``policy`` (one, or a stack [P, K_i, |A^i|] per agent), exactly: mean over policies and agents
    of the reach-weighted mean over the non-empty local histories. NaN without phi or non-empty history."""
    if not phis:
        return float("nan")
    reach = [np.atleast_2d(r) for r in local_history_reach(tree, policy)]  # per agent [P, K_i]
    counts = [observation_counts(tree, i) for i in range(len(reach))]  # once, for every phi
    losses = []
    for phi in phis:
        for i, r in enumerate(reach):
            ratio = history_ratios(tree, i, step_errors(phi.observations[i]), counts[i])
            keep = ~np.isnan(ratio)
            mass = r[:, keep].sum(axis=1)  # [P]: H - 1 per policy (reach sums to 1 within each t)
            if not keep.any() or np.any(mass <= 0):
                return float("nan")
            losses.append(np.mean(r[:, keep] @ ratio[keep] / mass))
    return float(np.mean(losses))
