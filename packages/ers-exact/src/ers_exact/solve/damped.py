"""The damped iteration of the multistart search, pi <- (1 - eta) pi + eta F(pi) in probability space, batched
over the starts and computed on log pi (log-sum-exp), so that probabilities that underflow at a small alpha keep
their logits (:func:`ers_exact.solve.fixed_points.solve_fixed_points`).

Two paths give the same iterates: per agent through :class:`~ers_exact.solve.boltzmann.LogitCoordinates`'
conversions (the reference, any game), and on the stacked sequence arrays of the dense evaluator
(:mod:`ers_exact.solve.dense`, small two-agent games), where a step is a dozen array operations."""

from __future__ import annotations

import numpy as np

from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.config import SolverConfig
from ers_exact.util.progress import Progress

__all__ = ["damped"]


def damped(
    coords: LogitCoordinates, y: np.ndarray, alpha: float, cfg: SolverConfig, bound: float, bar: Progress
) -> tuple[np.ndarray, np.ndarray]:
    """Each start until it moves by less than ``damped_tol`` (max abs in probability), at most
    ``damped_steps`` steps. Returns the logits after ``damped_short`` steps (Newton's starts towards any fixed
    point) and at the end (near the stable points the damped iteration is attracted to), clipped to
    [-bound, bound]."""
    if coords.dense_map is not None:
        return _dense(coords, y, alpha, cfg, bound, bar)
    return _reference(coords, y, alpha, cfg, bound, bar)


def _dense(
    coords: LogitCoordinates, y: np.ndarray, alpha: float, cfg: SolverConfig, bound: float, bar: Progress
) -> tuple[np.ndarray, np.ndarray]:
    """The damped iteration on stacked log-policies [P, S] (illegal and padding actions at the dense map's NEG)."""
    dense = coords.dense_map
    assert dense is not None

    def logits(lp: np.ndarray) -> np.ndarray:
        return np.clip(lp[:, dense.pos] - lp[:, dense.seq_r], -bound, bound)

    logs = dense.log_policy(y)
    short = logits(logs)
    active = np.arange(len(y))
    keep, move = np.log1p(-cfg.damping), np.log(cfg.damping)
    for step in range(cfg.damped_steps):
        if active.size == 0:
            break
        cur = logs[active]
        image = dense.log_policy(coords.logit_map(logits(cur), alpha))
        diff = np.abs(np.exp(image) - np.exp(cur)).max(axis=1)
        logs[active] = np.logaddexp(keep + cur, move + image)
        active = active[diff >= cfg.damped_tol]
        if step + 1 == cfg.damped_short:
            short = logits(logs)
        bar.update()
    return short, logits(logs)


def _reference(
    coords: LogitCoordinates, y: np.ndarray, alpha: float, cfg: SolverConfig, bound: float, bar: Progress
) -> tuple[np.ndarray, np.ndarray]:
    """pi <- (1 - eta) pi + eta F(pi) in probability space, batched, each start until it moves by less than
    ``damped_tol``; computed on log pi (log-sum-exp), so probabilities that underflow at a small alpha keep
    their logits. Returns the logits after ``damped_short`` steps (Newton's starts towards any fixed
    point) and at the end (near the stable points the damped iteration is attracted to), clipped."""
    logs = coords.to_log_policy(y)
    short = np.clip(coords.from_log_policy(logs), -bound, bound)
    active = np.arange(len(y))
    keep, move = np.log1p(-cfg.damping), np.log(cfg.damping)
    for step in range(cfg.damped_steps):
        if active.size == 0:
            break
        cur = tuple(lp[active] for lp in logs)
        y_cur = np.clip(coords.from_log_policy(cur), -bound, bound)
        image = coords.to_log_policy(coords.logit_map(y_cur, alpha))
        diff = np.max([np.abs(np.exp(f) - np.exp(c)).max(axis=(1, 2)) for f, c in zip(image, cur)], axis=0)
        for lp, c, f in zip(logs, cur, image):
            lp[active] = np.logaddexp(keep + c, move + f)
        active = active[diff >= cfg.damped_tol]
        if step + 1 == cfg.damped_short:
            short = np.clip(coords.from_log_policy(logs), -bound, bound)
        bar.update()
    return short, np.clip(coords.from_log_policy(logs), -bound, bound)
