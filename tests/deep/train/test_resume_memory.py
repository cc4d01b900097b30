"""A resume gets the memory check of a new run in the library, not only on the command line: ``train.run.resume``
(and so a pool's, other-play's and discovery's resume) and a Ray pool's resume refuse a run whose config.json asks
for more games than the memory budget holds (``train.games_memory.check_run_memory``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ers_deep.pools import train_pool, train_pool_ray
from ers_deep.train.config import TrainConfig, paper_config
from ers_deep.train.games_memory import bytes_per_game
from ers_deep.train.run import resume
from ers_exact.util.budget import MEMORY_BUDGET_ENV, BudgetError
from tests.deep.threads import single_thread


def _config(seeds: tuple[int, ...] = (0, 1)) -> TrainConfig:
    return paper_config("tabular:toy-coordination", seeds=seeds, num_envs=4, num_steps=4, total_env_steps=64)


def _budget_below(config: TrainConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory budget of half what ``config``'s games need (the run itself is tiny: the budget is lowered)."""
    need = bytes_per_game(config, config.num_steps) * config.num_envs * len(config.seeds)
    monkeypatch.setenv(MEMORY_BUDGET_ENV, str(need / 2 / 1e9))


def test_a_library_resume_over_the_memory_budget_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, config = tmp_path / "pool", _config()
    with single_thread():
        train_pool(config, pool, eval_games=2, max_updates=1)
    metrics = (pool / "run" / "metrics.csv").read_bytes()
    _budget_below(config, monkeypatch)
    want = (
        rf"{pool / 'run' / 'config.json'}'s num_envs x seeds: 8 games of tabular:toy-coordination needs about"
    )
    with pytest.raises(BudgetError, match=want):
        resume(pool / "run")
    with pytest.raises(BudgetError, match=want):
        train_pool(config, pool, resume_run=True)
    assert (pool / "run" / "metrics.csv").read_bytes() == metrics  # refused before it continued
    monkeypatch.delenv(MEMORY_BUDGET_ENV)
    with single_thread():
        assert resume(pool / "run", max_updates=2)[0].update == 2  # within the budget it resumes


def test_a_ray_pool_resume_over_the_budget_is_refused_before_its_tasks_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each seed's run of a killed Ray pool (``runs/seed-S/run``) is checked on the driver, before Ray is asked
    for anything; the command line's check looked for ``runs/seed-S/config.json``, which no Ray pool has."""
    out, config = tmp_path / "rp", _config()
    with single_thread():
        train_pool(_config((1,)), out / "runs" / "seed-1", eval_games=2, max_updates=1)
    (out / "ray-run.json").write_text(json.dumps({"config": config.to_json(), "eval_games": 2}))
    _budget_below(_config((1,)), monkeypatch)
    with pytest.raises(BudgetError, match=r"seed-1/run/config\.json's num_envs x seeds"):
        train_pool_ray(config, out, "local", resume_run=True)
