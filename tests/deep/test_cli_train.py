"""``ers-deep train-sp`` and ``ers-deep crossplay`` end to end (tiny tabular pool), through ``main``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ers_deep.cli import TrainSPOptions, main, parse_seeds
from ers_exact.util.options import UsageError
from tests.cli_helpers import assert_refused


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
    assert res["figure"] == "learning-curve.png" and (pool / "learning-curve.png").stat().st_size > 2000
    assert json.loads((pool / "pool.json").read_text()) == res  # the figure is named in pool.json too
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


def test_options_resolve_the_hanabi_observation_and_modes() -> None:
    cfg = TrainSPOptions(env="hanabi", out="x", knowledge="v0-belief", update_mode="eager").config()
    assert cfg.hanabi_knowledge == "v0-belief" and cfg.update_mode == "eager" and cfg.collect_mode == "auto"
    unset = TrainSPOptions(env="hanabi", out="x").config()  # unset options: the paper config's own values
    assert (unset.hanabi_knowledge, unset.hanabi_preset, unset.device) == ("plausible", "Hanabi-Full", "cpu")


def test_bf16_gradients_option(capsys: pytest.CaptureFixture[str]) -> None:
    """``--bf16-gradients on|off|auto`` sets ``TrainConfig.bf16_gradients`` (unset: "auto"); other words are
    refused by the parser (exit 2) before anything is written."""
    of = {
        v: TrainSPOptions(env="hanabi", out="x", bf16_gradients=v).config().bf16_gradients
        for v in ("on", "off")
    }
    assert of == {"on": True, "off": False}
    assert TrainSPOptions(env="hanabi", out="x").config().bf16_gradients == "auto"
    with pytest.raises(SystemExit) as stop:
        main(["train-sp", "--env", "hanabi", "--out", "/tmp/ers-never", "--bf16-gradients", "yes"])
    assert stop.value.code == 2
    assert "--bf16-gradients" in capsys.readouterr().err
    assert not Path("/tmp/ers-never").exists()


@pytest.mark.parametrize(
    "flag",
    [
        ["--preset", "Hanabi-Small"],
        ["--knowledge", "v0-belief"],
        ["--layout", "cramped_room_v2"],
        ["--advantage", "gae"],
        ["--collector", "native"],
        ["--collect-mode", "eager"],
        ["--update-mode", "eager"],
        ["--device", "cpu"],
        ["--bf16-gradients", "off"],
    ],
)
def test_resume_refuses_every_option_it_would_ignore(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    """A resumed run keeps the config it started with: an option that would change it is refused by name
    (these were silently ignored before), before the folder is read."""
    assert main(["train-sp", "--resume", str(tmp_path), *flag]) == 2
    err = capsys.readouterr().err
    assert flag[0] in err and "cannot change it" in err


def test_no_help_text_repeats_its_default() -> None:
    """Every option's default is shown once, by the options machinery (``default_text``/``default_value``),
    never also inside its help text (``--help`` printed "(default: the paper's) (default: None)")."""
    import dataclasses

    from ers_deep.cli import COMMANDS as DEEP
    from ers_exact.cli import COMMANDS as EXACT

    classes = [c.options for c in (*DEEP, *EXACT)]
    assert len(classes) > 20
    for cls in classes:
        for f in dataclasses.fields(cls):
            assert "default" not in f.metadata.get("help", "").lower(), f"{cls.__name__}.{f.name}"


def test_help_shows_no_empty_default() -> None:
    """An option whose default means "not given" (None, "", a flag that is off) shows no default in ``--help``
    (it printed "(default: None)" for required-unless-resume options and "(default: False)" for flags), and
    the README's table says ``unset`` / ``none`` / ``off`` for it; a real default is still shown."""
    import argparse

    from ers_deep.cli import COMMANDS as DEEP
    from ers_exact.cli import COMMANDS as EXACT
    from ers_exact.util.options import add_options, options_markdown

    for command in (*DEEP, *EXACT):
        parser = argparse.ArgumentParser(
            prog="x", formatter_class=lambda prog: argparse.HelpFormatter(prog, width=400)
        )
        add_options(parser, command.options)
        text = parser.format_help()
        for empty in ("(default: None)", "(default: False)", "(default: )"):
            assert empty not in text, f"{command.name}: {empty}"
        table = options_markdown(command.options)
        assert "| `None` |" not in table and "| `False` |" not in table and "| `` |" not in table
    parser = argparse.ArgumentParser(prog="x")
    train = next(c for c in DEEP if c.name == "train-sp")
    add_options(parser, train.options)
    assert "(default: 0-4)" in " ".join(parser.format_help().split())


def test_a_figure_that_cannot_be_drawn_does_not_fail_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool is trained and saved; a failing learning-curve figure is one line on stderr, exit 0."""
    import importlib

    curves = importlib.import_module("ers_deep.analysis.curves")  # the package's `curves` is a function

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no display")

    monkeypatch.setattr(curves, "pool_curve", broken)
    pool = tmp_path / "toy"
    argv = ["train-sp", "--env", "tabular:toy-coordination", "--seeds", "0", "--out", str(pool)]
    argv += [
        "--num-envs",
        "16",
        "--total-steps",
        str(16 * 2 * 2),
        "--eval-games",
        "20",
        "--threads",
        "1",
        "--json",
    ]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "figure" not in json.loads(out) and (pool / "pool.json").exists()
    assert "learning curves not drawn: RuntimeError: no display" in err


@pytest.mark.parametrize(
    ("argv", "stray"),
    [
        (["--env", "hanabi", "--conv", "8"], "--conv (an option of overcooked-v2)"),
        (["--env", "hanabi", "--layout", "cramped_room_v2"], "--layout (an option of overcooked-v2)"),
        (["--env", "overcooked-v2", "--preset", "small"], "--preset (an option of hanabi)"),
        (
            ["--env", "tabular:toy-coordination", "--hidden", "64"],
            "--hidden (an option of hanabi and overcooked-v2)",
        ),
        (
            ["--env", "tabular:toy-coordination", "--knowledge", "v0-belief"],
            "--knowledge (an option of hanabi)",
        ),
    ],
)
def test_options_of_another_env_are_refused(argv: list[str], stray: str) -> None:
    """They were ignored and recorded in pool.json as if they had applied (an Overcooked pool with
    "hanabi_preset": "small")."""
    with pytest.raises(UsageError, match=re.escape(stray)):
        TrainSPOptions(out="/tmp/ers-never", **_kw(argv))
    assert TrainSPOptions(env="overcooked-v2", out="/tmp/ers-never", conv=8, hidden=16).config().net.conv == 8


def _kw(argv: list[str]) -> dict[str, str | int]:
    return {
        a.removeprefix("--").replace("-", "_"): int(v) if v.isdigit() else v
        for a, v in zip(argv[::2], argv[1::2])
    }


def test_a_preset_alias_is_the_game_it_names() -> None:
    """``--preset very-small`` was stored as typed, so its pools and Hanabi-Very-Small's were "different envs"
    to crossplay, discover and table1."""
    from ers_deep.train.config import paper_config
    from ers_deep.zsc.config import PopulationConfig

    alias = TrainSPOptions(env="hanabi", out="/tmp/ers-never", preset="very-small").config()
    named = TrainSPOptions(env="hanabi", out="/tmp/ers-never", preset="Hanabi-Very-Small").config()
    assert alias.hanabi_preset == "Hanabi-Very-Small" and alias.env_key == named.env_key
    assert alias.game == "hanabi:Hanabi-Very-Small"
    assert paper_config("hanabi", hanabi_preset="SMALL").hanabi_preset == "Hanabi-Small"
    assert PopulationConfig(env="hanabi", preset="full").preset == "Hanabi-Full"


def test_seeds_beyond_32_bits_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """A 64-bit seed overflowed torch's manual_seed inside the run (an internal error, a stray folder)."""
    with pytest.raises(ValueError):
        parse_seeds("4294967296")
    assert parse_seeds("4294967295") == (4294967295,)
    assert main(["crossplay", "/tmp/ers-never-pool", "--seed", "18446744073709551615"]) == 2
    assert "must be a seed, an integer in 0 .. 4294967295" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train-sp", "train-op"])
def test_a_ray_pool_is_not_stopped_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """--max-updates with --ray made a pool that --resume could not continue (its seeds' runs are in
    runs/seed-N/, no run/): refused before any job; --resume of such a pool (a killed one) without --ray says
    what it is and how to continue it (it said "no run to resume (config.json missing)"); with --ray, a pool
    started before its start record (ray-run.json) is refused naming it, and --ray for a pool trained in one
    process is refused (tests/deep/test_ray.py resumes a killed Ray pool)."""
    args = [command, "--env", "tabular:toy-coordination", "--out", str(tmp_path / "new"), "--ray", "local"]
    assert (
        main([*args, "--max-updates", "2", *(["--symmetries", "none"] if command == "train-op" else [])]) == 2
    )
    err = capsys.readouterr().err
    assert "--max-updates" in err and "Ray pool" in err and not (tmp_path / "new").exists()
    pool = tmp_path / "ray-pool"
    (pool / "runs" / "seed-0" / "run").mkdir(parents=True)
    assert main([command, "--resume", str(pool)]) == 2
    err = capsys.readouterr().err
    assert (
        len(err.strip().splitlines()) == 1
        and f"--resume {pool}: a Ray pool" in err
        and "--ray ADDRESS" in err
    )
    assert main([command, "--resume", str(pool), "--ray", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "no ray-run.json" in err and "--force" in err, err
    one = tmp_path / "one-process"
    (one / "run").mkdir(parents=True)
    (one / "run" / "config.json").write_text("{}")
    assert main([command, "--resume", str(one), "--ray", "local"]) == 2
    assert "is a pool trained in one process: drop --ray" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train-sp", "train-op"])
def test_resume_of_a_folder_that_is_no_pool_removes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A mistyped --resume path is refused before anything in it is touched: a file named like a killed
    writer's temporary (``.NAME.tmp-PID``, PID no longer running) stays (train-sp removed it, then refused)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    stale = tmp_path / f".notes.txt.tmp-{int(done.stdout)}"
    stale.write_text("someone else's")
    assert main([command, "--resume", str(tmp_path)]) == 2
    assert "no " in capsys.readouterr().err and stale.read_text() == "someone else's"


#: a tiny train-sp run's options (4 games x 4 steps, one minibatch, 4 evaluation games, one thread)
TINY = ["--num-envs", "4", "--num-steps", "4", "--minibatches", "1", "--eval-games", "4", "--threads", "1"]


def test_total_steps_is_rounded_down_to_whole_updates_at_least_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--total-steps 1`` trains one whole update (num_envs x num_steps env steps per seed), as its help now
    says; pool.json's config keeps the value given, its training the steps trained."""
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(TrainSPOptions)}
    assert "rounded down to whole updates" in fields["total_steps"].metadata["help"]
    for total, updates in (("1", 1), ("47", 2)):
        argv = ["train-sp", "--env", "tabular:toy-coordination", "--seeds", "0-1", "--total-steps", total]
        res = _json(capsys, [*argv, *TINY, "--out", str(tmp_path / total), "--json"])
        assert res["config"]["total_env_steps"] == int(total)
        assert res["training"]["updates"] == updates and res["training"]["env_steps"] == 16 * updates


def test_the_summary_says_which_counts_are_per_seed_and_which_all_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``env_steps`` is per seed, ``env_steps_per_s`` all seeds together: the printed summary said "env steps
    per seed, N env-steps/s" and pool.json had no name that told; both say so now (the old keys stay)."""
    argv = ["train-sp", "--env", "tabular:toy-coordination", "--seeds", "0-1", "--total-steps", "32"]
    argv += TINY
    assert main([*argv, "--out", str(tmp_path / "pool")]) == 0
    out = capsys.readouterr().out
    t = json.loads((tmp_path / "pool" / "pool.json").read_text())["training"]
    assert t["env_steps"] == t["env_steps_per_seed"] == 32 and t["env_steps_all_seeds"] == 64
    assert t["env_steps_per_s"] == t["env_steps_per_s_all_seeds"] == pytest.approx(64 / t["seconds"])
    assert t["segment"]["env_steps_per_s_all_seeds"] == t["segment"]["env_steps_per_s"]
    assert re.search(
        r"2 updates, 32 env steps per seed \(64 for the 2 seeds\), [\d,]+ env-steps/s for the 2 seeds", out
    )


def test_a_tabular_game_trains_with_a_compiled_collection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--collect-mode compile`` on a tabular game (refused before: the env had no branch-free step) trains
    through the compiled branch-free step."""
    argv = [
        "train-sp",
        "--env",
        "tabular:dectiger",
        "--seeds",
        "0-1",
        "--total-steps",
        "16",
        "--collect-mode",
    ]
    res = _json(capsys, [*argv, "compile", *TINY, "--out", str(tmp_path / "pool"), "--json"])
    assert res["config"]["collect_mode"] == "compile" and res["training"]["updates"] == 1


@pytest.mark.parametrize("command", [["train-sp"], ["train-op", "--symmetries", "none"]], ids=["sp", "op"])
def test_a_killed_pool_resumed_without_eval_games_is_scored_as_the_unkilled_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """--eval-games is saved with the run: a pool stopped after 3 of 6 updates, its pool.json and policies
    removed (what a kill after the checkpoint leaves), then resumed without the flag ends with the pool.json
    of the same command run uninterrupted (scored on 37 games, not the default 1000). A value given on
    --resume rescores the pool and replaces the saved one; a run recorded without it scores on 1000, one with
    a damaged value is refused."""
    import shutil

    argv = [*command, "--env", "tabular:toy-coordination", "--seeds", "0-1", "--alpha", "0.25"]
    argv += ["--num-envs", "64", "--total-steps", str(64 * 2 * 6), "--eval-games", "37", "--threads", "1"]
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main([*argv, "--out", str(whole)]) == 0
    assert main([*argv, "--out", str(part), "--max-updates", "3"]) == 0
    (part / "pool.json").unlink()
    shutil.rmtree(part / "policies")
    capsys.readouterr()
    resumed = _json(capsys, [command[0], "--resume", str(part), "--json"])
    expected = json.loads((whole / "pool.json").read_text())
    assert resumed["training"]["updates"] == expected["training"]["updates"] == 6
    assert resumed["policies"] == expected["policies"]  # every score: self-play (and other-play), exact J
    assert {p["self_play"]["games"] for p in resumed["policies"]} == {37}
    rescored = _json(capsys, [command[0], "--resume", str(part), "--eval-games", "20", "--json"])
    assert {p["self_play"]["games"] for p in rescored["policies"]} == {20}
    again = _json(capsys, [command[0], "--resume", str(part), "--json"])  # the value given last is kept
    assert again["policies"] == rescored["policies"]
    config = part / "run" / "config.json"
    info = json.loads(config.read_text())
    assert info["eval_games"] == 20
    del info["eval_games"]  # a pool written before the run kept it: the default, as before
    config.write_text(json.dumps(info))
    old = _json(capsys, [command[0], "--resume", str(part), "--json"])
    assert {p["self_play"]["games"] for p in old["policies"]} == {1000}
    assert "eval_games" not in json.loads(config.read_text())  # not written unasked into an older run
    config.write_text(json.dumps({**info, "eval_games": "x"}))  # damaged: refused by name, not ignored
    assert main([command[0], "--resume", str(part)]) == 2
    assert f"{config}: its scores' games per policy, 'x'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command", [["train-sp", "--env", "hanabi"], ["crossplay", "pool-that-is-never-read"]]
)
def test_mps_is_refused_by_name(
    tmp_path: Path, deep: Callable[..., tuple[int, str, str]], command: list[str]
) -> None:
    """Apple's MPS has no float64, which the games' returns and the tabular envs use: ``--device mps`` is one
    line naming it before any work (it was accepted, and a run would have failed at its first evaluation)."""
    code, out, err = deep(*command, "--out", str(tmp_path / "out"), "--device", "mps")
    assert_refused("ers-deep", code, err, "--device", "MPS", "float64")
    assert out == "" and not (tmp_path / "out").exists()


def test_a_resume_gets_the_memory_check_of_a_new_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A resume rebuilds its learner from run/config.json: one edited to 200,000,000 games allocated 12.8 GB and
    ended in an internal error; it is refused in one line, as the same numbers on the command line are."""
    pool = tmp_path / "pool"
    argv = ["train-sp", "--env", "tabular:toy-coordination", "--seeds", "0", "--total-steps", "16", *TINY]
    assert main([*argv, "--max-updates", "1", "--out", str(pool)]) == 0
    capsys.readouterr()
    info = json.loads((pool / "run" / "config.json").read_text())
    info["config"]["num_envs"] = 200_000_000
    (pool / "run" / "config.json").write_text(json.dumps(info))
    assert main(["train-sp", "--resume", str(pool)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "200,000,000 games" in err and "internal" not in err, err
