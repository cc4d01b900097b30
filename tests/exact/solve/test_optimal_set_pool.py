"""The optimal-set search over worker processes (``OptimalSetConfig.workers``, ``solve/optimal_set_pool.py``):
it proves the same set as the search in one process (same completeness, the same optimal points), it is
deterministic for a given number of workers, a budget stop still reports what is left, and bad input is
refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from ers_exact.cli import main
from ers_exact.games import get_game, load_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.config import OptimalSetConfig, SolverConfig
from ers_exact.solve.optimal_set import OptimalSetResult, certified_optimal_set
from ers_exact.symmetry.mdp_group import decpomdp_group
from tests.exact.solve.test_optimal_set import check_twin

SERIAL = OptimalSetConfig(max_seconds=60.0, progress=False)
POOL = dataclasses.replace(SERIAL, workers=2)
SOLVER = SolverConfig(n_starts=16, complete_search=False, progress=False)


def _same_set(a: OptimalSetResult, b: OptimalSetResult) -> None:
    """Both complete with the same optimal points (policies within 1e-7) and overlapping J* enclosures."""
    assert a.complete and b.complete, (a.note, b.note)
    assert max(a.J_star_lo, b.J_star_lo) <= min(a.J_star_hi, b.J_star_hi) + 1e-12
    assert len(a.optimal_points) == len(b.optimal_points)
    flat = lambda p: np.concatenate([x.ravel() for x in p.policy])  # noqa: E731
    pa, pb = [flat(p) for p in a.optimal_points], [flat(p) for p in b.optimal_points]
    for x in pa:
        assert min(np.max(np.abs(x - y)) for y in pb) < 1e-7


@pytest.mark.parametrize(
    ("name", "alpha"),
    [("two-lever", 0.25), ("handshake", 0.25), ("dectiger", 1.0), ("toy-coordination", 0.25)],
)
def test_workers_prove_the_same_set(name: str, alpha: float) -> None:
    game = get_game(name)
    rel = decpomdp_group(game).policy_parts
    tree = enumerate_histories(game)
    one = certified_optimal_set(tree, alpha, SERIAL, solver=SOLVER, relabellings=rel)
    two = certified_optimal_set(tree, alpha, POOL, solver=SOLVER, relabellings=rel)
    _same_set(one, two)
    assert two.config.workers == 2


def test_workers_on_a_longer_search(dpomdp_dir: Path) -> None:
    """recycling H=2 at alpha 0.25: ~2,300 boxes, so many batches run side by side; the same single point."""
    tree = enumerate_histories(load_game(str(dpomdp_dir / "recycling.dpomdp"), horizon=2))
    one = certified_optimal_set(tree, 0.25, SERIAL, solver=SOLVER)
    two = certified_optimal_set(tree, 0.25, POOL, solver=SOLVER)
    _same_set(one, two)
    assert len(two.optimal_points) == 1


def test_a_twin_only_the_search_finds_is_found_by_a_worker() -> None:
    """The solver's list cut to one optimal point; its planted twin is a root that a worker's Krawczyk test
    finds and this process then lists (``found_by == "search"``)."""
    assert check_twin(3, 2, 0.1, dataclasses.replace(POOL, max_seconds=20.0))


def test_workers_are_deterministic() -> None:
    tree = enumerate_histories(get_game("dectiger"))
    runs = [certified_optimal_set(tree, 0.25, POOL, solver=SOLVER) for _ in range(2)]
    assert runs[0].boxes == runs[1].boxes and runs[0].pruned == runs[1].pruned
    assert [p.J for p in runs[0].points] == [p.J for p in runs[1].points]


def test_a_budget_stop_with_workers_reports_what_is_left() -> None:
    tree = enumerate_histories(get_game("dectiger"))
    result = certified_optimal_set(tree, 0.25, dataclasses.replace(POOL, max_boxes=4), solver=SOLVER)
    assert not result.complete
    assert result.boxes_left > 0 and "NOT proven complete" in result.note


def test_bad_worker_counts_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="workers"):
        OptimalSetConfig(workers=0)
    assert main(["optimal-set", "handshake", "--alpha", "0.25", "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("field", "value"),
    [("eps", -1.0), ("eps", float("nan")), ("eps", float("inf")), ("eps", 0.0), ("max_seconds", float("nan"))]
    + [("max_seconds", -1.0), ("batch", 0), ("max_boxes", 0), ("batch", True), ("eps", "1e-6")],
)
def test_the_library_refuses_what_the_command_line_refuses(field: str, value: object) -> None:
    """A negative or NaN eps searched and blamed "no certified fixed point", an infinite one called every fixed
    point optimal, NaN seconds meant none, batch 0 passed (found by an audit, 2026-12-07)."""
    with pytest.raises(ValueError, match=f"OptimalSetConfig.{field}"):
        OptimalSetConfig(**{field: value})  # type: ignore[arg-type]
