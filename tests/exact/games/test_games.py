"""The built-in game registry: every game builds and validates, hand-known entries are right, configs
work, names resolve (with suggestions), and the built-in Dec-Tiger equals MADP's file."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ers_exact.games import GAMES, UnknownGameError, get_game, lever_game, load_game
from ers_exact.io.dpomdp import read_dpomdp
from ers_exact.model.game import Game, GameError

REPO = Path(__file__).resolve().parents[3]


def _dpomdp_dir() -> Path:
    return Path(os.environ.get("ERS_DPOMDP_DIR", REPO.parent / "shared" / "dpomdp"))


def _joint(game: Game, *local: int) -> int:
    """Joint index of local actions (last agent fastest), found through the game's own table."""
    return int(np.flatnonzero((game.joint_actions == np.array(local)).all(axis=1))[0])


def _joint_obs(game: Game, *local: int) -> int:
    return int(np.flatnonzero((game.joint_observations == np.array(local)).all(axis=1))[0])


def _open_loop_return(game: Game, joint_actions: Sequence[int]) -> float:
    """J of a fixed joint-action sequence a_0, ..., a_{H-1}: sum_t gamma^t b_t . E[R | s, a_t]."""
    belief, total = game.initial_belief, 0.0
    for t, a in enumerate(joint_actions):
        total += game.discount**t * float(belief @ game.expected_reward[:, a])
        belief = belief @ game.transition[:, a, :]
    return total


# ----- every registered game -----


def test_registry_is_a_plain_dict_of_callables() -> None:
    assert type(GAMES) is dict
    assert set(GAMES) >= {"toy-coordination", "three-lever", "two-lever", "handshake", "dectiger"}
    assert all(callable(f) for f in GAMES.values())


@pytest.mark.parametrize("name", sorted(GAMES))
def test_every_game_builds_and_validates(name: str) -> None:
    game = get_game(name)
    assert isinstance(game, Game)
    assert game.name == name
    assert game.description and "\n" not in game.description
    assert game.horizon >= 1 and 0.0 <= game.discount <= 1.0
    for arr in (game.transition, game.observation, game.reward, game.initial_belief):
        assert not arr.flags.writeable
    assert Game(**{f: getattr(game, f) for f in game.__dataclass_fields__}) == game  # re-validates
    assert get_game(name) == game  # deterministic


# ----- toy coordination game (paper's Example) -----

TOY_T = [  # (s, a^1, a^2, s', T)
    pytest.param("s0", 0, 0, "x", 1.0, id="s0-00-x"),
    pytest.param("s0", 1, 1, "m", 1.0, id="s0-11-m"),
    pytest.param("s0", 0, 1, "b", 1.0, id="s0-01-b"),
    pytest.param("s0", 1, 0, "b", 1.0, id="s0-10-b"),
    pytest.param("s0", 1, 1, "x", 0.0, id="s0-11-not-x"),
    pytest.param("x", 1, 0, "x", 1.0, id="x-absorbing"),
    pytest.param("m", 0, 1, "m", 1.0, id="m-absorbing"),
    pytest.param("b", 1, 1, "b", 1.0, id="b-absorbing"),
]


@pytest.mark.parametrize(("s", "a1", "a2", "s_next", "prob"), TOY_T)
def test_toy_transition(s: str, a1: int, a2: int, s_next: str, prob: float) -> None:
    game = get_game("toy-coordination")
    idx = game.state_names.index
    assert game.transition[idx(s), _joint(game, a1, a2), idx(s_next)] == prob


TOY_R = [  # (s, a^1, a^2, s', R)
    pytest.param("s0", 0, 0, "x", 1.0, id="t0-00-pays-1"),
    pytest.param("s0", 1, 1, "m", 0.0, id="t0-11-pays-0"),
    pytest.param("s0", 0, 1, "b", 0.0, id="t0-01-pays-0"),
    pytest.param("s0", 1, 0, "b", 0.0, id="t0-10-pays-0"),
    *[pytest.param("m", a1, a2, "m", 1.0, id=f"t1-m-{a1}{a2}-pays-1") for a1 in (0, 1) for a2 in (0, 1)],
    *[pytest.param("x", a1, a2, "x", 0.0, id=f"t1-x-{a1}{a2}-pays-0") for a1 in (0, 1) for a2 in (0, 1)],
    *[pytest.param("b", a1, a2, "b", 0.0, id=f"t1-b-{a1}{a2}-pays-0") for a1 in (0, 1) for a2 in (0, 1)],
]


@pytest.mark.parametrize(("s", "a1", "a2", "s_next", "r"), TOY_R)
def test_toy_reward(s: str, a1: int, a2: int, s_next: str, r: float) -> None:
    game = get_game("toy-coordination")
    idx = game.state_names.index
    assert game.reward[idx(s), _joint(game, a1, a2), idx(s_next)] == r


def test_toy_spec() -> None:
    game = get_game("toy-coordination")
    assert (game.n_agents, game.horizon, game.discount) == (2, 2, 1.0)
    assert game.state_names == ("s0", "x", "m", "b")
    assert game.action_names == (("0", "1"), ("0", "1"))
    assert game.observation_names == (("x", "m", "b"), ("x", "m", "b"))
    np.testing.assert_array_equal(game.initial_belief, [1, 0, 0, 0])
    for s in ("x", "m", "b"):  # full observability: both agents observe the state reached
        k = game.observation_names[0].index(s)
        for a in range(game.n_joint_actions):
            assert game.observation[a, game.state_names.index(s), _joint_obs(game, k, k)] == 1.0
    assert not game.transition[:, :, 0].any(), "s0 is never re-entered"


@pytest.mark.parametrize(
    ("a0", "ret"),
    [
        pytest.param((0, 0), 1.0, id="00"),
        pytest.param((1, 1), 1.0, id="11"),
        pytest.param((0, 1), 0.0, id="01"),
        pytest.param((1, 0), 0.0, id="10"),
    ],
)
def test_toy_returns(a0: tuple[int, int], ret: float) -> None:
    """Both coordinated conventions are worth 1 (Q^i(s0, a) = q_a); a mismatch is worth 0."""
    game = get_game("toy-coordination")
    for a1 in range(game.n_joint_actions):
        assert _open_loop_return(game, [_joint(game, *a0), a1]) == ret


# ----- lever games -----


@pytest.mark.parametrize(
    "name,levers", [pytest.param("three-lever", 3, id="three"), pytest.param("two-lever", 2, id="two")]
)
def test_lever_observation_is_partner_action(name: str, levers: int) -> None:
    game = get_game(name)
    assert game.n_actions == (levers, levers) and game.n_states == 1 and game.horizon == 2
    assert game.observation_names == game.action_names
    for a in range(levers):
        for b in range(levers):
            row = game.observation[_joint(game, a, b), 0]
            o = int(np.flatnonzero(row)[0])
            assert row[o] == 1.0
            assert tuple(game.joint_observations[o]) == (b, a)  # o^1 = a^2, o^2 = a^1
            assert game.reward[0, _joint(game, a, b), 0] == (1.0 if a == b else 0.0)


@pytest.mark.parametrize(
    ("levers", "a", "b", "o1_label"),
    [
        pytest.param(3, 0, 2, "L3", id="3-(L1,L3)"),
        pytest.param(3, 1, 0, "L1", id="3-(L2,L1)"),
        pytest.param(2, 1, 1, "L2", id="2-(L2,L2)"),
    ],
)
def test_lever_observation_labels(levers: int, a: int, b: int, o1_label: str) -> None:
    game = lever_game(levers=levers)
    o = int(np.argmax(game.observation[_joint(game, a, b), 0]))
    assert game.observation_names[0][game.joint_observations[o][0]] == o1_label


def test_lever_game_configurable() -> None:
    game = get_game("three-lever", levers=4, rounds=3, match_reward=1.0, mismatch_reward=-1.0)
    assert game.name == "four-lever"
    assert game.n_actions == (4, 4) and game.n_observations == (4, 4) and game.horizon == 3
    assert game.n_joint_actions == 16 and game.observation.shape == (16, 1, 16)
    assert game.reward[0, _joint(game, 3, 3), 0] == 1.0 and game.reward[0, _joint(game, 3, 2), 0] == -1.0
    assert _open_loop_return(game, [_joint(game, 2, 2)] * 3) == 3.0
    assert get_game("two-lever", rounds=5).horizon == 5


def test_lever_game_rejects_bad_config() -> None:
    with pytest.raises(GameError, match="levers"):
        lever_game(levers=0)
    with pytest.raises(GameError, match="horizon"):
        lever_game(rounds=0)


# ----- handshake (Figure 1) -----


@pytest.mark.parametrize(
    ("a1", "a2", "r"),
    [
        pytest.param("handshake", "handshake", 1.0, id="HH"),
        pytest.param("fist-bump", "fist-bump", 1.0, id="FF"),
        pytest.param("handshake", "fist-bump", 0.0, id="HF"),
        pytest.param("fist-bump", "handshake", 0.0, id="FH"),
    ],
)
def test_handshake_rewards(a1: str, a2: str, r: float) -> None:
    game = get_game("handshake")
    acts = game.action_names[0]
    assert game.reward[0, _joint(game, acts.index(a1), acts.index(a2)), 0] == r
    assert game.horizon == 1 and game.n_states == 1 and game.n_observations == (1, 1)


def test_handshake_configurable() -> None:
    game = get_game("handshake", mismatch_reward=-1.0)
    np.testing.assert_array_equal(game.expected_reward, [[1.0, -1.0, -1.0, 1.0]])


# ----- Dec-Tiger -----

TL, TR = "tiger-left", "tiger-right"
L, OL, OR = "listen", "open-left", "open-right"
HL, HR = "hear-left", "hear-right"

DECTIGER_OBS = [  # after (listen, listen), in state s': P(o^1, o^2)
    pytest.param(TL, HL, HL, 0.7225, id="TL-both-right"),
    pytest.param(TL, HL, HR, 0.1275, id="TL-1-right"),
    pytest.param(TL, HR, HL, 0.1275, id="TL-2-right"),
    pytest.param(TL, HR, HR, 0.0225, id="TL-both-wrong"),
    pytest.param(TR, HR, HR, 0.7225, id="TR-both-right"),
    pytest.param(TR, HL, HR, 0.1275, id="TR-2-right"),
    pytest.param(TR, HR, HL, 0.1275, id="TR-1-right"),
    pytest.param(TR, HL, HL, 0.0225, id="TR-both-wrong"),
]


@pytest.mark.parametrize(("s", "o1", "o2", "prob"), DECTIGER_OBS)
def test_dectiger_listen_observations(s: str, o1: str, o2: str, prob: float) -> None:
    game = get_game("dectiger")
    obs = game.observation_names[0]
    u = game.observation[
        _joint(game, 0, 0), game.state_names.index(s), _joint_obs(game, obs.index(o1), obs.index(o2))
    ]
    assert u == pytest.approx(prob, abs=1e-15)


DECTIGER_R = [  # (state before the move, a^1, a^2, R): every joint action in both states
    pytest.param(TL, L, L, -2, id="TL-both-listen"),
    pytest.param(TR, L, L, -2, id="TR-both-listen"),
    pytest.param(TL, OL, OL, -50, id="TL-both-open-tiger"),
    pytest.param(TR, OR, OR, -50, id="TR-both-open-tiger"),
    pytest.param(TL, OR, OR, 20, id="TL-both-open-treasure"),
    pytest.param(TR, OL, OL, 20, id="TR-both-open-treasure"),
    pytest.param(TL, OL, L, -101, id="TL-1-opens-tiger"),
    pytest.param(TL, L, OL, -101, id="TL-2-opens-tiger"),
    pytest.param(TR, OR, L, -101, id="TR-1-opens-tiger"),
    pytest.param(TR, L, OR, -101, id="TR-2-opens-tiger"),
    pytest.param(TL, OR, L, 9, id="TL-1-opens-treasure"),
    pytest.param(TL, L, OR, 9, id="TL-2-opens-treasure"),
    pytest.param(TR, OL, L, 9, id="TR-1-opens-treasure"),
    pytest.param(TR, L, OL, 9, id="TR-2-opens-treasure"),
    pytest.param(TL, OL, OR, -100, id="TL-different-doors-LR"),
    pytest.param(TL, OR, OL, -100, id="TL-different-doors-RL"),
    pytest.param(TR, OL, OR, -100, id="TR-different-doors-LR"),
    pytest.param(TR, OR, OL, -100, id="TR-different-doors-RL"),
]


@pytest.mark.parametrize(("s", "a1", "a2", "r"), DECTIGER_R)
def test_dectiger_rewards(s: str, a1: str, a2: str, r: float) -> None:
    game = get_game("dectiger")
    acts = game.action_names[0]
    row = game.reward[game.state_names.index(s), _joint(game, acts.index(a1), acts.index(a2))]
    np.testing.assert_array_equal(row, [r, r])  # R(s, a), whatever s'


def test_dectiger_dynamics() -> None:
    game = get_game("dectiger")
    assert game.state_names == (TL, TR) and game.action_names[0] == (L, OL, OR)
    assert game.observation_names == ((HL, HR), (HL, HR))
    assert (game.horizon, game.discount) == (2, 1.0)
    np.testing.assert_array_equal(game.initial_belief, [0.5, 0.5])
    listen = _joint(game, 0, 0)
    np.testing.assert_array_equal(game.transition[:, listen], np.eye(2))
    others = [a for a in range(9) if a != listen]
    np.testing.assert_array_equal(game.transition[:, others], 0.5)
    np.testing.assert_array_equal(game.observation[others], 0.25)
    assert _open_loop_return(game, [listen, listen]) == -4.0  # the published H = 2 optimum


def test_dectiger_configurable() -> None:
    game = get_game("dectiger", horizon=3, listen_accuracy=1.0, tiger_left_prob=0.8)
    assert game.horizon == 3
    np.testing.assert_array_equal(game.initial_belief, [0.8, 0.2])
    np.testing.assert_array_equal(game.observation[0, 0], [1, 0, 0, 0])
    with pytest.raises(GameError, match="listen_accuracy"):
        get_game("dectiger", listen_accuracy=1.5)


def _read_dpomdp_or_skip(filename: str) -> Game:
    folder = _dpomdp_dir()
    if not (folder / filename).is_file():
        pytest.skip(f"{filename} not found in {folder} (set ERS_DPOMDP_DIR to the shared dpomdp folder)")
    return read_dpomdp(folder / filename, horizon=2)


@pytest.mark.parametrize(
    ("filename", "config"),
    [
        pytest.param("dectiger.dpomdp", {}, id="dectiger"),
        pytest.param("dectiger_skewed.dpomdp", {"tiger_left_prob": 0.8}, id="dectiger_skewed"),
    ],
)
def test_dectiger_equals_madp_file(filename: str, config: dict[str, float]) -> None:
    """The built-in, written from the definition, equals MADP's standard encoding entry for entry."""
    read = _read_dpomdp_or_skip(filename)
    built = get_game("dectiger", **config)
    # names up to renaming: same sizes (the arrays below then pin down the order)
    assert read.n_states == built.n_states and read.n_actions == built.n_actions
    assert read.n_observations == built.n_observations
    for field in ("transition", "observation", "reward", "initial_belief"):
        np.testing.assert_allclose(
            getattr(read, field), getattr(built, field), rtol=0, atol=1e-12, err_msg=field
        )
    assert (read.horizon, read.discount) == (built.horizon, built.discount)


# ----- lookup -----


@pytest.mark.parametrize(
    ("typo", "closest"),
    [
        pytest.param("three-levr", "three-lever", id="three-levr"),
        pytest.param("dec-tiger", "dectiger", id="dec-tiger"),
        pytest.param("handshak", "handshake", id="handshak"),
        pytest.param("toy-coordinaton", "toy-coordination", id="toy"),
    ],
)
def test_unknown_name_suggests_closest(typo: str, closest: str) -> None:
    with pytest.raises(UnknownGameError) as info:
        get_game(typo)
    assert info.value.suggestions[0] == closest
    assert f"did you mean {closest!r}" in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, KeyError)


def test_unknown_name_without_close_match_lists_games() -> None:
    with pytest.raises(UnknownGameError, match=r"known games: .*dectiger"):
        get_game("hanabi-full")


def test_names_are_case_and_separator_insensitive() -> None:
    assert get_game("Three_Lever") == get_game("three-lever")


def test_unknown_option_names_the_options() -> None:
    with pytest.raises(TypeError, match="rounds"):
        get_game("three-lever", horizon=3)


def test_load_game_builtin_with_overrides() -> None:
    base = get_game("dectiger")
    game = load_game("dectiger", horizon=3, discount=0.9)
    assert (game.horizon, game.discount) == (3, 0.9)
    assert game == base.with_horizon(3).with_discount(0.9)
    assert load_game("three-lever") == get_game("three-lever")
    assert load_game("two-lever", horizon=4).horizon == 4
    with pytest.raises(GameError, match="horizon"):
        load_game("handshake", horizon=0)
    with pytest.raises(GameError, match="discount"):
        load_game("handshake", discount=2.0)
    with pytest.raises(UnknownGameError):
        load_game("no-such-game")


@pytest.fixture
def fake_reader(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, object]]]:
    """Replace ers_exact.io.dpomdp by a stub that records its calls and returns the handshake game."""
    calls: list[tuple[str, dict[str, object]]] = []

    def read_dpomdp(path: str, horizon: int = 2, name: str | None = None) -> Game:
        calls.append((str(path), {"horizon": horizon}))
        return get_game("handshake").with_horizon(horizon)

    module = types.ModuleType("ers_exact.io.dpomdp")
    module.read_dpomdp = read_dpomdp  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ers_exact.io.dpomdp", module)
    return calls


def test_load_game_routes_paths_to_the_reader(fake_reader: list, tmp_path: Path) -> None:
    existing = tmp_path / "problem.txt"
    existing.write_text("agents: 2\n")
    game = load_game(str(existing), horizon=3, discount=0.5)
    assert fake_reader[-1] == (str(existing), {"horizon": 3})
    assert (game.horizon, game.discount) == (3, 0.5)
    with pytest.raises(FileNotFoundError, match=r"missing/somewhere\.dpomdp: no such file"):
        load_game("missing/somewhere.dpomdp")  # a .dpomdp name is a path, even when it is missing
    (tmp_path / "p").write_text("agents: 2\n")
    assert load_game(tmp_path / "p").horizon == 2  # a PathLike is always a path
    assert fake_reader[-1] == (str(tmp_path / "p"), {"horizon": 2})
    n_calls = len(fake_reader)
    load_game("dectiger")  # a registered name never goes to the reader
    assert len(fake_reader) == n_calls


def test_load_game_reads_real_dpomdp_file() -> None:
    path = _dpomdp_dir() / "dectiger.dpomdp"
    if not path.is_file():
        pytest.skip(f"{path} not found (set ERS_DPOMDP_DIR)")
    game = load_game(str(path), horizon=3, discount=0.95)
    assert (game.horizon, game.discount) == (3, 0.95)
    np.testing.assert_allclose(game.reward, get_game("dectiger").reward, rtol=0, atol=1e-12)
