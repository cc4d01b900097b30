"""Cross-play: exact seats in both orders, the symmetriser's equivariance, the population report."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ers_deep.cli.crossplay import population_names
from ers_deep.crossplay import (
    check_compatible,
    crossplay_matrix,
    env_symmetries,
    heatmap,
    population_report,
    xp_estimates,
)
from ers_deep.nets import NetConfig, build_net
from ers_deep.pools import Policy, PoolError, train_pool
from ers_deep.train.config import paper_config
from ers_deep.train.evaluate import Agent, play
from tests.cli_helpers import assert_refused
from tests.deep.threads import single_thread


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


def test_xp_counts_each_unordered_pair_once_as_ers_exact_does() -> None:
    """Entries (i, j) and (j, i) both average the two seat orders: two estimates of one XP(pi_i, pi_j). XP and
    XP(*) are over the n (n - 1) / 2 pairs (not the n (n - 1) entries, which understated the SE by ~sqrt 2),
    through the same ``Estimate.of`` as ers-exact's pipeline; one pair has no SE."""
    m = {"mean": [[2.0, 1.0, 0.2], [1.1, 1.9, 0.6], [0.4, 0.5, 2.0]]}
    pairs = np.array([(1.0 + 1.1) / 2, (0.2 + 0.4) / 2, (0.6 + 0.5) / 2])  # (0, 1), (0, 2), (1, 2)
    est = xp_estimates(m, seed=5)
    assert est["xp"].value == pytest.approx(pairs.mean())
    assert est["xp"].se == pytest.approx(pairs.std(ddof=1) / math.sqrt(3))
    assert est["xp_median"].value == pytest.approx(np.median(pairs)) and 0 < est["xp_median"].se < 1
    two = xp_estimates({"mean": [[2.0, 0.9], [1.1, 2.0]]})
    assert two["xp"].value == pytest.approx(1.0) and math.isnan(two["xp"].se)
    assert two["xp_median"].value == pytest.approx(1.0) and math.isnan(two["xp_median"].se)


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


def test_xp_star_mdp_is_xp_star_where_phi_mdp_is_the_identity() -> None:
    """Hanabi-Very-Small has one colour: Phi_MDP = {id}, S(pi) = pi, so XP(*)+MDP is XP(*), as table1 and
    ers-exact report it (``population_report`` gave NaN before 2026-12-07, so ``crossplay`` and ``table1``
    disagreed on one population)."""
    pols = _policies("hanabi", (0, 1), hanabi_preset="Hanabi-Very-Small", net=NetConfig(kind="mlp", hidden=8))
    report, _, sym = population_report("very-small", pols, games=10)
    row = report.rows[0]
    assert sym is None and report.config["mdp_symmetries"] == 1
    assert row.xp_median_mdp == row.xp_median and math.isfinite(row.xp_median_mdp.value)


def test_population_report_and_heatmap(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pols = _policies("hanabi", (0, 1), hanabi_preset="Hanabi-Small", net=NetConfig(kind="mlp", hidden=16))
    report, plain, sym = population_report("small", pols, games=20)
    row = report.rows[0]
    assert sym is not None and sym["symmetries"] == 2 and math.isfinite(row.xp_median_mdp.value)
    assert math.isnan(row.xp_median_er.value) and len(plain["mean"]) == 2
    assert report.game == "hanabi:Hanabi-Small"  # the preset told apart, as table1's reports name it
    assert heatmap(plain, tmp_path / "xp.png").stat().st_size > 1000


@pytest.fixture(scope="module")
def tiny_pools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two-seed pools: toy-coordination in ``a/pool`` and ``b/pool`` (one folder name, other seeds) and
    three-lever in ``lever/pool`` (seconds each)."""
    root = tmp_path_factory.mktemp("xp-pools")
    small: dict[str, Any] = {"num_envs": 4, "num_steps": 4, "minibatches": 1, "total_env_steps": 64}
    made = {"a": ("tabular:toy-coordination", (0, 1)), "b": ("tabular:toy-coordination", (2, 3))}
    made["lever"] = ("tabular:three-lever", (0, 1))
    for name, (env, seeds) in made.items():
        with single_thread():
            train_pool(paper_config(env, seeds=seeds, **small), root / name / "pool", eval_games=4)
    return {name: root / name / "pool" for name in made}


def test_two_pools_in_folders_of_one_name_stay_two_populations(
    tiny_pools: dict[str, Path], tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    """Keyed by folder name, ``a/pool`` x ``b/pool`` once kept one population of the two (the other lost)."""
    a, b, out = str(tiny_pools["a"]), str(tiny_pools["b"]), tmp_path / "out"
    code, _, err = deep("crossplay", a, b, "--games", "4", "--out", str(out), "--json")
    assert code == 0, err
    xp = json.loads((out / "xp.json").read_text())
    assert sorted(xp["populations"]) == [a, b]
    assert xp["populations"][b]["plain"]["rows"] == [f"{b}/seed-2", f"{b}/seed-3"]
    assert xp["matrix"]["rows"] == [f"{a}/seed-0", f"{a}/seed-1"] and xp["matrix"]["cols"][0] == f"{b}/seed-2"
    report = json.loads((out / "report.json").read_text())
    assert [row["name"] for row in report["rows"]] == [a, b]


def test_population_names() -> None:
    assert population_names(["x/toy", "y/lever"]) == ["toy", "lever"]  # unique folder names: as before
    assert population_names(["x/pool", "y/pool"]) == ["x/pool", "y/pool"]
    assert population_names(["x/pool", "x/pool"]) == ["x/pool (1)", "x/pool (2)"]


def test_crossplay_checks_both_envs_before_any_game(
    tiny_pools: dict[str, Path],
    tmp_path: Path,
    deep: Callable[..., tuple[int, str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pools of two envs are refused before either population's report (it was checked after both)."""
    import ers_deep.crossplay as xp

    def no_games(*args: object, **kwargs: object) -> None:
        raise AssertionError("games were played before the envs were checked")

    monkeypatch.setattr(xp, "population_report", no_games)
    monkeypatch.setattr(xp, "crossplay_matrix", no_games)
    out = tmp_path / "out"
    code, stdout, err = deep("crossplay", str(tiny_pools["a"]), str(tiny_pools["lever"]), "--out", str(out))
    assert_refused("ers-deep", code, err, "different envs", "toy-coordination vs tabular:three-lever")
    assert stdout == "" and not out.exists()


def test_policies_of_two_observation_encodings_are_refused() -> None:
    """Hanabi's plausible-card bits and JaxMARL's V0 belief are one shape: a cross-play of two such pools ran
    every game in the first pool's encoding (the cross block 0.78-0.89 one way round, 0.97-0.99 the other); so
    did Overcooked's paper and full channels where their shapes matched. Now refused, naming both."""
    bits = _policies("hanabi", (0,), hanabi_preset="Hanabi-Very-Small", hanabi_knowledge="plausible")
    belief = _policies("hanabi", (1,), hanabi_preset="Hanabi-Very-Small", hanabi_knowledge="v0-belief")
    with pytest.raises(
        PoolError, match="hanabi Hanabi-Very-Small plausible vs hanabi Hanabi-Very-Small v0-belief"
    ):
        crossplay_matrix(bits, belief, games=10)
    assert check_compatible([*bits, *bits]) is bits[0].config
    assert paper_config("overcooked-v2", paper_obs=False).env_key[-1] == "full-obs"


def test_probability_symmetriser_cross_play_is_ers_exacts_xp_of_symmetrised_policies() -> None:
    """XP(*)+MDP's entry with ``average="probabilities"`` is ers-exact's XP(S(pi_0), S(pi_1)) over Phi_MDP
    (three-lever, two random tables 3 N(0, 1), 20,000 games per seat order, seed 5: within 4.5 SE; measured
    0.7067 +- 0.0034 against 0.7059); the logit average's entry is another quantity (0.6673 +- 0.0033: more
    than 4.5 SE off), and each matrix records its symmetriser."""
    from ers_deep.envs.tabular import TabularEnv
    from ers_deep.train.exact import tabular_policies
    from ers_exact.model.objectives import cross_play, symmetrise
    from ers_exact.symmetry.mdp_group import decpomdp_group

    pols = _policies("tabular:three-lever", (0, 1))
    with torch.no_grad():
        for p in pols:
            w = p.net.logits.weight  # type: ignore[union-attr]
            w.copy_(3.0 * torch.randn(w.shape, generator=torch.Generator().manual_seed(p.seed)))
    env = TabularEnv("three-lever")
    phis = decpomdp_group(env.game).policy_parts
    sym = env_symmetries(pols[0].config)
    assert len(sym) == len(phis) == 6
    s0, s1 = (symmetrise(env.tree, tabular_policies(p.net, env)[0], phis) for p in pols)
    exact = float(cross_play(env.tree, s0, s1))
    m = crossplay_matrix(pols, pols, 20_000, seed=5, symmetries=sym, average="probabilities")
    assert m["symmetriser"] == "probabilities"
    assert abs(m["mean"][0][1] - exact) < 4.5 * m["se"][0][1], (m["mean"][0][1], m["se"][0][1], exact)
    logit = crossplay_matrix(pols, pols, 20_000, seed=5, symmetries=sym)
    assert abs(logit["mean"][0][1] - exact) > 4.5 * logit["se"][0][1], (logit["mean"][0][1], exact)
    assert logit["symmetriser"] == "logits" and crossplay_matrix(pols, pols, 2)["symmetriser"] is None


def test_crossplay_command_records_its_symmetriser(
    tiny_pools: dict[str, Path], tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    """``--symmetriser`` reaches the XP(*)+MDP matrix and is written to report.json and xp.json (the default:
    logits); an unknown name is refused."""
    lever = str(tiny_pools["lever"])
    for flag, want in (([], "logits"), (["--symmetriser", "probabilities"], "probabilities")):
        out = tmp_path / want
        code, _, err = deep("crossplay", lever, "--games", "4", "--out", str(out), "--json", *flag)
        assert code == 0, err
        report = json.loads((out / "report.json").read_text())
        assert report["config"]["symmetriser"] == want
        (pop,) = json.loads((out / "xp.json").read_text())["populations"].values()
        assert pop["mdp"]["symmetriser"] == want and pop["plain"]["symmetriser"] is None
    code, _, err = deep("crossplay", lever, "--symmetriser", "policies", "--out", str(tmp_path / "bad"))
    assert_refused("ers-deep", code, err, "--symmetriser")


def test_empty_rows_or_cols_are_refused_by_name() -> None:
    """``crossplay_matrix([], [], n)`` failed with an IndexError (``policies[0]``); an empty side with policies on
    the other played nothing and returned an empty matrix. Now a ValueError naming the empty argument."""
    pols = _policies("tabular:three-lever", (0,))
    for rows, cols, name in (([], [], "rows"), ([], pols, "rows"), (pols, [], "cols")):
        with pytest.raises(ValueError, match=f"crossplay_matrix: {name} is empty"):
            crossplay_matrix(rows, cols, games=4)
