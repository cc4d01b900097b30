"""Conditional action matrices P(a_t^i | a_{t-1}^j): every observed row is a distribution, counts add up per
seat pair, the labels are the env's moves, the estimate equals the exact conditional of a three-lever policy
within sampling error, and the command writes JSON beside its config and a heatmap (also from a table1
folder: the best cross-play agent of each population)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from ers_deep.analysis import action_labels, action_matrix
from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import NetConfig, build_net
from ers_deep.pools import Policy, Pool, load_pool
from ers_deep.train.checkpoint import load_checkpoint, save_checkpoint
from ers_deep.train.config import make_env, paper_config
from ers_deep.train.exact import tabular_policies


def _check_distributions(m: dict) -> None:
    counts = np.asarray(m["counts"])
    A = len(m["labels"])
    assert counts.shape == (A, A) and counts.sum() == m["transitions"] > 0
    assert np.array_equal(np.asarray(m["row_counts"]), counts.sum(1))
    assert np.array_equal(sum(np.asarray(c) for c in m["by_seat"].values()), counts)
    for b, row in enumerate(m["probabilities"]):
        if m["row_counts"][b] == 0:
            assert all(v is None for v in row)
        else:
            p = np.asarray(row, float)
            assert (p >= 0).all() and math.isclose(p.sum(), 1.0, abs_tol=1e-12)
            assert np.allclose(p, counts[b] / counts[b].sum())


def _untrained(env: str, **over: object) -> Policy:
    cfg = paper_config(env, seeds=(3,), **over)
    probe = make_env(cfg, 1, seed=0)
    net = build_net(cfg.net, [3], probe.obs_shape, probe.num_actions).eval()
    return Policy(net, cfg, 3, f"untrained/{env}")


@pytest.mark.parametrize(
    "source",
    [
        "random",  # a 2-update policy with random logits added: peaked rows, no training (default suite)
        pytest.param("trained", marks=pytest.mark.slow),  # the trained pool of lever_inputs (~50 s)
    ],
)
def test_three_lever_matches_the_exact_conditional(source: str, request: pytest.FixtureRequest) -> None:
    """Three-lever: agent i sees its partner's last lever b, so P(a_1^i = a | a_0^j = b) is
    sum_{a'} pi^i(a' | root) pi^i(a | (a', b)) exactly; the estimate of each seat pair is within 5 SE."""
    if source == "trained":
        policy = load_pool(request.getfixturevalue("lever_inputs")["sp"]).policies[0]
    else:
        policy = load_pool(request.getfixturevalue("lever_pool")).policies[0]
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in policy.net.parameters():
                p.add_(3.0 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    m = action_matrix(policy, 20_000, seed=1)
    _check_distributions(m)
    assert m["labels"] == ["L1", "L2", "L3"] and set(m["by_seat"]) == {"1->0", "0->1"}
    assert m["transitions"] == 2 * 20_000  # one step-1 move per agent per game
    env = TabularEnv("three-lever")
    pi = tabular_policies(policy.net, env)[0]
    for i, j in ((0, 1), (1, 0)):
        hist = env.tree.local[i]
        exact = np.zeros((3, 3))
        for k in np.nonzero(hist.time == 1)[0]:
            exact[hist.observation[k]] += pi[i][hist.parent[k], hist.action[k]] * pi[i][k]
        counts = np.asarray(m["by_seat"][f"{j}->{i}"], float)
        n = counts.sum(1, keepdims=True)
        est = counts / n
        se = np.sqrt(exact * (1 - exact) / n) + 1e-3
        assert (np.abs(est - exact) <= 5 * se).all(), (i, est, exact)


def test_hanabi_turns_and_labels() -> None:
    """Hanabi: only the player who moved at t-1 conditions the next player's move; HLE's move order."""
    policy = _untrained("hanabi", hanabi_preset="Hanabi-Very-Small", net=NetConfig(kind="mlp", hidden=16))
    m = action_matrix(policy, 64, seed=0)
    _check_distributions(m)
    assert m["labels"][:4] == ["discard 0", "discard 1", "play 0", "play 1"]
    assert m["labels"][4:] == ["hint R", "hint 1", "hint 2", "hint 3", "hint 4", "hint 5"]
    assert set(m["by_seat"]) == {"1->0", "0->1"}
    # every move but each game's first follows the other player's move
    assert m["transitions"] == m["moves"] - 64


def test_overcooked_simultaneous_moves() -> None:
    """Overcooked V2: both players move at every step, so each of the 399 later steps of a 400-step episode
    counts once per ordered seat pair."""
    policy = _untrained("overcooked-v2", net=NetConfig(kind="cnn-gru", hidden=8, conv=4))
    m = action_matrix(policy, 3, seed=0)
    _check_distributions(m)
    assert m["labels"] == ["right", "down", "left", "up", "stay", "interact"]
    assert m["transitions"] == 2 * 399 * 3 and m["moves"] == 2 * 400 * 3
    assert action_labels(policy.config) == m["labels"]


def test_cli_chosen_policies_of_a_pool(lever_pool: Path, tmp_path: Path) -> None:
    from ers_deep.cli import main

    out = tmp_path / "am"
    argv = ["action-matrix", str(lever_pool), "--policy", "0,seed-2", "--games", "500"]
    assert main([*argv, "--out", str(out)]) == 0
    result = json.loads((out / "action-matrix.json").read_text())
    assert [m["policy"] for m in result["matrices"]] == ["sp/seed-0", "sp/seed-2"]
    assert json.loads((out / "action-matrix-config.json").read_text())["policy"] == "0,seed-2"
    assert (out / "action-matrix.png").stat().st_size > 5000


def _fake_table1(lever_pool: Path, tmp_path: Path) -> Path:
    """A table1-shaped folder of 3 three-lever agents (config and pools, no XP matrices): run_table1's layout,
    sp/ (agent A's seeds 100 A + s), op-mdp/ (100 A + 50), agent-A/op-er/ (100 A + 70)."""
    from ers_deep.zsc import PopulationConfig

    t1 = tmp_path / "t1"
    t1.mkdir()
    config = PopulationConfig(env="tabular:three-lever", agents=3, k=2, m=1, candidates=1, top=1)
    (t1 / "config.json").write_text(json.dumps(config.to_json()))
    sp = load_pool(lever_pool)
    layout = {"sp": (0, 1, 100, 101, 200, 201), "op-mdp": (50, 150, 250)}
    layout |= {f"agent-{a}/op-er": (100 * a + 70,) for a in range(3)}
    for name, seeds in layout.items():
        _fake_pool(sp, t1 / name, seeds)
    return t1


def test_cli_table1_picks_the_best_cross_play_agent(lever_pool: Path, tmp_path: Path) -> None:
    """A table1-shaped folder (config, pools, XP matrices): per population the agent with the highest mean XP."""
    from ers_deep.cli import main

    t1 = _fake_table1(lever_pool, tmp_path)
    rows = {  # mean XP against the others: the best agent is 2, 0 and 1
        "ippo": [[1, 0.1, 0.2], [0.1, 1, 0.3], [0.2, 0.3, 1]],
        "op-mdp": [[1, 0.5, 0.4], [0.5, 1, 0.1], [0.4, 0.1, 1]],
        "op-er": [[1, 0.5, 0.1], [0.5, 1, 0.4], [0.1, 0.4, 1]],
    }
    for tag, mean in rows.items():
        (t1 / f"xp-{tag}-plain.json").write_text(json.dumps({"rows": ["a", "b", "c"], "mean": mean}))
    out = tmp_path / "am"
    assert main(["action-matrix", "--table1", str(t1), "--games", "200", "--out", str(out)]) == 0
    titles = [m["title"] for m in json.loads((out / "action-matrix.json").read_text())["matrices"]]
    assert [t.split(":")[0] for t in titles] == ["IPPO", "IPPO + OP-MDP", "IPPO + OP-ER"]
    assert "sp/seed-200 " in titles[0] and "op-mdp/seed-50 " in titles[1] and "op-er/seed-170 " in titles[2]


def test_cli_table1_with_a_damaged_matrix_is_refused_in_one_line(
    lever_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table1 folder whose xp-op-er-plain.json is not JSON, lacks 'mean', or is not the deployed agents'
    square matrix: exit 2 naming the file (it was an internal error, exit 1: JSONDecodeError, KeyError, or an
    IndexError / a wrong pick for a matrix of another size)."""
    from ers_deep.cli import main

    t1 = _fake_table1(lever_pool, tmp_path)
    good = {"rows": ["a", "b", "c"], "mean": np.eye(3).tolist()}
    for tag in ("ippo", "op-mdp"):
        (t1 / f"xp-{tag}-plain.json").write_text(json.dumps(good))
    damaged = [
        "{",
        json.dumps({"rows": ["a", "b", "c"]}),
        json.dumps({"rows": ["a", "b", "c"], "mean": [[1, 2], [3]]}),
        json.dumps({"rows": ["a", "b"], "mean": np.eye(2).tolist()}),  # 2 agents, 3 deployed
    ]
    for text in damaged:
        (t1 / "xp-op-er-plain.json").write_text(text)
        capsys.readouterr()
        assert main(["action-matrix", "--table1", str(t1), "--games", "10", "--force"]) == 2, text
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "xp-op-er-plain.json" in err and "internal" not in err, err


def _fake_pool(source: Pool, folder: Path, seeds: tuple[int, ...]) -> None:
    """A pool folder whose policies are ``source``'s first ones saved under the seed numbers ``seeds``."""
    (folder / "policies").mkdir(parents=True)
    entries = []
    for s, p in zip(seeds, itertools.cycle(source.policies)):
        tensors, meta = load_checkpoint(source.path / "policies" / f"seed-{p.seed}.safetensors")
        save_checkpoint(folder / "policies" / f"seed-{s}.safetensors", tensors, {**meta, "seed": s})
        entries.append({"seed": s, "file": f"policies/seed-{s}.safetensors", "self_play": {"mean": 1.0}})
    (folder / "pool.json").write_text(json.dumps({"env": source.info["env"], "policies": entries}))
