"""``ers-deep train-sp`` and ``ers-deep crossplay`` end to end (tiny tabular pool), through ``main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ers_deep.cli import TrainSPOptions, main, parse_seeds


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:  # type: ignore[type-arg]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_train_sp_then_resume_then_crossplay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pool = tmp_path / "toy"
    argv = [
        "train-sp",
        "--env",
        "tabular:toy-coordination",
        "--seeds",
        "0-1",
        "--out",
        str(pool),
        "--alpha",
        "0.25",
        "--num-envs",
        "64",
        "--total-steps",
        str(64 * 2 * 12),
        "--advantage",
        "exact",
        "--eval-games",
        "300",
        "--threads",
        "1",
        "--json",
    ]
    part = _json(capsys, [*argv, "--max-updates", "5"])
    assert part["training"]["updates"] == 5 and not part["training"]["finished"]
    res = _json(capsys, ["train-sp", "--resume", str(pool), "--eval-games", "300", "--json"])
    assert res["training"]["updates"] == 12 and res["training"]["finished"]
    for p in res["policies"]:
        assert set(p["exact"]) >= {"J", "residual", "fixed_point"} and p["self_play"]["games"] == 300
    xp = _json(capsys, ["crossplay", str(pool), "--games", "100", "--json"])
    assert len(xp["matrix"]["mean"]) == 2 and xp["report"]["rows"][0]["name"] == "toy"
    for f in xp["files"].values():
        assert Path(f).is_file()
    assert main(["train-sp", *argv[1:-1]]) == 2  # the pool exists: refused, one line
    assert "already holds" in capsys.readouterr().err


def test_options_resolve_to_the_paper_config() -> None:
    cfg = TrainSPOptions(env="overcooked-v2", out="x", seeds="2,4", hidden=64).config()
    assert cfg.seeds == (2, 4) and cfg.net.kind == "cnn-gru" and cfg.net.hidden == 64 and cfg.num_envs == 256
    assert parse_seeds("0-4") == (0, 1, 2, 3, 4)
