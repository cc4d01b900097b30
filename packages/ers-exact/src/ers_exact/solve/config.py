"""The solve layer's settings, readable without loading the solver (numpy, scipy): the configuration of
:func:`~ers_exact.solve.fixed_points.solve_fixed_points` (:class:`SolverConfig`, with the Newton and
continuation settings it derives, each re-exported by the module that uses it), the
default memory budget of a solve (the whole process), and the grids of temperatures that a sweep
accepts (:func:`parse_alphas`). The command line builds its options from these defaults."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "MAX_ALPHAS",
    "ContinuationConfig",
    "NewtonSettings",
    "OptimalSetConfig",
    "SolverConfig",
    "parse_alphas",
    "repeated_alpha",
]

#: Default bound on the solver's whole process (peak resident bytes); batched work is chunked under what is left.
DEFAULT_MEMORY_BUDGET = 1_000_000_000


@dataclass(frozen=True)
class NewtonSettings:
    """Stopping and step rules of :func:`~ers_exact.solve.newton.newton`."""

    steps: int = 60
    tol: float = 1e-11  # converged when ||y - M(y)||_inf < tol * max(1, ||y||_inf)
    max_step: float = 2.0  # cap on a step (inf-norm, logit units), or ||g||_inf where larger
    line_search: int = 4  # step halvings tried at once when the full step does not reduce ||g||_inf
    stall_steps: int = 12  # a start whose residual has not halved in this many steps is given up
    step_tol: float = 1e-9  # ... and its full Newton step ||delta||_inf < step_tol * max(1, ||y||_inf)
    polish_steps: int = 3  # full Newton steps taken to bring a converged point's step under step_tol


@dataclass(frozen=True)
class ContinuationConfig:
    """Parameters of :func:`~ers_exact.solve.continuation.continuation` (recorded in the result)."""

    overshoot: float = 1.1  # trace each branch until lambda > overshoot * lambda* (+ 0.05)
    max_branches: int = 24
    max_steps: int = 4000  # accepted predictor-corrector steps, all branches together
    initial_step: float = 0.05  # arclength, relative to (1 + lambda*) max(1, ||Gamma(0)||)
    max_step: float = 0.25  # arclength cap, same unit, while the test functions watch for branch points
    max_step_alone: float = 2.0  # ... on the principal branch alone (locate_branch_points=False)
    min_step: float = 1e-9
    corrector_tol: float = 1e-7  # ||H||_inf / max(1, ||y||_inf) at a point of the branch-point searches
    path_tol: float = 1e-4  # last correction (or the next, predicted) / max(1, ||y||_inf) at a step
    corrector_steps: int = 8
    max_dist: float = 0.5  # a step is refused when its first Newton correction exceeds this times the step
    max_contraction: float = 0.5  # ... or when a later correction is not this much shorter than the last
    chord_rate: float = 0.25  # corrections reuse the step's last Jacobian while they shrink this fast
    target_dist: float = 0.1  # the next step is scaled so that its first correction is about this x the step
    max_growth: float = 4.0  # ... growing by this factor at most
    hermite: bool = False  # predict by the cubic through the last two points and tangents (False: Euler)
    max_turn: float = 0.5  # radians between successive tangents before the step is halved
    polish_tol: float = 1e-12  # ||y - lambda* Gamma(y)||_inf at a reported crossing
    branch_eps: float = 1e-2  # points this close (relative) to a known branch point are that point
    switch_delta: float = 0.02  # new branches are picked up at lambda_b (1 +- switch_delta)
    switch_eps: tuple[float, ...] = (0.05, 0.5)  # ... from the parent's point pushed this far (relative)
    switch_directions: int = 48  # kernel directions tried at one branch point
    singular_ratio: float = (
        0.25  # a local minimum of sigma_min(A) below this times its neighbours is examined
    )
    singular_tol: float = 1e-6  # ... and is a branch point when the minimum is below this
    locate_branch_points: bool = (
        True  # False: the principal branch alone (as Gambit): no test functions, longer steps
    )
    stop_at_crossing: bool = False  # stop a branch at its first crossing of lambda* (as logit_solve_lambda)
    blas_threads: int | None = 1  # BLAS threads inside the trace (None: leave as configured; util/blas.py)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class SolverConfig:
    """Parameters of :func:`~ers_exact.solve.fixed_points.solve_fixed_points` (recorded in the result)."""

    n_starts: int = 64  # random starts (plus the uniform start and any warm starts)
    seed: int = 0
    damping: float = 0.5  # eta of the damped iteration
    damped_steps: int = 100  # at most, per start; a start stops once it moves by less than damped_tol
    damped_short: int = 10  # Newton runs from each start after this many damped steps and after the last
    damped_tol: float = 1e-6
    cluster_tol: float = 1e-5  # Newton runs once for starts whose policies already agree this closely
    newton_steps: int = 60
    max_newton_step: float = 2.0  # cap on a Newton step (inf-norm, logit units), or ||g||_inf where larger
    line_search: int = 4  # step halvings tried when a Newton step does not reduce ||g||_inf
    stall_steps: int = 12  # a start whose residual has not halved in this many Newton steps is given up
    tol: float = 1e-11  # converged when ||y - M(y)||_inf < tol * max(1, ||y||_inf) ...
    # ... and the full Newton step there ||delta||_inf < step_tol * max(1, ||y||_inf) after at most polish_steps
    # more steps (near a singular root, at a bifurcation, the residual is tiny far from the root)
    step_tol: float = 1e-9
    polish_steps: int = 3
    # a run whose step stays larger belongs to a listed point within near_radius x its step (policies, max abs)
    near_radius: float = 10.0
    dedup_tol: float = 1e-7  # two points are one when their policies differ by less (max abs)
    optimal_tol: float = 1e-9  # pi is self-play optimal when J(pi) >= J* - optimal_tol x (R_max - R_min)
    stable_margin: float = 1e-6  # stable when spectral radius < 1 - margin
    certify: bool = True  # interval Krawczyk test per point
    max_certify_dim: int = 2_000
    complete_search: bool = True  # certified subdivision when the effective dimension is small
    max_complete_dim: int = 3
    max_complete_input_dim: int = (
        64  # ... tried only up to this many coordinates (its first contraction is slow)
    )
    optimum_start: bool = True  # also start near the exact deterministic optimum when it is cheap to find
    optimum_max_policies: int = 5_000
    continuation: bool = True  # also trace the branches from lambda = 0 (ers_exact.solve.continuation)
    max_branches: int = 24  # continuation branches traced at most
    continuation_steps: int = 4_000  # continuation steps, all branches together
    memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET  # peak memory (bytes) of the scope below
    # "process": the whole process's resident memory (the CLI: a command is its process); "call": what the solve
    # adds to what was resident when it was called (a library call inside a larger process, e.g. a test run)
    memory_scope: Literal["process", "call"] = "call"
    blas_threads: int | None = 1  # BLAS threads inside the solver (None: leave as configured)
    progress: bool | None = None  # progress bars on stderr (None: when it is a terminal)

    def __post_init__(self) -> None:
        if self.memory_scope not in ("process", "call"):
            raise ValueError(f"SolverConfig.memory_scope = {self.memory_scope!r}: choose 'process' or 'call'")

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def newton_settings(self) -> NewtonSettings:
        return NewtonSettings(
            steps=self.newton_steps,
            tol=self.tol,
            max_step=self.max_newton_step,
            line_search=self.line_search,
            stall_steps=self.stall_steps,
            step_tol=self.step_tol,
            polish_steps=self.polish_steps,
        )

    @property
    def continuation_config(self) -> ContinuationConfig:
        return ContinuationConfig(max_branches=self.max_branches, max_steps=self.continuation_steps)


@dataclass(frozen=True)
class OptimalSetConfig:
    """Parameters of :func:`~ers_exact.solve.optimal_set.certified_optimal_set` (recorded in the result).

    The search covers the whole domain |y| <= B / alpha of logit coordinates (every Boltzmann fixed point lies
    in it) and proves that every fixed point with J >= J*_alpha - eps is in its list."""

    eps: float = 1e-6  # the set proven complete: all fixed points with J >= J* - eps
    max_boxes: int = 400_000  # boxes examined at most (the search then stops and reports what is left)
    # wall-clock limit of the search (closed blocks, then the branch-and-bound; it then stops likewise); listing
    # the images of the optimal roots afterwards stops after as long again (what is left: unmapped)
    max_seconds: float = 600.0
    batch: int = 128  # boxes evaluated together (numpy over the batch)
    contract_rounds: int = 6  # rounds of Y <- Y n M(Y) per box before the Krawczyk test
    exact_rounds: int = 1  # ... of which the first this many solve the two-agent stage games exactly
    contract_min: int = 8  # ... after the first, only while this many boxes of the batch still shrink
    # ... and after the exact rounds, the held-agent stage bound only where each held agent's polytope has at
    # most this many fill orders (stage_bound.fill_orders: 24 at 4 actions, 80 at 5; the bound took 86% of
    # GridSmall's search, 5 actions)
    held_orders: int = 24
    krawczyk_width: float = 64.0  # the Krawczyk test runs on boxes whose logit widths are all below this
    certify_radii: tuple[float, ...] = (
        1e-7,
        1e-5,
        1e-3,
        1e-2,
        0.1,
        0.5,
        2.0,
    )  # around each candidate (largest kept)
    dedup_tol: float = 1e-7  # the solver's candidates (policies, max abs)
    progress: bool | None = None  # progress on stderr (None: when it is a terminal)
    tie_equivalent: bool = True  # tie logits of proven-equivalent last-stage histories (solve/equivalence.py)
    orbit_domain: bool = (
        True  # explore a fundamental domain of the relabellings passed (solve/orbit_domain.py)
    )
    reach_power: float = 0.5  # bisection score: probability ranges x (reach probability) ** this
    closed_blocks: bool = True  # solve closed blocks of last-stage logits first (solve/closed_blocks.py)
    local_domain: bool = True  # sort each last-stage component by its relabellings (solve/local_symmetry.py)
    newton_boxes: int = 8  # per batch, Newton from the centres of this many boxes of highest J bound (0: off)
    newton_steps: int = 30  # Newton iterations of that incumbent search
    newton_share: float = 0.1  # ... which takes at most this share of the search's time
    # worker processes of the branch-and-bound (1: this process alone; > 1: solve/optimal_set_pool.py)
    workers: int = 1

    def __post_init__(self) -> None:
        if not (isinstance(self.workers, int) and self.workers >= 1):
            raise ValueError(f"OptimalSetConfig.workers = {self.workers!r}: give an integer >= 1")
        if not (isinstance(self.held_orders, int) and self.held_orders >= 0):
            raise ValueError(f"OptimalSetConfig.held_orders = {self.held_orders!r}: give an integer >= 0")
        # as the command line checks them (a negative or NaN eps searched and then blamed "no certified fixed
        # point"; an infinite one called every fixed point optimal; NaN seconds meant none)
        for name in ("eps", "max_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"OptimalSetConfig.{name} = {value!r}: give a finite number > 0")
        for name in ("batch", "max_boxes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"OptimalSetConfig.{name} = {value!r}: give an integer >= 1")

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


#: The largest alpha grid :func:`parse_alphas` accepts.
MAX_ALPHAS = 1000


def parse_alphas(text: str, max_points: int | None = None) -> list[float]:
    """'0.05:2:0.05' (start:stop:step, stop included) or '0.2,0.3,0.45': finite, positive, distinct temperatures.

    Raises ``ValueError`` ``"alphas '<text>': <what is wrong>"``; a grid of more than ``max_points`` (default
    :data:`MAX_ALPHAS`) is refused, as each point is a full solve."""
    limit = MAX_ALPHAS if max_points is None else max_points
    form = "use start:stop:step (e.g. 0.1:2:0.1) or a comma list (e.g. 0.25,0.5,1)"
    parts = text.split(":") if ":" in text else [v for v in text.split(",") if v.strip()]
    try:
        numbers = [float(v) for v in parts]
    except ValueError:
        raise ValueError(f"alphas {text!r}: cannot parse; {form}") from None
    if ":" in text and len(numbers) != 3:
        raise ValueError(f"alphas {text!r}: cannot parse; {form}")
    if not numbers:
        raise ValueError(f"alphas {text!r}: no temperature given; {form}")
    if not all(math.isfinite(v) for v in numbers) or min(numbers[:2] if ":" in text else numbers) <= 0:
        raise ValueError(f"alphas {text!r}: temperatures must be finite and > 0")
    if ":" not in text:
        values = numbers
    else:
        start, stop, step = numbers
        if step <= 0:
            raise ValueError(f"alphas {text!r}: the step must be > 0")
        if stop < start:
            raise ValueError(f"alphas {text!r}: stop {stop} is below start {start} (start:stop:step)")
        count = math.floor(min((stop - start) / step, float(limit)) + 1e-9) + 1
        # 15 significant digits: no float noise of the sum (0.1 + 2 * 0.1 is 0.3), and every digit a user writes
        values = [float(f"{start + k * step:.15g}") for k in range(count)]
    if len(values) > limit:
        raise ValueError(
            f"alphas {text!r}: more than {limit} points (each is a full solve); use a coarser grid"
        )
    repeated = repeated_alpha(values)
    if repeated is not None:  # each would be a second, identical row of the sweep or atlas
        why = "a step below the 15 significant digits kept" if ":" in text else "give each temperature once"
        raise ValueError(f"alphas {text!r}: {repeated!r} appears more than once; {why}")
    return values


def repeated_alpha(alphas: Sequence[float]) -> float | None:
    """A temperature that appears more than once in ``alphas`` (compared as floats: 0.3 and 0.30 are one),
    else None. Sweeps and atlases refuse such grids: each alpha is one row."""
    seen: set[float] = set()
    for a in alphas:
        if float(a) in seen:
            return float(a)
        seen.add(float(a))
    return None
