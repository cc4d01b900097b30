"""The whole ZSC pipeline (pools, discovery, OP training for two populations, cross-play tables),
timed end to end on the toy game (exact pools) and three-lever (IQL pools, reduced episodes)."""

from __future__ import annotations

import pytest

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.zsc.pipeline import PopulationConfig, run_zsc

CASES = {
    "toy-exact": ("toy-coordination", PopulationConfig(agents=5, pool_source="exact", alpha=0.3, k=2, top=2)),
    "three-lever-iql-2000": ("three-lever", PopulationConfig(agents=5, episodes=2000)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_zsc_pipeline(benchmark, case: str) -> None:
    name, cfg = CASES[case]
    tree = enumerate_histories(get_game(name))
    report, _ = benchmark.pedantic(run_zsc, args=(tree, cfg), rounds=1, iterations=1)
    benchmark.extra_info.update(case=case, agents=cfg.agents, table=report.to_json()["rows"])
    print("\n" + report.to_markdown())
    assert len(report.rows) == 3
