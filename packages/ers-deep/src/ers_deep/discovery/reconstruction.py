"""Table 2's relative reconstruction loss of deep discovery (``scores.group_metrics``): the mean over the kept phi
of E_{pi ~ Pi_unseen} E_{tau ~ pi} ||tau - phi_O^2(tau)|| / ||tau||, tau ~ pi being the empirical distribution of
the acting seats' observations in each held-out policy's self-play (``scores.sample_observations``; every policy
weighs the same, whatever its number of samples). What the AOH vector tau is depends on the env:

* tabular envs (ers-exact games): the observation is the one-hot of a whole local history, so tau is decoded
  from it and encoded as ers-exact does (``ers_exact.zsc.reconstruction``, the one definition for both packages):
  the concatenation over the steps s = 1..t of one-hot action a_{s-1} and one-hot observation o_s, ||tau||^2 =
  2t, with phi_O^2 acting on the observation blocks only (e_o -> e_o R R, R the phi_O rows of
  ``net.observation_rows``; phi_A never enters). For an exact permutation phi_O this equals ers-exact's value on
  the same histories: sqrt(c / t) per history with c observations moved by phi_O^2, 0 for an involution;
* Hanabi, Overcooked V2: tau is the observation vector itself (HLE's observation encodes the history; Overcooked
  V2's is the agent's view), phi_O^2(tau) = phi_O(phi_O(tau)) by the learned network.

The empty history (||tau|| = 0: a tabular history at t = 0, or an all-zero observation vector) is left out, 0/0
being undefined; with none left (H = 1) or without phi the loss is NaN.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ers_deep.discovery.net import LearnedSymmetry, observation_rows
from ers_deep.envs.symmetry import Symmetry
from ers_deep.envs.tabular import TabularEnv
from ers_exact.zsc.reconstruction import history_ratios

__all__ = ["history_ratio_table", "reconstruction_loss", "sample_ratios"]


def history_ratio_table(sym: Symmetry, env: TabularEnv) -> Tensor:
    """[K] float64 ||tau - phi_O^2(tau)|| / ||tau|| of every local history of the tabular ``env`` (shared index
    space of its observations), NaN on the empty ones; ``sym`` must be a tabular :class:`LearnedSymmetry`."""
    if not isinstance(sym, LearnedSymmetry) or sym.lift is None:
        raise TypeError(
            f"the tabular reconstruction loss needs a tabular LearnedSymmetry (phi_O rows), got {type(sym).__name__}"
        )
    n = sym.obs_map.size
    with torch.no_grad():
        eye = torch.eye(n, device=sym.action_map.device)
        rows = observation_rows(sym.obs_map, eye[None])[0].double().cpu()  # row o = phi_O(e_o)
    twice = rows @ rows  # row o = phi_O^2(e_o)
    errors = ((torch.eye(n, dtype=torch.float64) - twice) ** 2).sum(1).numpy()  # ||e_o - phi_O^2(e_o)||^2
    parts = [history_ratios(env.tree, i, errors) for i in range(env.num_agents)]
    return torch.as_tensor(np.concatenate(parts))


def sample_ratios(sym: Symmetry, obs: Tensor, env: object, table: Tensor | None = None) -> Tensor:
    """||tau - phi_O^2(tau)|| / ||tau|| of every sample of ``obs`` [n, *O] with ||tau|| > 0 (module docstring;
    ``env``: the policies' env, a :class:`TabularEnv` or another; ``table``: ``history_ratio_table(sym, env)``
    if already computed)."""
    x = obs.reshape(obs.shape[0], -1).float()
    if isinstance(env, TabularEnv):
        if not bool(((x == 0) | (x == 1)).all()) or not bool((x.sum(1) == 1).all()):
            raise ValueError("tabular observations must be one-hot local histories")
        table = history_ratio_table(sym, env) if table is None else table
        ratios = table[x.argmax(1).cpu()]
        return ratios[~ratios.isnan()]
    norms = x.norm(dim=1)
    x, norms = x[norms > 0], norms[norms > 0]
    return ((x - sym.apply_obs(sym.apply_obs(x))).norm(dim=1) / norms).double().cpu()


def reconstruction_loss(syms: list[LearnedSymmetry], obs: list[Tensor], env: object) -> float:
    """The mean over ``syms`` and the held-out policies (``obs[j]``: policy j's self-play observations) of the
    mean ratio over its non-empty samples (:func:`sample_ratios`); NaN without phi or non-empty sample."""
    if not syms or not obs:
        return float("nan")
    losses = []
    for s in syms:
        table = history_ratio_table(s, env) if isinstance(env, TabularEnv) else None
        for o in obs:  # E_pi of E_{tau ~ pi}: each held-out policy weighs the same, however many samples
            r = sample_ratios(s, o, env, table)
            losses.append(float(r.mean()) if len(r) else float("nan"))
    return float(np.mean(losses))
