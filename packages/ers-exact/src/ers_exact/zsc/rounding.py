"""Rounding a learned transformation to the nearest exact one, and scoring exact transformations exactly.

Deep discovery (ers-deep) learns phi = (phi_A, phi_O) with phi_O a network. On a tabular game its input
is the one-hot local history tau^i, indexed as :class:`~ers_exact.model.histories.HistoryTree` indexes
``tree.local[i]``, so the network defines for every possible local history k of agent i the history it
maps k to: an image array ``images[i]`` [K_i] (-1 where the image is no possible history of agent i).

* :func:`round_history_images` finds the phi in Psi (identity phi_S, the given phi_A^i) whose history
  map :func:`~ers_exact.model.transformation.history_map` agrees with those images on the most
  histories, by enumerating each agent's observation permutations phi_O^i in S_{|O^i|} (agents are
  independent: the history map of agent i depends only on phi_A^i and phi_O^i).
* :func:`score_transformations` scores exact transformations against a pool Pi' of policies: whether
  phi is admissible (DESIGN.md), in Phi_MDP (paper eq. decpomdp-invariance), the mean
  J(phi(pi)) over Pi' (eq. sp-max's objective), and whether phi is in Phi_ER at temperature alpha
  (Definition "Expected Return Symmetries", computed by :func:`ers_exact.symmetry.er.er_symmetries` on the
  pool's log-policies where given: the solver's logits, defined where probabilities underflow).

Both work in :class:`~ers_exact.model.transformation.Transformation`'s convention,
phi(pi)^i(phi(a) | phi(tau)) = pi^i(a | tau): ``images[i][k]`` is phi(tau_k). A
:class:`~ers_exact.interface.LearnedTransformation` is written the other way round,
phi(pi)(a | o) = pi(action_map[a] | phi_O(o)): its ``action_map`` is phi_A^{-1} and its network maps
histories as phi^{-1} does. So round ``(action_map, the network's images)`` and take
:meth:`Transformation.inverse` of the result to get the ``nearest`` phi (a test checks this).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.transformation import Transformation, apply_to_policy, is_admissible
from ers_exact.model.values import Policy, expected_return
from ers_exact.symmetry.candidates import stack_pool
from ers_exact.symmetry.er import er_symmetries
from ers_exact.symmetry.search import decpomdp_symmetries, permutation_table
from ers_exact.util.errors import InputError

__all__ = [
    "MAX_OBSERVATION_PERMUTATIONS",
    "RoundingError",
    "TransformationScore",
    "round_history_images",
    "score_transformations",
]

#: Rounding refuses an agent with more observation permutations |O^i|! than this (8! = 40320).
MAX_OBSERVATION_PERMUTATIONS = 40_320
_CHUNK_ENTRIES = 4_000_000  # history-map entries per vectorised chunk of observation permutations

PolicyPart = tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]


class RoundingError(InputError, ValueError):
    """Images or action permutations that do not fit the game, or too many observation permutations."""


def _history_maps(tree: HistoryTree, agent: int, act: np.ndarray, obs_table: np.ndarray) -> np.ndarray:
    """:func:`~ers_exact.model.transformation.history_map` of agent i for one action permutation and many
    observation permutations at once (rows of ``obs_table`` [M, |O^i|]).  # [M, K_i]"""
    hist = tree.local[agent]
    n_a, n_o = tree.game.n_actions[agent], tree.game.n_observations[agent]
    out = np.full((len(obs_table), len(hist)), -1, dtype=np.int64)
    out[:, 0] = 0
    for t in range(1, len(hist.offsets) - 1):
        lo, hi, plo = hist.offsets[t], hist.offsets[t + 1], hist.offsets[t - 1]
        if hi == lo:
            continue
        keys = ((hist.parent[lo:hi] - plo) * n_a + hist.action[lo:hi]) * n_o + hist.observation[lo:hi]
        par = out[:, hist.parent[lo:hi]]  # [M, n]
        obs = obs_table[:, hist.observation[lo:hi]]  # [M, n] phi_O^i of each history's last observation
        img = ((par - plo) * n_a + act[hist.action[lo:hi]][None]) * n_o + obs
        pos = np.clip(np.searchsorted(keys, img), 0, hi - lo - 1)
        out[:, lo:hi] = np.where((par >= 0) & (keys[pos] == img), lo + pos, -1)
    return out


def _check_inputs(
    tree: HistoryTree, action_perms: Sequence[Sequence[int]], images: Sequence[np.ndarray]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    game = tree.game
    if len(action_perms) != game.n_agents or len(images) != game.n_agents:
        raise RoundingError(
            f"{game.name}: {len(action_perms)} action permutations and {len(images)} image arrays "
            f"for {game.n_agents} agents"
        )
    acts, imgs = [], []
    for i in range(game.n_agents):
        act = np.asarray(action_perms[i])
        if act.ndim != 1 or sorted(act.tolist()) != list(range(game.n_actions[i])):
            raise RoundingError(
                f"action permutation of agent {i} is not a permutation of 0..{game.n_actions[i] - 1}: "
                f"{act.tolist()}"
            )
        img = np.asarray(images[i])
        K = len(tree.local[i])
        if img.shape != (K,) or not np.issubdtype(img.dtype, np.integer):
            raise RoundingError(
                f"images of agent {i} must be an integer array of shape ({K},) (one entry per local "
                f"history), got {img.dtype} {img.shape}"
            )
        if img.size and (img.min() < -1 or img.max() >= K):
            raise RoundingError(f"images of agent {i} must lie in -1..{K - 1}, got {img.min()}..{img.max()}")
        n_perm = math.factorial(game.n_observations[i])
        if n_perm > MAX_OBSERVATION_PERMUTATIONS:
            raise RoundingError(
                f"{game.name}: agent {i} has {game.n_observations[i]} observations, {n_perm:,} observation "
                f"permutations; rounding enumerates at most {MAX_OBSERVATION_PERMUTATIONS:,}"
            )
        acts.append(act.astype(np.int64))
        imgs.append(img.astype(np.int64))
    return acts, imgs


def round_history_images(
    tree: HistoryTree,
    action_perms: Sequence[Sequence[int]],
    images: Sequence[np.ndarray],
    weights: Sequence[np.ndarray] | None = None,
) -> tuple[Transformation | None, float]:
    """The exact phi nearest to a learned phi_O, and the fraction of histories where they disagree.

    ``action_perms[i]`` is phi_A^i (a permutation of agent i's actions); ``images[i]`` [K_i] gives for
    every possible local history k of agent i (index into ``tree.local[i]``) the index of its learned
    image (-1: outside agent i's possible histories). Among the phi = (identity phi_S, phi_A^i, phi_O^i)
    with phi_O^i in S_{|O^i|}, returns the one maximising the number of (i, k) with
    ``history_map(tree, phi, i)[k] == images[i][k]`` (per agent; ties go to the lexicographically first
    phi_O^i, the identity first) and the disagreement count over sum_i K_i. Admissible phi_O^i (possible
    histories onto possible ones, legal actions onto legal ones) are preferred: the count is minimised over
    them whenever agent i has one, so a learned map that leaves payoff-irrelevant histories where they
    were (the sp-max objective does not see them) still rounds to the transformation that acts on
    policies; only an agent without any admissible phi_O^i gets an inadmissible one
    (:func:`score_transformations` says whether phi is admissible).

    Returns ``(None, 1.0)`` when even the best phi agrees with the images on no history at all (the
    images carry nothing a permutation could round to; the empty history, which every phi fixes, is
    mapped elsewhere too).

    ``weights[i]`` [K_i] >= 0 (default 1) weighs each history's disagreement, e.g. the probability that
    the policies reach it (a learned map is constrained only where they go); the returned distance is
    then the weighted disagreement over the total weight. Raises :class:`RoundingError` on images or permutations that do not fit the
    game, and when some |O^i|! exceeds :data:`MAX_OBSERVATION_PERMUTATIONS`."""
    game = tree.game
    acts, imgs = _check_inputs(tree, action_perms, images)
    w = [np.ones(len(h)) for h in tree.local] if weights is None else [np.asarray(x, float) for x in weights]
    if len(w) != game.n_agents or any(x.shape != (len(h),) or (x < 0).any() for x, h in zip(w, tree.local)):
        raise RoundingError("weights must be one non-negative array [K_i] per agent")
    best_obs, wrong = [], 0.0
    for i in range(game.n_agents):
        table = permutation_table(game.n_observations[i])  # [M, |O^i|], identity first
        K = len(tree.local[i])
        width = max(1, _CHUNK_ENTRIES // max(1, K))
        counts = np.empty(len(table), dtype=float)
        admissible = np.empty(len(table), dtype=bool)
        legal = tree.local[i].legal
        for lo in range(0, len(table), width):
            maps = _history_maps(tree, i, acts[i], table[lo : lo + width])
            counts[lo : lo + len(maps)] = ((maps != imgs[i][None]) * w[i][None]).sum(axis=1)
            ok = (maps >= 0).all(axis=1)
            same_legal = (legal[np.maximum(maps, 0)][:, :, acts[i]] == legal[None]).all(axis=(1, 2))
            admissible[lo : lo + len(maps)] = ok & same_legal
        if admissible.any():  # the nearest phi that acts on policies (DESIGN.md), when one exists
            counts = np.where(admissible, counts, np.inf)
        m = int(np.argmin(counts))
        best_obs.append(tuple(int(v) for v in table[m]))
        wrong += float(counts[m])
    total = float(sum(x.sum() for x in w))
    if wrong >= total:
        return None, 1.0
    phi = Transformation(
        tuple(range(game.n_states)), tuple(tuple(int(v) for v in a) for a in acts), tuple(best_obs)
    )
    return phi, wrong / total


@dataclass(frozen=True)
class TransformationScore:
    """One exact transformation phi scored against a pool Pi' (see :func:`score_transformations`)."""

    transformation: Transformation
    admissible: bool  # possible histories onto possible ones, legal actions onto legal ones
    decpomdp_symmetry: bool  # some phi_S makes (phi_S, phi_A, phi_O) a member of Phi_MDP
    mean_return: float  # mean_{pi in Pi'} J(phi(pi)); NaN when phi is inadmissible
    pool_return: float  # mean_{pi in Pi'} J(pi)
    er_symmetry: bool | None  # phi in Phi_ER at temperature alpha; None: no alpha given
    alpha: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "transformation": self.transformation.to_json(),
            "admissible": self.admissible,
            "decpomdp_symmetry": self.decpomdp_symmetry,
            "mean_return": None if math.isnan(self.mean_return) else self.mean_return,
            "pool_return": self.pool_return,
            "er_symmetry": self.er_symmetry,
            "alpha": self.alpha,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TransformationScore:
        mean, er, alpha = data.get("mean_return"), data.get("er_symmetry"), data.get("alpha")
        return cls(
            transformation=Transformation.from_json(data["transformation"]),
            admissible=bool(data["admissible"]),
            decpomdp_symmetry=bool(data["decpomdp_symmetry"]),
            mean_return=math.nan if mean is None else float(mean),
            pool_return=float(data["pool_return"]),
            er_symmetry=None if er is None else bool(er),
            alpha=None if alpha is None else float(alpha),
        )


def _policy_part(phi: Transformation) -> PolicyPart:
    return phi.actions, phi.observations


def _er_parts(
    tree: HistoryTree,
    pool: Sequence[Policy],
    pool_J: np.ndarray,
    alpha: float,
    J_star: float | None,
    tol: float,
    er_pool: Sequence[Policy] | None,
    er_log_pool: Sequence[Policy] | None,
) -> set[PolicyPart]:
    """The policy parts of Phi_ER w.r.t. ``er_pool`` (else ``pool``) at ``alpha``, tested on ``er_log_pool``
    when given (:func:`score_transformations`)."""
    ref = list(pool if er_pool is None else er_pool)
    if er_log_pool is not None and len(er_log_pool) != len(ref):
        raise RoundingError(
            f"er_log_pool holds {len(er_log_pool)} log-policies for the ER test's pool of {len(ref)} "
            f"({'er_pool' if er_pool is not None else 'pool'}): give log pi of the same points"
        )
    ref_J = pool_J if er_pool is None else np.asarray(expected_return(tree, stack_pool(ref)), dtype=float)
    target = float(ref_J.max()) if J_star is None else float(J_star)
    er = er_symmetries(
        tree,
        ref if er_log_pool is None else None,
        alpha,
        target,
        tol=tol,
        pool_is_whole_optimal_set=False,
        progress=False,
        log_pool=er_log_pool,
    )
    return {_policy_part(m) for m in er.members}


def score_transformations(
    tree: HistoryTree,
    transformations: Sequence[Transformation],
    pool: Sequence[Policy],
    alpha: float | None = None,
    J_star: float | None = None,
    tol: float = 1e-8,
    er_pool: Sequence[Policy] | None = None,
    er_log_pool: Sequence[Policy] | None = None,
) -> list[TransformationScore]:
    """Exact scores of each phi against the pool Pi' (one :class:`TransformationScore` per phi, in order).

    * ``admissible``: :func:`~ers_exact.model.transformation.is_admissible`;
    * ``decpomdp_symmetry``: phi's policy part (phi_A, phi_O) is that of a member of Phi_MDP
      (:func:`~ers_exact.symmetry.search.decpomdp_symmetries`, computed once): a rounded phi has the
      identity phi_S, and state permutations do not act on policies;
    * ``mean_return``: mean_{pi in Pi'} J(phi(pi)) by :func:`apply_to_policy` and
      :func:`expected_return` (NaN for an inadmissible phi, which does not act on policies);
    * ``er_symmetry``: when ``alpha`` is given, phi's policy part is a member of Phi_ER w.r.t. Pi'
      (every phi(pi) a Boltzmann fixed point at alpha, in its logits y ||M(y) - y||_inf <= ``tol``
      max(1, ||y||_inf) as the solver measures convergence, with J(phi(pi)) = J* within ``tol``), computed
      once by :func:`~ers_exact.symmetry.er.er_symmetries` (Pi' should be points of Pi*_alpha, e.g. the
      optimal fixed points of :func:`ers_exact.solve.fixed_points.solve_fixed_points`). ``J_star``
      defaults to the pool's best J, which is J* when Pi' lies in Pi*_alpha. ``er_pool`` replaces Pi'
      for this verdict only: the points of Pi*_alpha to test against when Pi' holds approximate points
      (a deep pool), e.g. the optimal points of ``solve_fixed_points(tree, alpha)``, with their J*.
      ``er_log_pool``: log pi of the same points (``er_pool``'s, else Pi''s), the ER test's input
      (:mod:`~ers_exact.symmetry.er_test`): give it for the solver's points,
      ``LogitCoordinates(tree).log_pool(ys)`` of their logits y. Without it the test takes log of the
      probabilities, which at low alpha have legal actions at exactly 0 (underflow: the toy game below alpha
      ~0.0013) and are refused with :class:`~ers_exact.solve.boltzmann.TemperatureError`; with it the verdict
      is defined down to the solver's own temperature limit.

    Budget errors of the two symmetry searches (InputError) propagate."""
    if not pool:
        raise RoundingError("score_transformations needs a non-empty pool of policies")
    for phi in transformations:
        phi.check_game(tree.game)
    stacked = stack_pool(pool)  # [P, K_i, |A^i|] per agent
    pool_J = np.asarray(expected_return(tree, stacked), dtype=float)
    er_parts: set[PolicyPart] | None = None
    if alpha is not None:
        er_parts = _er_parts(tree, pool, pool_J, alpha, J_star, tol, er_pool, er_log_pool)
    mdp_parts = {_policy_part(m) for m in decpomdp_symmetries(tree.game)} if transformations else set()
    out = []
    for phi in transformations:
        admissible = is_admissible(tree, phi)
        mean = math.nan
        if admissible:
            mean = float(np.mean(np.asarray(expected_return(tree, apply_to_policy(tree, phi, stacked)))))
        out.append(
            TransformationScore(
                transformation=phi,
                admissible=admissible,
                decpomdp_symmetry=_policy_part(phi) in mdp_parts,
                mean_return=mean,
                pool_return=float(pool_J.mean()),
                er_symmetry=None if er_parts is None else _policy_part(phi) in er_parts,
                alpha=None if alpha is None else float(alpha),
            )
        )
    return out
