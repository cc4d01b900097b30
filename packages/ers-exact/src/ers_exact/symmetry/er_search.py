"""Backtrack search for elements of H = {phi in Psi_pol admissible : phi(Pi') = Pi'}, the setwise stabiliser
of a finite pool Pi' of joint policies, inside the policy part Psi_pol = prod_i S_{|A^i|} x S_{|O^i|} of Psi
(paper eq. symm-equiv: phi(pi)^i(phi(a) | phi(tau)) = pi^i(a | tau)). Used by :mod:`ers_exact.symmetry.
er_group` to build Phi_ER by generators, one base point at a time.

Points. The labels of all agents form one point set, in the *base order*
``[A^0 | O^0 | A^1 | O^1 | ...]`` (agent 0's actions, then its observations, then agent 1's, ...); a
candidate phi is a permutation of these points that keeps every block. Point j is also base position j.

Partial assignments. The images of points 0..j-1 are fixed when point j is assigned. A local history
tau^i = (a_0, o_1, ..., o_t) is *determined* once all its labels are assigned, and an entry (tau^i, a) of
agent i's policy once tau^i and a are: its image (phi(tau^i), phi(a)) is then known, so

* phi(tau^i) must be a possible history and legal sets must agree (admissibility, DESIGN.md);
* the relation R[p, q] "phi(pi_p) may still equal pi_q" keeps only the pairs with
  pi_q^i(phi(a) | phi(tau^i)) = pi_p^i(a | tau^i) (within ``tol``) on the newly determined entries.

A row or column of R with no pair left is a dead end. A full assignment is an element of H when R holds a
permutation sigma of the pool (phi(pi_p) = pi_{sigma(p)}); :class:`Searcher` then also runs the exact ER
test (Boltzmann residual and J) on phi(Pi') so that nothing enters H on a tolerance alone.

Canonical pruning. Looking for h in H fixing points 0..k-1 with h(k) = gamma, the solutions form the coset
h H_{k+1}, with H_j the pointwise stabiliser of points 0..j-1 in H. When every H_j (j > k) is known, only
the lexicographically least element of the coset need be found, and it satisfies h(j) < h(m) for every
j > k and every m != j in the orbit of j under H_j (:func:`search`'s ``orbits``): those branches are cut.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.util.partition import classes

__all__ = ["AgentIndex", "SearchBudgetError", "Searcher", "build_index", "pool_orbits", "pool_permutation"]

MATCH_TOL = 1e-7  # probabilities of pool points computed to ~1e-12 agree far within this


class SearchBudgetError(RuntimeError):
    """The search used up its node or time budget."""


@dataclass(frozen=True, eq=False)
class AgentIndex:
    """Agent i's local histories arranged for the search: which histories and policy entries are
    determined at each of its base positions (0 .. |A^i| + |O^i| - 1)."""

    offset: int  # global point index of action 0 (observation o is offset + |A^i| + o)
    n_actions: int
    n_observations: int
    parent: np.ndarray  # [K]
    action: np.ndarray  # [K]
    observation: np.ndarray  # [K]
    child: np.ndarray  # [K', |A|, |O|]: index of (tau, a, o), -1 where impossible (K' non-final histories)
    legal: np.ndarray  # [K, |A|]
    histories_at: tuple[tuple[np.ndarray, ...], ...]  # per local position: newly determined, by time
    entries_at: tuple[tuple[np.ndarray, np.ndarray], ...]  # per local position: (histories, actions)

    @property
    def n_points(self) -> int:
        return self.n_actions + self.n_observations


def build_index(tree: HistoryTree) -> list[AgentIndex]:
    """One :class:`AgentIndex` per agent, with offsets in the base order."""
    out, offset = [], 0
    for i, hist in enumerate(tree.local):
        n_a, n_o = tree.game.n_actions[i], tree.game.n_observations[i]
        K = len(hist)
        n_inner = int(hist.offsets[-2]) if len(hist.offsets) > 2 else 1
        child = np.full((n_inner, n_a, n_o), -1, dtype=np.int64)
        det = np.full(K, -1, dtype=np.int64)  # local base position at which the history is determined
        ks = np.arange(1, K)
        child[hist.parent[ks], hist.action[ks], hist.observation[ks]] = ks
        for t in range(1, len(hist.offsets) - 1):  # parents first
            lo, hi = hist.offsets[t], hist.offsets[t + 1]
            det[lo:hi] = np.maximum(
                det[hist.parent[lo:hi]], np.maximum(hist.action[lo:hi], n_a + hist.observation[lo:hi])
            )
        level = np.maximum(det[:, None], np.arange(n_a)[None, :])  # [K, |A|]
        hist_at, entries_at = [], []
        for j in range(n_a + n_o):
            new = np.flatnonzero(det == j)
            times = hist.time[new]
            hist_at.append(tuple(new[times == t] for t in np.unique(times)))
            k, a = np.nonzero(level == j)
            entries_at.append((k, a))
        out.append(
            AgentIndex(
                offset, n_a, n_o, hist.parent, hist.action, hist.observation, child, hist.legal,
                tuple(hist_at), tuple(entries_at),
            )
        )  # fmt: skip
        offset += n_a + n_o
    return out


def perfect_matching(R: np.ndarray) -> np.ndarray | None:
    """A permutation sigma with R[p, sigma[p]] for all p (augmenting paths), or None."""
    P = len(R)
    match_q = np.full(P, -1, dtype=np.int64)

    def augment(p: int, seen: np.ndarray) -> bool:
        for q in np.flatnonzero(R[p]):
            if not seen[q]:
                seen[q] = True
                if match_q[q] < 0 or augment(int(match_q[q]), seen):
                    match_q[q] = p
                    return True
        return False

    for p in range(P):
        if not augment(p, np.zeros(P, dtype=bool)):
            return None
    sigma = np.empty(P, dtype=np.int64)
    sigma[match_q] = np.arange(P)
    return sigma


class Searcher:
    """Elements of H (module docstring) for a tree and a pool (per-agent stacked arrays [P, K_i, |A^i|]).

    ``exact_test(perm)`` is the final check of a full assignment (True: phi(Pi') passes the ER test).
    ``max_nodes`` / ``max_seconds`` bound all searches together (:class:`SearchBudgetError` beyond)."""

    def __init__(
        self,
        tree: HistoryTree,
        pols: Sequence[np.ndarray],
        exact_test: Callable[[np.ndarray], bool],
        tol: float = MATCH_TOL,
        max_nodes: int = 2_000_000,
        max_seconds: float = float("inf"),
    ) -> None:
        self.agents = build_index(tree)
        self.pols = [np.asarray(p, dtype=np.float64) for p in pols]
        self.exact_test, self.tol = exact_test, tol
        self.max_nodes, self.deadline = max_nodes, time.perf_counter() + max_seconds
        self.nodes = 0
        self.rejected = 0  # full assignments matching the pool but failing the exact test
        self.n_points = sum(a.n_points for a in self.agents)
        self.owner = np.concatenate([np.full(a.n_points, i) for i, a in enumerate(self.agents)])
        blocks = [(a.offset, a.n_actions) for a in self.agents] + [
            (a.offset + a.n_actions, a.n_observations) for a in self.agents
        ]
        self.block = np.empty((self.n_points, 2), dtype=np.int64)  # [start, end) of each point's block
        for lo, size in blocks:
            self.block[lo : lo + size] = (lo, lo + size)

    # -- one assignment step ------------------------------------------------------------------------
    def _assign(
        self, img: np.ndarray, himg: list[np.ndarray], R: np.ndarray, j: int
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Check the histories and entries determined by point j (its image already in ``img``); returns
        agent i's updated history images and R, or None at a dead end."""
        i = int(self.owner[j])
        ag = self.agents[i]
        local = j - ag.offset
        pa = img[ag.offset : ag.offset + ag.n_actions] - ag.offset
        po = img[ag.offset + ag.n_actions : ag.offset + ag.n_points] - ag.offset - ag.n_actions
        h = himg[i]
        if ag.histories_at[local]:
            h = h.copy()
            for ks in ag.histories_at[local]:
                par = h[ag.parent[ks]]
                if np.any(par >= len(ag.child)):
                    return None
                h[ks] = ag.child[par, pa[ag.action[ks]], po[ag.observation[ks]]]
                if np.any(h[ks] < 0):
                    return None  # a possible history onto an impossible one: inadmissible
        ks, acts = ag.entries_at[local]
        if len(ks):
            hk, ha = h[ks], pa[acts]
            if not np.array_equal(ag.legal[ks, acts], ag.legal[hk, ha]):
                return None
            pol = self.pols[i]
            V, W = pol[:, ks, acts], pol[:, hk, ha]  # [P, E]: pi_p(a | tau) and pi_q(phi a | phi tau)
            R = R.copy()
            for p in np.flatnonzero(R.any(axis=1)):
                qs = np.flatnonzero(R[p])
                R[p, qs] = np.abs(W[qs] - V[p][None]).max(axis=1) <= self.tol
            if not (R.any(axis=1).all() and R.any(axis=0).all()):
                return None
        return h, R

    # -- the prefix of identities, shared by all searches ---------------------------------------------
    def identity_prefixes(self) -> list[tuple[list[np.ndarray], np.ndarray]]:
        """State (history images, R) after fixing points 0..j-1, for every j (index j)."""
        P = self.pols[0].shape[0]
        himg = [np.where(np.arange(len(a.parent)) == 0, 0, -1) for a in self.agents]
        R = np.ones((P, P), dtype=bool)
        img = np.arange(self.n_points)
        out = [([h.copy() for h in himg], R)]
        for j in range(self.n_points):
            step = self._assign(img, himg, R, j)
            assert step is not None, "the identity must map the pool onto itself"
            himg = list(himg)
            himg[int(self.owner[j])], R = step
            out.append((himg, R))
        return out

    # -- the search ---------------------------------------------------------------------------------------
    def search(
        self,
        k: int,
        gamma: int,
        prefix: tuple[list[np.ndarray], np.ndarray],
        orbits: Sequence[frozenset[int]],
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """An element h of H fixing points 0..k-1 with h(k) = gamma, as (point images [N], sigma [P]), or
        None when there is none. ``prefix``: the state after fixing 0..k-1; ``orbits[j]``: the orbit of j
        under H_j for j > k (canonical pruning, module docstring); points absent there are not pruned."""
        N = self.n_points
        img = np.full(N, -1, dtype=np.int64)
        img[:k] = np.arange(k)
        used = np.zeros(N, dtype=bool)
        used[:k] = True
        # below[m]: positions j in (k, m) whose image must be smaller than m's
        below: list[list[int]] = [[] for _ in range(N)]
        for j in range(k + 1, N):
            for m in orbits[j]:
                if m > j:
                    below[m].append(j)

        def rec(j: int, himg: list[np.ndarray], R: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
            if j == N:
                sigma = perfect_matching(R)
                if sigma is None:
                    return None
                if not self.exact_test(img):
                    self.rejected += 1
                    return None
                return img.copy(), sigma
            self.nodes += 1
            if self.nodes > self.max_nodes or (self.nodes % 256 == 0 and time.perf_counter() > self.deadline):
                raise SearchBudgetError(f"stopped after {self.nodes:,} search nodes")
            lo = max(img[below[j]], default=-1)
            cands = [gamma] if j == k else range(*self.block[j])
            for v in cands:
                if used[v] or v <= lo:
                    continue
                img[j], used[v] = v, True
                step = self._assign(img, himg, R, j)
                if step is not None:
                    h2 = list(himg)
                    h2[int(self.owner[j])] = step[0]
                    found = rec(j + 1, h2, step[1])
                    if found is not None:
                        return found
                img[j], used[v] = -1, False
            return None

        himg, R = prefix
        return rec(k, list(himg), R)


def pool_permutation(pols: Sequence[np.ndarray], images: Sequence[np.ndarray]) -> np.ndarray | None:
    """sigma with images[p] = pool[sigma(p)] (within MATCH_TOL), or None."""
    P = pols[0].shape[0]
    flat = np.concatenate([p.reshape(P, -1) for p in pols], axis=1)
    img = np.concatenate([m.reshape(P, -1) for m in images], axis=1)
    sigma = np.empty(P, dtype=np.int64)
    for p in range(P):  # one row at a time: [P, D] in memory, not [P, P, D]
        dist = np.abs(flat - img[p][None]).max(axis=1)
        sigma[p] = int(dist.argmin())
        if dist[sigma[p]] > MATCH_TOL:
            return None
    return sigma if len(set(sigma.tolist())) == P else None


def pool_orbits(P: int, sigmas: Sequence[np.ndarray]) -> tuple[tuple[int, ...], ...]:
    """Orbits of the pool under the maps ``sigmas`` (union-find), singletons included; an entry q < 0 maps its
    point outside the pool and joins nothing."""
    pairs = ((p, int(q)) for s in sigmas for p, q in enumerate(s) if q >= 0)
    return tuple(tuple(g) for g in classes(P, pairs))
