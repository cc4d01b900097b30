"""A discovery run's saved config (``OUT/discovery-config.json``): read by one reader (``read_saved_config``)
for ``discover``'s resume check and the CLI's ``--resume``; a run started with lambda_1 = 1 (accepted before the
paper's range [0, 1) was enforced) resumes with it and one warning line; and the CLI's paper sizing
(``--defaults paper``: Hanabi's 1024 games per training policy) follows the run's split of the pool."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

import ers_deep.discovery.config as config_module
import ers_deep.discovery.run as run_module
from ers_deep.cli import main
from ers_deep.cli.discover import DiscoverOptions
from ers_deep.discovery import DeepDiscoveryConfig, DiscoveryNet, discover, paper_discovery_config
from ers_deep.discovery.config import FILLED_IN, read_saved_config, training_count
from ers_deep.discovery.run import split_policies
from ers_deep.pools import load_pool
from ers_deep.train.run import checkpoints
from ers_exact.util.options import UsageError

#: a discovery-config.json as the code before [0, 1) was enforced could write it (``--lambda1 1``), before
#: ``lr_schedule`` existed
OLD_RUN = {
    "algorithm": "sp-max-reg", "candidates": 2, "top": 1, "action_set": "transpositions", "lambda1": 1.0,
    "lambda2": 0.01, "earlier": None, "num_envs": 256, "num_steps": 4, "total_env_steps": 10_240, "lr": 0.01,
    "alpha": None, "eval_games": 300, "exact_scores": True, "seed": 0,
}  # fmt: skip


def test_saved_lambda1_of_1_loads_with_one_warning() -> None:
    """from_json keeps lambda_1 = 1 (the run must continue as it started) and warns once, in one line; a new
    config still refuses it, and a value never accepted (1.5) is refused from a file too."""
    with pytest.warns(UserWarning) as caught:
        config = DeepDiscoveryConfig.from_json(dict(OLD_RUN))
    assert config.lambda1 == 1.0 and config.lr_schedule == FILLED_IN["lr_schedule"]
    assert len(caught) == 1
    message = str(caught[0].message)
    assert len(message.splitlines()) == 1 and "lambda1 = 1.0 is outside the paper's range [0, 1)" in message
    assert config.to_json() == {**FILLED_IN, **OLD_RUN}  # written back unchanged
    first = config.replace(algorithm="sp-max", seed=1)  # the sp-max run sp-max-reg starts with
    assert (first.lambda1, first.algorithm) == (1.0, "sp-max")
    with pytest.raises(UsageError, match=r"lambda1 = 1\.0: must be in \[0, 1\)"):
        DeepDiscoveryConfig(**{**OLD_RUN, "lambda1": 1.0})
    with pytest.raises(UsageError, match=r"lambda1 = 1\.0: must be in \[0, 1\)"):
        DeepDiscoveryConfig(lambda1=0.5).replace(lambda1=1.0)
    with pytest.raises(UsageError, match=r"lambda1 = 1\.5: must be in \[0, 1\]"):
        DeepDiscoveryConfig.from_json({**OLD_RUN, "lambda1": 1.5})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DeepDiscoveryConfig.from_json({**OLD_RUN, "lambda1": 0.5}).lambda1 == 0.5  # no warning


def test_resume_check_and_cli_read_through_from_json(
    toy_pool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """discover's resume check and the CLI's --resume read OUT/discovery-config.json through one reader
    (``read_saved_config``, hence ``DeepDiscoveryConfig.from_json``, which fills in fields added later), so a
    field added to it cannot be missed by either (each merged FILLED_IN itself, never calling from_json)."""
    assert read_saved_config(tmp_path) is None
    saved = {**OLD_RUN, "lambda1": 0.5}
    (tmp_path / "discovery-config.json").write_text(json.dumps(saved))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")  # a run to resume: the check comes before it is read
    given = DeepDiscoveryConfig.from_json({**saved, "seed": 7})
    read: list[dict[str, Any]] = []
    original = DeepDiscoveryConfig.from_json.__func__  # type: ignore[attr-defined]

    def spy(
        cls: type[DeepDiscoveryConfig], data: dict[str, Any], *, warn: bool = True
    ) -> DeepDiscoveryConfig:
        read.append(dict(data))
        return original(cls, data, warn=warn)  # type: ignore[no-any-return]

    monkeypatch.setattr(DeepDiscoveryConfig, "from_json", classmethod(spy))
    assert read_saved_config(tmp_path) == DeepDiscoveryConfig(**{**FILLED_IN, **saved})
    assert read == [saved]
    with pytest.raises(UsageError, match=r"seed = 7 \(the run's: 0\)"):
        discover(load_pool(toy_pool), given, tmp_path, resume_run=True, progress=False)
    assert read == [saved, saved]
    argv = ["discover", "--pool", str(toy_pool), "--out", str(tmp_path), "--resume", "--seed", "7"]
    assert main(argv) == 2
    assert "seed = 7 (the run's: 0)" in capsys.readouterr().err
    assert read == [saved, saved, saved]


def test_resume_of_a_run_started_with_lambda1_1(
    toy_pool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An interrupted sp-max-reg run whose discovery-config.json (and its earlier sp-max run's) holds
    lambda1 = 1.0 resumes through the CLI: exit 0, exactly one warning line on stderr, the composition
    probability of the resumed learner is 1.0 and the config is written back with it."""
    out = tmp_path / "reg"
    start = DeepDiscoveryConfig(**{**OLD_RUN, "lambda1": 0.5})
    discover(load_pool(toy_pool), start, out, progress=False)
    for folder in (out, out / "earlier"):  # as the old code wrote a run started with --lambda1 1
        path = folder / "discovery-config.json"
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "lambda1": 1.0}))
    checkpoints(out / "run")[-1].unlink()
    compose: list[float] = []
    init = DiscoveryNet.__init__

    def record(self: DiscoveryNet, *args: Any, **kw: Any) -> None:
        compose.append(kw["compose_prob"])
        init(self, *args, **kw)

    monkeypatch.setattr(DiscoveryNet, "__init__", record)
    argv = ["discover", "--pool", str(toy_pool), "--out", str(out), "--resume", "--threads", "1", "--json"]
    assert main(argv) == 0, capsys.readouterr().err
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lambda1 = 1.0 is outside the paper's range [0, 1)" in err[0], err
    assert compose and compose[-1] == 1.0  # the sp-max-reg learner composes every rollout, as it started
    for folder in (out, out / "earlier"):
        assert json.loads((folder / "discovery-config.json").read_text())["lambda1"] == 1.0


def _fake_pool(folder: Path, env: str, policies: int) -> Path:
    folder.mkdir(parents=True)
    entries = [{"seed": s, "file": f"policies/seed-{s}.safetensors"} for s in range(policies)]
    (folder / "pool.json").write_text(json.dumps({"env": env, "policies": entries}))
    return folder


class _Pool:
    """What ``split_policies`` reads of a pool: its policies (here their seeds) and its path."""

    def __init__(self, n: int) -> None:
        self.policies = list(range(n))
        self.path = Path("pool")


def _cli_sizing(tmp_path: Path, n: int) -> int:
    pool = str(_fake_pool(tmp_path / f"hanabi-{n}", "hanabi", n))
    return DiscoverOptions(pool=pool, defaults="paper").config("hanabi").num_envs


def test_cli_paper_sizing_follows_the_runs_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--defaults paper sizes Hanabi's games as 1024 per policy the run trains on: the length of the training
    side of ``split_policies``, for pools of 2-7; and after the split changes (``training_count`` patched to
    train on all but one policy) both the run's split and the CLI's sizing follow it."""
    for n in range(2, 8):
        trained, held = split_policies(_Pool(n), None, "sp-max")  # type: ignore[arg-type]
        assert len(trained) == -(-n // 2) and len(trained) + len(held) == n  # ceil(n / 2), the rest held out
        assert _cli_sizing(tmp_path, n) == 1024 * len(trained)
    assert training_count(5) == 3
    monkeypatch.setattr(config_module, "training_count", lambda n: n - 1)
    monkeypatch.setattr(run_module, "training_count", lambda n: n - 1)
    trained, held = split_policies(_Pool(5), None, "sp-max")  # type: ignore[arg-type]
    assert (len(trained), len(held)) == (4, 1)
    assert _cli_sizing(tmp_path / "patched", 5) == 1024 * 4


def test_paper_preset_says_overcooked_phi_a_is_not_the_papers() -> None:
    """Appendix A: on Overcooked V2 "phi_{A,theta} is a learned affine map"; ers's candidates keep a fixed phi_A
    (``action_candidates``). The preset's docstring and the README's side-by-side table say so."""
    doc = " ".join((paper_discovery_config.__doc__ or "").split())
    assert '"is a learned affine map"' in doc and "action_candidates" in doc
    readme = (Path(__file__).parents[3] / "packages" / "ers-deep" / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| phi_A")]
    assert len(rows) == 1 and '"a learned affine map"' in rows[0] and "action_candidates" in rows[0], rows
