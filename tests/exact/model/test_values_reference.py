"""ers_exact.model.values against the slow, independent reference in ``reference.py`` (plain recursion over
explicit state / joint-history paths, written from the definitions), on random small games and on the
built-in games.

Checked: J, every agent's local Q^i (values to 1e-10 and the NaN pattern: illegal actions and histories
of zero probability under pi^{-i}), joint action values at every joint node, the set of possible local
histories, best responses against brute force over all deterministic policies, finiteness of Q under
Boltzmann policies, and batched == single calls.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ers_exact.model.game import Game, make_game
from ers_exact.model.histories import HistoryBudgetError, HistoryTree, enumerate_histories
from ers_exact.model.values import (
    best_response,
    expected_return,
    joint_action_values,
    local_q_values,
    uniform_policy,
)

from ..reference import (
    History,
    joint_q_to_dict,
    local_q_to_dict,
    policy_fn_from_arrays,
    ref_expected_return,
    ref_joint_q,
    ref_local_q,
    ref_possible_histories,
    ref_reachable_histories,
)
from ..strategies import (
    FULL_SUPPORT_KINDS,
    GameSpec,
    PolicySpec,
    deterministic_policies,
    game_specs,
    policy_specs,
    random_policy,
    tiny_game_specs,
)

ATOL = 1e-10
RTOL = 1e-10

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


# ----- helpers -----
def _close(a: float, b: float) -> bool:
    return abs(a - b) <= ATOL + RTOL * abs(b)


def assert_rows_match(ref: Mapping, got: Mapping, what: str) -> None:
    """Same keys; per entry both NaN or equal within tolerance. Reports the first mismatch."""
    assert set(got) == set(ref), (
        f"{what}: keys differ; only in ers: {sorted(set(got) - set(ref))[:5]}, "
        f"only in reference: {sorted(set(ref) - set(got))[:5]}"
    )
    for key, ref_row in ref.items():
        row = got[key]
        assert len(row) == len(ref_row), f"{what}{key}: {len(row)} entries, reference {len(ref_row)}"
        for a, (x, r) in enumerate(zip(row, ref_row)):
            if math.isnan(r) or math.isnan(x):
                assert math.isnan(r) and math.isnan(x), (
                    f"{what}{key}[{a}]: ers {x}, reference {r} (NaN pattern)"
                )
            else:
                assert _close(x, r), f"{what}{key}[{a}]: ers {x!r}, reference {r!r}, diff {x - r:.3e}"


def assert_matches_reference(tree: HistoryTree, policy: tuple[np.ndarray, ...]) -> None:
    """J and every agent's Q^i of ers equal the reference's."""
    game = tree.game
    fn = policy_fn_from_arrays(tree, policy)
    j_ref = ref_expected_return(game, fn)
    j = expected_return(tree, policy)
    assert _close(j, j_ref), f"J: ers {j!r}, reference {j_ref!r}"
    qs = local_q_values(tree, policy)
    for i in range(game.n_agents):
        ref_q = ref_local_q(game, fn, i)
        assert_rows_match(ref_q, local_q_to_dict(tree, qs[i], i), f"Q^{i}")
        # Q_pi_full at the root: J = sum_a pi^i(a | empty) Q^i(empty, a) (the root always has weight 1)
        root = ref_q[()]
        legal = tree.local[i].legal[0]
        assert _close(float(sum(p * q for p, q, ok in zip(policy[i][0], root, legal) if ok)), j_ref)


def tree_shape(tree: HistoryTree, agent: int) -> tuple[int, int]:
    """Shape [K_i, |A^i|] of one agent's policy / Q array."""
    return (len(tree.local[agent]), tree.game.n_actions[agent])


# ----- the reference itself, on hand-computed values -----
def _noisy_guess(discount: float) -> Game:
    """One agent, two persistent states, b_0 uniform; reward 1 for naming the state; after each step the
    agent sees the state with accuracy 0.8. Hand values: Q((), a) = 0.5 + gamma * 0.8 under 'name the
    observation' at t = 1, and Q((a, o), a') = 0.8 if a' == o else 0.2."""
    U = np.zeros((2, 2, 2))
    for a in range(2):
        U[a] = [[0.8, 0.2], [0.2, 0.8]]
    return make_game(
        "noisy-guess",
        ["s0", "s1"],
        [["g0", "g1"]],
        [["o0", "o1"]],
        transition=np.stack([np.eye(2)] * 2, axis=1),
        observation=U,
        reward=np.array([[1.0, 0.0], [0.0, 1.0]]),
        initial_belief=[0.5, 0.5],
        horizon=2,
        discount=discount,
    )


@pytest.mark.parametrize("discount", [1.0, 0.9], ids=["gamma1", "gamma0.9"])
def test_reference_noisy_guess_by_hand(discount: float) -> None:
    game = _noisy_guess(discount)

    def follow_observation(agent: int, hist: History) -> list[float]:
        return [0.5, 0.5] if not hist else [1.0 - hist[-1], float(hist[-1])]

    assert ref_expected_return(game, follow_observation) == pytest.approx(0.5 + discount * 0.8, abs=1e-14)
    q = ref_local_q(game, follow_observation, 0)
    assert q[()] == pytest.approx([0.5 + discount * 0.8] * 2, abs=1e-14)
    for a in range(2):
        for o in range(2):
            assert q[(a, o)] == pytest.approx([0.8 if o == 0 else 0.2, 0.8 if o == 1 else 0.2], abs=1e-14)


TOY_CASES = [
    pytest.param(2, 1.0, (0.3, 0.7), (0.6, 0.4), id="H2-gamma1"),
    pytest.param(3, 1.0, (0.3, 0.7), (0.6, 0.4), id="H3-gamma1"),
    pytest.param(3, 0.9, (1.0, 0.0), (0.25, 0.75), id="H3-gamma0.9-deterministic"),
]


@pytest.mark.parametrize("horizon, discount, p, q", TOY_CASES)
def test_reference_toy_coordination_by_hand(
    horizon: int, discount: float, p: tuple[float, float], q: tuple[float, float]
) -> None:
    """Paper's toy game: (0,0) pays 1 now; (1,1) reaches m, which pays 1 every later step."""
    from ers_exact.games.toy_coordination import toy_coordination

    game = toy_coordination(horizon=horizon, discount=discount)
    later = sum(discount**k for k in range(1, horizon))  # value of reaching m

    def fn(agent: int, hist: History) -> list[float]:
        return list(p if agent == 0 else q)

    assert ref_expected_return(game, fn) == pytest.approx(p[0] * q[0] + p[1] * q[1] * later, abs=1e-14)
    assert ref_local_q(game, fn, 0)[()] == pytest.approx([q[0], q[1] * later], abs=1e-14)
    assert ref_local_q(game, fn, 1)[()] == pytest.approx([p[0], p[1] * later], abs=1e-14)


# ----- (a) J and local Q on random games -----
@SETTINGS
@given(spec=game_specs(), pol=policy_specs())
def test_values_match_reference(spec: GameSpec, pol: PolicySpec) -> None:
    tree = enumerate_histories(spec.build())
    assert_matches_reference(tree, pol.build(tree))


@SETTINGS
@given(spec=game_specs(), pol=policy_specs(FULL_SUPPORT_KINDS))
def test_possible_histories_match_reference(spec: GameSpec, pol: PolicySpec) -> None:
    """The tree's local histories = those the reference reaches under a full-support policy = those with
    positive chance weight under some legal action sequence."""
    tree = enumerate_histories(spec.build())
    ers_sets = [set(h.index) for h in tree.local]
    for i, h in enumerate(tree.local):
        assert len(ers_sets[i]) == len(h), f"agent {i}: duplicate history tuples in the tree"
    reachable = ref_reachable_histories(tree.game, policy_fn_from_arrays(tree, pol.build(tree)))
    possible = ref_possible_histories(tree.game)
    for i in range(tree.game.n_agents):
        assert ers_sets[i] == set(reachable[i]) == set(possible[i]), f"agent {i}"


@SETTINGS
@given(spec=game_specs(), pol=policy_specs(("sparse", "deterministic")))
def test_nan_exactly_where_conditioning_has_zero_probability(spec: GameSpec, pol: PolicySpec) -> None:
    """With zeros in pi^{-i}: Q^i at a legal action is NaN iff tau^i is unreachable under pi^{-i} when
    agent i plays tau^i's own actions (checked here by reachability under an own full-support policy)."""
    tree = enumerate_histories(spec.build())
    policy = pol.build(tree)
    qs = local_q_values(tree, policy)
    uni = uniform_policy(tree)
    for i in range(tree.game.n_agents):
        mixed = tuple(uni[j] if j == i else policy[j] for j in range(tree.game.n_agents))
        reach = ref_reachable_histories(tree.game, policy_fn_from_arrays(tree, mixed))[i]
        hist = tree.local[i]
        for k in range(len(hist)):
            defined = np.isfinite(qs[i][k])
            assert not np.any(defined & ~hist.legal[k]), f"agent {i} history {hist.as_tuple(k)}: Q at illegal"
            expect = hist.as_tuple(k) in reach
            assert np.array_equal(defined[hist.legal[k]], np.full(hist.legal[k].sum(), expect)), (
                f"agent {i} history {hist.as_tuple(k)}: finite {defined}, reachable under pi^-i: {expect}"
            )


# ----- (b) joint action values -----
@SETTINGS
@given(spec=game_specs(), pol=policy_specs())
def test_joint_action_values_match_reference(spec: GameSpec, pol: PolicySpec) -> None:
    """Every joint node (the root included), at legal joint actions. At illegal joint actions ers returns
    a finite number (the expected immediate reward, without continuation) while local_q_values gives NaN;
    the reference leaves them undefined, so they are masked here by the tree's own legal table."""
    tree = enumerate_histories(spec.build())
    policy = pol.build(tree)
    ref = ref_joint_q(tree.game, policy_fn_from_arrays(tree, policy))
    q_layers = joint_action_values(tree, policy)
    assert len(tree.layers[0]) == 1 and len(q_layers) == len(tree.layers)
    masked = [np.where(layer.legal, q, np.nan) for layer, q in zip(tree.layers, q_layers)]
    assert_rows_match(ref, joint_q_to_dict(tree, masked), "Q_joint")
    root = tuple(() for _ in range(tree.game.n_agents))
    np.testing.assert_allclose(masked[0][0], ref[root], atol=ATOL, rtol=RTOL, equal_nan=True)


# ----- (c) best response -----
@settings(SETTINGS, max_examples=80)
@given(
    spec=tiny_game_specs(),
    pol=policy_specs(("sparse", "deterministic", "full", "sparse")),
    agent_seed=st.integers(0, 2),
)
def test_best_response_is_brute_force_optimal(spec: GameSpec, pol: PolicySpec, agent_seed: int) -> None:
    """Sparse / deterministic others make some responder histories unreachable (the BR must still pick
    a legal action there)."""
    tree = enumerate_histories(spec.build())
    policy = pol.build(tree)
    n = tree.game.n_agents
    agent = agent_seed % n
    br, j_br = best_response(tree, policy, agent)
    hist = tree.local[agent]
    # a deterministic policy over legal actions
    assert br.shape == (len(hist), tree.game.n_actions[agent])
    assert np.all((br == 0) | (br == 1)) and np.all(br.sum(axis=1) == 1) and not np.any(br[~hist.legal])
    profile = tuple(br if j == agent else policy[j] for j in range(n))
    assert _close(j_br, ref_expected_return(tree.game, policy_fn_from_arrays(tree, profile)))
    # brute force over every deterministic policy of the responder (batched J, validated above)
    det = deterministic_policies(tree, agent)
    batch = tuple(
        det if j == agent else np.broadcast_to(policy[j], (len(det),) + policy[j].shape) for j in range(n)
    )
    values = expected_return(tree, batch)
    assert j_br >= values.max() - ATOL
    assert _close(j_br, float(values.max()))
    # the responder's own part of the input is ignored
    other_own = random_policy(np.random.default_rng(pol.seed + 1), tree, "full")[agent]
    br2, j2 = best_response(tree, tuple(other_own if j == agent else policy[j] for j in range(n)), agent)
    assert np.array_equal(br, br2) and j2 == j_br


# ----- (d) Boltzmann policies: Q finite at every legal action -----
@SETTINGS
@given(spec=game_specs(), pol=policy_specs(("boltzmann",)))
def test_boltzmann_q_finite(spec: GameSpec, pol: PolicySpec) -> None:
    tree = enumerate_histories(spec.build())
    qs = local_q_values(tree, pol.build(tree))
    for i, (q, hist) in enumerate(zip(qs, tree.local)):
        assert np.all(np.isfinite(q[hist.legal])), f"agent {i}: non-finite Q at a legal action"
        assert np.all(np.isnan(q[~hist.legal])), f"agent {i}: Q defined at an illegal action"


# ----- (e) batch == single -----
@settings(SETTINGS, max_examples=30)
@given(spec=game_specs(), seed=policy_specs(("uniform",)))
@example(  # tied best responses: a raw argmax picked by float rounding (found by the explore profile, 2026-12-08)
    spec=GameSpec(
        n_agents=2,
        n_states=2,
        n_actions=(3, 1),
        n_observations=(2, 3),
        horizon=3,
        discount=1.0,
        sparsity=0.6,
        reward_kind="grid",
        legal=False,
        seed=1,
    ),
    seed=PolicySpec(kind="uniform", seed=0),
)
def test_batch_equals_single_calls(spec: GameSpec, seed: PolicySpec) -> None:
    tree = enumerate_histories(spec.build())
    rng = np.random.default_rng(seed.seed)
    kinds = ["uniform", "full", "boltzmann", "sparse", "deterministic"]
    pols = [random_policy(rng, tree, kind) for kind in kinds]
    batch = tuple(np.stack([p[i] for p in pols]) for i in range(tree.game.n_agents))
    P = len(pols)

    j = expected_return(tree, batch)
    assert j.shape == (P,)
    qs = local_q_values(tree, batch)
    jq = joint_action_values(tree, batch)
    for p, single in enumerate(pols):
        assert j[p] == pytest.approx(expected_return(tree, single), abs=1e-12)
        for i, q in enumerate(local_q_values(tree, single)):
            np.testing.assert_allclose(qs[i][p], q, atol=1e-12, rtol=0, equal_nan=True)
        for t, q in enumerate(joint_action_values(tree, single)):
            np.testing.assert_allclose(jq[t][p], q, atol=1e-12, rtol=0, equal_nan=True)
    for agent in range(tree.game.n_agents):
        br, jb = best_response(tree, batch, agent)
        assert br.shape == (P,) + tree_shape(tree, agent) and jb.shape == (P,)
        for p, single in enumerate(pols):
            br1, j1 = best_response(tree, single, agent)
            np.testing.assert_array_equal(br[p], br1)
            assert jb[p] == pytest.approx(j1, abs=1e-12)


# ----- built-in games -----
REFERENCE_COST_FAST = 1_000  # joint history nodes x states up to which a built-in game runs by default
REFERENCE_COST_MAX = 200_000  # beyond this even the slow test skips (the reference would take minutes)


# Configurations beyond the registry defaults: (registry name, id suffix, keyword overrides).
BUILTIN_VARIANTS = [
    ("dectiger", "H3", {"horizon": 3}),
    ("dectiger", "H2-gamma0.9-asym", {"discount": 0.9, "listen_accuracy": 0.7, "tiger_left_prob": 0.3}),
    ("three-lever", "rounds3", {"rounds": 3}),
    ("toy-coordination", "H3-gamma0.9", {"horizon": 3, "discount": 0.9}),
    ("handshake", "H2-pm1", {"horizon": 2, "match_reward": 1.0, "mismatch_reward": -1.0}),
]


def _builtin_params() -> list:
    """One param per registry game (defaults) and per variant above; marked slow by tree size."""
    try:
        from ers_exact.games import GAMES
    except ImportError:
        return [
            pytest.param(
                None,
                None,
                id="no-registry",
                marks=pytest.mark.skip(reason="ers_exact.games.GAMES is not available"),
            )
        ]
    items: list[tuple[str, Callable[[], Game]]] = list(GAMES.items())
    for name, suffix, config in BUILTIN_VARIANTS:
        if name in GAMES:
            items.append((f"{name}-{suffix}", functools.partial(GAMES[name], **config)))
    params = []
    for name, factory in items:
        try:
            game = factory()
            cost = enumerate_histories(game, max_nodes=REFERENCE_COST_MAX).n_joint_nodes * game.n_states
        except HistoryBudgetError:
            cost = REFERENCE_COST_MAX + 1
        except Exception:  # let the test call the factory again and fail loudly
            cost = 0
        marks = [pytest.mark.slow] if cost > REFERENCE_COST_FAST else []
        if cost > REFERENCE_COST_MAX:
            marks.append(pytest.mark.skip(reason=f"reference too slow (cost estimate {cost:,})"))
        params.append(pytest.param(name, factory, id=name, marks=marks))
    return params


@pytest.mark.parametrize("name, factory", _builtin_params())
@pytest.mark.parametrize("kind", ["uniform", "full"], ids=["uniform", "random-full-support"])
def test_builtin_games_match_reference(name: str, factory: Callable[[], Game], kind: str) -> None:
    game = factory()
    assert isinstance(game, Game), f"GAMES[{name!r}]() returned {type(game).__name__}"
    tree = enumerate_histories(game)
    policy = (
        uniform_policy(tree) if kind == "uniform" else random_policy(np.random.default_rng(0), tree, kind)
    )
    assert_matches_reference(tree, policy)
    possible = ref_possible_histories(game)
    for i, hist in enumerate(tree.local):
        assert set(hist.index) == possible[i], f"agent {i}: possible histories differ"
