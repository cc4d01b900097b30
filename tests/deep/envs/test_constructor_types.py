"""A count or size argument of an env constructor that is not a number (``HanabiEnv(players='2')``, a str
``batch_size``, Overcooked V2's ``max_steps`` / ``agent_view_size``, a tabular env's ``horizon``) is a TypeError
naming the argument (was a TypeError from a comparison naming none, or ``int('400')`` taken silently); so is a
tabular env's ``discount`` that is not a number (``float('0.5')`` was taken)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ers_deep.envs.hanabi.config import HanabiConfig
from ers_deep.envs.hanabi.env import HanabiEnv
from ers_deep.envs.overcooked_v2.env import OvercookedV2Env
from ers_deep.envs.tabular.env import TabularEnv
from ers_exact.games import get_game, load_game

CASES: list[tuple[str, Any, dict[str, Any]]] = [
    ("players", HanabiEnv, {"config": "Hanabi-Very-Small", "players": "2"}),
    ("players", HanabiEnv, {"players": "2"}),
    ("batch_size", HanabiEnv, {"config": "Hanabi-Very-Small", "batch_size": "4"}),
    ("colors", HanabiConfig, {"colors": "2"}),
    ("hand_size", HanabiConfig, {"hand_size": [5]}),
    ("max_life_tokens", HanabiConfig, {"max_life_tokens": None}),
    ("batch_size", OvercookedV2Env, {"batch_size": "4"}),
    ("max_steps", OvercookedV2Env, {"max_steps": "400"}),
    ("agent_view_size", OvercookedV2Env, {"agent_view_size": "2"}),
    ("batch_size", TabularEnv, {"game": "three-lever", "batch_size": "4"}),
    ("batch_size", TabularEnv, {"game": "three-lever", "batch_size": True}),
    ("horizon", TabularEnv, {"game": "three-lever", "horizon": "3"}),  # was ers-exact's GameError
    ("horizon", TabularEnv, {"game": get_game("dectiger"), "horizon": "3"}),  # a Game: was ignored
]


@pytest.mark.parametrize(("name", "cls", "kwargs"), CASES, ids=[f"{c[1].__name__}-{c[0]}" for c in CASES])
def test_a_count_that_is_not_a_number_is_a_type_error_naming_it(name: str, cls: Any, kwargs: dict) -> None:
    with pytest.raises(TypeError, match=rf"^{name} must be a whole number"):
        cls(**kwargs)


def test_whole_numbers_of_another_type_are_read_as_ints() -> None:
    """numpy-free floats with no fraction were taken before (batch_size) and still are, as ints."""
    assert HanabiConfig(players=3.0).players == 3 and isinstance(HanabiConfig(players=3.0).players, int)
    assert OvercookedV2Env(max_steps=10.0).max_steps == 10
    with pytest.raises(ValueError, match="players must be a whole number"):
        HanabiConfig(players=2.5)


@pytest.mark.parametrize("game", ["dectiger", get_game("dectiger")], ids=["name", "Game"])
@pytest.mark.parametrize("discount", ["0.5", True, 0.5j, [0.5]])
def test_a_tabular_discount_that_is_not_a_number_is_a_type_error_naming_it(game: Any, discount: Any) -> None:
    with pytest.raises(TypeError, match=r"^discount must be a number"):
        TabularEnv(game, discount=discount)


@pytest.mark.parametrize("game", ["dectiger", get_game("dectiger")], ids=["name", "Game"])
def test_a_tabular_env_overrides_h_and_gamma_of_a_name_and_of_a_game_alike(game: Any) -> None:
    """A ``Game`` given with ``horizon`` / ``discount`` kept its own H and gamma; the overrides are ers-exact's
    ``load_game``'s (whole floats and numpy numbers read as an int and a float)."""
    want = load_game("dectiger", horizon=3, discount=0.75)
    for horizon, discount in ((3, 0.75), (3.0, np.float32(0.75)), (np.int64(3), 0.75)):
        env = TabularEnv(game, horizon=horizon, discount=discount)
        assert env.game == want and env.horizon == 3 and type(env.game.discount) is float
    assert TabularEnv(game).game == get_game("dectiger")  # None: the game's own
    with pytest.raises(ValueError, match="horizon must be a whole number"):
        TabularEnv(game, horizon=2.5)
    with pytest.raises(ValueError, match="discount gamma must lie in"):
        TabularEnv(game, discount=1.5)  # the range is the game's check, as before
