"""``ers_deep.bench.minibatch_noise``: minibatch gradient noise under the three minibatch schemes."""

from __future__ import annotations

import pytest

from ers_deep.bench.minibatch_noise import SCHEMES, gradient_noise, noise_ratios
from ers_deep.train import Learner
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import tiny_config


def test_one_minibatch_has_no_noise_and_four_have_some() -> None:
    """A minibatch of every entry is the same set under every split (noise: float order only); a quarter of
    them differs from split to split."""
    whole = gradient_noise(Learner(tiny_config("hanabi", seeds=(0,), minibatches=1)), repeats=3)
    quarters = gradient_noise(Learner(tiny_config("hanabi", seeds=(0,), minibatches=4)), repeats=3)
    assert set(whole) == set(quarters) == set(SCHEMES)
    for scheme in SCHEMES:
        assert set(whole[scheme]) == {"embed", "actor", "critic", "total"}
        assert whole[scheme]["total"] < 1e-9 * quarters[scheme]["total"]
        assert all(v > 0 for v in quarters[scheme].values())
    ratios = noise_ratios(quarters)
    assert set(ratios) == {"games", "turn-streams"}
    assert ratios["games"]["total"] == quarters["games"]["total"] / quarters["actors"]["total"]


def test_needs_one_seed_of_a_turn_based_game() -> None:
    with pytest.raises(ValueError, match="one seed of a turn-based game"):
        gradient_noise(Learner(tiny_config("hanabi")), repeats=1)  # two seeds
    with pytest.raises(ValueError, match="one seed of a turn-based game"):
        gradient_noise(Learner(tiny_config("hanabi", seeds=(0,), num_steps=31)), repeats=1)
