"""Tests for the MADP .dpomdp writer (ers_exact.io.dpomdp): bit-exact round trips of hand-built, special
(identity, uniform, counts) and random games (Hypothesis), .gz files, the replacement of invalid names only,
s'-dependent rewards written J-equivalently, and legal-action games refused.
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_exact.io import DpomdpError, read_dpomdp, save_dpomdp, write_dpomdp
from ers_exact.io.dpomdp_parse import RESERVED
from ers_exact.model.game import Game, make_game
from tests.exact.io.dpomdp_helpers import roundtrip


# ----------------------------------------------------------------------------------- writer / round trip
def _game(S: int = 2, acts=(2, 3), obs=(2, 1), seed: int = 0, **kw) -> Game:
    rng = np.random.default_rng(seed)
    A, O = math.prod(acts), math.prod(obs)
    args = dict(
        name="g",
        states=[f"s{i}" for i in range(S)],
        actions=[[f"a{i}_{k}" for k in range(n)] for i, n in enumerate(acts)],
        observations=[[f"o{i}_{k}" for k in range(n)] for i, n in enumerate(obs)],
        transition=rng.dirichlet(np.ones(S), size=(S, A)),
        observation=rng.dirichlet(np.ones(O), size=(A, S)),
        reward=rng.normal(size=(S, A)),
        initial_belief=rng.dirichlet(np.ones(S)),
        horizon=3,
        discount=0.95,
    )
    args.update(kw)
    return make_game(**args)


def test_round_trip_hand_built_and_bit_exact(tmp_path: Path) -> None:
    R = np.array([[0.1 + 0.2, 1 / 3, -0.0, 1e-300, -7.0, 2.5e17]] * 2)
    g = _game(reward=R, discount=1 / 3)
    text = write_dpomdp(g)
    assert read_dpomdp(text, horizon=3, name="g") == g
    # T and O come before R
    kinds = [ln[0] for ln in text.splitlines() if ln[:2] in ("T:", "O:", "R:")]
    assert kinds == sorted(kinds, key="TOR".index)
    save_dpomdp(g, tmp_path / "hand.dpomdp")
    back = read_dpomdp(tmp_path / "hand.dpomdp", horizon=3)
    assert back.name == "hand" and back.with_horizon(3) == g
    with gzip.open(tmp_path / "hand.dpomdp.gz", "wt") as fh:
        fh.write(text)
    gz = read_dpomdp(str(tmp_path / "hand.dpomdp.gz"), horizon=3)
    assert gz.name == "hand" and gz == g


def test_round_trip_special_matrices_and_counts() -> None:
    g = _game(
        S=3,
        acts=(2,),
        obs=(3,),
        states=["0", "1", "2"],
        actions=[["0", "1"]],
        observations=[["0", "1", "2"]],
        initial_belief=np.full(3, 1 / 3),
    )
    T = g.transition.copy()
    T[:, 0, :] = np.eye(3)
    T[:, 1, :] = 1.0 / 3
    U = np.full((2, 3, 3), 1.0 / 3)
    g = make_game(
        "counts",
        g.state_names,
        g.action_names,
        g.observation_names,
        T,
        U,
        g.reward[:, :, 0],
        g.initial_belief,
        horizon=2,
    )
    text = write_dpomdp(g)
    assert "states: 3\n" in text and "identity\n" in text and text.count("uniform") == 4  # b0, T, 2 x O
    assert roundtrip(g) == g


def test_writer_replaces_only_invalid_names() -> None:
    g = _game(
        S=4,
        acts=(2,),
        obs=(2,),
        # 'uniform' is a name the reader accepts but the writer avoids (duplicates: Game refuses them)
        states=["s 0", "T", "ok", "uniform"],
        actions=[["go", "go!"]],
        observations=[["o1", "1x"]],
    )
    back = roundtrip(g)
    assert back.state_names == ("s0", "s1", "ok", "s3")
    assert back.action_names == (("go", "a1"),) and back.observation_names == (("o1", "o1_1"),)
    for k in ("transition", "observation", "reward", "initial_belief"):
        assert np.array_equal(getattr(back, k), getattr(g, k))


def test_s_prime_dependent_reward_is_j_equivalent() -> None:
    rng = np.random.default_rng(3)
    base = _game(S=3)
    T = base.transition.copy()
    T[0, 0] = [1.0, 0.0, 0.0]  # a zero T entry: its R line is dropped
    R = rng.normal(size=(3, 6, 3))
    R[1, 2] = 4.0  # one (s, a) row that is constant in s'
    g = make_game(
        "sp",
        base.state_names,
        base.action_names,
        base.observation_names,
        T,
        base.observation,
        R,
        base.initial_belief,
        horizon=3,
        discount=0.95,
    )
    text = write_dpomdp(g)
    assert "R: a0_0 a1_0 : s0 : s0 : * :" in text and "R: a0_0 a1_0 : s0 : s1 :" not in text
    assert "R: a0_0 a1_2 : s1 : * : * : 4.0" in text
    back = roundtrip(g)
    assert not np.array_equal(back.reward, g.reward)
    np.testing.assert_allclose(back.expected_reward, g.expected_reward, rtol=1e-13, atol=1e-13)
    assert np.all(back.reward[1, 2] == 4.0)  # written as a SET line
    for k in ("transition", "observation", "initial_belief"):
        assert np.array_equal(getattr(back, k), getattr(g, k))


def test_legal_actions_are_refused() -> None:
    g = _game(acts=(2,), obs=(2,), legal_actions=[np.array([[True, False], [True, True], [True, True]])])
    with pytest.raises(DpomdpError, match="legal-action"):
        write_dpomdp(g)


_NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9_\-]{0,5}", fullmatch=True).filter(lambda s: s not in RESERVED)


def _names(data: st.DataObject, k: int) -> list[str]:
    if data.draw(st.booleans()):
        return [str(i) for i in range(k)]
    return data.draw(st.lists(_NAME, min_size=k, max_size=k, unique=True))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_games_round_trip_exactly(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 2))
    S = data.draw(st.integers(1, 3))
    acts = [data.draw(st.integers(1, 3)) for _ in range(n)]
    obs = [data.draw(st.integers(1, 3)) for _ in range(n)]
    A, O = math.prod(acts), math.prod(obs)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    alpha = data.draw(st.sampled_from([0.2, 1.0, 5.0]))
    T = rng.dirichlet(np.full(S, alpha), size=(S, A))
    sparse = rng.random((S, A)) < 0.3
    T[sparse] = np.eye(S)[rng.integers(0, S, size=int(sparse.sum()))]
    U = rng.dirichlet(np.full(O, alpha), size=(A, S))
    R = rng.normal(size=(S, A)) * data.draw(st.sampled_from([1.0, 1e-9, 1e6]))
    R[rng.random((S, A)) < 0.3] = 0.0
    g = make_game(
        "rand",
        _names(data, S),
        [_names(data, k) for k in acts],
        [_names(data, k) for k in obs],
        T,
        U,
        R,
        rng.dirichlet(np.ones(S)),
        horizon=data.draw(st.integers(1, 4)),
        discount=data.draw(st.floats(0.0, 1.0)),
    )
    assert roundtrip(g) == g
