"""``scripts/gpu_env_table.py`` (the one device command's table) tried on CPU: it measures, writes the JSON row
by row, honours its budget and renders the README table with the ratios of what it measured."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.deep.threads import one_thread  # noqa: F401

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "gpu_env_table.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_env_table", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_table_on_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    args = ["--out", str(tmp_path), "--device", "cpu", "--no-jaxmarl", "--no-rollouts", "--modes", "eager"]
    args += ["--batches", "2,4"]
    assert script.main([*args, "--steps", "3", "--envs", "overcooked-v2"]) == 0
    result = json.loads((tmp_path / "gpu-env-table.json").read_text())
    rows = result["rows"]
    assert [(r["variant"], r["batch"]) for r in rows] == [("obs", 2), ("obs", 4), ("state", 2), ("state", 4)]
    assert all(r["env_steps_per_s"] > 0 and r["mode"] == "eager" for r in rows)
    table = (tmp_path / "gpu-env-table.md").read_text()
    assert "| overcooked-v2 (state only) | 4 |" in table
    assert script.main([*args, "--steps", "3", "--envs", "hanabi", "--budget-s", "0"]) == 0
    skipped = json.loads((tmp_path / "gpu-env-table.json").read_text())["rows"]
    assert all("skipped" in r for r in skipped)  # a spent budget records the rows it did not run


def test_markdown_ratios() -> None:
    rows = [
        {"env": "hanabi", "variant": "obs", "batch": 256, "side": "jaxmarl", "env_steps_per_s": 2e6},
        {
            "env": "hanabi",
            "variant": "obs",
            "batch": 256,
            "side": "ers",
            "mode": "eager",
            "unroll": 1,
            "env_steps_per_s": 5e5,
        },
        {
            "env": "hanabi",
            "variant": "obs",
            "batch": 256,
            "side": "ers",
            "mode": "graph",
            "unroll": 1,
            "env_steps_per_s": 3e6,
        },
        {
            "env": "hanabi",
            "variant": "obs",
            "batch": 256,
            "side": "ers",
            "mode": "graph",
            "unroll": 16,
            "env_steps_per_s": 4e6,
        },
        {
            "env": "hanabi",
            "variant": "obs",
            "batch": 256,
            "side": "ers",
            "mode": "compile-graph",
            "error": "boom",
        },
    ]
    rows.append(
        {
            "env": "hanabi",
            "variant": "rollout",
            "batch": 1024,
            "side": "ers",
            "mode": "graph",
            "env_steps_per_s": 1.5e6,
            "setup_seconds": 3.2,
        }
    )
    table = _script().markdown({"device": "X", "torch": "t", "rows": rows})
    assert "| hanabi | 256 | 2.00M | 0.50M | 4.00M (graph, unroll 16) | 2.00 | 0.25 |" in table
    assert "| hanabi | 1,024 | graph | 1.50M | 3 |" in table


def test_plan_orders_the_rows_by_need() -> None:
    import argparse

    args = argparse.Namespace(
        envs=["hanabi", "overcooked-v2"],
        batches=[256, 1024],
        modes=["eager", "graph", "compile-graph"],
        unroll=[1, 16],
        jaxmarl=True,
        rollouts=True,
    )
    rows = _script().plan(args)
    tiers = [r["tier"] for r in rows]
    assert tiers == sorted(tiers)
    first = {(r["env"], r["variant"], r["side"], r.get("mode")) for r in rows if r["tier"] == 0}
    assert ("hanabi", "obs", "jaxmarl", None) in first and ("overcooked-v2", "obs", "ers", "graph") in first
    state_modes = {r["mode"] for r in rows if r["variant"] == "state" and r["side"] == "ers"}
    assert state_modes == {"eager", "graph", "compile-graph"}  # the state-only rate in every mode
    assert {r["env"] for r in rows if r["variant"] == "rollout"} == {"hanabi", "overcooked-v2"}
