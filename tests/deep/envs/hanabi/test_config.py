"""Config, presets, sizes and move order against HLE."""

from __future__ import annotations

import numpy as np
import pytest

from ers_deep.envs.hanabi.config import PRESETS, HanabiConfig, resolve_config
from ers_deep.envs.hanabi.hle import HLEGame

# (obs 2p, moves 2p, obs 3p, moves 3p) measured with HLE (shared notes, verified again below)
SIZES = {
    "Hanabi-Full": (658, 20, 956, 30),
    "Hanabi-Full-Minimal": (308, 20, 431, 30),
    "Hanabi-Small": (171, 11, 226, 18),
    "Hanabi-Very-Small": (106, 10, 139, 16),
}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_sizes(name: str) -> None:
    c2, c3 = HanabiConfig.preset(name), HanabiConfig.preset(name, players=3)
    assert (c2.obs_size, c2.num_moves, c3.obs_size, c3.num_moves) == SIZES[name]


@pytest.mark.parametrize("players", [2, 3, 4, 5])
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_sizes_and_move_order_match_hle(name: str, players: int) -> None:
    cfg = HanabiConfig.preset(name, players=players)
    game = HLEGame(cfg)  # raises if HLE's encoder shape or move count differ
    assert [game.move_string(m) for m in range(cfg.num_moves)] == [
        cfg.describe_move(m) for m in range(cfg.num_moves)
    ]
    game.close()


def test_full_two_player_move_order() -> None:
    cfg = HanabiConfig()
    names = [cfg.describe_move(m) for m in range(20)]
    assert names[:5] == [f"(Discard {i})" for i in range(5)]
    assert names[5:10] == [f"(Play {i})" for i in range(5)]
    assert names[10:15] == [f"(Reveal player +1 color {c})" for c in "RYGWB"]
    assert names[15:] == [f"(Reveal player +1 rank {r})" for r in range(1, 6)]


def test_aliases_and_errors() -> None:
    assert HanabiConfig.preset("full") == HanabiConfig()
    assert HanabiConfig.preset("very-small", players=4).hand == 2
    assert HanabiConfig(players=4).hand == 4
    with pytest.raises(ValueError, match="unknown Hanabi preset"):
        HanabiConfig.preset("huge")
    with pytest.raises(ValueError, match="players"):
        HanabiConfig(players=6)
    with pytest.raises(ValueError, match="exceed the deck"):
        HanabiConfig(colors=1, ranks=2, hand_size=3, players=2)
    with pytest.raises(TypeError, match="HanabiConfig, a preset name or None, not dict"):
        resolve_config({"players": 3})  # type: ignore[arg-type]  # was an AttributeError deep in the env


def test_layout_sections_full() -> None:
    sec = HanabiConfig().layout.sections()
    assert sec == {
        "hands": (0, 127),
        "board": (127, 203),
        "discards": (203, 253),
        "last_action": (253, 308),
        "knowledge": (308, 658),
    }
    deck = HanabiConfig().full_deck()
    assert len(deck) == 50 and np.bincount(deck).tolist() == [3, 2, 2, 2, 1] * 5


def test_players_beside_a_config_object_must_agree() -> None:
    """``HanabiEnv(HanabiConfig(...), players=3)`` built the config's 2-player game, the 3 ignored: a value
    that differs from the config's is refused; the default, an equal value and presets work as before."""
    from ers_deep.envs.hanabi import HanabiEnv

    small = HanabiConfig.preset("Hanabi-Very-Small")
    with pytest.raises(ValueError, match=r"players=3 conflicts with the given HanabiConfig's players=2"):
        HanabiEnv(small, players=3)
    with pytest.raises(ValueError, match="players=2 conflicts"):
        resolve_config(HanabiConfig.preset("Hanabi-Very-Small", players=3), players=2)
    assert HanabiEnv(small).num_players == HanabiEnv(small, players=2).num_players == 2
    three = HanabiConfig.preset("Hanabi-Very-Small", players=3)
    assert HanabiEnv(three).num_players == HanabiEnv(three, players=3).num_players == 3
    assert HanabiEnv("Hanabi-Very-Small", players=3).num_players == 3
    assert HanabiEnv().num_players == 2 and HanabiEnv().config == HanabiConfig()
