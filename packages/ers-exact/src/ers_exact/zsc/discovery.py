"""ER-symmetry discovery on tabular games: the paper's Algorithms 1-3, computed exactly.

* Algorithm 1 (eq. sp-max): for each tuple of local action permutations (all, or transpositions as for
  Hanabi), the observation permutations maximising mean_{pi in Pi'} J(phi(pi)); keep the l best.
  ``search="exhaustive"`` scores every candidate exactly; ``search="gradient"`` learns a factorised
  softmax distribution over each agent's observation permutations by REINFORCE on exact returns (the
  paper's policy-gradient path), so it can be checked against the exhaustive answer.
* Algorithm 2 (eq. sp-max-with-reg-stoch): (1 - lambda_1) J(phi(pi)) + lambda_1 E_{i,j} J(phi_i o phi o
  phi_j (pi)) - lambda_2 E_o d(o, phi_O^2(o))^2 with phi_i, phi_j drawn from {Id} united with the
  previously learned symmetries (:func:`learned_phi`; the official code appends the identity to the loaded
  symmetries, as ers-deep does) and the discrete metric on one-hot observations (d^2 = 2 when different),
  in expectation rather than sampled; it picks phi_O per action tuple, and the l kept are the best by the
  plain J-bar_phi = mean_{pi in Pi'} J(phi(pi)), as in the paper's Algorithm 2 (lines 21-25).
* Algorithm 3 (eq. xp-max): for pairs (pi_i, pi_j), i != j, maximise XP(pi_i, phi(pi_j)) over phi.

Only admissible transformations are candidates (DESIGN.md). The result reports the paper's Table 2
group metrics (J_1, J_2, J_3 after composing 1-3 random learned transformations; relative
reconstruction loss, defined in :mod:`ers_exact.zsc.reconstruction`) on an unseen pool.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ers_exact.interface import DiscoveryResult
from ers_exact.model.histories import HistoryTree, check_tree
from ers_exact.model.objectives import cross_play
from ers_exact.model.transformation import Transformation, apply_to_policy
from ers_exact.model.values import PolicyError, check_policy, expected_return
from ers_exact.symmetry.candidates import CandidateSpace, stack_pool
from ers_exact.util.options import UsageError
from ers_exact.zsc.config import ALGORITHMS, SEARCHES, DiscoveryConfig
from ers_exact.zsc.reconstruction import reconstruction_loss

StackedPolicy = tuple[np.ndarray, ...]  # a pool stacked per agent: arrays [P, K_i, |A^i|]

#: scores within this (relative to their size) are ties, broken by candidate order: exact returns of
#: symmetric candidates differ only by rounding, which must not decide which of them is kept
TIE = 1e-9


def _first_best(values: np.ndarray) -> int:
    """The first index whose value is within :data:`TIE` of the maximum (argmax with ties by order)."""
    top = float(values.max())
    return int(np.flatnonzero(values >= top - TIE * max(1.0, abs(top)))[0])


def _ranking(scores: Sequence[float]) -> list[int]:
    """Indices by decreasing score, runs of scores within :data:`TIE` of their run's best in index order."""
    values = np.asarray(scores, dtype=float)
    order = [int(k) for k in np.argsort(-values, kind="stable")]
    out: list[int] = []
    while order:
        top = values[order[0]]
        run = [k for k in order if values[k] >= top - TIE * max(1.0, abs(top))]
        out += sorted(run)
        order = [k for k in order if k not in run]
    return out


__all__ = [
    "ALGORITHMS",
    "SEARCHES",
    "DiscoveryConfig",
    "check_pool",
    "discover",
    "group_metrics",
    "learn_action_distribution",
    "learned_phi",
]


def learned_phi(tree: HistoryTree, learned: Sequence[Transformation]) -> list[Transformation]:
    """{Id} united with ``learned`` symmetries (Id first, each element once): the set an agent composes
    with in Algorithm 2 and other-plays and symmetrises with (:mod:`ers_exact.zsc.pipeline`), as the
    official code (learned symmetries plus an appended identity) and ers-deep do."""
    return list(dict.fromkeys([Transformation.identity(tree.game), *learned]))


def _action_key(space: CandidateSpace, combo: np.ndarray) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(v) for v in a.actions[c]) for a, c in zip(space.agents, combo))


def _allowed_actions(perm: tuple[int, ...], action_set: str) -> bool:
    moved = sum(int(p != k) for k, p in enumerate(perm))
    return action_set == "permutations" or moved in (0, 2)


def _groups(space: CandidateSpace, combos: np.ndarray, action_set: str) -> dict[tuple, np.ndarray]:
    """Admissible combos grouped by their tuple of local action permutations."""
    groups: dict[tuple, list[int]] = {}
    for k, combo in enumerate(combos):
        key = _action_key(space, combo)
        if all(_allowed_actions(p, action_set) for p in key):
            groups.setdefault(key, []).append(k)
    return {key: np.array(v) for key, v in groups.items()}


def _reinforce(
    space: CandidateSpace,
    combos: np.ndarray,
    pool: StackedPolicy,
    cfg: DiscoveryConfig,
    rng: np.random.Generator,
) -> int:
    """Learn a factorised softmax over each agent's rows within one action group; return the combo index
    (into ``combos``) of the final argmax."""
    rows = [np.unique(combos[:, i]) for i in range(combos.shape[1])]
    theta = [np.zeros(len(r)) for r in rows]
    lookup = {tuple(c): k for k, c in enumerate(combos)}
    for _ in range(cfg.steps):
        probs = [np.exp(t - t.max()) / np.exp(t - t.max()).sum() for t in theta]
        picks = [rng.choice(len(p), size=cfg.samples, p=p) for p in probs]
        sampled = np.stack([r[p] for r, p in zip(rows, picks)], axis=1)
        ok = np.array([tuple(c) in lookup for c in sampled])
        score = np.full(cfg.samples, np.nan)
        if ok.any():
            score[ok] = space.mean_return(sampled[ok], pool)
        score = np.where(ok, score, np.nanmin(score) - 1.0 if ok.any() else 0.0)
        adv = score - score.mean()
        for i, (t, p, pk) in enumerate(zip(theta, probs, picks)):
            grad = (np.eye(len(t))[pk] - p[None]) * adv[:, None]
            theta[i] = t + cfg.learning_rate * grad.mean(axis=0)
    best = tuple(int(r[np.argmax(t)]) for r, t in zip(rows, theta))
    return lookup.get(best, 0)


def _sp_max(
    space: CandidateSpace,
    combos: np.ndarray,
    pool: StackedPolicy,
    cfg: DiscoveryConfig,
    known: Sequence[Transformation],
) -> tuple[list[int], list[float]]:
    rng = np.random.default_rng(cfg.seed)
    table = (
        space.mean_return(combos, pool)
        if (cfg.search == "exhaustive" or cfg.algorithm == "sp-max-reg")
        else None
    )
    plain = table  # J-bar_phi = mean over Pi' of J(phi(pi)): what Algorithm 2 ranks by (its lines 21-25)
    if (
        cfg.algorithm == "sp-max-reg"
    ):  # the regularised objective picks phi_O per action tuple, not the ranking
        assert table is not None
        table = _regularised(space, combos, table, cfg, known)
    picks, scores = [], []
    for members in _groups(space, combos, cfg.action_set).values():
        if cfg.search == "gradient" and cfg.algorithm == "sp-max":
            k = members[_reinforce(space, combos[members], pool, cfg, rng)]
            score = float(space.mean_return(combos[k : k + 1], pool)[0])
        else:
            assert table is not None and plain is not None
            k = members[_first_best(table[members])]
            score = float(plain[k])
        picks.append(int(k))
        scores.append(score)
    return picks, scores


def _regularised(
    space: CandidateSpace,
    combos: np.ndarray,
    table: np.ndarray,
    cfg: DiscoveryConfig,
    known: Sequence[Transformation],
) -> np.ndarray:
    """eq. sp-max-with-reg-stoch in expectation over the known symmetries and observations."""
    index = {tuple(c): k for k, c in enumerate(combos)}
    drawn = learned_phi(space.tree, known)
    out = np.empty(len(combos))
    for k, combo in enumerate(combos):
        phi = space.transformation(combo)
        comp = []
        for f, g in itertools.product(drawn, drawn):
            j = index.get(tuple(space.combo(f.compose(phi).compose(g))))
            comp.append(table[j] if j is not None else -np.inf)
        penalty = np.mean(
            [2.0 * np.mean(np.asarray(o)[np.asarray(o)] != np.arange(len(o))) for o in phi.observations]
        )
        composed = np.mean(comp)
        out[k] = (1 - cfg.lambda1) * table[k] + cfg.lambda1 * composed - cfg.lambda2 * penalty
    return out


def _xp_max(
    tree: HistoryTree,
    space: CandidateSpace,
    combos: np.ndarray,
    pool_list: Sequence[Sequence[np.ndarray]],
    cfg: DiscoveryConfig,
) -> tuple[list[int], list[float]]:
    rng = np.random.default_rng(cfg.seed)
    pairs = [(i, j) for i in range(len(pool_list)) for j in range(len(pool_list)) if i != j]
    if len(pairs) > cfg.max_pairs:
        pairs = [pairs[k] for k in rng.choice(len(pairs), size=cfg.max_pairs, replace=False)]
    best: dict[int, float] = {}
    for i, j in pairs:
        images = space.apply(combos, stack_pool([pool_list[j]]))
        mine = tuple(np.broadcast_to(p, (len(combos),) + p.shape) for p in pool_list[i])
        xp = np.asarray(cross_play(tree, mine, images))
        k = _first_best(xp)
        best[k] = max(best.get(k, -np.inf), float(xp[k]))
    return list(best), list(best.values())


def check_pool(tree: HistoryTree, pool: object, name: str = "pool") -> None:
    """A ``PolicyError`` naming ``name`` (and the entry) unless ``pool`` is a non-empty list of joint policies
    of ``tree``'s game (each one [K_i, |A^i|] table per agent, as :func:`~ers_exact.model.values.check_policy`
    checks them): one joint policy passed as the pool, or a stacked one, failed deep inside the search."""
    if isinstance(pool, (str, bytes, np.ndarray)) or not isinstance(pool, Sequence):
        raise PolicyError(f"{name} must be a list of joint policies, got {type(pool).__name__}")
    if len(pool) == 0:
        raise PolicyError(f"{name} holds no policy: give at least one joint policy")
    for j, policy in enumerate(pool):
        if isinstance(policy, np.ndarray):
            raise PolicyError(
                f"{name}[{j}] is one array of shape {policy.shape}, not a joint policy (a tuple of one "
                f"[K_i, |A^i|] array per agent): a pool is a list of joint policies ([pi] for one policy pi)"
            )
        try:
            _, batched = check_policy(tree, policy)
        except PolicyError as e:
            raise PolicyError(f"{name}[{j}]: {e}") from None
        if batched:
            raise PolicyError(f"{name}[{j}] is a batch of joint policies: list them one by one")


def discover(
    tree: HistoryTree,
    pool: Sequence[Sequence[np.ndarray]],
    config: DiscoveryConfig = DiscoveryConfig(),
    known: Sequence[Transformation] = (),
    unseen_pool: Sequence[Sequence[np.ndarray]] | None = None,
) -> DiscoveryResult:
    """Learn the ``top`` best transformations from the pool Pi' (``pool``: a list of joint policies, each one
    [K_i, |A^i|] array per agent; see module docstring). ``unseen_pool`` (the same form; default ``pool``) is
    where Table 2's J_1, J_2, J_3 and reconstruction loss are measured."""
    check_tree(tree)
    if not isinstance(config, DiscoveryConfig):
        raise TypeError(f"config must be a DiscoveryConfig, got {type(config).__name__}")
    check_pool(tree, pool)
    if unseen_pool is not None:
        check_pool(tree, unseen_pool, "unseen_pool")
    space = CandidateSpace(tree)
    combos = space.admissible_combos()
    stacked = stack_pool(pool)
    if config.algorithm == "xp-max":
        if len(pool) < 2:  # bad input, not a bug: an exact pool is one point where Pi*_alpha is one point
            raise UsageError(
                f"xp-max (Algorithm 3) cross-plays distinct pool policies; the pool has {len(pool)} "
                "(an exact pool holds at most |Pi*_alpha| points, one where the optimal fixed point is "
                "unique at this alpha: use a larger pool, another alpha, or sp-max)"
            )
        picks, scores = _xp_max(tree, space, combos, list(pool), config)
    elif config.algorithm in ("sp-max", "sp-max-reg"):
        if config.algorithm == "sp-max-reg" and not known:
            known = discover(tree, pool, replace(config, algorithm="sp-max")).permutations()
        picks, scores = _sp_max(space, combos, stacked, config, known)
    else:
        raise ValueError(f"unknown algorithm {config.algorithm!r}: sp-max, sp-max-reg or xp-max")
    order = _ranking(scores)[: config.top]
    chosen = [space.transformation(combos[picks[k]]) for k in order]
    metrics = group_metrics(tree, chosen, unseen_pool or pool, seed=config.seed)
    return DiscoveryResult(
        game=tree.game.name,
        algorithm=config.algorithm,
        transformations=tuple(chosen),
        scores=tuple(float(scores[k]) for k in order),
        pool_return=float(np.mean(expected_return(tree, stacked))),
        **metrics,
        config=config.to_json(),
    )


def group_metrics(
    tree: HistoryTree,
    phis: Sequence[Transformation],
    pool: Sequence[Sequence[np.ndarray]],
    max_compositions: int = 256,
    seed: int = 0,
) -> dict[str, float]:
    """J_k = E[J((phi_1 o ... o phi_k)(pi))] over random learned phi_i and the pool (k = 1, 2, 3), and the
    relative reconstruction loss, the mean over ``phis`` of E_pi E_{tau ~ pi} ||tau - phi_O^2(tau)|| / ||tau||
    (:func:`~ers_exact.zsc.reconstruction.reconstruction_loss`): tau each agent's non-empty local AOH
    (a_0, o_1, ..., a_{t-1}, o_t) at the steps it acts, weighed by its exact reach, as the concatenation of one-hot
    action and one-hot observation per step; phi_O^2 moves observations only (phi_A never enters), so a history
    with c of its t observations moved by phi_O^2 has ratio sqrt(c / t) (0 for an involution); the empty history
    (0/0) is left out, and the loss is NaN where no history is left (H = 1)."""
    rng = np.random.default_rng(seed)
    stacked = stack_pool(pool)
    out: dict[str, float] = {}
    for k in (1, 2, 3):
        tuples = list(itertools.product(range(len(phis)), repeat=k))
        if len(tuples) > max_compositions:
            tuples = [tuples[t] for t in rng.choice(len(tuples), size=max_compositions, replace=False)]
        values = []
        for tup in tuples:
            phi = phis[tup[0]]
            for t in tup[1:]:
                phi = phi.compose(phis[t])
            values.append(np.mean(expected_return(tree, apply_to_policy(tree, phi, stacked))))
        out[f"J_{k}"] = float(np.mean(values)) if values else float("nan")
    out["reconstruction_loss"] = reconstruction_loss(tree, phis, stacked)
    return out


def learn_action_distribution(
    tree: HistoryTree,
    pool: Sequence[Sequence[np.ndarray]],
    candidates: Sequence[Transformation],
    bias: Sequence[float],
    steps: int = 500,
    learning_rate: float = 1.0,
) -> np.ndarray:
    """The paper's toy experiment: a softmax distribution over ``candidates`` maximising
    E_phi[mean_pi J(phi(pi))] + sum_c bias_c p_c by exact gradient ascent; returns the probabilities per
    step [steps + 1, len(candidates)]."""
    stacked = stack_pool(pool)
    value = np.array([np.mean(expected_return(tree, apply_to_policy(tree, c, stacked))) for c in candidates])
    objective = value + np.asarray(bias, dtype=float)
    theta = np.zeros(len(candidates))
    history = []
    for _ in range(steps + 1):
        p = np.exp(theta - theta.max())
        p /= p.sum()
        history.append(p)
        theta = theta + learning_rate * p * (objective - p @ objective)
    return np.array(history)
