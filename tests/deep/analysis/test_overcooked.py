"""The Overcooked V2 population protocol at a toy budget (recurrent CNN + GRU policies, Algorithm 3), then the
cross-play distribution and the action matrices from its folder (``slow``: about 5 minutes on one CPU thread;
the reduced and the paper's runs are in the README and ``scripts/analyses-gpu.sh``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ers_deep.cli import main
from ers_deep.zsc import PopulationConfig, load_deployed, run_table1


@pytest.mark.slow
def test_overcooked_population_and_analyses(tmp_path: Path) -> None:
    steps = 8 * 16 * 2  # two updates per seed
    config = PopulationConfig(
        env="overcooked-v2",
        agents=3,
        k=4,
        candidates=1,
        top=1,
        m=1,
        algorithm="xp-max",
        sp_steps=steps,
        op_steps=steps,
        discovery_steps=steps,
        num_envs=8,
        num_steps=16,
        hidden=16,
        conv=8,
        minibatches=2,
        games=2,
    )
    report, _ = run_table1(config, tmp_path, progress=False)
    assert report.game == "overcooked-v2:grounded_coord_simple" and len(report.rows) == 3
    _, deployed = load_deployed(tmp_path)
    assert all(p.config.net.kind == "cnn-gru" for pop in deployed.values() for p in pop)
    assert main(["xp-distribution", "--table1", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "analysis" / "xp-distribution.json").read_text())["populations"]
    assert [len(s["pairs"]) for s in result.values()] == [3, 3, 3]
    assert main(["action-matrix", "--table1", str(tmp_path), "--games", "2"]) == 0
    matrices = json.loads((tmp_path / "analysis" / "action-matrix.json").read_text())["matrices"]
    assert [m["transitions"] for m in matrices] == [2 * 399 * 2] * 3
