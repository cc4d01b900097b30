"""The bisection of the optimal-set search (``solve/optimal_set_boxes.py``): the coordinate it cuts is one whose
cut, where ``split`` puts it, narrows its history's policy ranges. Checked against what the cut does to the
children's ranges (``BoxEnclosure.policy_bounds``), not against the score itself; and on the search it steers
(recycling H=2, whose histories have three actions)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ers_exact.games import get_game, load_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.box_enclosure import BoxEnclosure
from ers_exact.solve.config import OptimalSetConfig
from ers_exact.solve.optimal_set import certified_optimal_set
from ers_exact.solve.optimal_set_boxes import score, split
from ers_exact.symmetry.mdp_group import decpomdp_group


@pytest.fixture(scope="module")
def three_lever() -> BoxEnclosure:
    """three-lever: three actions per history, so a history has two logit coordinates."""
    return BoxEnclosure(LogitCoordinates(enumerate_histories(get_game("three-lever"))))


def _root_pair(enc: BoxEnclosure) -> tuple[int, int]:
    """The two logit coordinates of agent 0's first history (y_b = log pi(b) - log pi(r), b = 1, 2)."""
    k, _, _ = enc.index[0]
    first = np.flatnonzero(k == 0)
    assert first.size == 2
    return int(first[0]), int(first[1])


def _root_range(enc: BoxEnclosure, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per box, the summed width of agent 0's first-history action probability ranges."""
    low, up = enc.policy_bounds(lo, hi)[0]
    return (up[:, 0] - low[:, 0]).sum(axis=1)


def test_the_cut_narrows_the_history_where_a_sibling_is_saturated(three_lever: BoxEnclosure) -> None:
    """A box seen on recycling H=2 at alpha 0.1: y_a in [-6.8, 36.2], y_b in [13.9, 62.6] (wider), the other
    logits narrow. pi(r) ~ 0 throughout, and pi(a), pi(b) range over [0, 1] whichever coordinate is cut, so a
    score of those ranges alone tied and took y_b by its width; but split cuts y_b where its own share
    sigma(y_b) halves, at ~14.6, a sliver that leaves both children as wide as the parent. Cutting y_a (at ~0)
    gives a child where pi(a) <= e^-13.9 pi(b)."""
    enc = three_lever
    a, b = _root_pair(enc)
    lo, hi = np.full((1, enc.coords.dim), -0.05), np.full((1, enc.coords.dim), 0.05)
    lo[0, a], hi[0, a] = -6.8, 36.18
    lo[0, b], hi[0, b] = 13.86, 62.58
    before = _root_range(enc, lo, hi)[0]
    s = score(enc, lo, hi)
    assert int(np.argmax(s[0])) == a
    assert _root_range(enc, *split(lo, hi, s)).min() < 0.25 * before
    prefer_b = s.copy()
    prefer_b[0, b] = s[0].max() + 1.0  # the other choice, cut where split cuts it
    assert _root_range(enc, *split(lo, hi, prefer_b)).min() > 0.9 * before


def test_recycling_is_proven_in_few_boxes(dpomdp_dir: Path) -> None:
    """recycling H=2 at alpha 0.25 (three actions per history): proven complete, one optimal point, in at most
    5,000 boxes (the score without the own range needed 17,551, README)."""
    tree = enumerate_histories(load_game(str(dpomdp_dir / "recycling.dpomdp"), horizon=2))
    r = certified_optimal_set(tree, 0.25, OptimalSetConfig(max_seconds=100, max_boxes=5_000, progress=False))
    assert r.complete
    assert len(r.optimal_points) == 1
    assert r.boxes <= 5_000


@pytest.mark.slow
def test_recycling_at_alpha_0_1_is_proven(dpomdp_dir: Path) -> None:
    """recycling H=2 at alpha 0.1, Phi_MDP's fundamental domain as the CLI gives it: proven complete with one
    optimal point (~120 s on one core; without the own range ~11,000 boxes stayed left from 30 s on)."""
    game = load_game(str(dpomdp_dir / "recycling.dpomdp"), horizon=2)
    rel = decpomdp_group(game).policy_parts
    cfg = OptimalSetConfig(max_seconds=400, progress=False)
    r = certified_optimal_set(enumerate_histories(game), 0.1, cfg, relabellings=rel)
    assert r.complete
    assert len(r.optimal_points) == 1
