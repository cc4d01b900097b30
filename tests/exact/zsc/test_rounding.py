"""Rounding learned history images to the nearest exact transformation, and exact transformation scores
(:mod:`ers_exact.zsc.rounding`)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ers_exact.games import get_game
from ers_exact.model.game import Game
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.model.transformation import Transformation, apply_to_policy, history_map, is_admissible
from ers_exact.model.values import expected_return
from ers_exact.solve.boltzmann import LogitCoordinates, TemperatureError
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
from ers_exact.symmetry.candidates import CandidateSpace
from ers_exact.symmetry.mdp_group import decpomdp_group
from ers_exact.util.errors import InputError
from ers_exact.zsc.rounding import (
    MAX_OBSERVATION_PERMUTATIONS,
    RoundingError,
    TransformationScore,
    round_history_images,
    score_transformations,
)

from ..strategies import game_specs

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GAMES = ("toy-coordination", "three-lever")


@pytest.fixture(scope="module", params=GAMES)
def tree(request: pytest.FixtureRequest) -> HistoryTree:
    return enumerate_histories(get_game(request.param))


def _images(tree: HistoryTree, phi: Transformation) -> list[np.ndarray]:
    return [history_map(tree, phi, i) for i in range(tree.game.n_agents)]


def _policy_part(phi: Transformation) -> tuple[object, object]:
    return phi.actions, phi.observations


_CANDIDATES: dict[str, list[Transformation]] = {}


def _candidates(tree: HistoryTree) -> list[Transformation]:
    """Every action x observation permutation of the game (identity on states), admissible or not."""
    if tree.game.name not in _CANDIDATES:
        space = CandidateSpace(tree)
        combos = itertools.product(*[range(len(a.admissible)) for a in space.agents])
        _CANDIDATES[tree.game.name] = [space.transformation(c) for c in combos]
    return _CANDIDATES[tree.game.name]


def _admissible(tree: HistoryTree) -> list[Transformation]:
    key = tree.game.name + " admissible"
    if key not in _CANDIDATES:
        _CANDIDATES[key] = [phi for phi in _candidates(tree) if is_admissible(tree, phi)]
    return _CANDIDATES[key]


def _uncontested(k: int) -> int:
    """A value no history map gives history k: the root maps to 0, every later history to an index >= 1
    or to -1."""
    return -1 if k == 0 else 0


def test_exact_images_round_to_themselves(tree: HistoryTree) -> None:
    assert len(_admissible(tree)) > 1
    for phi in _admissible(tree):
        found, dist = round_history_images(tree, phi.actions, _images(tree, phi))
        assert found is not None and dist == 0.0
        assert _policy_part(found) == _policy_part(phi)
        assert found.states == tuple(range(tree.game.n_states))


def test_inadmissible_images_round_to_the_nearest_admissible_transformation(tree: HistoryTree) -> None:
    """A map that is no admissible phi (e.g. a learned phi_O that left payoff-irrelevant histories in
    place) rounds to the admissible phi with the same action part that disagrees on the fewest histories,
    checked against a brute-force scan of every candidate."""
    admissible = _admissible(tree)
    total = sum(len(h) for h in tree.local)
    for phi in _candidates(tree):
        if is_admissible(tree, phi):
            continue
        images = _images(tree, phi)
        found, dist = round_history_images(tree, phi.actions, images)
        same_actions = [a for a in admissible if a.actions == phi.actions]
        if not same_actions:
            continue
        assert found is not None and is_admissible(tree, found) and found.actions == phi.actions

        def wrong(t: Transformation, images: list[np.ndarray] = images) -> int:
            return sum(int((m != im).sum()) for m, im in zip(_images(tree, t), images))

        assert dist * total == min(wrong(a) for a in same_actions) == wrong(found)


@SETTINGS
@given(data=st.data())
def test_corrupted_images_still_round_to_the_same_transformation(
    tree: HistoryTree, data: st.DataObject
) -> None:
    phi = data.draw(st.sampled_from(_admissible(tree)))
    images = _images(tree, phi)
    slots = [(i, k) for i in range(tree.game.n_agents) for k in range(len(tree.local[i]))]
    total = len(slots)
    # values no transformation produces: every candidate loses exactly one agreement per corrupted slot
    hit = data.draw(st.sets(st.sampled_from(slots), min_size=1, max_size=total - 1))
    for i, k in hit:
        images[i][k] = _uncontested(k)
    found, dist = round_history_images(tree, phi.actions, images)
    assert found is not None and dist == pytest.approx(len(hit) / total)
    # a nearest phi agrees with phi wherever the images were left alone ...
    maps = _images(tree, found)
    assert all(maps[i][k] == images[i][k] for i, k in slots if (i, k) not in hit)
    # ... and is phi itself while each agent keeps all but one history (the others fix phi_O^i)
    if all(sum(j == i for j, _ in hit) <= 1 for i in range(tree.game.n_agents)):
        assert _policy_part(found) == _policy_part(phi)


@pytest.fixture(scope="module")
def three_lever_tree() -> HistoryTree:
    """Three-lever's histories: every admissible phi there has a corruption budget of 2 (toy's is 0 for all 4,
    where another candidate's map lies one or two entries away, so the property below says nothing there)."""
    return enumerate_histories(get_game("three-lever"))


@SETTINGS
@given(data=st.data())
def test_few_arbitrary_corruptions_keep_the_nearest(
    three_lever_tree: HistoryTree, data: st.DataObject
) -> None:
    """Fewer than half the smallest Hamming distance to another candidate's map: still the nearest."""
    tree = three_lever_tree
    phi = data.draw(st.sampled_from(_admissible(tree)))
    flat = np.concatenate(_images(tree, phi))
    same_actions = [c for c in _candidates(tree) if c.actions == phi.actions and c != phi]
    d_min = min(int((np.concatenate(_images(tree, c)) != flat).sum()) for c in same_actions)
    budget = (d_min - 1) // 2
    assert budget >= 1  # a corruption to test (else the case is vacuous)
    images = _images(tree, phi)
    slots = [(i, k) for i in range(tree.game.n_agents) for k in range(len(tree.local[i]))]
    hit = data.draw(st.sets(st.sampled_from(slots), min_size=1, max_size=budget))
    changed = 0
    for i, k in hit:
        new = data.draw(st.integers(-1, len(tree.local[i]) - 1))
        changed += int(new != images[i][k])
        images[i][k] = new
    found, dist = round_history_images(tree, phi.actions, images)
    assert found is not None and _policy_part(found) == _policy_part(phi)
    assert dist == pytest.approx(changed / len(slots))


def test_non_permutation_images_are_at_positive_distance(tree: HistoryTree) -> None:
    game = tree.game
    phi = Transformation.identity(game)
    # phi_O sends every observation to observation 0 (not a bijection), phi_A the identity
    images = []
    for hist in tree.local:
        index = hist.index
        squashed = [
            tuple(0 if j % 2 else v for j, v in enumerate(hist.as_tuple(k))) for k in range(len(hist))
        ]
        images.append(np.array([index.get(h, -1) for h in squashed]))
    found, dist = round_history_images(tree, phi.actions, images)
    assert found is not None and 0 < dist < 1
    # two histories with one image: no permutation agrees on both
    images = _images(tree, phi)
    images[0][2] = images[0][1]
    assert round_history_images(tree, phi.actions, images)[1] > 0


def test_images_that_agree_nowhere_round_to_none(tree: HistoryTree) -> None:
    images = [np.array([_uncontested(k) for k in range(len(h))]) for i, h in enumerate(tree.local)]
    assert round_history_images(tree, Transformation.identity(tree.game).actions, images) == (None, 1.0)


@SETTINGS
@given(spec=game_specs(max_nodes=150), seed=st.integers(0, 2**31))
def test_random_games_round_their_own_maps_exactly(spec, seed: int) -> None:
    """The vectorised maps agree with history_map: any admissible phi's own images are at distance 0. (Rounding
    prefers admissible phi_O^i, so an inadmissible phi, one mapping a possible history to an impossible one or
    a legal action to an illegal one, may round elsewhere: one agent, observation 0 impossible after action 1,
    gave distance 0.5; found by ``--hypothesis-profile explore``, 2026-12-08.)"""
    tree = enumerate_histories(spec.build())
    phi = Transformation.random(tree.game, np.random.default_rng(seed))
    assume(is_admissible(tree, phi))
    images = _images(tree, phi)
    found, dist = round_history_images(tree, phi.actions, images)
    assert found is not None and dist == 0.0 and found.actions == phi.actions
    assert all(np.array_equal(a, b) for a, b in zip(_images(tree, found), _images(tree, phi)))


def test_learned_record_convention_rounds_to_the_inverse(tree: HistoryTree) -> None:
    """A LearnedTransformation's phi(pi)(a | o) = pi(action_map[a] | phi_O(o)): action_map and the
    network's history images are those of phi^{-1}, so rounding them and inverting gives phi."""
    rng = np.random.default_rng(0)
    pi = tuple(rng.dirichlet(np.ones(a), size=len(h)) for a, h in zip(tree.game.n_actions, tree.local))
    for phi in _admissible(tree)[:: max(1, len(_admissible(tree)) // 12)]:
        inv = phi.inverse()
        images = _images(tree, inv)  # what the network computes
        deep = tuple(p[img][:, np.asarray(a)] for p, img, a in zip(pi, images, inv.actions))
        assert all(np.allclose(x, y) for x, y in zip(deep, apply_to_policy(tree, phi, pi)))
        found, dist = round_history_images(tree, inv.actions, images)
        assert found is not None and dist == 0 and _policy_part(found.inverse()) == _policy_part(phi)


def test_bad_inputs_are_refused(tree: HistoryTree) -> None:
    ident = Transformation.identity(tree.game)
    images = _images(tree, ident)
    with pytest.raises(RoundingError, match="agent 0 is not a permutation"):
        round_history_images(tree, ((0, 0, 1)[: tree.game.n_actions[0]], *ident.actions[1:]), images)
    with pytest.raises(RoundingError, match="shape"):
        round_history_images(tree, ident.actions, [images[0][:-1], *images[1:]])
    with pytest.raises(RoundingError, match="must lie in"):
        round_history_images(tree, ident.actions, [images[0] + len(images[0]), *images[1:]])
    assert issubclass(RoundingError, InputError)


def test_too_many_observation_permutations_are_refused() -> None:
    from ..strategies import random_game

    game: Game = random_game(
        np.random.default_rng(0), n_agents=1, n_states=1, n_actions=1, n_observations=9, horizon=1
    )
    tree = enumerate_histories(game)
    assert MAX_OBSERVATION_PERMUTATIONS < 362_880
    with pytest.raises(RoundingError, match="362,880 observation permutations"):
        round_history_images(tree, [(0,)], [np.zeros(len(tree.local[0]), dtype=np.int64)])


# ----- exact scores -----
ALPHA = 0.3  # the toy swap (both agents swap actions and observations x <-> m) is in Phi_ER here


@pytest.fixture(scope="module")
def toy_pool() -> tuple[HistoryTree, list[tuple[np.ndarray, ...]], float]:
    toy = enumerate_histories(get_game("toy-coordination"))
    fs = solve_fixed_points(toy, ALPHA)
    return toy, [p.policy for p in fs.optimal_points], fs.J_star


def test_toy_swap_scores_as_an_er_symmetry(toy_pool) -> None:
    toy, pool, J_star = toy_pool
    swap = Transformation((0, 1, 2, 3), ((1, 0), (1, 0)), ((1, 0, 2), (1, 0, 2)))
    half = Transformation((0, 1, 2, 3), ((1, 0), (0, 1)), ((1, 0, 2), (0, 1, 2)))  # one agent swaps
    paper = Transformation((0, 1, 2, 3), ((1, 0), (1, 0)), ((0, 1, 2), (0, 1, 2)))  # inadmissible
    ident = Transformation.identity(toy.game)
    scores = score_transformations(toy, [swap, half, paper, ident], pool, alpha=ALPHA)
    s_swap, s_half, s_paper, s_ident = scores
    assert s_swap.er_symmetry is True and s_swap.admissible and not s_swap.decpomdp_symmetry
    assert s_swap.mean_return == pytest.approx(s_swap.pool_return, abs=1e-10)
    assert s_swap.pool_return == pytest.approx(J_star, abs=1e-10)
    assert s_half.admissible and s_half.er_symmetry is False and s_half.mean_return < J_star - 0.1
    assert not s_paper.admissible and s_paper.er_symmetry is False and np.isnan(s_paper.mean_return)
    assert s_ident.er_symmetry is True and s_ident.decpomdp_symmetry
    for s, phi in zip(scores, [swap, half, paper, ident]):
        assert s.transformation == phi and s.alpha == ALPHA
        if s.admissible:
            images = [apply_to_policy(toy, phi, pi) for pi in pool]
            assert s.mean_return == pytest.approx(np.mean([expected_return(toy, im) for im in images]))
        again = TransformationScore.from_json(json.loads(json.dumps(s.to_json())))
        assert again.to_json() == s.to_json()


def test_scores_without_alpha_leave_er_open(toy_pool) -> None:
    toy, pool, _ = toy_pool
    (score,) = score_transformations(toy, [Transformation.identity(toy.game)], pool)
    assert score.er_symmetry is None and score.alpha is None
    assert score.to_json()["er_symmetry"] is None
    with pytest.raises(RoundingError, match="non-empty pool"):
        score_transformations(toy, [], [])


def test_three_lever_relabelings_are_decpomdp_symmetries() -> None:
    lever = enumerate_histories(get_game("three-lever"))
    rng = np.random.default_rng(1)
    pool = [tuple(rng.dirichlet(np.ones(3), size=len(h)) for h in lever.local) for _ in range(2)]
    relabel = Transformation((0,), ((1, 2, 0), (1, 2, 0)), ((1, 2, 0), (1, 2, 0)))
    other = Transformation((0,), ((1, 2, 0), (1, 2, 0)), ((0, 1, 2), (0, 1, 2)))
    s_rel, s_other = score_transformations(lever, [relabel, other], pool)
    assert s_rel.decpomdp_symmetry and s_rel.mean_return == pytest.approx(s_rel.pool_return, abs=1e-12)
    assert not s_other.decpomdp_symmetry


# ----- exact scores at low temperature: the ER verdict on the solver's log-policies -----
LOW = [("toy-coordination", 1e-3), ("toy-coordination", 1e-4), ("three-lever", 1e-3)]


def _toy_er_by_hand(tree: HistoryTree) -> set[tuple[object, object]]:
    """Phi_ER of the toy game on policies at every alpha, derived by hand (tests/exact/symmetry/
    test_er_log_space.py): at s0 action 0 pays 1 now (observed as x), action 1 pays 1 at t = 1 (m), the same
    with gamma = 1, and every action after t = 1 pays the same; so both agents swapping their actions with
    x <-> m maps fixed points onto fixed points of the same J, one agent alone turns a convention into a
    mismatch, and an observation permutation with identity actions is inadmissible. {identity, that swap}."""
    names = tree.game.observation_names[0]
    x, m = names.index("x"), names.index("m")
    swap = list(range(len(names)))
    swap[x], swap[m] = m, x
    ident = tuple(range(len(names)))
    return {(((0, 1), (0, 1)), (ident, ident)), (((1, 0), (1, 0)), (tuple(swap), tuple(swap)))}


@pytest.mark.parametrize("name, alpha", LOW, ids=[f"{g}-{a:g}" for g, a in LOW])
def test_low_temperature_er_verdict_on_the_solvers_log_policies(name: str, alpha: float) -> None:
    """Where the optimal points' probabilities underflow (a legal action at exactly 0) the ER verdict was
    refused (TemperatureError: their logits are lost). Given the solver's log-policies (er_log_pool) it is
    decided, scoring an approximate (deep-like) pool against the exact Pi*_alpha as ers-deep's discovery does,
    and equals the independent answer for every candidate of Psi's policy part: the hand-derived pair on the
    toy game, Phi_MDP from the game's model alone (decpomdp_group: no policies, no alpha) on three-lever."""
    tree = enumerate_histories(get_game(name))
    fs = solve_fixed_points(tree, alpha, SolverConfig(n_starts=16, certify=False, complete_search=False))
    optimal = [p.policy for p in fs.optimal_points]
    n_agents = tree.game.n_agents
    assert any((pi[i] == 0)[tree.local[i].legal].any() for pi in optimal for i in range(n_agents))
    log_pool = LogitCoordinates(tree).log_pool(np.stack([p.y for p in fs.optimal_points]))
    for pi, lp in zip(optimal, log_pool):  # the same points: exp(log pi) is the solver's pi
        assert all(np.allclose(np.exp(lp[i]), pi[i], rtol=0, atol=1e-12) for i in range(n_agents))
    deep = [tuple(0.99 * p + 0.01 * h.legal / h.legal.sum(1, keepdims=True) for p, h in zip(pi, tree.local))
            for pi in optimal]  # fmt: skip
    phis = _candidates(tree)
    with pytest.raises(TemperatureError, match="probability exactly 0"):
        score_transformations(tree, phis[:1], deep, alpha=alpha, J_star=fs.J_star, er_pool=optimal)
    scores = score_transformations(
        tree, phis, deep, alpha=alpha, J_star=fs.J_star, er_pool=optimal, er_log_pool=log_pool
    )
    if name == "toy-coordination":
        expected = _toy_er_by_hand(tree)
    else:
        expected = {_policy_part(g) for g in decpomdp_group(tree.game).policy_parts}
    assert {_policy_part(s.transformation) for s in scores if s.er_symmetry} == expected
    assert all(s.er_symmetry is not None and s.alpha == alpha for s in scores)
    with pytest.raises(RoundingError, match="er_log_pool holds 1 log-policies"):
        score_transformations(tree, phis[:1], deep, alpha=alpha, er_pool=optimal, er_log_pool=log_pool[:1])
