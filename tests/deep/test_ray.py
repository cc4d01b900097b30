"""``train-sp --ray``: one Ray task per seed on a local Ray instance, gathered into a pool ``load_pool`` reads.

Skipped where ray (the ``ray`` extra of ers-deep) is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ers_deep.cli import main
from ers_deep.pools import RayError, load_pool, train_pool, train_pool_ray
from ers_deep.train.checkpoint import load_checkpoint
from ers_deep.train.config import paper_config
from tests.deep.threads import single_thread

ray = pytest.importorskip("ray")


def _config(seeds: tuple[int, ...]):  # type: ignore[no-untyped-def]
    return paper_config(
        "tabular:toy-coordination", num_envs=64, seeds=seeds, total_env_steps=64 * 2 * 3, advantage="exact"
    )


@pytest.mark.slow  # starts a local Ray instance (~12 s); test_cli_ray_errors is the default run's Ray test
def test_ray_pool_equals_one_seed_pools(tmp_path: Path) -> None:
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        info = train_pool_ray(_config((0, 4)), tmp_path / "rp", "local", eval_games=200, threads=1)
    finally:
        ray.shutdown()
    pool = load_pool(tmp_path / "rp")
    assert [p.seed for p in pool.policies] == [0, 4] and pool.name == "rp"
    assert json.loads((tmp_path / "rp" / "pool.json").read_text()) == info
    t = info["training"]
    assert t["finished"] and t["ray"]["tasks"] == 2
    assert (
        t["env_steps_per_seed"] == t["env_steps"] == 64 * 2 * 3
        and t["env_steps_all_seeds"] == 2 * t["env_steps"]
    )
    assert t["env_steps_per_s_all_seeds"] == t["env_steps_per_s"]
    # each seed equals the in-process pool of that seed alone (same thread count), bit for bit
    with single_thread():
        alone = train_pool(_config((4,)), tmp_path / "alone", eval_games=200)
    a, _ = load_checkpoint(tmp_path / "alone" / "policies" / "seed-4.safetensors")
    b, _ = load_checkpoint(tmp_path / "rp" / "policies" / "seed-4.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    entry = info["policies"][1]
    assert entry["self_play"] == alone["policies"][0]["self_play"]
    assert entry["exact"] == alone["policies"][0]["exact"]
    assert (tmp_path / "rp" / "runs" / "seed-4" / "run" / "metrics.csv").is_file()


def test_cli_ray_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RayError, match="cannot connect"):
        train_pool_ray(_config((0,)), tmp_path / "x", "127.0.0.1:1")
    args = ["train-sp", "--env", "tabular:toy-coordination", "--out", str(tmp_path / "y")]
    assert main([*args, "--ray", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--ray 127.0.0.1:1: cannot connect" in err and len(err.splitlines()) == 1
    assert main(["train-sp", "--resume", str(tmp_path), "--ray", "local"]) == 2  # no pool there


@pytest.mark.slow  # a local Ray instance (~12 s), three times
@pytest.mark.parametrize("command", ["train-sp", "train-op"])
def test_a_killed_ray_pool_resumes_to_the_uninterrupted_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """``train-sp --resume POOL --ray ADDRESS`` (``ray-run.json``, since 2026-12-07; a Ray pool could not be resumed
    before), and ``train-op``'s (its symmetries' source recorded too): a pool killed with one seed's run cut back to
    an earlier checkpoint and the other seed's run never started ends with the policies, scores and pool.json
    entries of the uninterrupted pool."""
    from ers_deep.other_play import train_op_pool_ray

    config = _config((0, 4)).replace(total_env_steps=64 * 2 * 6, checkpoint_every=2)
    if command == "train-op":
        config = config.replace(advantage="gae")  # other-play's update
    full, cut = tmp_path / "full", tmp_path / "cut"
    for out in (full, cut):
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
        try:
            if command == "train-sp":
                train_pool_ray(config, out, "local", eval_games=100, threads=1)
            else:
                train_op_pool_ray(config, "none", out, "local", eval_games=100, threads=1)
        finally:
            ray.shutdown()
    # as a kill leaves it: no gathered pool, seed 0 at an earlier checkpoint, seed 4 never run
    import shutil

    for name in ("pool.json", "policies"):
        shutil.rmtree(cut / name) if (cut / name).is_dir() else (cut / name).unlink()
    seed0 = cut / "runs" / "seed-0"
    (seed0 / "pool.json").unlink()
    shutil.rmtree(seed0 / "policies")
    checkpoints = sorted((seed0 / "run" / "checkpoints").glob("*.safetensors"))
    assert len(checkpoints) >= 2
    checkpoints[-1].unlink()
    shutil.rmtree(cut / "runs" / "seed-4")
    other = "train-op" if command == "train-sp" else "train-sp"
    assert main([other, "--resume", str(cut), "--ray", "local"]) == 2  # the other command's pool
    assert f"a Ray pool of ers-deep {command}" in capsys.readouterr().err
    assert main([command, "--resume", str(cut), "--ray", "local", "--threads", "1", "--json"]) == 0
    capsys.readouterr()
    a, b = (json.loads((out / "pool.json").read_text()) for out in (full, cut))
    strip = ("seconds", "env_steps_per_s", "figure")
    for ea, eb in zip(a["policies"], b["policies"], strict=True):
        assert ea["self_play"] == eb["self_play"] and ea["exact"] == eb["exact"] and ea["seed"] == eb["seed"]
        assert ea.get("other_play") == eb.get("other_play") and (command == "train-sp") == (
            "other_play" not in ea
        )
    assert {k: v for k, v in a.items() if k not in ("training", *strip)} == {
        k: v for k, v in b.items() if k not in ("training", *strip)
    }
    for seed in (0, 4):
        x, _ = load_checkpoint(full / "policies" / f"seed-{seed}.safetensors")
        y, _ = load_checkpoint(cut / "policies" / f"seed-{seed}.safetensors")
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
