"""Other-play on tabular games: maximise OP^Phi(pi) = mean_{phi in Phi} XP(pi, phi(pi)) (eq. other-play).

OP is a polynomial in the policy entries with many local optima: in the three-lever game, Adam from one
random start stops at 1, 7/6 or 0.999 about three times in four (the optimum is 4/3). Each of the m
seeds ("trainings", as in the paper) therefore runs

* **Adam on the exact gradient** (:func:`op_gradient`; J is multilinear in the policy entries and the
  partner's phi(pi) is differentiated back through the history maps of phi) from ``restarts`` starts,
  all seeds' starts in one vectorised batch: random logits; *symmetrised* random starts (S(pi) =
  mean_phi phi(pi), e.g. a uniform first lever); and the seed's deterministic optimum (below) mixed
  with uniform play, so optima that need stochastic play are reached from the best deterministic point.
  An entropy bonus annealed to 0 over the first half keeps early policies mixed (with shared parameters
  a coordination term like u^2 has no first-order pull at u = 0); then a polish rounds rows above
  ``polish_threshold`` to one-hot when that does not lower OP, and a best-improvement local search sets
  single rows to pure actions while that raises OP (it finishes runs the softmax left at 0.98 on a
  wrong lever). The seed's result is its first start that reaches its best value (the restarts make a
  seed reliable; they are not a selection on J).
* **Exact OP over deterministic policies**, when there are at most ``exhaustive`` joint profiles: every
  deterministic policy *tree* (one legal action at each local history the agent's own earlier actions
  reach; histories it never reaches play uniformly and enter no XP value) is enumerated, one shared
  tree or one per agent, and OP^Phi of each profile is computed exactly in batches: the optimum over
  deterministic policies. Each seed draws one of the optimal profiles with the best J at random (the
  three relabelled conventions of the three-lever game), so independent seeds still break symmetries
  independently, and it replaces the seed's gradient result only when it is better by more than 1e-6
  (where OP is flat, e.g. the toy game under its learned swap, the trained policy stays).

Deployment across seeds: the best OP value, ties (within 1e-6) broken by self-play J (the paper keeps
the best J; with exact objectives OP-suboptimal seeds can have a higher J, so OP optimality comes
first). Parameter sharing (one policy for agents whose local history trees coincide) is the default and
an option: the two-lever OP^{Phi_MDP} optimum is 5/4 with it (and needs a mixed policy: deterministic
shared ones reach 1) and 3/2 without (tests/exact/zsc/test_other_play.py).
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree, LocalHistories
from ers_exact.model.objectives import seat_assignments
from ers_exact.model.transformation import InadmissibleError, Transformation, history_map
from ers_exact.model.values import Policy, check_policy, expected_return, local_history_reach, return_gradient
from ers_exact.symmetry.search import decpomdp_symmetries
from ers_exact.util.budget import check_memory, check_time
from ers_exact.util.options import UsageError
from ers_exact.zsc.config import DEFAULT_EXHAUSTIVE, SYMMETRY_SETS, OPConfig
from ers_exact.zsc.iql import same_local_trees

__all__ = [
    "DEFAULT_EXHAUSTIVE",
    "SYMMETRY_SETS",
    "OPConfig",
    "OPResult",
    "op_gradient",
    "op_values",
    "played_histories",
    "solve_other_play",
    "symmetry_set",
    "train_other_play",
]

_Maps = list[list[tuple[np.ndarray, np.ndarray]]]  # per phi, per agent: (history map, action map)
_TIE = 1e-6  # OP / J values within this are ties
_BATCH_POLICIES = 4096  # joint policies per exact evaluation when scoring deterministic profiles
_ROW_SEARCH_BUDGET = 20_000_000  # policy entries x |Phi| x seats evaluated per round of the row search
_WARM_MIX = 0.2  # weight of uniform play in the warm start from a deterministic optimum
_CALIBRATION_STARTS = 8  # starts of the gradient step timed (and its memory traced) before a run


@dataclass(frozen=True, eq=False)
class OPResult:
    """The deployed OP policy, what every seed reached, and how it was found."""

    policy: tuple[np.ndarray, ...]  # per agent [K_i, |A^i|]
    op_value: float  # OP^Phi of the deployed policy
    J: float  # its self-play return
    seed_op_values: tuple[float, ...]
    seed_J: tuple[float, ...]
    seed_methods: tuple[str, ...] = ()  # per seed: "deterministic" (exhaustive) or "gradient"
    method: str = ""
    share: bool = True  # parameters were shared (requested and every agent's history tree is the same)
    n_symmetries: int = 0  # |Phi|
    symmetries: str = "given"  # the set's name ("mdp", "none") or "given"
    deterministic_profiles: int = 0  # deterministic joint profiles enumerated (0: over the budget)
    deterministic_optimum: float | None = None  # max OP over them
    game: str = ""
    horizon: int = 0
    seconds: float = 0.0
    config: dict[str, Any] = field(default_factory=dict)
    played: tuple[
        dict[str, Any], ...
    ] = ()  # the histories the deployed policy reaches: :func:`played_histories`

    def to_json(self, with_policy: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "game": self.game,
            "horizon": self.horizon,
            "symmetries": self.symmetries,
            "n_symmetries": self.n_symmetries,
            "share": self.share,
            "op_value": self.op_value,
            "J": self.J,
            "method": self.method,
            "seed": self.config.get("seed"),
            "seeds": self.config.get("seeds"),
            "seed_op_values": list(self.seed_op_values),
            "seed_J": list(self.seed_J),
            "seed_methods": list(self.seed_methods),
            "deterministic_profiles": self.deterministic_profiles,
            "deterministic_optimum": self.deterministic_optimum,
            "seconds": round(self.seconds, 4),
            "config": self.config,
            "played": list(self.played),
        }
        if with_policy:
            out["policy"] = [p.tolist() for p in self.policy]  # usable by `ers-exact value --policy`
        return out


# --- symmetry sets -------------------------------------------------------------------------------------


def symmetry_set(tree: HistoryTree, name: str) -> list[Transformation]:
    """Phi by name: ``"mdp"`` = Phi_MDP (every Dec-POMDP symmetry, exact search), ``"none"`` = {id}
    (OP^{id} = SP)."""
    if name == "mdp":
        return decpomdp_symmetries(tree.game)
    if name == "none":
        return [Transformation.identity(tree.game)]
    raise UsageError(f"unknown symmetry set {name!r}: use one of {', '.join(SYMMETRY_SETS)}")


# --- exact OP values and gradients, batched ------------------------------------------------------------


def _maps(tree: HistoryTree, phis: Sequence[Transformation]) -> _Maps:
    """Per phi and agent: (history map [K_i], action permutation [A_i]); refuses inadmissible phi."""
    if len(phis) == 0:
        raise ValueError("the set of transformations Phi is empty")
    out = []
    for phi in phis:
        row = []
        for i in range(tree.game.n_agents):
            hmap = history_map(tree, phi, i)
            if np.any(hmap < 0):
                k = int(np.flatnonzero(hmap < 0)[0])
                raise InadmissibleError(
                    f"phi maps agent {i}'s possible history {tree.local[i].as_tuple(k)} to an impossible one"
                )
            act = np.asarray(phi.actions[i])
            if not np.array_equal(tree.local[i].legal[hmap][:, act], tree.local[i].legal):
                raise InadmissibleError(f"phi maps a legal action of agent {i} to an illegal one")
            row.append((hmap, act))
        out.append(row)
    return out


def _image(pol: np.ndarray, hmap: np.ndarray, act: np.ndarray) -> np.ndarray:
    """phi(pi)^i[hmap(k), act(a)] = pi^i[k, a] for a batch [B, K, A]."""
    new = np.empty_like(pol)
    new[:, hmap[:, None], act[None, :]] = pol
    return new


def _profiles(tree: HistoryTree, pols: tuple[np.ndarray, ...], maps: _Maps) -> tuple[np.ndarray, ...]:
    """Every (phi, seat assignment) profile of a batch: per agent [F * M * B, K_i, A_i], phi-major."""
    seats = seat_assignments(tree.game.n_agents)
    return tuple(
        np.concatenate([pols[i] if row[i] == 0 else _image(pols[i], *m[i]) for m in maps for row in seats])
        for i in range(tree.game.n_agents)
    )


def _op(tree: HistoryTree, pols: tuple[np.ndarray, ...], maps: _Maps) -> np.ndarray:
    """OP^Phi of a batch [B], evaluated in chunks of at most _BATCH_POLICIES joint policies."""
    B = pols[0].shape[0]
    chunk = max(1, _BATCH_POLICIES // (len(maps) * len(seat_assignments(tree.game.n_agents))))
    out = np.empty(B)
    for lo in range(0, B, chunk):
        part = tuple(p[lo : lo + chunk] for p in pols)
        out[lo : lo + chunk] = (
            np.asarray(expected_return(tree, _profiles(tree, part, maps)))
            .reshape(-1, len(part[0]))
            .mean(axis=0)
        )
    return out


def op_values(tree: HistoryTree, policy: Policy, phis: Sequence[Transformation]) -> np.ndarray | float:
    """OP^Phi(pi) for one policy or a batch ([P]); the same number as
    :func:`ers_exact.model.objectives.other_play`, with the history maps computed once."""
    pols, batched = check_policy(tree, policy)
    out = _op(tree, pols, _maps(tree, phis))
    return out if batched else float(out[0])


def _op_grad(tree: HistoryTree, pols: tuple[np.ndarray, ...], maps: _Maps) -> tuple[np.ndarray, ...]:
    n, seats = tree.game.n_agents, seat_assignments(tree.game.n_agents)
    F, M, B = len(maps), len(seats), pols[0].shape[0]
    grads = return_gradient(tree, _profiles(tree, pols, maps))
    out = []
    for i in range(n):
        g = grads[i].reshape(F, M, B, *pols[i].shape[1:])
        own, other = seats[:, i] == 0, seats[:, i] == 1
        total = g[:, own].sum(axis=(0, 1))
        for f, m in enumerate(maps):  # seat filled by phi(pi): d/d pi[k, a] reads the image's entry
            hmap, act = m[i]
            total = total + g[f, other].sum(axis=0)[:, hmap[:, None], act[None, :]]
        out.append(total / (F * M))
    return tuple(out)


def op_gradient(tree: HistoryTree, policy: Policy, phis: Sequence[Transformation]) -> tuple[np.ndarray, ...]:
    """d OP^Phi(pi) / d pi^i(a | tau), entries as free variables; per agent [K_i, A_i] (or [P, K_i, A_i]
    for a batch)."""
    pols, batched = check_policy(tree, policy)
    out = _op_grad(tree, pols, _maps(tree, phis))
    return out if batched else tuple(g[0] for g in out)


# --- exhaustive search over deterministic policies -----------------------------------------------------

_Children = dict[tuple[int, int], list[int]]  # (history, action) -> child histories


def _children(hist: LocalHistories) -> _Children:
    out: dict[tuple[int, int], list[int]] = {}
    for k in range(1, len(hist)):
        out.setdefault((int(hist.parent[k]), int(hist.action[k])), []).append(k)
    return out


def _count_trees(hist: LocalHistories, children: _Children, k: int = 0) -> int:
    """Deterministic policy trees below history k (exact integer)."""
    total = 0
    for a in np.flatnonzero(hist.legal[k]):
        prod = 1
        for c in children.get((k, int(a)), []):
            prod *= _count_trees(hist, children, c)
        total += prod
    return total


def _trees(hist: LocalHistories, children: _Children, k: int = 0) -> np.ndarray:
    """Every deterministic policy tree below history k: [N, K] chosen action, -1 where not reached."""
    K, blocks = len(hist), []
    for a in np.flatnonzero(hist.legal[k]):
        block = np.full((1, K), -1, dtype=np.int64)
        for c in children.get((k, int(a)), []):  # disjoint subtrees: the product of their choices
            sub = _trees(hist, children, c)
            block = np.maximum(block[:, None, :], sub[None, :, :]).reshape(-1, K)
        block[:, k] = a
        blocks.append(block)
    return np.concatenate(blocks)


def _as_policy(hist: LocalHistories, choice: np.ndarray) -> np.ndarray:
    """Choices [N, K] -> policies [N, K, A]: one-hot where chosen, uniform over legal actions elsewhere."""
    out = np.broadcast_to(
        hist.legal / hist.legal.sum(axis=1, keepdims=True), (*choice.shape, hist.legal.shape[1])
    ).copy()
    n, k = np.nonzero(choice >= 0)
    out[n, k] = 0.0
    out[n, k, choice[n, k]] = 1.0
    return out


@dataclass(frozen=True)
class _Deterministic:
    trees: tuple[np.ndarray, ...]  # per policy slot: [N_j, K] choices
    index: np.ndarray  # [P, slots] tree index per profile
    op: np.ndarray  # [P]
    J: np.ndarray  # [P]

    def policy(self, tree: HistoryTree, p: int, shared: bool) -> tuple[np.ndarray, ...]:
        slots = [0 if shared else i for i in range(len(tree.local))]
        return tuple(
            _as_policy(h, self.trees[j][self.index[p, j]][None])[0] for j, h in zip(slots, tree.local)
        )


def _deterministic_search(
    tree: HistoryTree, maps: _Maps, shared: bool, budget: int
) -> tuple[int, _Deterministic | None]:
    """OP and J of every deterministic joint profile (one shared tree, or one tree per agent), or None
    when there are more than ``budget``. Returns (number of profiles, search)."""
    slots = [tree.local[0]] if shared else list(tree.local)
    children = [_children(h) for h in slots]
    counts = [_count_trees(h, c) for h, c in zip(slots, children)]
    total = int(np.prod(np.array(counts, dtype=object)))
    if total > budget:
        return total, None
    trees = tuple(_trees(h, c) for h, c in zip(slots, children))
    index = np.stack(np.unravel_index(np.arange(total), counts), axis=1)
    chunk = max(1, _BATCH_POLICIES // (len(maps) * len(seat_assignments(tree.game.n_agents))))
    op, J = np.empty(total), np.empty(total)
    for lo in range(0, total, chunk):
        idx = index[lo : lo + chunk]
        pols = tuple(
            _as_policy(h, trees[0 if shared else i][idx[:, 0 if shared else i]])
            for i, h in enumerate(tree.local)
        )
        op[lo : lo + len(idx)] = _op(tree, pols, maps)
        J[lo : lo + len(idx)] = expected_return(tree, pols)
    return total, _Deterministic(trees=trees, index=index, op=op, J=J)


def _pick(op: np.ndarray, J: np.ndarray, rng: np.random.Generator | None = None) -> int:
    """Best OP, ties by J; remaining ties drawn at random (or the first without ``rng``)."""
    best = np.flatnonzero(op >= op.max() - _TIE)
    best = best[J[best] >= J[best].max() - _TIE]
    return int(best[0] if rng is None else rng.choice(best))


# --- gradient ascent -----------------------------------------------------------------------------------


def _policy(tree: HistoryTree, theta: np.ndarray, shared: bool) -> tuple[np.ndarray, ...]:
    """theta [B, D] -> per agent [B, K_i, A_i] softmax over legal actions (agent 0's block for all agents
    when ``shared``)."""
    out, offset = [], 0
    for hist in tree.local:
        K, A = hist.legal.shape
        if shared:
            offset = 0
        z = np.where(hist.legal[None], theta[:, offset : offset + K * A].reshape(-1, K, A), -np.inf)
        z = np.exp(z - z.max(axis=2, keepdims=True))
        out.append(z / z.sum(axis=2, keepdims=True))
        offset += K * A
    return tuple(out)


def _logits(tree: HistoryTree, pols: tuple[np.ndarray, ...], shared: bool) -> np.ndarray:
    """Inverse of :func:`_policy` on full-support rows: [B, D] log-probabilities (0 at illegal actions)."""
    parts = [
        np.where(h.legal[None], np.log(np.maximum(p, 1e-12)), 0.0).reshape(p.shape[0], -1)
        for h, p in zip(tree.local, pols)
    ]
    return parts[0] if shared else np.concatenate(parts, axis=1)


def _softmax_grad(policy: tuple[np.ndarray, ...], grads: tuple[np.ndarray, ...], shared: bool) -> np.ndarray:
    """Chain rule through the per-history softmax: d/dtheta = pi * (g - sum_b pi_b g_b), flattened per
    batch row (summed over agents when their parameters are shared).  # [B, D]"""
    parts = [
        (p * (g - (p * g).sum(axis=2, keepdims=True))).reshape(p.shape[0], -1) for p, g in zip(policy, grads)
    ]
    return np.sum(parts, axis=0) if shared else np.concatenate(parts, axis=1)


def _entropy_grad(policy: tuple[np.ndarray, ...], shared: bool) -> np.ndarray:
    """d/dtheta of the sum over histories of the row entropy H = -sum_a pi_a log pi_a.  # [B, D]"""
    parts = []
    for p in policy:
        logp = np.log(np.where(p > 0, p, 1.0))
        parts.append((-p * (logp - (p * logp).sum(axis=2, keepdims=True))).reshape(p.shape[0], -1))
    return np.sum(parts, axis=0) if shared else np.concatenate(parts, axis=1)


def _polish(policy: tuple[np.ndarray, ...], threshold: float) -> tuple[np.ndarray, ...]:
    out = []
    for p in policy:
        hard = np.eye(p.shape[-1])[np.argmax(p, axis=-1)]
        out.append(np.where(p.max(axis=-1, keepdims=True) > threshold, hard, p))
    return tuple(out)


def _row_search(
    tree: HistoryTree, pols: tuple[np.ndarray, ...], maps: _Maps, shared: bool, rounds: int
) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Best-improvement local search over single rows: set one local history's row (of the shared policy,
    or of one agent) to a pure legal action when that raises OP, up to ``rounds`` times per policy. Takes a
    softmax-saturated gradient point (e.g. 0.98 on a wrong lever after a match) to the vertex it was
    heading for. Skipped (0 rounds) when one round would exceed the evaluation budget.  # (pols, OP [B])"""
    pols = tuple(p.copy() for p in pols)
    value = _op(tree, pols, maps)
    slots = [0] if shared else list(range(tree.game.n_agents))
    moves = [(j, k, a) for j in slots for k, a in zip(*np.nonzero(tree.local[j].legal))]
    entries = sum(p.shape[1] * p.shape[2] for p in pols)
    if (
        len(value) * len(moves) * len(maps) * len(seat_assignments(tree.game.n_agents)) * entries
        > _ROW_SEARCH_BUDGET
    ):
        return pols, value
    active = np.arange(len(value))
    for _ in range(rounds):
        if len(active) == 0:
            break
        B, C = len(active), len(moves)
        cand = [np.repeat(p[active], C, axis=0) for p in pols]  # [B * C, K, A], candidate-minor
        for c, (j, k, a) in enumerate(moves):
            for i in range(tree.game.n_agents):
                if i == j or shared:
                    cand[i][c::C, k] = 0.0
                    cand[i][c::C, k, a] = 1.0
        vals = _op(tree, tuple(cand), maps).reshape(B, C)
        best = vals.argmax(axis=1)
        gain = vals[np.arange(B), best] > value[active] + 1e-12
        for b in np.flatnonzero(gain):
            for i in range(tree.game.n_agents):
                pols[i][active[b]] = cand[i][b * C + best[b]]
            value[active[b]] = vals[b, best[b]]
        active = active[gain]
    return pols, value


def _adam(tree: HistoryTree, theta: np.ndarray, maps: _Maps, shared: bool, config: OPConfig) -> np.ndarray:
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for step in range(1, config.steps + 1):
        policy = _policy(tree, theta, shared)
        grad = _softmax_grad(policy, _op_grad(tree, policy, maps), shared)
        beta = config.entropy * max(0.0, 1.0 - 2.0 * step / config.steps)
        if beta > 0:
            grad = grad + beta * _entropy_grad(policy, shared)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        theta = theta + config.learning_rate * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return theta


def _check_budget(tree: HistoryTree, maps: _Maps, shared: bool, config: OPConfig) -> None:
    """Refuse, before any work, a run whose Adam phase would not fit the memory or the time budget
    (:mod:`ers_exact.util.budget`): one gradient step on a few random starts is measured (its peak memory
    traced, its time on the clock) and scaled to the run's starts (seeds x restarts) and ``steps``."""
    B = config.seeds * config.restarts
    b = min(B, _CALIBRATION_STARTS)
    D = tree.local[0].legal.size if shared else sum(h.legal.size for h in tree.local)
    theta = np.random.default_rng(0).normal(size=(b, D))

    def step() -> None:
        policy = _policy(tree, theta, shared)
        _softmax_grad(policy, _op_grad(tree, policy, maps), shared)

    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    step()
    peak = tracemalloc.get_traced_memory()[1] - base
    if not tracing:
        tracemalloc.stop()
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    where = f"on {tree.game.name} H={tree.game.horizon} with |Phi| = {len(maps)}"
    starts = f"{B:,} starts (--seeds {config.seeds:,} x --restarts {config.restarts:,})"
    check_memory(f"{starts} {where}", peak / b * B, "lower --seeds or --restarts")
    check_time(
        f"--steps {config.steps:,} of {starts} {where}",
        seconds / b * B * max(1, config.steps),
        "lower --steps, --seeds or --restarts",
    )


def _starts(
    tree: HistoryTree,
    maps: _Maps,
    shared: bool,
    config: OPConfig,
    rngs: Sequence[np.random.Generator],
    *,
    warm: Sequence[tuple[np.ndarray, ...] | None],
) -> np.ndarray:
    """Initial logits [seeds * restarts, D], seed-major. Restart r of a seed: r = 2 the warm start from the
    seed's deterministic optimum (when there is one); odd r symmetrised random; otherwise random."""
    D = tree.local[0].legal.size if shared else sum(h.legal.size for h in tree.local)
    theta = np.stack(
        [rng.normal(scale=config.init_scale, size=(config.restarts, D)) for rng in rngs]
    ).reshape(-1, D)
    rows = np.arange(len(theta)) % config.restarts
    sym = np.flatnonzero(rows % 2 == 1)
    if len(sym):
        pols = _policy(tree, theta[sym], shared)
        symm = tuple(
            np.mean([_image(pols[i], *m[i]) for m in maps], axis=0) for i in range(tree.game.n_agents)
        )
        theta[sym] = _logits(tree, symm, shared)
    for s, pol in enumerate(warm):
        if pol is not None and config.restarts > 2:
            mixed = tuple(
                (1 - _WARM_MIX) * p + _WARM_MIX * h.legal / h.legal.sum(axis=1, keepdims=True)
                for p, h in zip(pol, tree.local)
            )
            theta[s * config.restarts + 2] = _logits(tree, tuple(p[None] for p in mixed), shared)[0]
    return theta


def played_histories(
    tree: HistoryTree, policy: Policy, phis: Sequence[Transformation] = (), tol: float = 1e-12
) -> tuple[dict[str, Any], ...]:
    """Per agent, every local history the policy reaches with probability > ``tol`` -- in other-play
    against phi(pi), phi in ``phis`` (either seat; the mean reach), or in self-play when ``phis`` is empty:
    ``{"agent", "history": [a_0, o_1, ...] as names, "reach", "policy": {action name: probability > tol}}``.
    A readable summary of a policy; histories it never reaches are left out."""
    pols, _ = check_policy(tree, policy)
    game, n, out = tree.game, tree.game.n_agents, []
    if phis:
        profiles = _profiles(tree, pols, _maps(tree, phis))  # [F * M, ...], seat rows inner
        seats = np.tile(seat_assignments(n), (len(phis), 1))
        reaches = local_history_reach(tree, profiles)
        reach_of = [reaches[i][seats[:, i] == 0].mean(axis=0) for i in range(n)]
    else:
        reach_of = list(local_history_reach(tree, tuple(p[0] for p in pols)))
    for i, reach in enumerate(reach_of):
        for k in np.flatnonzero(reach > tol):
            names = [
                game.action_names[i][x] if j % 2 == 0 else game.observation_names[i][x]
                for j, x in enumerate(tree.local[i].as_tuple(int(k)))
            ]
            row = pols[i][0, k]
            actions = {game.action_names[i][a]: float(row[a]) for a in np.flatnonzero(row > tol)}
            out.append({"agent": i, "history": names, "reach": float(reach[k]), "policy": actions})
    return tuple(out)


# --- training ------------------------------------------------------------------------------------------


def train_other_play(
    tree: HistoryTree, phis: Sequence[Transformation], config: OPConfig = OPConfig()
) -> OPResult:
    """Maximise OP^Phi for ``config.seeds`` seeds (each: exact over deterministic profiles when there are
    at most ``config.exhaustive``, and Adam from ``config.restarts`` starts); deploy the best."""
    start = time.perf_counter()
    # OP is a mean over Phi: a canonical order makes the result a function of the set, not of its listing
    maps = _maps(tree, sorted(phis, key=lambda p: (p.actions, p.observations, p.states)))
    shared = bool(config.share) and same_local_trees(tree)
    _check_budget(tree, maps, shared, config)
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(config.seed).spawn(config.seeds)]

    n_det, det = (
        (0, None) if config.exhaustive == 0 else _deterministic_search(tree, maps, shared, config.exhaustive)
    )
    exact: list[tuple[tuple[np.ndarray, ...], float, float] | None] = [None] * config.seeds
    if det is not None:
        for s, rng in enumerate(rngs):
            p = _pick(det.op, det.J, rng)
            exact[s] = (det.policy(tree, p, shared), float(det.op[p]), float(det.J[p]))

    theta = _adam(
        tree,
        _starts(tree, maps, shared, config, rngs, warm=[e[0] if e else None for e in exact]),
        maps,
        shared,
        config,
    )
    soft = _policy(tree, theta, shared)
    hard = _polish(soft, config.polish_threshold)
    use_hard = _op(tree, hard, maps) >= _op(tree, soft, maps)
    grad_pols = tuple(np.where(use_hard[:, None, None], h, s) for h, s in zip(hard, soft))
    grad_pols, grad_op = _row_search(tree, grad_pols, maps, shared, config.row_search)
    grad_J = np.asarray(expected_return(tree, grad_pols))

    results = []  # per seed: (policy, OP, J, method)
    for s, pick in enumerate(exact):
        ops = grad_op[s * config.restarts : (s + 1) * config.restarts]
        r = s * config.restarts + int(
            np.flatnonzero(ops >= ops.max() - _TIE)[0]
        )  # the first start at the best
        if pick is not None and pick[1] > grad_op[r] + _TIE:  # the exact search rescues a stuck seed
            results.append((pick[0], pick[1], pick[2], "deterministic"))
        else:
            results.append((tuple(p[r] for p in grad_pols), float(grad_op[r]), float(grad_J[r]), "gradient"))

    k = _pick(np.array([r[1] for r in results]), np.array([r[2] for r in results]))
    grad_desc = (
        f"Adam on the exact OP gradient from {config.restarts} starts per seed (random, symmetrised"
        + (", deterministic optimum + uniform" if det is not None and config.restarts > 2 else "")
        + f"), polish, {config.row_search} rounds of single-row local search"
    )
    if det is not None:
        method = (
            f"{grad_desc}; exact OP over all {n_det:,} deterministic policy profiles where it does better"
        )
    else:
        why = (
            "disabled"
            if config.exhaustive == 0
            else f"{n_det:,} deterministic profiles > budget {config.exhaustive:,}"
        )
        method = f"{grad_desc}; no exhaustive search ({why})"
    return OPResult(
        policy=results[k][0],
        op_value=results[k][1],
        J=results[k][2],
        seed_op_values=tuple(r[1] for r in results),
        seed_J=tuple(r[2] for r in results),
        seed_methods=tuple(r[3] for r in results),
        method=method,
        share=shared,
        n_symmetries=len(maps),
        deterministic_profiles=n_det if det is not None else 0,
        deterministic_optimum=float(det.op.max()) if det is not None else None,
        game=tree.game.name,
        horizon=tree.game.horizon,
        seconds=time.perf_counter() - start,
        config=config.to_json(),
        played=played_histories(tree, results[k][0], phis),
    )


def solve_other_play(
    tree: HistoryTree, symmetries: str | Sequence[Transformation] = "mdp", config: OPConfig = OPConfig()
) -> OPResult:
    """The library entry point of ``ers-exact op``: Phi by name (:data:`SYMMETRY_SETS`) or as a list of
    transformations, then :func:`train_other_play`."""
    name = symmetries if isinstance(symmetries, str) else "given"
    phis = symmetry_set(tree, symmetries) if isinstance(symmetries, str) else list(symmetries)
    return replace(train_other_play(tree, phis, config), symmetries=name)
