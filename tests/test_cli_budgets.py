"""Issue 22's careless-user inputs, class 3: budgets before work. Sizes over the memory budget (ers-exact and
ers-deep) and other-play runs over the time budget are refused with the estimate before any work; the
estimates themselves are checked against what is built (history arrays) and timed (the Adam phase, slow).

A refusal is exit status 2 with ONE stderr line ``PROG CMD: error: ...`` naming the value, never a traceback
(the contract of ``tests/test_cli_contract.py``); the shared helpers are in ``tests/cli_helpers.py``, the
``exact``, ``deep`` and ``pools`` fixtures in ``tests/conftest.py``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_helpers import assert_refused, fill

# ----- class 3: budgets before work --------------------------------------------------------------------------
EXACT_BUDGET_CASES = [
    ("census-games", ["census", "--games", "1000000000"], {}, "--games"),
    ("solve-starts", ["solve", "dectiger", "--alpha", "1", "--starts", "1000000000"], {}, "--starts"),
    ("export-gambit-horizon-5", ["export-gambit", "dectiger", "--horizon", "5", "@OUT.efg"], {}, "horizon"),
    ("info-memory", ["info", "dectiger", "--horizon", "4"], {"ERS_MEMORY_BUDGET": "0.001"}, "horizon"),
    ("budget-not-a-number", ["info", "dectiger"], {"ERS_MEMORY_BUDGET": "lots"}, "ERS_MEMORY_BUDGET"),
    ("op-seeds", ["op", "dectiger", "--seeds", "1000000000"], {}, "--seeds"),
    (
        "solve-starts-small-budget",
        ["solve", "dectiger", "--alpha", "1"],
        {"ERS_MEMORY_BUDGET": "0.0001"},
        "--starts",
    ),
]


@pytest.mark.parametrize(
    ("argv", "env", "name"), [pytest.param(a, e, n, id=i) for i, a, e, n in EXACT_BUDGET_CASES]
)
def test_exact_sizes_over_the_budget_are_refused_with_the_estimate(
    argv: list[str],
    env: dict[str, str],
    name: str,
    tmp_path: Path,
    exact: Callable[..., tuple[int, str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    argv, _ = fill(argv, tmp_path)
    code, _, err = exact(*argv)
    line = assert_refused("ers-exact", code, err, name, "ERS_MEMORY_BUDGET")
    if "lots" not in env.values():
        assert "needs about" in line


# op's Adam phase costs time rather than memory: one gradient step is timed before the run and scaled
TIME_BUDGET_CASES = [
    ("op-steps", ["op", "dectiger", "--steps", "1000000000"], {}, "--steps 1,000,000,000"),
    (
        "op-restarts-and-steps",
        ["op", "three-lever", "--restarts", "1000", "--steps", "100000"],
        {},
        "--restarts",
    ),
    (
        "op-small-time-budget",
        ["op", "three-lever", "--steps", "50"],
        {"ERS_TIME_BUDGET": "1e-6"},
        "--steps 50",
    ),
    ("time-budget-not-a-number", ["op", "three-lever"], {"ERS_TIME_BUDGET": "-1"}, "'-1'"),
]


@pytest.mark.parametrize(
    ("argv", "env", "name"), [pytest.param(a, e, n, id=i) for i, a, e, n in TIME_BUDGET_CASES]
)
def test_op_runs_over_the_time_budget_are_refused_with_the_estimate(
    argv: list[str],
    env: dict[str, str],
    name: str,
    exact: Callable[..., tuple[int, str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code, out, err = exact(*argv)
    line = assert_refused("ers-exact", code, err, name, "ERS_TIME_BUDGET")
    assert out == ""
    if "-1" not in env.values():
        assert "takes about" in line and "time budget" in line


@pytest.mark.slow  # a timing comparison: kept out of the default suite (CI's shared cores make it noisy)
def test_the_op_time_estimate_is_near_the_adam_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimate scales one timed gradient step; the Adam phase of the run takes about as long (within 8x:
    the shared machine's timing noise)."""
    import time

    import numpy as np

    from ers_exact.games import GAMES
    from ers_exact.model.histories import enumerate_histories
    from ers_exact.zsc import op_ascent
    from ers_exact.zsc import other_play as op
    from ers_exact.zsc.op_objective import symmetry_maps

    tree = enumerate_histories(GAMES["three-lever"]())
    config = op.OPConfig(seeds=2, restarts=4, steps=60, exhaustive=0, row_search=0)
    maps = symmetry_maps(tree, op.symmetry_set(tree, "mdp"))
    seen: list[float] = []
    monkeypatch.setattr(op_ascent, "check_time", lambda what, seconds, lower: seen.append(seconds))
    op_ascent.check_budget(tree, maps, True, config)
    theta = np.random.default_rng(1).normal(size=(8, tree.local[0].legal.size))
    start = time.perf_counter()
    op_ascent._adam(tree, theta, maps, True, config)
    took = time.perf_counter() - start
    assert seen and took / 8 <= seen[0] <= 8 * took, (seen, took)


DEEP_BUDGET_CASES = [
    ("env-bench-batch", ["env-bench", "hanabi", "--batch", "100000000"], "--batch"),
    ("env-bench-overcooked-batch", ["env-bench", "overcooked-v2", "--batch", "100000000"], "--batch"),
    (
        "train-num-envs",
        ["train-sp", "--env", "hanabi", "--num-envs", "1000000000", "--out", "@OUT"],
        "--num-envs",
    ),
    (
        "train-seeds",
        ["train-sp", "--env", "tabular:dectiger", "--seeds", "0-99999", "--out", "@OUT"],
        "--seeds",
    ),
    ("threads", ["env-bench", "hanabi", "--threads", "100000"], "--threads 100000"),
    ("bins", ["xp-distribution", "--table1", "@OUT", "--bins", "1000000000"], "--bins 1000000000"),
]


@pytest.mark.parametrize(("argv", "name"), [pytest.param(a, n, id=i) for i, a, n in DEEP_BUDGET_CASES])
def test_deep_sizes_over_the_budget_are_refused_before_work(
    argv: list[str], name: str, tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    argv, target = fill(argv, tmp_path)
    code, _, err = deep(*argv)
    assert_refused("ers-deep", code, err, name)
    assert not target.exists() or target == tmp_path


def test_the_history_memory_estimate_is_within_2x_of_the_arrays_built() -> None:
    """The bytes-per-node estimate against the arrays the enumeration keeps (Dec-Tiger H = 4)."""
    from ers_exact.games import load_game
    from ers_exact.model.histories import enumerate_histories, node_bytes

    game = load_game("dectiger", horizon=4)
    tree = enumerate_histories(game)
    kept = sum(
        sum(a.nbytes for a in (lay.parent, lay.action, lay.observation, lay.weight, lay.local, lay.legal))
        for lay in tree.layers
    )
    estimate = sum(len(lay) for lay in tree.layers) * node_bytes(game)
    assert kept <= estimate <= 4 * kept
