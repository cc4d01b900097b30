"""Branch and bound over two-agent Bayesian games against enumerating every joint decision rule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ers_exact.model.bayes_bnb import BestFirstRules, best_rule_bnb
from ers_exact.model.bayes_game import BayesGame, LazyChildren, SortedRules, best_rule, children_values

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
GAMES = st.tuples(
    st.integers(0, 2**32 - 1), st.integers(1, 7), st.integers(1, 5), st.integers(1, 3), st.integers(1, 3)
)


def random_game(seed: int, k_e: int, k_r: int, a_e: int, a_r: int) -> tuple[BayesGame, np.ndarray]:
    """A two-agent game with random legal sets, missing joint types, some zero-weight rows and, for odd seeds,
    -inf at illegal joint actions."""
    rng = np.random.default_rng(seed)
    m = k_e * k_r
    inv = [np.repeat(np.arange(k_e), k_r), np.tile(np.arange(k_r), k_e)]
    keep = rng.random(m) < 0.8
    keep[0] = True
    inv = [x[keep] for x in inv]
    present = [np.unique(x) for x in inv]
    inv = [np.searchsorted(p, x) for p, x in zip(present, inv)]
    options = []
    for p, a in zip(present, (a_e, a_r)):
        opts = []
        for _ in p:
            legal = np.flatnonzero(rng.random(a) < 0.7)
            opts.append(legal if len(legal) else np.array([rng.integers(a)]))
        options.append(opts)
    bg = BayesGame(inv, options, (a_e, a_r))
    q = rng.normal(size=(len(inv[0]), a_e * a_r)) * (rng.random(len(inv[0])) < 0.9)[:, None]
    if seed % 2:  # -inf at illegal joint actions, as GMAA*-ICE's payoff tables have them
        for row in range(len(q)):
            legal0 = np.isin(np.arange(a_e), options[0][inv[0][row]])
            legal1 = np.isin(np.arange(a_r), options[1][inv[1][row]])
            q[row, ~(legal0[:, None] & legal1[None, :]).reshape(-1)] = -np.inf
    return bg, q


def sorted_rules(bg: BayesGame, q: np.ndarray) -> SortedRules:
    return SortedRules(np.concatenate([c for _, c in bg.payoff_chunks(q)]))


SPLITS = st.sampled_from([(2048, 32), (1, 1), (2, 4), (5, 32)])  # (leaf_rules, group_rules)


@given(GAMES, SPLITS)
@SETTINGS
def test_branch_and_bound_solves_bayesian_games_exactly(
    spec: tuple[int, int, int, int, int], split: tuple[int, int]
) -> None:
    """The last-stage solver against enumerating every rule (small blocks and groups: deep search trees)."""
    bg, q = random_game(*spec)
    value, _ = best_rule(bg, q, 10**7)
    got, acts = best_rule_bnb(bg, q, -np.inf, *split)
    assert got == pytest.approx(value, abs=1e-9)
    assert acts is not None
    assert float(q[np.arange(len(q)), bg.joint_action(acts)].sum()) == pytest.approx(value, abs=1e-9)
    assert best_rule_bnb(bg, q, value + 1e-6, *split) == (-np.inf, None)


@given(GAMES, SPLITS)
@SETTINGS
def test_best_first_rules_come_in_decreasing_value_each_once(
    spec: tuple[int, int, int, int, int], split: tuple[int, int]
) -> None:
    """Every rule of the enumerated agent once, in non-increasing F, with the payoffs the enumeration gives
    it (small blocks make deep branch-and-bound trees)."""
    bg, q = random_game(*spec)
    full = sorted_rules(bg, q)
    stream = BestFirstRules(bg, q, *split)
    seen, last = set(), np.inf
    while stream.peek() > -np.inf:
        bound = stream.peek()
        F, c, s = stream.pop()
        assert bound + 1e-9 >= F and last + 1e-9 >= F
        assert c not in seen
        seen.add(c)
        np.testing.assert_allclose(s, full.S[c], atol=1e-9)
        assert pytest.approx(float(full.S[c].max(axis=1).sum()), abs=1e-9) == F
        last = F
    assert seen == set(range(bg.n_e)) and stream.evaluated == bg.n_e
    with pytest.raises(IndexError):
        stream.pop()


@given(GAMES)
@SETTINGS
def test_lazy_children_are_every_joint_rule_in_decreasing_priority(
    spec: tuple[int, int, int, int, int],
) -> None:
    """Both sources give every joint rule (enumerated agent x responder) once, in decreasing priority, each
    with g + scale * its payoff by enumeration."""
    bg, q = random_game(*spec)
    g, scale = 0.5, 0.9
    values = g + scale * children_values(bg, q, 10**7)
    legal = np.isfinite(values)
    for source in (sorted_rules(bg, q), BestFirstRules(bg, q, 2, 2)):
        kids = LazyChildren(bg, source, g, scale)
        seen, last = set(), np.inf
        while kids.peek() > -np.inf:
            bound = kids.peek()
            f, index = kids.pop()
            assert f <= bound + 1e-9 and f <= last + 1e-9 and index not in seen
            assert f == pytest.approx(values[index], abs=1e-9)
            seen.add(index)
            last = f
        assert seen == set(np.flatnonzero(legal).tolist())
