"""The solver at the size of the standard benchmarks (issue 12): Dec-Tiger H = 3 at alpha = 1, 0.5, 0.25
with every point converged and certified, the crash of `solve ... --starts 1|4` at alpha = 0.25 (``cannot
reshape array of size 0``, no start converged) as a regression test, and the memory budget's refusal."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from ers_exact.cli import main
from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.derivatives import MemoryBudgetError
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
from ers_exact.solve.newton import policy_bytes
from ers_exact.util.budget import resident_bytes
from tests.own_process import run_json

DECTIGER_H3_OPTIMUM = 5.190812  # masplan.org, undiscounted


@pytest.fixture(scope="module")
def dectiger3():
    return enumerate_histories(get_game("dectiger", horizon=3))


@pytest.mark.parametrize("starts", [1, 4])
def test_solve_dectiger_h3_low_temperature_with_few_starts_does_not_crash(capsys, starts: int) -> None:
    """Issue 12: `ers-exact solve dectiger --horizon 3 --alpha 0.25 --starts 1|4` crashed after 80-100 s."""
    assert (
        main(["solve", "dectiger", "--horizon", "3", "--alpha", "0.25", "--starts", str(starts), "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["J_star"] == pytest.approx(DECTIGER_H3_OPTIMUM, abs=1e-6)
    assert all(p["residual"] < 1e-10 for p in out["fixed_points"])


def test_no_converged_start_gives_an_empty_list_not_a_crash(dectiger3) -> None:
    cfg = SolverConfig(
        n_starts=1, damped_steps=0, newton_steps=0, continuation=False, optimum_start=False, certify=False
    )
    fs = solve_fixed_points(dectiger3, 0.25, cfg)
    assert fs.converged_starts == 0 and fs.points == ()
    assert np.isnan(fs.J_star) and fs.to_json()["n_fixed_points"] == 0


def test_memory_budget_refuses_at_once_with_an_estimate(dectiger3) -> None:
    start = time.perf_counter()
    with pytest.raises(MemoryBudgetError, match=r"needs about [0-9.]+ MB .* budget is 1.00 kB"):
        solve_fixed_points(dectiger3, 0.5, SolverConfig(memory_budget_bytes=1000))
    assert time.perf_counter() - start < 1.0


def test_a_small_budget_chunks_and_gives_the_same_points(dectiger3) -> None:
    """A whole-process budget that leaves room for about three policies' Newton steps: the work is chunked
    (Newton's Jacobians too) and the points are the same."""
    cfg = SolverConfig(n_starts=8, continuation=False, certify=False)
    big = solve_fixed_points(dectiger3, 1.0, cfg)
    coords = LogitCoordinates(dectiger3)
    per = policy_bytes(coords)
    budget = int(resident_bytes() + coords.derivatives.structure_bytes() + 3 * per)
    small = solve_fixed_points(
        dectiger3,
        1.0,
        SolverConfig(
            n_starts=8, continuation=False, certify=False, memory_budget_bytes=budget, memory_scope="process"
        ),
    )
    assert [p.J for p in small.points] == pytest.approx([p.J for p in big.points], abs=1e-10)


def test_memory_budget_is_for_the_whole_process(dectiger3) -> None:
    """Issue 23, point 5: a budget that one evaluation fits but the process (what is resident already, the
    index structures, one policy's Newton step) does not is refused at once, naming each part."""
    coords = LogitCoordinates(dectiger3)
    assert coords.derivatives.bytes_per_policy(True) < 2**23 < resident_bytes()
    start = time.perf_counter()
    with pytest.raises(
        MemoryBudgetError, match=r"whole process needs at least .* in use: .* budget is 8.39 MB"
    ):
        solve_fixed_points(dectiger3, 0.5, SolverConfig(memory_budget_bytes=2**23, memory_scope="process"))
    assert time.perf_counter() - start < 1.0


def test_a_library_call_budgets_what_the_solve_adds(dectiger3) -> None:
    """The default scope (``"call"``): a process that already holds more than the budget (this test run)
    still solves under it; the budget bounds what the solve adds."""
    budget = 2**25
    assert resident_bytes() > budget
    cfg = SolverConfig(n_starts=4, continuation=False, certify=False, memory_budget_bytes=budget)
    assert cfg.memory_scope == "call"
    with pytest.raises(ValueError, match="memory_scope"):
        SolverConfig(memory_scope="thread")  # type: ignore[arg-type]
    assert solve_fixed_points(dectiger3, 0.5, cfg).points
    one = LogitCoordinates(dectiger3).derivatives.bytes_per_policy(True)  # fits, the rest of a step does not
    with pytest.raises(MemoryBudgetError, match=r"the solve needs at least .* added since the call"):
        solve_fixed_points(dectiger3, 0.5, SolverConfig(memory_budget_bytes=int(one * 1.01)))


@pytest.mark.parametrize(  # the lowest temperature stays in the default suite
    "alpha", [pytest.param(1.0, marks=pytest.mark.slow), pytest.param(0.5, marks=pytest.mark.slow), 0.25]
)
def test_dectiger_h3_every_point_converged_and_certified(dectiger3, alpha: float) -> None:
    """Issue 12 (393 s at alpha = 0.5, nothing in 300 s at 0.25): the default solve (64 starts +
    continuation) within a minute (a few seconds here), every point's residual < 1e-10 and
    certified; at alpha = 0.25 the best point is within 1e-5 of the deterministic optimum."""
    start = time.perf_counter()
    fs = solve_fixed_points(dectiger3, alpha)
    assert time.perf_counter() - start < 60
    assert fs.points and fs.n_starts >= 64
    assert all(p.residual < 1e-10 for p in fs.points)
    assert all(p.certified for p in fs.points)
    assert any("continuation" in p.method and p.branch == 0 for p in fs.points)
    if alpha == 0.25:
        assert fs.J_star == pytest.approx(DECTIGER_H3_OPTIMUM, abs=1e-5)


_PEAK = """
import json, sys
from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
horizon, budget = int(sys.argv[1]), float(sys.argv[2])
tree = enumerate_histories(get_game("dectiger", horizon=horizon))
cfg = SolverConfig(memory_budget_bytes=int(budget), memory_scope="process", progress=False)
fs = solve_fixed_points(tree, 0.5, cfg)
from tests.own_process import peak_rss_mb  # this process image's own peak (VmHWM), not its parent's
peak = peak_rss_mb() * 2**20
print(json.dumps({"peak": peak, "points": len(fs.points), "certified": all(p.certified for p in fs.points)}))
"""


@pytest.mark.parametrize(
    ("horizon", "budget"),
    [pytest.param(2, 60e6, id="H2-60MB"), pytest.param(3, 120e6, id="H3-120MB", marks=pytest.mark.slow)],
)
def test_whole_process_stays_under_the_memory_budget(horizon: int, budget: float) -> None:
    """Issue 23, point 5: a solve in a process of its own, peak resident memory (interpreter and numpy
    included) under ``memory_budget_bytes``, and the points still found and certified."""
    out = run_json(_PEAK, str(horizon), str(budget), timeout=600)
    assert out["points"] > 0 and out["certified"]
    assert out["peak"] < budget


def test_a_game_without_free_coordinates_has_its_one_policy_certified() -> None:
    """One agent with one action (found by the extreme-alpha Hypothesis test): D = 0 logit coordinates, the
    one policy is the one fixed point, certified (the batched Krawczyk test once failed on an empty box)."""
    from tests.exact.strategies import GameSpec

    spec = GameSpec(
        n_agents=1,
        n_states=2,
        n_actions=(1,),
        n_observations=(2,),
        horizon=2,
        discount=1.0,
        sparsity=0.3,
        reward_kind="grid",
        legal=False,
        seed=0,
    )
    fs = solve_fixed_points(enumerate_histories(spec.build()), 1.0, SolverConfig(n_starts=3, progress=False))
    assert len(fs.points) == 1 and fs.points[0].certified


def test_a_command_budgets_its_whole_process_only_when_it_is_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ers-exact`` run as a command (argv from sys.argv) solves with ``memory_scope="process"``; ``main([...])``
    called from Python (this test) with ``"call"``."""
    from ers_exact.cli import commands

    seen: list[str] = []
    real = commands.solver_config

    def spy(o):  # type: ignore[no-untyped-def]
        cfg = real(o)
        seen.append(cfg.memory_scope)
        return cfg

    monkeypatch.setattr(commands, "solver_config", spy)
    assert main(["solve", "toy-coordination", "--alpha", "1", "--json"]) == 0
    argv = ["ers-exact", "solve", "toy-coordination", "--alpha", "1", "--json", "--memory-budget", "100"]
    monkeypatch.setattr("sys.argv", argv)  # a large budget: this test run's process may hold over 1 GB
    assert main() == 0
    assert seen == ["call", "process"]
