"""Tabular acceptance: IPPO at temperature alpha converges to a Boltzmann fixed point that ers-exact
certifies, and its J equals the exact J of that fixed point (toy coordination game, iterated three-lever)."""

from __future__ import annotations

import pytest

from ers_deep.train.config import paper_config
from ers_deep.train.exact import exact_report
from ers_deep.train.ippo import Learner
from tests.deep.threads import single_thread


def _train(game: str, updates: int, seeds: tuple[int, ...], **kw: object) -> list[dict]:  # type: ignore[type-arg]
    with single_thread():
        cfg = paper_config(f"tabular:{game}", seeds=seeds, **kw)  # type: ignore[arg-type]
        cfg = cfg.replace(total_env_steps=cfg.steps_per_update * updates)
        learner = Learner(cfg)
        for _ in range(updates):
            learner.train_step()
        return exact_report(learner.net, learner.env, cfg.alpha)


@pytest.mark.parametrize(
    ("game", "updates", "residual"),
    [("toy-coordination", 400, 1e-6), pytest.param("three-lever", 400, 1e-6, marks=pytest.mark.slow)],
)
def test_exact_mode_converges_to_a_certified_fixed_point(game: str, updates: int, residual: float) -> None:
    for row in _train(game, updates, (0, 1), advantage="exact", num_envs=256):
        fp = row["fixed_point"]
        assert row["residual"] < residual, row
        assert fp["residual"] < 1e-9 and fp["distance"] < 10 * residual and fp["stable"]
        assert abs(row["J"] - fp["J"]) < 10 * residual


def test_sampled_ippo_reaches_the_fixed_point_within_sampling_noise() -> None:
    """Plain IPPO (GAE lambda = 1, no advantage normalisation, entropy coefficient alpha) on toy coordination."""
    for row in _train("toy-coordination", 120, (0,), num_envs=4096):
        assert row["residual"] < 0.03, row
        assert abs(row["J"] - row["fixed_point"]["J"]) < 0.01 and row["fixed_point"]["optimal"]


def test_exact_mode_refuses_a_discount_other_than_the_games() -> None:
    """Exact advantages are Q_pi at the game's discount; a different gamma would train the critic at another."""
    from ers_exact.util.options import UsageError

    cfg = paper_config("tabular:toy-coordination", seeds=(0,), num_envs=8, advantage="exact")
    learner = Learner(cfg)  # gamma None: the game's own
    own = learner.env.game.discount  # type: ignore[attr-defined]
    assert learner.gamma == own
    Learner(cfg.replace(gamma=own))
    with pytest.raises(UsageError, match="game's discount"):
        Learner(cfg.replace(gamma=own / 2))
    Learner(cfg.replace(gamma=own / 2, advantage="gae"))  # GAE at any gamma is the user's choice
