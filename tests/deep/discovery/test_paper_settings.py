"""The paper's discovery hyper-parameters (``paper_discovery_config``, ``ers-deep discover --defaults paper``),
the learning-rate schedule of the discovery optimiser (``DeepDiscoveryConfig.lr_schedule``), lambda_1's range
[0, 1), and resuming a discovery run whose config was written before ``lr_schedule`` existed.

Every expected value below is typed from the paper (``../shared/paper/expected-return-symmetries.tex``,
Appendix A "Experimental Setup", \\label{appendix:exp-deets}; the appendix gives its hyper-parameters as prose,
not in a table), with the sentence it comes from."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ers_deep.cli import main
from ers_deep.cli.discover import DiscoverOptions
from ers_deep.discovery import (
    DeepDiscoveryConfig,
    discover,
    discovery_train_config,
    paper_discovery_config,
)
from ers_deep.pools import load_pool
from ers_deep.train.config import paper_config
from ers_deep.train.run import checkpoints, read_metrics, read_run_config
from ers_deep.train.update import PPOUpdate
from ers_exact.interface import DiscoveryResult
from ers_exact.util.options import UsageError

# Appendix A, "For Hanabi, we run each inner loop of Algorithm [2] for 2.25e9 timesteps across vectorized
# Hanabi environments. As per Equation [sp-max-with-reg-stoch] we use lambda_1 = 0.65, lambda_2 = 2.5e-9."
# Appendix A, "For Hanabi, we use 4 epochs, 1024 environments per pretrained policy, 128 environment steps per
# update, 4 minibatches, gamma = 0.99, GAE Lambda = 0.95, CLIP EPS = 0.2, VF COEFF = 0.5, MAX GRAD NORM = 0.5,
# a learning rate of 1e-5 and a linear learning rate annealing schedule."
HANABI = {
    "total_env_steps": 2.25e9,
    "lambda1": 0.65,
    "lambda2": 2.5e-9,
    "envs_per_policy": 1024,
    "num_steps": 128,
    "lr": 1e-5,
    "lr_schedule": "linear",
    "ppo": {
        "epochs": 4,
        "minibatches": 4,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip_eps": 0.2,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
    },
}
# Appendix A, "For Overcooked V2, we run each inner loop of Algorithm [3] for 1.5e8 timesteps." and "For
# Overcooked V2, we use 4 epochs, 256 environments, 256 environment steps per update, 64 minibatches,
# gamma = 0.99, GAE Lambda = 0.95, CLIP EPS = 0.2, VF COEFF = 0.5, MAX GRAD NORM = 0.25, a learning rate of
# 1e-5 with no annealing." (The official code's config has 2.5e-5; the paper's text is the specification.)
OVERCOOKED = {
    "total_env_steps": 1.5e8,
    "num_envs": 256,
    "num_steps": 256,
    "lr": 1e-5,
    "lr_schedule": "constant",
    "ppo": {
        "epochs": 4,
        "minibatches": 64,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip_eps": 0.2,
        "vf_coef": 0.5,
        "max_grad_norm": 0.25,
    },
}
#: the fields the paper gives (the rest keep the dataclass defaults: the paper states no other)
PAPER_FIELDS = {"num_envs", "num_steps", "total_env_steps", "lr", "lr_schedule", "lambda1", "lambda2"}


def _changed(config: DeepDiscoveryConfig) -> set[str]:
    default = DeepDiscoveryConfig()
    return {f.name for f in dataclasses.fields(config) if getattr(config, f.name) != getattr(default, f.name)}


@pytest.mark.parametrize("policies", [1, 2, 6])
def test_hanabi_preset_is_appendix_a(policies: int) -> None:
    cfg = paper_discovery_config("hanabi", policies=policies)
    assert cfg.total_env_steps == HANABI["total_env_steps"]
    assert cfg.num_envs == HANABI["envs_per_policy"] * policies  # "1024 environments per pretrained policy"
    assert cfg.num_steps == HANABI["num_steps"]
    assert cfg.lr == HANABI["lr"] and cfg.lr_schedule == HANABI["lr_schedule"]
    assert (cfg.lambda1, cfg.lambda2) == (HANABI["lambda1"], HANABI["lambda2"])
    # the temperature "alpha = 1 for Boltzmann exploration" divides logits (by 1); the entropy weight stays the
    # pool's (the official config's ENT_COEF 0.01), so alpha stays unset
    assert cfg.alpha is None
    assert _changed(cfg) <= PAPER_FIELDS


def test_overcooked_preset_is_appendix_a() -> None:
    cfg = paper_discovery_config("overcooked-v2", policies=5)  # 256 games for the whole run, any pool size
    assert cfg.total_env_steps == OVERCOOKED["total_env_steps"]
    assert (cfg.num_envs, cfg.num_steps) == (OVERCOOKED["num_envs"], OVERCOOKED["num_steps"])
    assert cfg.lr == OVERCOOKED["lr"] and cfg.lr_schedule == OVERCOOKED["lr_schedule"]
    assert cfg.alpha is None and _changed(cfg) <= PAPER_FIELDS
    # Algorithm 3 has no lambda_1, lambda_2: the paper gives none for Overcooked V2
    assert (cfg.lambda1, cfg.lambda2) == (DeepDiscoveryConfig().lambda1, DeepDiscoveryConfig().lambda2)


@pytest.mark.parametrize(
    ("env", "paper", "updates"), [("hanabi", HANABI, 2861), ("overcooked-v2", OVERCOOKED, 2288)]
)
def test_learner_of_a_paper_pool_runs_appendix_a_ppo(env: str, paper: dict[str, Any], updates: int) -> None:
    """The learner's config (the pool's PPO settings, the discovery run's sizes and schedule) of a pool trained
    with ``paper_config``: every PPO value of the appendix's sentence; the number of updates is the official
    config's (``../shared/notes/reference-code-and-jaxmarl.md`` 1.3: 2861; 1.7: 2288)."""
    learner = discovery_train_config(paper_config(env), paper_discovery_config(env))
    for field, value in paper["ppo"].items():
        assert getattr(learner, field) == value, field
    assert learner.lr == paper["lr"] and learner.lr_schedule == paper["lr_schedule"]
    assert learner.num_updates == updates


def test_preset_for_another_env_or_pool_size_is_refused() -> None:
    with pytest.raises(UsageError, match=r"hanabi and overcooked-v2 only, not .tabular:three-lever."):
        paper_discovery_config("tabular:three-lever")
    with pytest.raises(UsageError, match="policies = 0"):
        paper_discovery_config("hanabi", policies=0)
    assert paper_discovery_config("hanabi", lr=3e-4, algorithm="sp-max-reg").lr == 3e-4  # overrides


@pytest.mark.parametrize("value", [1.0, 1.5, -0.1])
def test_lambda1_outside_0_1_is_refused(value: float) -> None:
    """lambda_1 in [0, 1) (paper, after eq. sp-max-with-reg): at 1 every rollout is composed and phi_theta
    alone is never trained."""
    with pytest.raises(UsageError, match=r"lambda1 = .*must be in \[0, 1\)") as info:
        DeepDiscoveryConfig(lambda1=value)
    assert len(str(info.value).splitlines()) == 1
    assert DeepDiscoveryConfig(lambda1=0.0).lambda1 == 0.0
    assert DeepDiscoveryConfig(lambda1=0.999).lambda1 == 0.999


def _learning_rates(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every learning rate the PPO update's optimiser is given (``PPOUpdate.set_lr``), in order."""
    seen: list[float] = []
    original = PPOUpdate.set_lr

    def record(self: PPOUpdate, lr: float) -> None:
        seen.append(float(lr))
        original(self, lr)

    monkeypatch.setattr(PPOUpdate, "set_lr", record)
    return seen


TINY = {"candidates": 2, "top": 1, "num_envs": 256, "num_steps": 4, "lr": 0.01, "total_env_steps": 10_240}


@pytest.mark.parametrize("schedule", ["constant", "linear"])
def test_discovery_optimiser_follows_lr_schedule(
    schedule: str, toy_pool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """constant: the optimiser gets ``lr`` at every update; linear: lr (1 - u / N) at update u (0-based)."""
    seen = _learning_rates(monkeypatch)
    config = DeepDiscoveryConfig(**TINY, lr_schedule=schedule)  # type: ignore[arg-type]
    discover(load_pool(toy_pool), config, tmp_path / "disc", progress=False)
    n = TINY["total_env_steps"] // (TINY["num_envs"] * TINY["num_steps"])
    want = [0.01] * n if schedule == "constant" else [0.01 * (1 - u / n) for u in range(n)]
    assert seen == pytest.approx(want, rel=1e-12, abs=0)
    rows = read_metrics(tmp_path / "disc" / "run")
    assert sorted({float(r["lr"]) for r in rows}, reverse=True) == pytest.approx(
        sorted(set(want), reverse=True)
    )
    _, run_config = read_run_config(tmp_path / "disc" / "run")
    assert run_config.lr_schedule == schedule
    saved = json.loads((tmp_path / "disc" / "discovery-config.json").read_text())
    assert saved["lr_schedule"] == schedule


#: the fields of a DeepDiscoveryConfig as the code before ``lr_schedule`` wrote them (discovery-config.json)
OLD_FIELDS = {
    "algorithm", "candidates", "top", "action_set", "lambda1", "lambda2", "earlier", "num_envs", "num_steps",
    "total_env_steps", "lr", "alpha", "eval_games", "exact_scores", "seed",
}  # fmt: skip


def _as_written_before(out: Path) -> None:
    """Rewrite OUT/discovery-config.json as the code before ``lr_schedule`` wrote it, and drop the newest
    checkpoint, so that a resume trains the last updates again."""
    path = out / "discovery-config.json"
    data = json.loads(path.read_text())
    old = {k: v for k, v in data.items() if k in OLD_FIELDS}
    assert set(old) == OLD_FIELDS and set(data) - OLD_FIELDS == {"lr_schedule"}
    path.write_text(json.dumps(old, indent=2))
    newest = checkpoints(out / "run")[-1]
    newest.unlink()


def test_run_written_before_lr_schedule_resumes_with_linear_annealing(
    toy_discovery: tuple[Path, DiscoveryResult],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An interrupted run whose discovery-config.json has no ``lr_schedule`` resumes (CLI and library) with the
    linear annealing it ran with, and its config is written back with the field."""
    pool = toy_discovery[0].parent / "toy-pool"
    for how in ("cli", "library"):
        out = tmp_path / how
        shutil.copytree(toy_discovery[0], out)
        _as_written_before(out)
        last = int(checkpoints(out / "run")[-1].stem.split("-")[1])
        _, run_config = read_run_config(out / "run")
        n, lr = run_config.num_updates, run_config.lr
        seen = _learning_rates(monkeypatch)
        if how == "cli":
            argv = [
                "discover",
                "--pool",
                str(pool),
                "--out",
                str(out),
                "--resume",
                "--threads",
                "1",
                "--json",
            ]
            assert main(argv) == 0, capsys.readouterr().err
            capsys.readouterr()
        else:
            saved = json.loads((out / "discovery-config.json").read_text())
            discover(
                load_pool(pool), DeepDiscoveryConfig.from_json(saved), out, resume_run=True, progress=False
            )
        assert seen == pytest.approx([lr * (1 - u / n) for u in range(last, n)], rel=1e-12, abs=0)
        assert json.loads((out / "discovery-config.json").read_text())["lr_schedule"] == "linear"
        monkeypatch.undo()


def test_resume_refuses_another_schedule_for_a_run_written_before_it(
    toy_discovery: tuple[Path, DiscoveryResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "old"
    shutil.copytree(toy_discovery[0], out)
    _as_written_before(out)
    pool = toy_discovery[0].parent / "toy-pool"
    argv = ["discover", "--pool", str(pool), "--out", str(out), "--resume", "--lr-schedule", "constant"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lr-schedule = 'constant' (the run's: 'linear')" in err[0], err


def _fake_pool(folder: Path, env: str, policies: int) -> Path:
    folder.mkdir()
    entries = [{"seed": s, "file": f"policies/seed-{s}.safetensors"} for s in range(policies)]
    (folder / "pool.json").write_text(json.dumps({"env": env, "policies": entries}))
    return folder


def test_cli_defaults_paper_resolves_the_preset_per_pool(tmp_path: Path) -> None:
    """--defaults paper: Appendix A's values for the pool's env, 1024 Hanabi games per policy phi trains on
    (half the pool, or all of it beside --held-out); options given override them; refused on tabular pools."""
    hanabi = str(_fake_pool(tmp_path / "hanabi", "hanabi", 5))
    held = str(_fake_pool(tmp_path / "held", "hanabi", 2))
    cfg = DiscoverOptions(pool=hanabi, defaults="paper", algorithm="sp-max-reg").config("hanabi")
    assert cfg == paper_discovery_config("hanabi", policies=3, algorithm="sp-max-reg")
    assert cfg.num_envs == 3 * HANABI["envs_per_policy"] and cfg.lambda1 == HANABI["lambda1"]
    opts = DiscoverOptions(pool=hanabi, held_out=held, defaults="paper", lr=2e-5, num_envs=64)
    cfg = opts.config("hanabi")
    assert (cfg.num_envs, cfg.lr, cfg.total_env_steps) == (64, 2e-5, HANABI["total_env_steps"])
    cooked = str(_fake_pool(tmp_path / "cooked", "overcooked-v2", 4))
    cfg = DiscoverOptions(pool=cooked, defaults="paper", algorithm="xp-max").config("overcooked-v2")
    assert cfg == paper_discovery_config("overcooked-v2", algorithm="xp-max")
    cfg = DiscoverOptions(pool=cooked, lr_schedule="constant").config("overcooked-v2")
    assert (cfg.lr, cfg.lr_schedule, cfg.num_envs) == (1e-3, "constant", 128)  # CPU sizes, constant lr
    tabular = str(_fake_pool(tmp_path / "tab", "tabular:toy-coordination", 4))
    with pytest.raises(UsageError, match=r"--defaults paper.*tabular:toy-coordination"):
        DiscoverOptions(pool=tabular, defaults="paper")
