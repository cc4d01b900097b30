"""Gambit (pygambit 17.x) as an independent oracle for ers: profiles, action values and agent logit QRE.

Test-only: pygambit is imported inside the functions, so importing this module never needs it. The game
is exported with :func:`ers_exact.io.gambit.export_efg` and read with ``pygambit.read_efg``; Gambit's
information sets are mapped back to ``tree.local[i]`` indices by decoding each set's representative
History (own actions and observation labels along the path), not by trusting the exporter's numbering.

pygambit 17 API used (differs from 16.x): players are labels (``g.players`` iterates str);
``g.get_infosets(player)`` lists one representative ``History`` per information set;
``H.path(*history.actions)`` is the selector used to index profiles and value vectors;
``profile.action_values[sel]`` iterates (action label, value) pairs; ``profile.payoffs[player]``;
``qre.logit_solve_lambda(g, lam)`` returns ``LogitQREMixedBehaviorProfile`` objects with ``.lam`` and
``.profile``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ers_exact.io.gambit import EfgExport, export_efg
from ers_exact.model.histories import HistoryTree

__all__ = [
    "GambitGame",
    "GambitQRE",
    "boltzmann_residual",
    "gambit_qre",
    "gambit_qre_policy",
    "load_gambit",
]


@dataclass(frozen=True, eq=False)
class GambitGame:
    """A pygambit game read from an ers export, with its information sets mapped to local histories.

    ``infosets[i]`` lists (selector, local history index k, action labels) for agent i, in Gambit's order.
    """

    export: EfgExport
    game: Any  # pygambit.gambit.ExtensiveGame
    infosets: tuple[tuple[tuple[Any, int, tuple[str, ...]], ...], ...]

    @property
    def tree(self) -> HistoryTree:
        return self.export.tree

    def profile(self, policy: Sequence[np.ndarray]) -> Any:
        """A float MixedBehaviorProfile equal to the ers joint policy (rows over legal actions)."""
        prof = self.game.mixed_behavior_profile(rational=False)
        for i, sets in enumerate(self.infosets):
            labels = self.export.action_labels[i]
            for sel, k, acts in sets:
                prof[sel] = {lab: float(policy[i][k, labels.index(lab)]) for lab in acts}
        return prof

    def policy(self, profile: Any) -> tuple[np.ndarray, ...]:
        """The ers joint policy [K_i, |A^i|] per agent read from a Gambit behaviour profile."""
        out = []
        for i, sets in enumerate(self.infosets):
            labels = self.export.action_labels[i]
            pol = np.zeros((len(self.tree.local[i]), len(labels)))
            for sel, k, _ in sets:
                for lab, p in profile[sel]:
                    pol[k, labels.index(lab)] = float(p)
            out.append(pol)
        return tuple(out)

    def action_values(self, profile: Any, rescale: bool = True) -> tuple[np.ndarray, ...]:
        """Gambit's conditional action values per agent, [K_i, |A^i|], NaN at absent (illegal) actions
        and unreached sets. With ``rescale`` they are divided by gamma^t (ers's reward-to-go Q^i units)."""
        vectors = profile.action_values
        out = []
        for i, sets in enumerate(self.infosets):
            labels = self.export.action_labels[i]
            q = np.full((len(self.tree.local[i]), len(labels)), np.nan)
            for sel, k, _ in sets:
                for lab, v in vectors[sel]:
                    q[k, labels.index(lab)] = np.nan if v is None else float(v)
            if rescale:
                q = q / self.export.q_scale(i)[:, None]
            out.append(q)
        return tuple(out)

    def payoffs(self, profile: Any) -> list[float]:
        """Every player's expected payoff (common payoff: all equal J)."""
        return [float(profile.payoffs[p]) for p in self.export.player_labels]


def load_gambit(tree: HistoryTree, check_members: bool = True) -> GambitGame:
    """Export ``tree`` to .efg, read it with pygambit and map every information set to its local history.

    With ``check_members`` every member node of every set is decoded too, and must give the same local
    history (a structural check of the export that is independent of its own bookkeeping)."""
    import pygambit as gbt

    export = export_efg(tree)
    g = gbt.read_efg(io.StringIO(export.text))
    infosets = []
    for i, player in enumerate(export.player_labels):
        sets = []
        for rep in g.get_infosets(player):
            sel = gbt.H.path(*rep.actions)
            k = export.local_history(i, [(tr.player, tr.action) for tr in rep])
            if check_members:
                for member in g.get_members(sel):
                    k_m = export.local_history(i, [(tr.player, tr.action) for tr in member])
                    assert k_m == k, f"agent {i}: infoset of history {k} contains a node of history {k_m}"
            sets.append((sel, k, tuple(g.get_actions(sel))))
        infosets.append(tuple(sets))
    return GambitGame(export=export, game=g, infosets=tuple(infosets))


@dataclass(frozen=True, eq=False)
class GambitQRE:
    """Gambit's agent logit QRE at lambda = 1 / alpha as an ers joint policy."""

    policy: tuple[np.ndarray, ...]
    alpha: float
    lam_requested: float
    lam: float  # the lambda of the point Gambit returned (the tracer stops within ~1e-11 of it)


def gambit_qre(tree: HistoryTree, alpha: float, gambit: GambitGame | None = None) -> GambitQRE:
    """The first agent logit QRE on Gambit's principal branch at lambda = 1 / alpha.

    For gamma = 1 this is a Boltzmann fixed point pi^i(.|tau) = softmax(Q^i_pi(tau, .) / alpha); for
    gamma < 1 Gambit's values are gamma^t Q^i, i.e. the stage temperature is alpha / gamma^t."""
    import pygambit as gbt

    gg = gambit if gambit is not None else load_gambit(tree, check_members=False)
    lam = 1.0 / alpha
    point = gbt.qre.logit_solve_lambda(gg.game, lam=lam)[0]
    return GambitQRE(policy=gg.policy(point.profile), alpha=alpha, lam_requested=lam, lam=float(point.lam))


def gambit_qre_policy(tree: HistoryTree, alpha: float) -> tuple[np.ndarray, ...]:
    """Gambit's agent logit QRE at lambda = 1 / alpha as ers policy arrays [K_i, |A^i|] (see gambit_qre)."""
    return gambit_qre(tree, alpha).policy


def boltzmann_residual(
    tree: HistoryTree, policy: Sequence[np.ndarray], alpha: float, stage_scaled: bool = False
) -> float:
    """max_i,tau,a |pi^i(a|tau) - softmax(Q^i_pi(tau, .) / alpha)(a)| over legal actions, Q^i from ers.

    With ``stage_scaled`` the logits are gamma^t Q^i / alpha (Gambit's QRE map when gamma < 1)."""
    from ers_exact.model.values import local_q_values

    q_all = local_q_values(tree, policy)
    worst = 0.0
    for i, (q, pol, hist) in enumerate(zip(q_all, policy, tree.local)):
        scale = tree.game.discount ** hist.time.astype(np.float64) if stage_scaled else np.ones(len(hist))
        logits = np.where(hist.legal, q * scale[:, None] / alpha, -np.inf)
        if np.isnan(logits).any():
            raise ValueError(f"agent {i}: Q^i undefined at a legal action (policy lacks full support)")
        logits -= logits.max(axis=1, keepdims=True)
        soft = np.exp(logits)
        soft /= soft.sum(axis=1, keepdims=True)
        worst = max(worst, float(np.abs(np.where(hist.legal, pol - soft, 0.0)).max()))
    return worst
