"""JSON round trips of the types shared by ers-exact and ers-deep (:mod:`ers_exact.interface`):
Transformation, DiscoveryResult and ZSCReport, built by the exact pipeline."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.interface import DiscoveryResult, Transformation, ZSCReport
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.fixed_points import solve_fixed_points
from ers_exact.zsc.discovery import DiscoveryConfig, discover
from ers_exact.zsc.pipeline import PopulationConfig, run_zsc


@pytest.fixture(scope="module")
def toy_pool():
    tree = enumerate_histories(get_game("toy-coordination"))
    fs = solve_fixed_points(tree, 0.3)
    return tree, [p.policy for p in fs.optimal_points], fs.J_star


def test_transformation_json_round_trip() -> None:
    """The six lever relabelings of the three-lever game (one permutation on actions and observations)."""
    for p in itertools.permutations(range(3)):
        f = Transformation((0,), (p, p), (p, p))
        assert Transformation.from_json(f.to_json()) == f
        assert Transformation.from_json(json.loads(json.dumps(f.to_json()))) == f


def test_interface_json_round_trip(toy_pool) -> None:
    tree, pool, _ = toy_pool
    result = discover(tree, pool, DiscoveryConfig(top=2))
    assert DiscoveryResult.from_json(json.loads(json.dumps(result.to_json()))) == result
    report, _ = run_zsc(
        tree, PopulationConfig(agents=3, pool_source="exact", alpha=0.3, k=2, top=2, m=2, op_steps=60)
    )
    again = ZSCReport.from_json(json.loads(report.dumps()))
    assert again == report and "| OP + Phi_MDP |" in report.to_markdown()
    # every population carries the OP objective of its deployed policies, with a standard error
    assert all(r.op is not None and np.isfinite(r.op.value) and r.op.se >= 0 for r in report.rows)
    assert [r.op for r in again.rows] == [r.op for r in report.rows]
    assert report.to_markdown().splitlines()[0].startswith("| population | Self-Play | OP | XP |")


def test_zsc_reports_without_the_op_column_still_load() -> None:
    """JSON written before the OP column (no "op" key) loads with op = None and prints "-"."""
    cell = {"value": 1.0, "se": 0.0}
    old = {
        "game": "three-lever",
        "config": {},
        "rows": [
            {
                "name": "SP (iql)",
                "sp": cell,
                "xp": cell,
                "xp_median": cell,
                "xp_median_mdp": cell,
                "xp_median_er": cell,
            }
        ],
    }
    report = ZSCReport.from_json(old)
    assert report.rows[0].op is None
    assert "op_column_reading" not in report.config  # no OP column to name
    assert (
        report.to_markdown().splitlines()[-1]
        == "| SP (iql) | 1.000 ± 0.000 | - | " + " | ".join(["1.000 ± 0.000"] * 4) + " |"
    )
    assert ZSCReport.from_json(json.loads(report.dumps())) == report


def test_a_zsc_report_with_an_op_column_written_before_its_reading_field_loads_as_seatings() -> None:
    """main's ``ers-exact zsc`` file of tests/interface/old_files (an OP column, no ``op_column_reading``)
    loads with the reading that code computed (OP^Phi: "seatings"); a field present is kept."""
    old = json.loads((Path(__file__).parent / "old_files" / "zsc-toy-coordination-seed0.json").read_text())
    assert "op_column_reading" not in old["config"] and all(r["op"] for r in old["rows"])
    assert ZSCReport.from_json(old).config == {**old["config"], "op_column_reading": "seatings"}
    old["config"]["op_column_reading"] = "per-seat"
    assert ZSCReport.from_json(old).config["op_column_reading"] == "per-seat"


def test_undefined_estimates_print_as_a_dash() -> None:
    """NaN (null in JSON: a column a pool cannot fill, a standard error of one sample) is not printed as "nan"."""
    cell, none, one = {"value": 0.5, "se": 0.01}, {"value": None, "se": None}, {"value": 0.25, "se": None}
    row = {"name": "p", "sp": cell, "xp": one, "xp_median": cell, "xp_median_mdp": none, "xp_median_er": none}
    line = ZSCReport.from_json({"game": "hanabi", "rows": [row]}).to_markdown().splitlines()[-1]
    assert line == "| p | 0.500 ± 0.010 | - | 0.250 | 0.500 ± 0.010 | - | - |"
