"""The ``ers-deep env-bench`` command."""

from __future__ import annotations

import json

import pytest

from ers_deep.bench import jaxmarl_available
from ers_deep.cli import main


def test_env_bench_json_against_hle(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env-bench", "hanabi", "--batch", "16", "--steps", "5", "--against", "hle", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["env_steps_per_s"] > 0 and res["batch"] == 16 and res["config"]["players"] == 2
    hle = res["references"]["hle"]
    assert hle["env_steps_per_s"] > 0 and hle["ratio"] == pytest.approx(res["env_steps_per_s"] / hle["env_steps_per_s"])


def test_env_bench_text_and_missing_jaxmarl(capsys: pytest.CaptureFixture[str]) -> None:
    if jaxmarl_available():
        pytest.skip("jaxmarl is installed here; the 'not installed' path cannot be shown")
    assert main(["env-bench", "hanabi", "--batch", "4", "--steps", "3", "--preset", "small", "--players", "3",
                 "--against", "jaxmarl"]) == 0
    out = capsys.readouterr().out
    assert "env-steps/s" in out and "jaxmarl" in out and "not installed" in out


def test_unknown_reference_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown reference"):
        main(["env-bench", "hanabi", "--batch", "2", "--steps", "1", "--against", "gym"])
