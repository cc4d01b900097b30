"""Deep discovery end to end on games with known answers (issue 15's acceptance): IPPO pools at alpha 0.25, learned
phi rounded to ers-exact transformations and judged exactly. ers-exact says Phi_ER at 0.25 is the toy swap
(not a Dec-POMDP symmetry) on the toy game, and the six lever relabellings (= Phi_MDP) on three-lever."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ers_deep.discovery import DeepDiscoveryConfig, discover, load_symmetries
from ers_deep.pools import load_pool, train_pool
from ers_deep.train.config import paper_config
from ers_exact.games import get_game
from ers_exact.interface import DiscoveryResult, LearnedTransformation, Transformation
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.fixed_points import solve_fixed_points
from ers_exact.symmetry.er import er_symmetries
from tests.deep.threads import single_thread

ALPHA = 0.25
TOY_SWAP_ACTIONS = ((1, 0), (1, 0))
TOY_SWAP_OBSERVATIONS = ((1, 0, 2), (1, 0, 2))  # x <-> m, b fixed


def _exact_policy_parts(game: str) -> set[tuple[Any, Any]]:
    """Phi_ER at ALPHA on policies (actions, observations), from ers-exact against its own Pi*_alpha."""
    tree = enumerate_histories(get_game(game))
    fps = solve_fixed_points(tree, ALPHA)
    er = er_symmetries(tree, [p.policy for p in fps.optimal_points], ALPHA, fps.J_star, progress=False)
    return {(m.actions, m.observations) for m in er.members}


def _kept(result: DiscoveryResult) -> list[tuple[LearnedTransformation, Transformation, dict[str, Any]]]:
    out = []
    for t, verdict in zip(result.transformations, result.config["exact"]):
        assert isinstance(t, LearnedTransformation) and t.nearest is not None and verdict is not None
        out.append((t, t.nearest, verdict))
    return out


def test_toy_game_finds_the_toy_swap(toy_discovery: tuple[Path, DiscoveryResult]) -> None:
    _, result = toy_discovery
    assert result.game == "tabular:toy-coordination" and len(result.transformations) == 2
    assert (TOY_SWAP_ACTIONS, TOY_SWAP_OBSERVATIONS) in _exact_policy_parts("toy-coordination")
    for t, exact, verdict in _kept(result):
        assert t.action_map == (1, 0)
        assert (exact.actions, exact.observations) == (TOY_SWAP_ACTIONS, TOY_SWAP_OBSERVATIONS)
        assert verdict["admissible"] and verdict["er_symmetry"] is True
        assert verdict["decpomdp_symmetry"] is False  # in Phi_ER, not in Phi_MDP: the paper's point
        assert abs(verdict["mean_return"] - verdict["pool_return"]) < 0.02  # J(phi(pi)) ~ J(pi) on the pool
    assert result.config["entropy"] == ALPHA  # the pool's alpha by default


def _three_lever_checks(result: DiscoveryResult, need_all: bool) -> None:
    exact_er = _exact_policy_parts("three-lever")
    assert len(exact_er) == 6
    kept = _kept(result)
    ers = [(exact.actions, exact.observations) in exact_er for _, exact, _ in kept]
    assert all(ers) if need_all else ers[0]
    for (t, exact, verdict), is_er in zip(kept, ers):
        assert verdict["er_symmetry"] is is_er  # the discovery's own verdict agrees with ers-exact's Phi_ER
        if is_er:
            assert exact.actions[0] == exact.observations[0] != (0, 1, 2)  # a lever relabelling, not identity
            assert (
                verdict["decpomdp_symmetry"] and abs(verdict["mean_return"] - verdict["pool_return"]) < 1e-9
            )
            assert t.distance < 0.1  # phi_O's rows are close to that permutation


@pytest.fixture(scope="module")
def small_three_lever(tmp_path_factory: pytest.TempPathFactory) -> DiscoveryResult:
    """4 seeds at 600k steps each (~9 s), 6 candidates trained for 150k steps (~7 s), 2 kept (discovery seeds 0-3
    all gave 2 of 2 ER symmetries at distance <= 0.055)."""
    out = tmp_path_factory.mktemp("three-lever")
    cfg = paper_config("tabular:three-lever", seeds=(0, 1, 2, 3), total_env_steps=600_000, alpha=ALPHA)
    config = DeepDiscoveryConfig(
        candidates=6, top=2, num_envs=256, num_steps=4, lr=0.01, total_env_steps=150_000, eval_games=300
    )
    with single_thread():
        train_pool(cfg, out / "pool", eval_games=200, progress=False)
        return discover(load_pool(out / "pool"), config, out / "discovery", progress=False)


@pytest.mark.slow  # ~45 s with its fixture; the toy game's discovery stays in the default suite
def test_three_lever_small_every_kept_symmetry_is_a_lever_relabelling(
    small_three_lever: DiscoveryResult,
) -> None:
    """The cheap variant (a smaller pool, fewer candidates and steps): every kept phi rounds to an exact ER
    symmetry (a lever relabelling), every verdict agrees with ers-exact's Phi_ER, the kept are best first."""
    _three_lever_checks(small_three_lever, need_all=True)
    assert list(small_three_lever.scores) == sorted(small_three_lever.scores, reverse=True)


@pytest.mark.slow
def test_three_lever_every_kept_symmetry_rounds_to_an_exact_er_symmetry(tmp_path: Path) -> None:
    """The acceptance setting: 8 seeds at the paper's tabular settings (2.46M steps each, ~60 s), 9 candidates
    for 300k steps (~25 s), 3 kept: every kept phi rounds to an exact ER symmetry."""
    cfg = paper_config("tabular:three-lever", seeds=tuple(range(8)), alpha=ALPHA)
    train_pool(cfg, tmp_path / "pool", progress=False)
    config = DeepDiscoveryConfig(
        candidates=9, top=3, num_envs=256, num_steps=4, lr=0.01, total_env_steps=300_000, eval_games=500
    )
    result = discover(load_pool(tmp_path / "pool"), config, tmp_path / "discovery", progress=False)
    _three_lever_checks(result, need_all=True)
    shutil.rmtree(tmp_path / "discovery" / "run")


def test_exact_scores_are_the_pools_exact_returns(
    toy_pool: Path, toy_discovery: tuple[Path, DiscoveryResult]
) -> None:
    """On tabular pools candidates are scored by exact returns: pi itself scores the J pool.json records; the
    result's pool return is the mean exact J of the policies phi trained on (Pi', as ers-exact's), the held-out
    policies' own is recorded beside Table 2's metrics, and every candidate is ranked by its exact J on Pi'."""
    from ers_deep.discovery.run import exact_value
    from ers_deep.envs.tabular import TabularEnv
    from ers_deep.train.evaluate import Agent

    pool = load_pool(toy_pool)
    value = exact_value(TabularEnv("toy-coordination"))
    js = [value([Agent(p.net)] * 2) for p in pool.policies]
    assert js == pytest.approx([p["exact"]["J"] for p in pool.info["policies"]], abs=1e-6)
    result = toy_discovery[1]
    assert result.config["scoring"] == "exact" and result.config["held_out"] == [
        p.name for p in pool.policies[2:]
    ]
    assert result.pool_return == pytest.approx(sum(js[:2]) / 2, abs=1e-9)
    assert result.config["held_out_return"] == pytest.approx(sum(js[2:]) / 2, abs=1e-9)
    assert result.config["trained_on"] == [p.name for p in pool.policies[:2]]
    syms = load_symmetries(toy_discovery[0])
    on_pi = [np.mean([value([Agent(p.net, (s,))] * 2) for p in pool.policies[:2]]) for s in syms]
    assert list(result.scores) == pytest.approx(on_pi, abs=1e-9)  # ranked on Pi', not on the held-out half


def test_a_pool_at_low_temperature_gets_the_exact_er_verdict(tmp_path: Path) -> None:
    """A toy pool at alpha 1e-3: Pi*_alpha's optimal points have legal actions at probability exactly 0
    (underflow), so the ER verdict on their probabilities was refused and ``discover`` stopped with a
    TemperatureError; on the solver's log-policies each kept phi's verdict is whether its rounding is one of
    the toy game's Phi_ER on policies, derived by hand at every alpha: the identity and both agents' action swap
    with x <-> m (tests/exact/symmetry/test_er_log_space.py)."""
    by_hand = {(((0, 1), (0, 1)), ((0, 1, 2), (0, 1, 2))), (TOY_SWAP_ACTIONS, TOY_SWAP_OBSERVATIONS)}
    cfg = paper_config("tabular:toy-coordination", seeds=(0, 1), total_env_steps=4096 * 2 * 20, alpha=1e-3)
    config = DeepDiscoveryConfig(
        candidates=2, top=2, num_envs=64, num_steps=4, lr=0.01, total_env_steps=4096, eval_games=100
    )
    with single_thread():
        train_pool(cfg, tmp_path / "pool", eval_games=100, progress=False)
        result = discover(load_pool(tmp_path / "pool"), config, tmp_path / "discovery", progress=False)
    kept = _kept(result)
    assert len(kept) == 2
    for _, exact, verdict in kept:
        assert verdict["er_symmetry"] is ((exact.actions, exact.observations) in by_hand)
