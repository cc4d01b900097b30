"""The policy part of Psi as an indexed candidate space: every agent's (action permutation, observation
permutation) pair with its history map, so that many transformations can be applied to a whole pool of
policies in one vectorised step. Used by the ER-symmetry search and by discovery (Algorithms 1-3)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.transformation import Transformation, history_map
from ers_exact.model.values import expected_return
from ers_exact.symmetry.search import permutation_table

__all__ = ["AgentMaps", "CandidateSpace", "stack_pool"]


@dataclass(frozen=True)
class AgentMaps:
    """For agent i, row m = one (action perm, observation perm) pair."""

    history: np.ndarray  # [M, K] image of each local history (-1: impossible)
    actions: np.ndarray  # [M, |A^i|] action permutation
    observations: np.ndarray  # [M, |O^i|] observation permutation
    admissible: np.ndarray  # [M] bool

    def index(self, actions: Sequence[int], observations: Sequence[int]) -> int:
        """Row of a given (action perm, observation perm) pair."""
        hit = np.flatnonzero(
            (self.actions == np.asarray(actions)).all(axis=1)
            & (self.observations == np.asarray(observations)).all(axis=1)
        )
        return int(hit[0])


@dataclass(frozen=True, eq=False)
class CandidateSpace:
    """prod_i S_{|A^i|} x S_{|O^i|} for a tree; a candidate is a combo [n] of per-agent rows."""

    tree: HistoryTree

    @cached_property
    def agents(self) -> list[AgentMaps]:
        game, out = self.tree.game, []
        ident_s = tuple(range(game.n_states))
        for i, hist in enumerate(self.tree.local):
            acts, obs = permutation_table(game.n_actions[i]), permutation_table(game.n_observations[i])
            rows = list(itertools.product(range(len(acts)), range(len(obs))))
            maps, ok = [], []
            for ai, oi in rows:
                actions = [tuple(range(k)) for k in game.n_actions]
                observations = [tuple(range(k)) for k in game.n_observations]
                actions[i], observations[i] = tuple(acts[ai]), tuple(obs[oi])
                hmap = history_map(self.tree, Transformation(ident_s, tuple(actions), tuple(observations)), i)
                legal_ok = np.array_equal(hist.legal[np.maximum(hmap, 0)][:, acts[ai]], hist.legal)
                maps.append(hmap)
                ok.append(bool(np.all(hmap >= 0)) and legal_ok)
            idx = np.array(rows)
            out.append(AgentMaps(np.array(maps), acts[idx[:, 0]], obs[idx[:, 1]], np.array(ok)))
        return out

    @property
    def size(self) -> int:
        return int(np.prod([len(a.admissible) for a in self.agents]))

    def admissible_combos(self) -> np.ndarray:
        """All admissible candidates.  # [C, n]"""
        return np.array(
            list(itertools.product(*[np.flatnonzero(a.admissible) for a in self.agents])), dtype=np.int64
        ).reshape(-1, len(self.agents))

    def transformation(self, combo: Sequence[int]) -> Transformation:
        game = self.tree.game
        return Transformation(
            tuple(range(game.n_states)),
            tuple(tuple(int(v) for v in a.actions[c]) for a, c in zip(self.agents, combo)),
            tuple(tuple(int(v) for v in a.observations[c]) for a, c in zip(self.agents, combo)),
        )

    def combo(self, phi: Transformation) -> np.ndarray:
        """Inverse of :meth:`transformation` (the state part of phi is ignored)."""
        return np.array([a.index(phi.actions[i], phi.observations[i]) for i, a in enumerate(self.agents)])

    def is_admissible(self, combo: Sequence[int]) -> bool:
        return all(a.admissible[c] for a, c in zip(self.agents, combo))

    def apply(self, combos: np.ndarray, pool: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """phi_c(pi_p) for every candidate c and pool policy p: per agent [C * P, K_i, |A^i|] (c-major).
        ``pool`` holds per-agent stacked arrays [P, K_i, |A^i|]; every combo must be admissible."""
        C, P = len(combos), pool[0].shape[0]
        out = []
        for i, maps in enumerate(self.agents):
            arr = np.empty((C, P) + pool[i].shape[1:])
            hm, pa = maps.history[combos[:, i]], maps.actions[combos[:, i]]
            arr[
                np.arange(C)[:, None, None, None],
                np.arange(P)[None, :, None, None],
                hm[:, None, :, None],
                pa[:, None, None, :],
            ] = pool[i][None]
            out.append(arr.reshape(C * P, *pool[i].shape[1:]))
        return tuple(out)

    def mean_return(
        self, combos: np.ndarray, pool: Sequence[np.ndarray], chunk_entries: int = 4_000_000
    ) -> np.ndarray:
        """mean_{pi in pool} J(phi_c(pi)) for every candidate c (eq. sp-max's objective).  # [C]"""
        P = pool[0].shape[0]
        width = max(1, chunk_entries // max(1, P * sum(p[0].size for p in pool)))
        out = np.empty(len(combos))
        for lo in range(0, len(combos), width):
            c = combos[lo : lo + width]
            out[lo : lo + len(c)] = (
                np.asarray(expected_return(self.tree, self.apply(c, pool))).reshape(len(c), P).mean(1)
            )
        return out


def stack_pool(pool: Sequence[Sequence[np.ndarray]]) -> tuple[np.ndarray, ...]:
    """A list of joint policies -> per-agent stacked arrays [P, K_i, |A^i|]."""
    return tuple(np.stack([np.asarray(p[i]) for p in pool]) for i in range(len(pool[0])))
