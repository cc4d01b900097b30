"""``paper_config`` refuses an env that names no game at the call (``paper_config("chess")`` made a tabular
config whose game failed to load only when the env was built), naming the registered games: the names come
from ers-exact's registry (``ers_exact.games.GAMES``), so a game registered later is known too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ers_deep.train.config import paper_config
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
