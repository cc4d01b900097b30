"""The memory budget of :func:`ers_exact.solve.fixed_points.solve_fixed_points`: what the solve counts as its
own (``budget_base``), the logit coordinates of its search and of its certificates, chunked under what is
left of ``SolverConfig.memory_budget_bytes`` once the evaluator's index structures are built, and the
refusals (:class:`~ers_exact.solve.derivatives.MemoryBudgetError`) when not even one policy's step fits."""

from __future__ import annotations

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.certify import certificate_bytes
from ers_exact.solve.config import SolverConfig
from ers_exact.solve.dense import MAX_DENSE_BYTES, dense_structure_bytes
from ers_exact.solve.derivatives import MemoryBudgetError
from ers_exact.solve.newton import policy_bytes
from ers_exact.util.budget import check_memory, format_bytes, resident_bytes

__all__ = [
    "DENSE_BUILD_PEAK",
    "START_BYTES_PER_COORDINATE",
    "budget_base",
    "budgeted_coordinates",
    "certificate_coordinates",
    "check_start_memory",
]

#: memory of one start of the multistart search per logit coordinate: y, its damped and Newton copies, the
#: residuals and the policies of the de-duplication (measured: 3-6x the [P, D] array of starts)
START_BYTES_PER_COORDINATE = 8 * 12
#: the dense evaluator's build peaks at this multiple of its estimate (measured: Dec-Tiger H=4, 1.2x)
DENSE_BUILD_PEAK = 1.25


def budget_base(cfg: SolverConfig) -> float:
    """The resident bytes the budget does not count: with ``memory_scope="call"`` what is resident when the
    solve starts (other work of the process), with ``"process"`` nothing."""
    return resident_bytes() if cfg.memory_scope == "call" else 0.0


def budgeted_coordinates(tree: HistoryTree, cfg: SolverConfig, base: float) -> LogitCoordinates:
    """The logit coordinates whose batched work is chunked under what ``memory_budget_bytes`` leaves for it
    in the whole process (``memory_scope="process"``, the CLI) or above what was resident at the call
    (``"call"``, ``base``): the budget less what is resident once the evaluator's index structures are built
    (interpreter, libraries, the tree). Refused at once (:class:`MemoryBudgetError`, before any
    iteration) when not even one policy's Newton or continuation step fits beside the index structures and
    their interval parts. The dense evaluator of a small two-agent game (:mod:`ers_exact.solve.dense`) is
    used where its arrays fit beside the reference's; the interval parts are built only by the certificates,
    which run after the search and release the dense evaluator first where both would not fit
    (:func:`certificate_coordinates`)."""
    budget = cfg.memory_budget_bytes
    coords = LogitCoordinates(tree, memory_budget=budget)
    der = coords.derivatives
    der.chunk_size(True, budget)  # one evaluation alone over the budget: refused before building anything
    per, structures = policy_bytes(coords), (0 if der.prepared else der.structure_bytes())
    resident = resident_bytes() - base
    if resident + structures + per > budget:
        _refuse(tree, coords, cfg, resident, structures, per)
    # the dense evaluator (two-agent games) wherever its arrays fit the budget beside the reference's
    size = dense_structure_bytes(tree)
    search = structures - (der.interval_bytes() if structures else 0)  # the search builds no interval parts
    dense = size is not None and resident + search + DENSE_BUILD_PEAK * size + per <= budget
    der.prepare()
    largest = max(size or 0, MAX_DENSE_BYTES)  # past the default limit where the budget holds it
    if dense:  # built now, so that the memory measured next holds it
        LogitCoordinates(tree, max_dense_bytes=largest).dense_map  # noqa: B018
    resident = resident_bytes() - base
    if not dense:  # no evaluator to release before the certificates: their parts count from the start
        resident += der.interval_bytes()
    if resident + per > budget:
        _refuse(tree, coords, cfg, resident, 0, per)
    return LogitCoordinates(tree, memory_budget=int(budget - resident), dense=dense, max_dense_bytes=largest)


def check_start_memory(tree: HistoryTree, coords: LogitCoordinates, cfg: SolverConfig, n_runs: int) -> None:
    """Refuse (``check_memory``) a multistart of ``n_runs`` runs whose starts and first batch would not fit the
    machine: ``START_BYTES_PER_COORDINATE`` per run and coordinate, and one batch (chunked under the budget)."""
    batch = min(cfg.memory_budget_bytes, n_runs * coords.derivatives.bytes_per_policy(True))
    check_memory(
        f"--starts {cfg.n_starts:,} on {tree.game.name} H={tree.game.horizon}",
        n_runs * START_BYTES_PER_COORDINATE * max(1, coords.dim) + batch,
        "lower --starts",
    )


def certificate_coordinates(coords: LogitCoordinates, cfg: SolverConfig, base: float) -> LogitCoordinates:
    """The coordinates the certificates run on (reference evaluator on interval arrays, never the dense one),
    with the budget that is left for their boxes once the interval parts of the index structures are built
    (:meth:`~ers_exact.solve.logit_structure.LogitStructure.interval_bytes`); the tree's dense evaluator is
    released first where it and one box's test (:func:`~ers_exact.solve.certify.certificate_bytes`) would not
    fit together (it is rebuilt if a later solve of the tree needs it)."""
    der, budget = coords.derivatives, cfg.memory_budget_bytes
    parts = 0 if der.interval_built else der.interval_bytes()
    if coords.dense_map is not None and (
        resident_bytes() - base + parts + certificate_bytes(coords) > budget
    ):
        coords.release_dense()
    left = budget - (resident_bytes() - base) - parts
    return LogitCoordinates(coords.tree, memory_budget=max(1, int(left)), dense=False)


def _refuse(
    tree: HistoryTree,
    coords: LogitCoordinates,
    cfg: SolverConfig,
    resident: float,
    structures: float,
    per: float,
) -> None:
    game, budget = tree.game, cfg.memory_budget_bytes
    built = f" + {format_bytes(structures)} for its index structures" if structures else ""
    scope, held = (
        ("the whole process", "interpreter, libraries, the history tree")
        if cfg.memory_scope == "process"
        else ("the solve", "added since the call")
    )
    raise MemoryBudgetError(
        f"{game.name} H={game.horizon}: {scope} needs at least "
        f"{format_bytes(resident + structures + per)} ({format_bytes(resident)} in use: {held}{built}; "
        f"{format_bytes(per)} for one policy's Newton or continuation step, "
        f"D = {coords.dim:,} coordinates, {tree.n_joint_nodes:,} joint nodes); the memory budget is "
        f"{format_bytes(budget)}. Raise --memory-budget (GB) or lower the horizon."
    )
