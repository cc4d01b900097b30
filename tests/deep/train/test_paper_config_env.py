"""``paper_config`` refuses an env that names no game at the call (``paper_config("chess")`` made a tabular
config whose game failed to load only when the env was built), naming the registered games: the names come
from ers-exact's registry (``ers_exact.games.GAMES``), so a game registered later is known too.

``TrainConfig`` built directly, replaced or read back (``from_json``: run/config.json, a policy file's
metadata) refuses such an env too (``TrainConfig(env="chess")`` was accepted and failed in ``make_env`` with
ers-exact's ``UnknownGameError``); a .dpomdp path is checked there by its form only, so that a stored run whose
game file is not on this machine still loads where nothing reads the game (its pool, its results)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ers_deep.pools import load_pool, train_pool
from ers_deep.train.config import TrainConfig, make_env, paper_config
from ers_deep.train.run import read_run_config
from ers_deep.train.run_files import RunError
from ers_exact.games import GAMES, get_game
from ers_exact.io.dpomdp import write_dpomdp
from ers_exact.util.options import UsageError


@pytest.mark.parametrize("env", ["chess", "tabular:chess", "tabular:", "hanabi-full", "Overcooked-V2"])
def test_an_unknown_env_is_refused_at_the_call_with_the_known_names(env: str) -> None:
    with pytest.raises(UsageError, match=rf"paper_config: env {re.escape(repr(env))} is not an env") as e:
        paper_config(env)
    assert all(name in str(e.value) for name in GAMES)


def test_registered_names_files_and_the_two_deep_envs_are_accepted(tmp_path: Path) -> None:
    for env in (
        "hanabi",
        "overcooked-v2",
        *(f"tabular:{n}" for n in GAMES),
        "three-lever",
        "tabular:Three_Lever",
    ):
        assert paper_config(env).env == env
    path = tmp_path / "lever.dpomdp"
    path.write_text(write_dpomdp(get_game("two-lever")))
    assert paper_config(f"tabular:{path}").game_spec == str(path)
    with pytest.raises(FileNotFoundError, match=r"missing\.dpomdp"):
        paper_config(f"tabular:{tmp_path / 'missing.dpomdp'}")


def test_the_names_come_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GAMES, "chess", GAMES["two-lever"])
    assert paper_config("tabular:chess").game_spec == "chess"
    monkeypatch.delitem(GAMES, "chess")
    with pytest.raises(UsageError, match="is not an env"):
        paper_config("tabular:chess")


@pytest.mark.parametrize("env", ["chess", "tabular:nope", "tabular:", "hanabi-full", "Overcooked-V2"])
def test_a_config_built_directly_refuses_an_unknown_env(env: str) -> None:
    expected = rf"TrainConfig.env = {re.escape(repr(env))} is not an env: use hanabi, overcooked-v2"
    with pytest.raises(UsageError, match=expected) as e:
        TrainConfig(env=env)
    assert all(name in str(e.value) for name in GAMES)
    with pytest.raises(UsageError, match=expected):
        TrainConfig().replace(env=env)


def test_a_config_built_directly_takes_every_registered_name_and_a_dpomdp_path_by_form(
    tmp_path: Path,
) -> None:
    forms = [f"tabular:{n}" for n in GAMES] + list(GAMES) + ["tabular:Three_Lever", "hanabi", "overcooked-v2"]
    missing = [
        f"tabular:{tmp_path / 'elsewhere' / 'game.dpomdp'}",  # a stored run's file, not on this machine
        str(tmp_path / "game.DPOMDP"),
        "tabular:game.dpomdp.gz",  # a bare name: looked up in $ERS_DPOMDP_DIR when the env is built
    ]
    for env in forms + missing:
        assert TrainConfig(env=env).env == env
    for env in missing:  # the file is looked for where the game is read
        with pytest.raises(FileNotFoundError, match="no such file"):
            make_env(TrainConfig(env=env), 2, 0)
    other = tmp_path / "lever.txt"  # an existing file of another name is read as a .dpomdp (load_game)
    other.write_text(write_dpomdp(get_game("two-lever")))
    assert TrainConfig(env=f"tabular:{other}").game_spec == str(other)
    with pytest.raises(UsageError, match="is not an env"):  # a folder is no game
        TrainConfig(env=f"tabular:{tmp_path}")


def test_from_json_refuses_a_bad_env_naming_the_field_and_run_config_names_the_file(tmp_path: Path) -> None:
    data = {**TrainConfig(env="tabular:two-lever").to_json(), "env": "chess"}
    with pytest.raises(UsageError, match=r"TrainConfig.env = 'chess' is not an env: use hanabi"):
        TrainConfig.from_json(data)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"config": data}))
    with pytest.raises(
        RunError, match=r"config.json: its 'config' is not a training config \(TrainConfig.env"
    ):
        read_run_config(run)


def test_a_stored_pool_whose_dpomdp_file_is_gone_still_loads(tmp_path: Path) -> None:
    game = tmp_path / "lever.dpomdp"
    game.write_text(write_dpomdp(get_game("two-lever")))
    config = paper_config(f"tabular:{game}", num_envs=8, num_steps=2, total_env_steps=16, seeds=(0, 1))
    train_pool(config, tmp_path / "pool", eval_games=4, progress=False)
    game.unlink()  # the pool copied to a machine without the game file
    pool = load_pool(tmp_path / "pool")
    assert pool.info["env"] == config.env
    assert [(p.seed, p.config.env) for p in pool.policies] == [(0, config.env), (1, config.env)]
    assert read_run_config(tmp_path / "pool" / "run")[1].env == config.env
    with pytest.raises(FileNotFoundError, match=re.escape(str(game))):
        make_env(pool.policies[0].config, 2, 0)
