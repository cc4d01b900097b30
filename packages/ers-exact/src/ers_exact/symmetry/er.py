"""Expected-return symmetries Phi_ER (paper, Definition "Expected Return Symmetries"), exactly.

phi is in Phi_ER w.r.t. a pool Pi' subset of Pi*_alpha when for every pi in Pi', phi(pi) is a Boltzmann
fixed point (in logits y of phi(pi): ||M(y) - y||_inf <= tol * max(1, ||y||_inf), the solver's own measure) and
J(phi(pi)) = J* within tol; an inadmissible phi
(DESIGN.md) is not a member and is counted as such. Phi_ER = S_{|S|} x members (state permutations act
trivially on policies). With the pool equal to the solver's whole optimal set this is the paper's Phi_ER
*relative to the fixed points found*; results say whether that set was certified complete.

The membership test runs on log-policies (:class:`~ers_exact.symmetry.er_test.ERTest`), so it is defined also
where the pool's probabilities underflow (pass ``log_pool``, e.g. from the solver's logits, instead of
``pool``). Two ways to generate the candidates, both followed by that exact membership test:

* ``exhaustive``: every candidate of the policy part of Psi (action and observation permutations),
  vectorised over candidates and pool, with a progress bar -- while that part has at most
  ``max_exhaustive`` elements;
* ``matching``: the candidates phi with phi(pi_0) in the pool for the pool's first point pi_0. phi acts
  agent by agent, so for each agent and each target pi' the action permutations that carry pi_0's root
  row onto pi''s, then the observation permutations that carry the t = 1 rows, are found by filtering
  permutation tables, and the full history map is checked last. When the pool is the whole of
  Pi*_alpha every member maps pi_0 into the pool, so both ways give the same members (a test checks it);
  with a pool that misses optimal points, ``matching`` finds the members whose image of pi_0 was found.

Both list members. Where the members are too many to list (matching refuses past ``MAX_MATCHES``), Phi_ER
is found by generators and order instead: :func:`ers_exact.symmetry.er_group.er_group`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.transformation import Transformation, history_map
from ers_exact.symmetry.candidates import CandidateSpace
from ers_exact.symmetry.er_search import pool_orbits
from ers_exact.symmetry.er_test import ERTest, log_pool_of
from ers_exact.symmetry.search import permutation_table, policy_part_order
from ers_exact.util.errors import InputError
from ers_exact.util.progress import Progress

__all__ = ["MAX_EXHAUSTIVE", "MAX_MATCHES", "ERBudgetError", "ERResult", "er_symmetries"]

#: The exhaustive scan is used while the policy part of Psi has at most this many candidates.
MAX_EXHAUSTIVE = 300_000
#: Matching refuses when it would test more candidates than this.
MAX_MATCHES = 1_000_000
_MATCH_TOL = 1e-7  # probabilities of pool points computed to ~1e-12 agree far within this


class ERBudgetError(InputError, RuntimeError):
    """The ER-symmetry search would test more candidates than its budget."""


_BATCH = 200_000  # policy-array entries per agent per evaluation chunk / 10


@dataclass(frozen=True)
class ERResult:
    """The ER symmetries found against a pool, with the pool's orbits under them."""

    game: str
    alpha: float
    J_star: float
    pool_size: int
    pool_is_whole_optimal_set: bool
    pool_complete: bool  # the solver proved its fixed-point list complete
    members: tuple[Transformation, ...] = field(repr=False)  # policy parts (identity on states)
    n_candidates: int  # |policy part of Psi|
    n_inadmissible: int | None  # among them (None: not counted, method "matching")
    orbits: tuple[tuple[int, ...], ...]
    images_outside_pool: int  # phi(pi) in Pi*_alpha but not among the pool's points
    tol: float
    method: str = "exhaustive"  # how candidates were generated: "exhaustive" or "matching"
    n_tested: int | None = None  # candidates that went through the exact test

    @property
    def order_on_policies(self) -> int:
        return len(self.members)

    def order(self, n_states: int) -> int:
        """|Phi_ER| as a subgroup of Psi (every state permutation acts trivially on policies)."""
        return math.factorial(n_states) * len(self.members)

    def to_json(self, n_states: int, max_elements: int = 10_000) -> dict[str, Any]:
        members = [m.to_json() for m in self.members[:max_elements]]
        return {
            "alpha": self.alpha,
            "J_star": self.J_star,
            "pool_size": self.pool_size,
            "pool_is_whole_optimal_set": self.pool_is_whole_optimal_set,
            "pool_complete": self.pool_complete,
            "order": self.order(n_states),
            "order_on_policies": self.order_on_policies,
            "elements": members,
            # True when "elements" holds every element (else the first max_elements), as er_group's and Phi_MDP's
            "elements_listed": len(self.members) <= max_elements,
            "elements_note": "policy parts; every state permutation may be composed with each",
            "n_candidates": self.n_candidates,
            "n_inadmissible": self.n_inadmissible,
            "orbits_on_pool": [list(o) for o in self.orbits],
            "images_outside_pool": self.images_outside_pool,
            "tol": self.tol,
            "method": self.method,
            "n_tested": self.n_tested,
        }


def er_symmetries(
    tree: HistoryTree,
    pool: Sequence[Sequence[np.ndarray]] | None,
    alpha: float,
    J_star: float,
    tol: float = 1e-8,
    pool_is_whole_optimal_set: bool = True,
    pool_complete: bool = False,
    method: str = "auto",
    max_exhaustive: int = MAX_EXHAUSTIVE,
    progress: bool | None = None,
    log_pool: Sequence[Sequence[np.ndarray]] | None = None,
) -> ERResult:
    """Every policy-part transformation phi with phi(pi) in Pi*_alpha for all pi in ``pool``.

    ``method``: 'exhaustive', 'matching' or 'auto' (exhaustive while the policy part of Psi has at most
    ``max_exhaustive`` elements); see the module docstring. The pool goes in exactly once (both or
    neither raise ValueError): as probabilities ``pool`` (the test takes their log, refused where a legal
    action's probability underflowed to 0) or as log-policies ``log_pool`` (``pool`` None)."""
    game = tree.game
    if method == "auto":
        method = "exhaustive" if policy_part_order(game) <= max_exhaustive else "matching"
    if method not in ("exhaustive", "matching"):
        raise ValueError(f"unknown method {method!r}: use 'exhaustive', 'matching' or 'auto'")
    logs = list(log_pool_of(tree, pool, log_pool))  # [P, K, A] per agent
    pols = [np.exp(lp) for lp in logs]
    P = pols[0].shape[0]
    test = ERTest(tree, alpha, J_star, tol)
    test.pool_values(logs)  # refuses a temperature where not even log space can evaluate the test
    if method == "exhaustive":
        members, images, total, tested = _exhaustive(test, logs, progress)
        inadmissible: int | None = total - tested  # every admissible candidate is tested
    else:
        members, images, total, tested = _matching(test, pols, logs, progress)
        inadmissible = None
    orbits, outside = _orbits(pols, [[np.exp(m) for m in img] for img in images])
    return ERResult(
        game=game.name,
        alpha=float(alpha),
        J_star=float(J_star),
        pool_size=P,
        pool_is_whole_optimal_set=pool_is_whole_optimal_set,
        pool_complete=pool_complete,
        members=tuple(members),
        n_candidates=total,
        n_inadmissible=inadmissible,
        n_tested=tested,
        orbits=orbits,
        images_outside_pool=outside,
        tol=tol,
        method=method,
    )


def _exhaustive(
    test: ERTest, pols: list[np.ndarray], progress: bool | None
) -> tuple[list[Transformation], list[list[np.ndarray]], int, int]:
    """Every admissible candidate through ``test``; ``pols`` (and the images returned) are log-policies."""
    space = CandidateSpace(test.tree)
    P = pols[0].shape[0]
    combos = space.admissible_combos()
    members, images = [], []
    width = max(1, _BATCH * 10 // max(1, P * sum(p[0].size for p in pols)))
    with Progress(
        len(combos), f"Phi_ER scan of Psi ({len(combos):,} admissible candidates)", enabled=progress
    ) as bar:
        for lo in range(0, len(combos), width):
            chunk = combos[lo : lo + width]
            C = len(chunk)
            batch = space.apply(chunk, pols)
            good = test.members(batch, C, P)
            for c in np.flatnonzero(good):
                members.append(space.transformation(chunk[c]))
                images.append([b.reshape(C, P, *b.shape[1:])[c] for b in batch])
            bar.update(C)
    return members, images, space.size, len(combos)


def _agent_matches(
    tree: HistoryTree, i: int, src: np.ndarray, dst: np.ndarray
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(action perm, observation perm) pairs of agent i carrying its policy ``src`` onto ``dst``
    (dst[phi(tau), phi(a)] = src[tau, a] at every possible history), admissibly."""
    hist = tree.local[i]
    game = tree.game
    perms_a = permutation_table(game.n_actions[i])
    ok = (np.abs(dst[0][perms_a] - src[0][None]).max(axis=1) <= _MATCH_TOL) & np.all(
        hist.legal[0][perms_a] == hist.legal[0][None], axis=1
    )
    perms_o = None
    t1 = np.arange(hist.offsets[1], hist.offsets[2]) if len(hist.offsets) > 2 else np.zeros(0, dtype=np.int64)
    out = []
    ident_a = [tuple(range(k)) for k in game.n_actions]
    ident_o = [tuple(range(k)) for k in game.n_observations]
    for pa in perms_a[ok]:
        if perms_o is None:
            perms_o = permutation_table(game.n_observations[i])
        cand = perms_o
        if len(t1):
            # t = 1 history (a, o) must go to (pa[a], po[o]) with the rows matching
            n_o = game.n_observations[i]
            allowed = np.ones((n_o, n_o), dtype=bool)
            index = {(int(hist.action[k]), int(hist.observation[k])): int(k) for k in t1}
            for k in t1:
                a, o = int(hist.action[k]), int(hist.observation[k])
                for o2 in range(n_o):
                    k2 = index.get((int(pa[a]), o2))
                    if k2 is None or np.abs(dst[k2][pa] - src[k]).max() > _MATCH_TOL:
                        allowed[o, o2] = False
            cand = perms_o[allowed[np.arange(n_o)[None, :], perms_o].all(axis=1)]
        for po in cand:
            acts, obs = list(ident_a), list(ident_o)
            acts[i], obs[i] = tuple(int(v) for v in pa), tuple(int(v) for v in po)
            phi = Transformation(tuple(range(game.n_states)), tuple(acts), tuple(obs))
            hmap = history_map(tree, phi, i)
            if np.any(hmap < 0) or not np.array_equal(hist.legal[hmap][:, pa], hist.legal):
                continue
            if np.abs(dst[hmap][:, pa] - src).max() <= _MATCH_TOL:
                out.append((acts[i], obs[i]))
    return out


def _agent_images(
    tree: HistoryTree, i: int, matches: list[tuple[tuple[int, ...], tuple[int, ...]]], pol: np.ndarray
) -> np.ndarray:
    """Agent i's part of phi(pi) for each matched (action perm, observation perm) and each pool point (any
    per-entry array: probabilities or log-probabilities).  # [M, P, K_i, A_i]"""
    game = tree.game
    ident_a = [tuple(range(k)) for k in game.n_actions]
    ident_o = [tuple(range(k)) for k in game.n_observations]
    out = np.empty((len(matches),) + pol.shape)
    for m, (pa, po) in enumerate(matches):
        acts, obs = list(ident_a), list(ident_o)
        acts[i], obs[i] = pa, po
        hmap = history_map(tree, Transformation(tuple(range(game.n_states)), tuple(acts), tuple(obs)), i)
        out[m][:, hmap[:, None], np.asarray(pa)[None, :]] = pol
    return out


def _matching(
    test: ERTest, pols: list[np.ndarray], logs: list[np.ndarray], progress: bool | None
) -> tuple[list[Transformation], list[list[np.ndarray]], int, int]:
    """Candidates matched on probabilities ``pols`` (a filter: phi(pi_0) = pi' entry by entry), tested on the
    log-policies ``logs``; the images returned are log-policies."""
    tree = test.tree
    game = tree.game
    P = pols[0].shape[0]
    per_target = []
    tested = 0
    for q in range(P):
        per_agent = [_agent_matches(tree, i, pols[i][0], pols[i][q]) for i in range(game.n_agents)]
        count = math.prod(len(m) for m in per_agent)
        tested += count
        if tested > MAX_MATCHES:
            raise ERBudgetError(
                f"{game.name}: matching the pool onto itself gives more than {MAX_MATCHES:,} candidate ER "
                f"symmetries ({count:,} onto pool point {q} alone: the pool's policies are unchanged by many "
                "action/observation permutations); too many to test one by one"
            )
        per_target.append(per_agent)
    members, images = [], []
    width = max(1, _BATCH * 10 // max(1, P * sum(p[0].size for p in pols)))
    with Progress(tested, f"Phi_ER candidates matching the pool ({tested:,})", enabled=progress) as bar:
        for per_agent in per_target:
            if not all(per_agent):
                continue
            imgs = [_agent_images(tree, i, m, logs[i]) for i, m in enumerate(per_agent)]
            grid = np.array(list(itertools.product(*[range(len(m)) for m in per_agent])), dtype=np.int64)
            for lo in range(0, len(grid), width):
                idx = grid[lo : lo + width]
                C = len(idx)
                batch = tuple(
                    imgs[i][idx[:, i]].reshape(C * P, *logs[i].shape[1:]) for i in range(game.n_agents)
                )
                good = test.members(batch, C, P)
                for c in np.flatnonzero(good):
                    acts = tuple(per_agent[i][idx[c, i]][0] for i in range(game.n_agents))
                    obs = tuple(per_agent[i][idx[c, i]][1] for i in range(game.n_agents))
                    members.append(Transformation(tuple(range(game.n_states)), acts, obs))
                    images.append([b.reshape(C, P, *b.shape[1:])[c] for b in batch])
                bar.update(C)
    # a pool holding a point twice (within _MATCH_TOL) matches a member onto each copy: list it once
    unique = dict(zip(members, images))
    members_sorted = sorted(unique.items(), key=lambda m: (m[0].actions, m[0].observations))
    return ([m for m, _ in members_sorted], [im for _, im in members_sorted], policy_part_order(game), tested)


def _orbits(
    pols: list[np.ndarray], images: list[list[np.ndarray]], tol: float = 1e-6
) -> tuple[tuple[tuple[int, ...], ...], int]:
    """Orbits of the pool under the members (``pool_orbits``); count images outside the pool."""
    P = pols[0].shape[0]
    flat = np.concatenate([p.reshape(P, -1) for p in pols], axis=1)
    sigmas = []
    for img in images:
        img_flat = np.concatenate([m.reshape(P, -1) for m in img], axis=1)
        dist = np.abs(img_flat[:, None, :] - flat[None, :, :]).max(axis=2)  # [P, P]
        nearest = dist.argmin(axis=1)
        sigmas.append(np.where(dist[np.arange(P), nearest] < tol, nearest, -1))
    outside = sum(int((s < 0).sum()) for s in sigmas)
    return pool_orbits(P, sigmas), outside
