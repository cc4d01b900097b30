"""``ers-deep discover`` end to end on the toy pool, through ``main``: JSON, the readable table, --out guard and
--resume, and the options resolved for tabular pools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ers_deep.cli import main
from ers_deep.cli.discover import DiscoverOptions
from ers_deep.discovery import TABULAR_SETTINGS
from ers_exact.interface import DiscoveryResult
from ers_exact.util.options import UsageError


def _argv(pool: Path, out: Path, *extra: str) -> list[str]:
    return [
        "discover",
        "--pool",
        str(pool),
        "--candidates",
        "2",
        "--top",
        "1",
        "--total-steps",
        "20000",
        "--out",
        str(out),
        "--threads",
        "1",
        *extra,
    ]


def test_discover_json_table_and_resume(
    toy_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "disc"
    assert main(_argv(toy_pool, out, "--json")) == 0
    res = json.loads(capsys.readouterr().out)
    result = DiscoveryResult.from_json(res)
    assert result.algorithm == "sp-max" and len(result.transformations) == 1
    assert (
        res["files"]["discovery"] == str(out / "discovery.json")
        and (out / "symmetries.safetensors").is_file()
    )
    assert res["config"]["discovery"]["num_envs"] == TABULAR_SETTINGS["num_envs"]  # tabular defaults
    assert res["config"]["entropy"] == 0.25 and res["config"]["scoring"] == "exact"
    assert res["config"]["exact"][0]["er_symmetry"] is True  # the toy swap

    assert main(_argv(toy_pool, out)) == 2  # the run is there: refuse to overwrite it
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out) in err[0] and "--resume" in err[0]

    assert main(_argv(toy_pool, out, "--resume")) == 0  # finished: resumes at once, prints the table
    text = capsys.readouterr().out
    assert "deep discovery on tabular:toy-coordination (sp-max)" in text
    for word in ("held-out", "admissible", "Dec-POMDP", "ER", "exact mean J", "A(1 0) O(1 0 2)", "Table 2"):
        assert word in text, word


def test_default_out_and_resolved_config(toy_pool: Path) -> None:
    opts = DiscoverOptions(pool=str(toy_pool), algorithm="xp-max", lr=0.05)
    assert opts.out_dir() == toy_pool / "discovery-xp-max"
    cfg = opts.config("tabular:toy-coordination")
    assert (cfg.num_envs, cfg.num_steps, cfg.total_env_steps, cfg.lr) == (256, 4, 300_000, 0.05)
    assert cfg.alpha is None and cfg.algorithm == "xp-max"
    deep = opts.config("hanabi")
    assert (deep.num_envs, deep.num_steps, deep.lr) == (128, 32, 0.05)
    with pytest.raises(UsageError, match="--top 3 is more than --candidates 2"):
        DiscoverOptions(pool=str(toy_pool), candidates=2, top=3)
