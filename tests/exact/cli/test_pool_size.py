"""``zsc`` and ``discover`` report the pool size they used: ``--pool-source exact`` draws at most |Pi*_alpha|
policies, whatever ``--k`` asks for (toy-coordination at alpha 0.3: ``--k 100`` gave a pool of 2 while the
JSON recorded only k = 100). The expected size is the solver's own count of optimal fixed points."""

from __future__ import annotations

import json

import pytest

from ers_exact.cli import main
from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points

TOY = ["toy-coordination", "--pool-source", "exact", "--alpha", "0.3", "--k", "100"]


@pytest.fixture(scope="module")
def n_optimal() -> int:
    """|Pi*_alpha| of the toy game at alpha 0.3, as ``ers-exact solve`` finds and certifies it."""
    fs = solve_fixed_points(enumerate_histories(get_game("toy-coordination")), 0.3, SolverConfig())
    assert fs.complete, "the solver's set is not proven complete: its count is no reference"
    n = len(fs.optimal_points)
    assert 1 < n < 100  # k = 100 is capped, and a pool of one would not show which size is reported
    return n


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    assert main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    return result, capsys.readouterr().out


def test_discover_reports_the_exact_pool_size_it_used(
    n_optimal: int, capsys: pytest.CaptureFixture[str]
) -> None:
    result, text = _run(["discover", *TOY], capsys)
    assert (result["k"], result["pool_size"], result["unseen_pool_size"]) == (100, n_optimal, n_optimal)
    assert f"pool size {n_optimal} (k = 100; --pool-source exact keeps at most |Pi*_alpha|)" in text


def test_zsc_reports_every_agents_pool_size(n_optimal: int, capsys: pytest.CaptureFixture[str]) -> None:
    result, text = _run(["zsc", *TOY, "--agents", "2", "--top", "2", "--m", "1"], capsys)
    assert result["config"]["k"] == 100  # the saved config keeps what was asked for
    assert result["pool_sizes"] == result["unseen_pool_sizes"] == [n_optimal] * 2
    assert f"per agent: pool size {n_optimal} (k = 100;" in text


def test_an_iql_pool_has_k_policies(capsys: pytest.CaptureFixture[str]) -> None:
    result, text = _run(["discover", "three-lever", "--k", "3", "--episodes", "20"], capsys)
    assert (result["k"], result["pool_size"], result["unseen_pool_size"]) == (3, 3, 3)
    assert "pool size 3 (k = 3); unseen pool size 3" in text


def test_run_zsc_refuses_pools_of_another_population() -> None:
    """``run_zsc(..., pools=)`` takes what ``population_pools`` builds: every agent's pool and its unseen one."""
    from ers_exact.zsc.pipeline import PopulationConfig, population_pools, run_zsc

    tree = enumerate_histories(get_game("toy-coordination"))
    cfg = PopulationConfig(agents=2, pool_source="exact", alpha=0.3, k=2, top=2, m=1, op_steps=1)
    pools = population_pools(tree, cfg)
    assert len(pools) == 2 * cfg.agents
    with pytest.raises(ValueError, match="2 x 2 pools"):
        run_zsc(tree, cfg, pools=pools[:3])
