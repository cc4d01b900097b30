"""Adam on the exact OP^Phi gradient, for :func:`ers_exact.zsc.other_play.train_other_play` (whose docstring
tells the method): the softmax parameterisation over legal actions, the starts (random, symmetrised, and
warm from a seed's deterministic optimum), Adam with the entropy bonus annealed to 0 over the first half,
the budget check before a run (:func:`check_budget`), the polish and the single-row search after it
(:func:`gradient_runs`)."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Sequence

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.values import expected_return
from ers_exact.util.budget import check_memory, check_time
from ers_exact.util.progress import Progress
from ers_exact.zsc.config import OPConfig
from ers_exact.zsc.op_objective import SymmetryMaps, batch_op_gradient, batch_op_values, policy_image
from ers_exact.zsc.op_search import row_search

__all__ = ["ascent_work", "check_budget", "gradient_runs"]

_WARM_MIX = 0.2  # weight of uniform play in the warm start from a deterministic optimum
_CALIBRATION_STARTS = 8  # starts of the gradient step timed (and its memory traced) before a run


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


def _adam(
    tree: HistoryTree,
    theta: np.ndarray,
    maps: SymmetryMaps,
    shared: bool,
    config: OPConfig,
    bar: Progress | None = None,
) -> np.ndarray:
    """``config.steps`` Adam steps on every start (the rows of ``theta``) at once; ``bar`` advances by the
    number of starts after each step (``starts x steps`` in all)."""
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for step in range(1, config.steps + 1):
        policy = _policy(tree, theta, shared)
        grad = _softmax_grad(policy, batch_op_gradient(tree, policy, maps), shared)
        beta = config.entropy * max(0.0, 1.0 - 2.0 * step / config.steps)
        if beta > 0:
            grad = grad + beta * _entropy_grad(policy, shared)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        theta = theta + config.learning_rate * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
        if bar is not None:
            bar.update(len(theta))
    return theta


def ascent_work(config: OPConfig) -> int:
    """The Adam phase's work in start-steps: ``seeds x restarts`` starts, ``steps`` each (a progress bar's
    total)."""
    return config.seeds * config.restarts * config.steps


def check_budget(tree: HistoryTree, maps: SymmetryMaps, shared: bool, config: OPConfig) -> None:
    """Refuse, before any work, a run whose Adam phase would not fit the memory or the time budget
    (:mod:`ers_exact.util.budget`): one gradient step on a few random starts is measured (its peak memory
    traced, its time on the clock) and scaled to the run's starts (seeds x restarts) and ``steps``."""
    B = config.seeds * config.restarts
    b = min(B, _CALIBRATION_STARTS)
    D = tree.local[0].legal.size if shared else sum(h.legal.size for h in tree.local)
    theta = np.random.default_rng(0).normal(size=(b, D))

    def step() -> None:
        policy = _policy(tree, theta, shared)
        _softmax_grad(policy, batch_op_gradient(tree, policy, maps), shared)

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
    maps: SymmetryMaps,
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
            np.mean([policy_image(pols[i], *m[i]) for m in maps], axis=0) for i in range(tree.game.n_agents)
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


def gradient_runs(
    tree: HistoryTree,
    maps: SymmetryMaps,
    shared: bool,
    config: OPConfig,
    rngs: Sequence[np.random.Generator],
    warm: Sequence[tuple[np.ndarray, ...] | None],
    bar: Progress | None = None,
) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
    """Every start's Adam run (``warm``: per seed, the deterministic optimum its warm start mixes with uniform
    play, or None), then the polish (kept where it does not lower OP) and the row search: (policies
    [seeds * restarts, K_i, A_i] per agent, their OP values, their J). ``bar`` (a progress bar) advances by
    ``seeds * restarts`` after each Adam step: :func:`ascent_work` in all."""
    theta = _adam(tree, _starts(tree, maps, shared, config, rngs, warm=warm), maps, shared, config, bar)
    soft = _policy(tree, theta, shared)
    hard = _polish(soft, config.polish_threshold)
    use_hard = batch_op_values(tree, hard, maps) >= batch_op_values(tree, soft, maps)
    pols = tuple(np.where(use_hard[:, None, None], h, s) for h, s in zip(hard, soft))
    pols, op = row_search(tree, pols, maps, shared, config.row_search)
    return pols, op, np.asarray(expected_return(tree, pols))
