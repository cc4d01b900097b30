"""The ``ers-deep env-bench`` command."""

from __future__ import annotations

import json
import os

import pytest

from ers_deep.bench import hanabi as bench
from ers_deep.bench import overcooked_v2 as bench_overcooked
from ers_deep.cli import main


def test_env_bench_json_against_hle(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env-bench", "hanabi", "--batch", "16", "--steps", "60", "--against", "hle", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["env_steps_per_s"] > 0 and res["batch"] == 16 and res["config"]["players"] == 2
    hle = res["references"]["hle"]
    assert hle["env_steps_per_s"] > 0 and hle["ratio"] == pytest.approx(
        res["env_steps_per_s"] / hle["env_steps_per_s"]
    )
    for side in (res, hle):  # CPU seconds over wall seconds of the timed span, every thread counted
        assert 0 < side["cores_used"] <= (os.cpu_count() or 1) + 0.5


@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_env_bench_text_and_missing_jaxmarl(
    env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in (bench, bench_overcooked):  # as on a machine without the reference extra
        monkeypatch.setattr(module, "jaxmarl_installed", lambda: False)
    assert (
        main(
            [
                "env-bench",
                env,
                "--batch",
                "4",
                "--steps",
                "3",
                *(["--preset", "small", "--players", "3"] if env == "hanabi" else []),  # Hanabi's options
                "--against",
                "jaxmarl",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "env-steps/s" in out and "cores)" in out and "jaxmarl" in out and "not installed" in out


@pytest.mark.slow  # ~20 s of JAX compilation; the port's equality with JaxMARL is checked by the env's differential test
@pytest.mark.skipif(not bench.jaxmarl_installed(), reason="needs the reference extra (jaxmarl)")
def test_overcooked_env_bench_json_against_jaxmarl(capfd: pytest.CaptureFixture[str]) -> None:
    """The user command of the issue: JSON on stdout (jaxmarl's import banner goes to stderr), ratio consistent."""
    assert (
        main(["env-bench", "overcooked-v2", "--batch", "8", "--steps", "4", "--against", "jaxmarl", "--json"])
        == 0
    )
    res = json.loads(capfd.readouterr().out)
    assert (
        res["env"] == "overcooked-v2"
        and res["batch"] == 8
        and res["config"]["layout"] == "grounded_coord_simple"
    )
    jm = res["references"]["jaxmarl"]
    assert jm["env_steps_per_s"] > 0 and jm["observations"] is True
    assert jm["ratio"] == pytest.approx(res["env_steps_per_s"] / jm["env_steps_per_s"])


def test_overcooked_env_bench_without_observations(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "env-bench",
                "overcooked-v2",
                "--batch",
                "4",
                "--steps",
                "3",
                "--no-obs",
                "--layout",
                "cramped_room_v2",
                "--json",
            ]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    assert res["observations"] is False and res["config"]["layout"] == "cramped_room_v2"


def test_unknown_reference_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    for env in ("hanabi", "overcooked-v2"):
        assert main(["env-bench", env, "--batch", "2", "--steps", "1", "--against", "gym"]) == 2
        assert "unknown reference 'gym'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "stray"),
    [
        (["hanabi", "--layout", "cramped_room_v2"], "--layout does"),
        (["hanabi", "--obs-dtype", "float32"], "--obs-dtype does"),
        (["overcooked-v2", "--preset", "small", "--players", "3"], "--preset, --players do"),
        (["overcooked-v2", "--no-check"], "--no-check does"),
    ],
)
def test_an_option_of_the_other_env_is_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str], stray: str
) -> None:
    """env-bench timed the env's own configuration and ignored them (hanabi --layout cramped_room_v2 ran)."""
    assert main(["env-bench", *argv, "--batch", "2", "--steps", "1", "--mode", "eager"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{argv[0]}: {stray} not apply to it" in err[0], err
