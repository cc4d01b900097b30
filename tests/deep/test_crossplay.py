"""Cross-play: exact seats in both orders, the symmetriser's equivariance, the population report."""

from __future__ import annotations

import math

import torch

from ers_deep.crossplay import crossplay_matrix, env_symmetries, heatmap, population_report
from ers_deep.nets import NetConfig, build_net
from ers_deep.pools import Policy
from ers_deep.train.config import paper_config
from ers_deep.train.evaluate import Agent, play


def _policies(env: str, seeds: tuple[int, ...], **kw: object) -> list[Policy]:
    cfg = paper_config(env, **kw)  # type: ignore[arg-type]
    from ers_deep.train.config import make_env

    e = make_env(cfg, 1, 0)
    return [Policy(build_net(cfg.net, [s], e.obs_shape, e.num_actions), cfg, s, f"p/seed-{s}") for s in seeds]


def test_matrix_is_both_seat_orders_and_diagonal_is_self_play() -> None:
    pols = _policies("tabular:three-lever", (0, 1, 2))
    m = crossplay_matrix(pols, pols[:2], games=400, seed=3)
    assert len(m["mean"]) == 3 and len(m["mean"][0]) == 2 and all(s > 0 for row in m["se"] for s in row)
    a, b = Agent(pols[0].net), Agent(pols[1].net)
    first = play((a, b), pols[0].config, 400, seed=3 + 0 + 104729)
    second = play((b, a), pols[0].config, 400, seed=3 + 104729 + 1)
    assert math.isclose(m["mean"][0][1], (first["mean"] + second["mean"]) / 2)


def test_greedy_play_of_a_tabular_policy_matches_its_deterministic_value() -> None:
    pols = _policies("tabular:toy-coordination", (0,))
    g = play([Agent(pols[0].net)] * 2, pols[0].config, 300, greedy=True)
    assert g["se"] == 0.0 or g["se"] < 0.1  # a deterministic policy in a stochastic game


def test_overcooked_symmetry_group() -> None:
    group = env_symmetries(paper_config("overcooked-v2"))
    assert len(group) == 2 and group[0].is_identity() and not group[1].is_identity()


def test_symmetriser_is_equivariant() -> None:
    """S(pi)(phi(o)) = phi(S(pi)(o)) for every phi in the group (Hanabi-Small: 2 colour permutations)."""
    pols = _policies("hanabi", (0,), hanabi_preset="Hanabi-Small", net=NetConfig(kind="mlp", hidden=16))
    group = env_symmetries(pols[0].config)
    assert len(group) == 2
    agent = Agent(pols[0].net, group)
    obs = torch.rand(5, *pols[0].net.obs_shape)
    first = torch.ones(5, dtype=torch.bool)
    base, _ = agent.logits(obs, first, agent.initial_state(5, torch.device("cpu")))
    for phi in group:
        mapped, _ = agent.logits(phi.apply_obs(obs), first, agent.initial_state(5, torch.device("cpu")))
        assert torch.allclose(mapped, phi.apply_legal(base), atol=1e-5)
    plain, _ = Agent(pols[0].net).logits(obs, first, Agent(pols[0].net).initial_state(5, torch.device("cpu")))
    assert not torch.allclose(plain, base)


def test_population_report_and_heatmap(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pols = _policies("hanabi", (0, 1), hanabi_preset="Hanabi-Small", net=NetConfig(kind="mlp", hidden=16))
    report, plain, sym = population_report("small", pols, games=20)
    row = report.rows[0]
    assert sym is not None and sym["symmetries"] == 2 and math.isfinite(row.xp_median_mdp.value)
    assert math.isnan(row.xp_median_er.value) and len(plain["mean"]) == 2
    assert heatmap(plain, tmp_path / "xp.png").stat().st_size > 1000
