"""``collector="torchrl"``: TorchRL's ``Collector`` gives the native loop's rollouts bit for bit, its runs resume
exactly, and ``ers-deep train-sp --collector torchrl`` runs end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from ers_deep.cli import main
from ers_deep.nets import NetConfig
from ers_deep.train.collector import LearnerEnv
from ers_deep.train.config import TrainConfig, paper_config
from ers_deep.train.ippo import Learner, Rollout
from ers_deep.train.run import read_metrics, resume, train
from ers_exact.util.options import UsageError

CONFIGS: dict[str, dict[str, Any]] = {
    "tabular:toy-coordination": {"num_envs": 8, "num_steps": 2},
    "hanabi": {
        "hanabi_preset": "Hanabi-Very-Small",
        "num_envs": 8,
        "num_steps": 8,
        "minibatches": 2,
        "net": NetConfig(kind="mlp", hidden=32),
    },
    "overcooked-v2": {
        "num_envs": 2,
        "num_steps": 6,
        "minibatches": 2,
        "net": NetConfig(kind="cnn-gru", hidden=8, conv=8),
    },
}


def _config(env: str, **over: Any) -> TrainConfig:
    return paper_config(env, seeds=(0, 3), **{**CONFIGS[env], **over})


def _recorded(learner: Learner, monkeypatch: pytest.MonkeyPatch) -> list[Rollout]:
    """The rollouts ``train_step`` collects, in order."""
    seen: list[Rollout] = []
    collect = learner.collect

    def recording() -> tuple[Rollout, dict[str, torch.Tensor]]:
        ro, stats = collect()
        seen.append(ro)
        return ro, stats

    monkeypatch.setattr(learner, "collect", recording)
    return seen


def _same_metrics(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def same(x: float, y: float) -> bool:
        return x == y or (math.isnan(x) and math.isnan(y))

    return a.keys() == b.keys() and all(
        all(map(same, a[k], b[k])) if isinstance(a[k], list) else a[k] == b[k] for k in a
    )


@pytest.mark.parametrize("env", list(CONFIGS))
def test_torchrl_rollouts_equal_the_native_ones(env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    native = Learner(_config(env))
    torchrl = Learner(_config(env, collector="torchrl"))
    assert torchrl.torchrl is not None and torchrl.torchrl.env.env is torchrl.env  # the same env object
    if env == "overcooked-v2":  # episodes of 4 steps: the GRU state is reset inside the rollouts
        for learner in (native, torchrl):
            monkeypatch.setattr(learner.env, "max_steps", 4)
    rollouts = _recorded(native, monkeypatch), _recorded(torchrl, monkeypatch)
    for _ in range(3):
        assert _same_metrics(native.train_step(), torchrl.train_step())
    ended = 0.0
    for a, b in zip(*rollouts):
        ta, tb = a.tensors(), b.tensors()
        assert ta.keys() == tb.keys()
        for name, x in ta.items():
            y = tb[name]
            assert x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y), name
        ended += float(a.done.sum())
    assert len(rollouts[1]) == 3 and ended > 0  # episodes ended (and restarted) inside the rollouts
    assert native.env.auto_reset and torchrl.env.auto_reset  # the learner's env keeps its auto-reset
    for k, v in native.state_tensors().items():
        assert torch.equal(v, torchrl.state_tensors()[k]), k


def test_learner_env_attaches_instead_of_dealing_anew() -> None:
    learner = Learner(_config("hanabi"))
    env, before = learner.env, learner.env.generator.get_state()
    wrapped = LearnerEnv(env)
    obs = env.observe()
    wrapped.attach(torch.zeros(env.batch_size, dtype=torch.bool))
    td = wrapped.reset()
    assert torch.equal(td["agents", "observation"], obs) and not td["is_init"].any()
    assert torch.equal(env.generator.get_state(), before)  # nothing dealt
    wrapped.reset()  # a plain full reset deals new games
    assert not torch.equal(env.generator.get_state(), before)


def test_resume_with_the_torchrl_collector_is_exact(tmp_path: Path) -> None:
    cfg = _config("hanabi", collector="torchrl", total_env_steps=8 * 8 * 4, checkpoint_every=2)
    threads = torch.get_num_threads()
    try:
        train(cfg, tmp_path / "whole", threads=1)
        train(cfg, tmp_path / "part", max_updates=2, threads=1)
        learner, info = resume(tmp_path / "part", threads=1)
    finally:
        torch.set_num_threads(threads)
    assert info["updates"] == 4 and learner.torchrl is not None

    def rows(run: str) -> list[dict[str, str]]:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in read_metrics(tmp_path / run)]

    assert rows("part") == rows("whole")


def test_train_sp_collector_torchrl_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pool = tmp_path / "toy"
    argv = ["train-sp", "--env", "tabular:toy-coordination", "--seeds", "0-1", "--out", str(pool)]
    argv += ["--num-envs", "16", "--total-steps", str(16 * 2 * 3), "--collector", "torchrl"]
    argv += ["--eval-games", "50", "--threads", "1", "--json"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["training"]["updates"] == 3 and res["training"]["finished"]
    configs = list(pool.rglob("config.json"))
    assert any(json.loads(p.read_text()).get("config", {}).get("collector") == "torchrl" for p in configs)
    with pytest.raises(SystemExit) as exit_:
        main([*argv[:-1], "--collector", "gym"])
    assert exit_.value.code == 2
    assert "gym" in capsys.readouterr().err
    with pytest.raises(UsageError, match="collector"):
        TrainConfig(collector="gym")  # type: ignore[arg-type]
