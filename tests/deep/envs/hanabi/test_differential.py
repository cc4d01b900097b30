"""ers's batched Hanabi equals HLE at every step of random legal play from identical deals (every player's
observation, legal moves, current player, reward, end of game, score)."""

from __future__ import annotations

import time

import pytest

from ers_deep.envs.hanabi.config import HanabiConfig
from tests.deep.envs.hanabi.differential import run_differential

CUSTOM = HanabiConfig(players=3, colors=3, ranks=4, hand_size=3, max_information_tokens=5, max_life_tokens=2)
ODD = HanabiConfig(players=2, colors=4, ranks=1, hand_size=2, max_information_tokens=2, max_life_tokens=1)

# 200 games in the default run
DEFAULT = [
    ("full-2p", HanabiConfig(), 80),
    ("full-3p", HanabiConfig(players=3), 20),
    ("full-4p", HanabiConfig(players=4), 15),
    ("full-5p", HanabiConfig(players=5), 15),
    ("minimal-2p", HanabiConfig.preset("minimal"), 15),
    ("small-2p", HanabiConfig.preset("small"), 15),
    ("very-small-3p", HanabiConfig.preset("very-small", players=3), 15),
    ("custom-3p", CUSTOM, 15),
    ("ranks1-2p", ODD, 10),
]
# >= 10,000 games in the slow run
SLOW = [
    ("full-2p", HanabiConfig(), 4000),
    ("full-3p", HanabiConfig(players=3), 1500),
    ("full-4p", HanabiConfig(players=4), 1000),
    ("full-5p", HanabiConfig(players=5), 1000),
    ("minimal-2p", HanabiConfig.preset("minimal"), 500),
    ("small-2p", HanabiConfig.preset("small"), 500),
    ("small-5p", HanabiConfig.preset("small", players=5), 500),
    ("very-small-2p", HanabiConfig.preset("very-small"), 500),
    ("custom-3p", CUSTOM, 500),
    ("ranks1-2p", ODD, 500),
]


def test_default_run_has_200_games() -> None:
    assert sum(n for _, _, n in DEFAULT) == 200
    assert sum(n for _, _, n in SLOW) >= 10_000


@pytest.mark.parametrize("index", range(len(DEFAULT)), ids=[d[0] for d in DEFAULT])
def test_equal_to_hle(index: int) -> None:
    _, cfg, n_games = DEFAULT[index]
    stats = run_differential(cfg, n_games, batch=min(n_games, 32), seed=index)
    assert stats.games == n_games
    assert stats.endings["out_of_lives"] > 0


def test_all_game_endings_are_covered() -> None:
    """Deck exhaustion and perfect scores both occur (and agree with HLE), not only bombs."""
    stats = run_differential(HanabiConfig.preset("very-small", players=2), 60, batch=30, seed=5)
    assert stats.endings["perfect"] > 0 and stats.endings["deck_out"] > 0


@pytest.mark.slow
def test_equal_to_hle_10000_games() -> None:
    total_games = total_steps = 0
    report = []
    for name, cfg, n_games in SLOW:
        t0 = time.perf_counter()
        stats = run_differential(cfg, n_games, batch=128, seed=1000 + len(report))
        assert stats.games == n_games
        total_games += stats.games
        total_steps += stats.steps
        report.append(
            f"{name}: {stats.games} games, {stats.steps} steps, {dict(stats.endings)}, "
            f"mean score {sum(stats.scores) / len(stats.scores):.2f}, {time.perf_counter() - t0:.0f}s"
        )
    print("\n" + "\n".join(report) + f"\ntotal: {total_games} games, {total_steps} steps, all equal to HLE")
    assert total_games >= 10_000
