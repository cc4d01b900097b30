"""Game validation: every malformed spec raises GameError naming the offending entry; nothing is
renormalised; games are frozen; make_game broadcasts a 2-d R[s, a]."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ers_exact.model.game import ROW_SUM_TOL, Game, GameError, make_game

# A small valid base game: S = 2, agent 0 has 2 actions and 1 observation, agent 1 has 1 action and
# 2 observations, so joint A = 2 and joint O = 2 (unequal local sizes catch index mix-ups).
N_S, N_A, N_O = 2, 2, 2


def _base() -> dict[str, Any]:
    return {
        "name": "base",
        "state_names": ("s0", "s1"),
        "action_names": (("a0", "a1"), ("b0",)),
        "observation_names": (("o0",), ("p0", "p1")),
        "transition": np.full((N_S, N_A, N_S), 0.5),
        "observation": np.full((N_A, N_S, N_O), 0.5),
        "reward": np.zeros((N_S, N_A, N_S)),
        "initial_belief": np.array([1.0, 0.0]),
        "horizon": 2,
        "discount": 1.0,
        "legal_actions": None,
    }


def _with(**changes: Any) -> dict[str, Any]:
    spec = _base()
    spec.update(changes)
    return spec


def _make_game(spec: dict[str, Any], name: str, horizon: Any = 1, **over: Any) -> Game:
    """``make_game`` of a Game spec (``_base`` / ``_with``), its ``transition`` or ``reward`` replaced by ``over``."""
    f = {**spec, **over}
    names = (f["state_names"], f["action_names"], f["observation_names"])
    arrays = (f["transition"], f["observation"], f["reward"], f["initial_belief"])
    return make_game(name, *names, *arrays, horizon)


def _set(name: str, index: tuple[int, ...], value: float) -> Callable[[], dict[str, Any]]:
    """A base spec whose array ``name`` has ``value`` at ``index``."""

    def build() -> dict[str, Any]:
        spec = _base()
        arr = np.array(spec[name], dtype=float)
        arr[index] = value
        spec[name] = arr
        return spec

    return build


def _msg(*parts: str) -> re.Pattern[str]:
    """A pattern matching ``parts`` in order (the value's repr between them may vary with numpy)."""
    return re.compile(".*".join(re.escape(p) for p in parts))


def test_base_spec_is_valid() -> None:
    game = Game(**_base())
    assert (game.n_states, game.n_joint_actions, game.n_joint_observations) == (N_S, N_A, N_O)


BAD_SPECS = [
    # wrong shapes
    pytest.param(lambda: _with(transition=np.full((2, 2), 0.5)), "transition has shape (2, 2)", id="T-2d"),
    pytest.param(
        lambda: _with(transition=np.full((N_S, N_A + 1, N_S), 0.5)),
        "transition has shape (2, 3, 2)",
        id="T-wrong-A",
    ),
    pytest.param(
        lambda: _with(observation=np.full((N_S, N_A, N_O), 0.5)[:, :1]),
        "observation has shape (2, 1, 2)",
        id="U-wrong-shape",
    ),
    pytest.param(
        lambda: _with(observation=np.full((2, 2, 4), 0.25)), "observation has shape (2, 2, 4)", id="U-wrong-O"
    ),
    pytest.param(lambda: _with(reward=np.zeros((2, 2, 2, 1))), "reward has shape (2, 2, 2, 1)", id="R-4d"),
    pytest.param(
        lambda: _with(initial_belief=np.ones(3) / 3), "initial_belief has shape (3,)", id="b0-shape"
    ),
    # negative entries (row sums still 1, so only the sign is wrong)
    pytest.param(
        _set("transition", (1, 0, 0), -0.5),
        _msg("transition[s=1, a=0, s'=0] = ", "-0.5", "is negative"),
        id="T-negative",
    ),
    pytest.param(
        _set("observation", (0, 1, 1), -0.5),
        _msg("observation[a=0, s'=1, o=1] = ", "-0.5", "is negative"),
        id="U-negative",
    ),
    pytest.param(
        lambda: _with(initial_belief=np.array([1.5, -0.5])),
        _msg("initial_belief[s=1] = ", "-0.5", "is negative"),
        id="b0-negative",
    ),
    # rows that do not sum to 1 within ROW_SUM_TOL = 1e-9
    pytest.param(_set("transition", (0, 1, 1), 0.5 + 1e-8), "transition[s=0, a=1] sums to", id="T-sum-high"),
    pytest.param(_set("transition", (1, 1, 0), 0.5 - 1e-8), "transition[s=1, a=1] sums to", id="T-sum-low"),
    pytest.param(
        _set("transition", (0, 0, 0), 0.0),
        _msg("transition[s=0, a=0] sums to ", "0.5", "not 1"),
        id="T-sum-half",
    ),
    pytest.param(_set("observation", (1, 0, 0), 0.6), "observation[a=1, s'=0] sums to", id="U-sum"),
    pytest.param(
        lambda: _with(initial_belief=np.array([0.5, 0.4])), "initial_belief sums to 0.9", id="b0-sum"
    ),
    # non-finite entries
    pytest.param(
        _set("transition", (0, 1, 0), np.nan), "transition[s=0, a=1, s'=0] is not finite", id="T-nan"
    ),
    pytest.param(_set("reward", (1, 0, 1), np.inf), "reward[s=1, a=0, s_next=1] is not finite", id="R-inf"),
    # empty sets
    pytest.param(
        lambda: _with(action_names=(("a0", "a1"), ())), "agent 1 has an empty action set", id="empty-actions"
    ),
    pytest.param(
        lambda: _with(observation_names=((), ("p0", "p1"))),
        "agent 0 has an empty observation set",
        id="empty-observations",
    ),
    pytest.param(lambda: _with(state_names=()), "at least one state", id="no-states"),
    pytest.param(lambda: _with(action_names=(), observation_names=()), "at least one agent", id="no-agents"),
    pytest.param(
        lambda: _with(observation_names=(("o0",),)),
        "observation_names has 1 agents",
        id="agent-count-mismatch",
    ),
    # horizon H >= 1, an integer
    pytest.param(lambda: _with(horizon=0), "horizon H must be an integer >= 1, got 0", id="H-0"),
    pytest.param(lambda: _with(horizon=-3), "horizon H must be an integer >= 1, got -3", id="H-negative"),
    pytest.param(lambda: _with(horizon=1.5), "horizon H must be an integer >= 1, got 1.5", id="H-float"),
    # discount gamma in [0, 1]
    pytest.param(lambda: _with(discount=-0.1), "discount gamma must lie in [0, 1], got -0.1", id="gamma-neg"),
    pytest.param(lambda: _with(discount=1.5), "discount gamma must lie in [0, 1], got 1.5", id="gamma-big"),
    pytest.param(
        lambda: _with(discount=float("nan")), "discount gamma must lie in [0, 1], got nan", id="gamma-nan"
    ),
    # legal actions
    pytest.param(
        lambda: _with(legal_actions=(np.array([[True, True], [False, False]]), np.ones((3, 1), bool))),
        "agent 0 has an empty legal action set after observation 'o0'",
        id="legal-empty-row-obs",
    ),
    pytest.param(
        lambda: _with(legal_actions=(np.ones((2, 2), bool), np.array([[False], [True], [True]]))),
        "agent 1 has an empty legal action set after the empty history",
        id="legal-empty-row-root",
    ),
    pytest.param(
        lambda: _with(legal_actions=(np.ones((2, 2), bool), np.ones((2, 1), bool))),
        "legal_actions[1] has shape (2, 1), expected (3, 1)",
        id="legal-wrong-shape",
    ),
    pytest.param(
        lambda: _with(legal_actions=(np.ones((1, 2), bool), np.ones((3, 1), bool))),
        "legal_actions[0] has shape (1, 2), expected (2, 2)",
        id="legal-wrong-shape-0",
    ),
    pytest.param(
        lambda: _with(legal_actions=(np.ones((2, 2), bool),)),
        "legal_actions has 1 entries, expected one per agent (2)",
        id="legal-wrong-count",
    ),
]


@pytest.mark.parametrize(("build", "message"), BAD_SPECS)
def test_invalid_spec_raises_game_error_naming_the_entry(
    build: Callable[[], dict[str, Any]], message: str | re.Pattern[str]
) -> None:
    pattern = message.pattern if isinstance(message, re.Pattern) else re.escape(message)
    with pytest.raises(GameError, match=pattern):
        Game(**build())


def test_game_error_is_a_value_error() -> None:
    assert issubclass(GameError, ValueError)


@pytest.mark.parametrize(
    ("name", "index", "delta"),
    [
        pytest.param("transition", (0, 1, 0), +1e-10, id="T-plus-1e-10"),
        pytest.param("transition", (1, 0, 1), -1e-10, id="T-minus-1e-10"),
        pytest.param("observation", (1, 1, 0), +1e-10, id="U-plus-1e-10"),
        pytest.param("initial_belief", (0,), -1e-10, id="b0-minus-1e-10"),
    ],
)
def test_row_sums_within_tolerance_pass_unchanged(name: str, index: tuple[int, ...], delta: float) -> None:
    spec = _base()
    arr = np.array(spec[name], dtype=float)
    arr[index] += delta
    spec[name] = arr
    game = Game(**spec)
    stored = getattr(game, name)
    assert np.array_equal(stored, arr), "entries must be stored as given, never renormalised"
    row_sum = float(stored[index[:-1]].sum())
    assert 1e-12 < abs(row_sum - 1.0) <= ROW_SUM_TOL, "the row really is off by about 1e-10"


def test_tolerance_boundary() -> None:
    assert ROW_SUM_TOL == 1e-9
    Game(**_set("transition", (0, 0, 0), 0.5 + 0.5e-9)())
    with pytest.raises(GameError):
        Game(**_set("transition", (0, 0, 0), 0.5 + 2e-9)())


# ----- frozen -----


@pytest.mark.parametrize("name", ["transition", "observation", "reward", "initial_belief"])
def test_arrays_are_read_only(name: str) -> None:
    game = Game(**_base())
    arr = getattr(game, name)
    assert not arr.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        arr[(0,) * arr.ndim] = 0.25


def test_legal_action_masks_are_read_only_bool() -> None:
    game = Game(**_with(legal_actions=(np.ones((2, 2)), np.ones((3, 1)))))
    assert game.legal_actions is not None
    for mask in game.legal_actions:
        assert mask.dtype == bool and not mask.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            mask[0, 0] = False


def test_arrays_are_copied_from_the_input() -> None:
    spec = _base()
    game = Game(**spec)
    spec["transition"][0, 0, 0] = 7.0
    spec["initial_belief"][0] = 7.0
    assert game.transition[0, 0, 0] == 0.5 and game.initial_belief[0] == 1.0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("horizon", 3, id="horizon"),
        pytest.param("discount", 0.5, id="discount"),
        pytest.param("transition", np.zeros((N_S, N_A, N_S)), id="transition"),
        pytest.param("name", "other", id="name"),
    ],
)
def test_dataclass_is_frozen(field: str, value: object) -> None:
    game = Game(**_base())
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(game, field, value)


def test_with_horizon_and_discount_revalidate_and_leave_the_original() -> None:
    game = Game(**_base())
    longer = game.with_horizon(5).with_discount(0.9)
    assert (longer.horizon, longer.discount) == (5, 0.9)
    assert (game.horizon, game.discount) == (2, 1.0)
    with pytest.raises(GameError, match="horizon"):
        game.with_horizon(0)
    with pytest.raises(GameError, match="discount"):
        game.with_discount(1.01)


@pytest.mark.parametrize("horizon", [1.5, 2.9, True, "3"])
def test_a_horizon_that_is_not_an_integer_is_refused_by_every_builder(horizon: Any) -> None:
    """make_game and with_horizon once took int(horizon): 2.9 built an H = 2 game, True H = 1, "3" H = 3."""
    game = Game(**_base())
    spec = _base()
    with pytest.raises(GameError, match="horizon H must be an integer"):
        game.with_horizon(horizon)
    with pytest.raises(GameError, match="horizon H must be an integer"):
        _make_game(spec, spec["name"], horizon)
    assert game.with_horizon(np.int64(3)).horizon == 3 and type(game.with_horizon(np.int64(3)).horizon) is int


# ----- make_game -----


def test_make_game_broadcasts_2d_reward_over_next_state() -> None:
    r2 = np.array([[1.0, -2.0], [3.5, 0.25]])  # R[s, a]
    spec = _base()
    game = make_game(
        name="broadcast",
        states=spec["state_names"],
        actions=spec["action_names"],
        observations=spec["observation_names"],
        transition=np.array([[[0.25, 0.75], [1.0, 0.0]], [[0.0, 1.0], [0.5, 0.5]]]),
        observation=spec["observation"],
        reward=r2,
        initial_belief=spec["initial_belief"],
        horizon=1,
    )
    assert game.reward.shape == (N_S, N_A, N_S)
    for s in range(N_S):
        for a in range(N_A):
            for s_next in range(N_S):
                assert game.reward[s, a, s_next] == r2[s, a]
    np.testing.assert_array_equal(game.expected_reward, r2)


def test_make_game_keeps_3d_reward() -> None:
    spec = _base()
    r3 = np.arange(N_S * N_A * N_S, dtype=float).reshape(N_S, N_A, N_S)
    game = _make_game(spec, "r3", reward=r3)
    np.testing.assert_array_equal(game.reward, r3)
    np.testing.assert_array_equal(game.expected_reward, 0.5 * r3.sum(axis=2))


def test_make_game_validates() -> None:
    spec = _base()
    with pytest.raises(GameError, match=re.escape("transition[s=0, a=0] sums to")):
        _make_game(spec, "bad", transition=np.full((N_S, N_A, N_S), 0.4), reward=np.zeros((N_S, N_A)))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"state_names": ("s0", "s0")}, "state_names has the name 's0' twice"),
        ({"action_names": (("a0", "a0"), ("b0",))}, "action_names[0] (agent 0) has the name 'a0' twice"),
        (
            {"observation_names": (("o0",), ("p", "p"))},
            "observation_names[1] (agent 1) has the name 'p' twice",
        ),
        ({"state_names": ("1", 1)}, "state_names has the name '1' twice"),  # equal once made str
    ],
    ids=["states", "actions", "observations", "str-equal"],
)
def test_duplicate_names_are_refused(changes: dict[str, Any], message: str) -> None:
    """Names key policies ({action name: probability} in zsc.op_objective) and reports; a duplicate merged
    two actions there silently. The .dpomdp reader refused them, Game and make_game did not."""
    with pytest.raises(GameError, match=re.escape(message)):
        Game(**_with(**changes))
    spec = _with(**changes)
    with pytest.raises(GameError, match=re.escape(message)):
        _make_game(spec, "dup")
    # the same name for two agents is fine: each agent's names are its own
    Game(**_with(action_names=(("a0", "a1"), ("a0",)), observation_names=(("p0",), ("p0", "p1"))))
