"""Pools: seeds trained together, frozen into verified policy files, self-play scores, exact checks."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ers_deep.pools import PoolError, load_policy, load_pool, train_pool
from ers_deep.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ers_deep.train.config import paper_config
from ers_deep.train.ippo import Learner
from ers_exact.interface import file_sha256
from tests.cli_helpers import assert_refused


@pytest.fixture(scope="module")
def toy_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pools") / "toy"
    cfg = paper_config(
        "tabular:toy-coordination",
        num_envs=256,
        seeds=(0, 4),
        total_env_steps=256 * 2 * 15,
        advantage="exact",
    )
    train_pool(cfg, out, eval_games=2000)
    return out


def test_pool_layout_and_scores(toy_pool: Path) -> None:
    info = json.loads((toy_pool / "pool.json").read_text())
    assert info["seeds"] == [0, 4] and info["alpha"] == 0.25
    for p in info["policies"]:
        assert (toy_pool / p["file"]).is_file()
        sp, ex = p["self_play"], p["exact"]
        assert abs(sp["mean"] - ex["J"]) < 5 * sp["se"]  # sampled self-play agrees with the exact J
        assert 0 <= ex["residual"] < 1 and ex["fixed_point"]["residual"] < 1e-9  # convergence: test_exact.py
    pool = load_pool(toy_pool)
    assert [p.seed for p in pool.policies] == [0, 4] and pool.name == "toy"


def test_the_recorded_digest_is_of_the_bytes_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pool.json's sha256 of each policy equals its file's, taken of the bytes written, not of the file read back
    (``file_sha256`` reread every policy file just written)."""
    import ers_deep.pools as pools
    from ers_exact.util import files

    def reread(path: object) -> str:
        raise AssertionError(f"{path} read back to hash it")

    monkeypatch.setattr(files, "file_sha256", reread)
    monkeypatch.setattr(pools, "file_sha256", reread, raising=False)
    cfg = paper_config("tabular:toy-coordination", num_envs=4, seeds=(1, 2), num_steps=4, total_env_steps=16)
    info = train_pool(cfg, tmp_path / "pool", eval_games=2)
    monkeypatch.undo()
    for entry in info["policies"]:
        assert entry["sha256"] == file_sha256(tmp_path / "pool" / entry["file"])
    assert [p.seed for p in load_pool(tmp_path / "pool").policies] == [1, 2]  # load_pool checks the digests


def test_frozen_policy_equals_its_seed_slice(toy_pool: Path) -> None:
    pol = load_policy(toy_pool / "policies" / "seed-4.safetensors")
    learner = Learner(pol.config)
    learner.load_state_tensors(*_last_checkpoint(toy_pool))
    obs = torch.eye(10).view(1, 1, 10, 10)
    first = torch.ones(1, 1, 10, dtype=torch.bool)
    pooled, _, _ = learner.net(
        obs.expand(2, 1, 10, 10), first.expand(2, 1, 10), learner.net.initial_state(10)
    )
    single, _, _ = pol.net(obs, first, pol.net.initial_state(10))
    assert torch.allclose(pooled[1], single[0])


def _last_checkpoint(pool: Path):  # type: ignore[no-untyped-def]
    from ers_deep.train.checkpoint import load_checkpoint
    from ers_deep.train.run import latest_checkpoint

    tensors, meta = load_checkpoint(latest_checkpoint(pool / "run"))
    return tensors, meta["counters"]


def test_damaged_policy_and_missing_pool(toy_pool: Path, tmp_path: Path) -> None:
    bad = tmp_path / "seed-0.safetensors"
    bad.write_bytes((toy_pool / "policies" / "seed-0.safetensors").read_bytes()[:-10])
    with pytest.raises(CheckpointError, match=str(bad)):
        load_policy(bad)
    with pytest.raises(PoolError, match="not a pool"):
        load_pool(tmp_path)
    with pytest.raises(PoolError, match="already holds a pool"):
        train_pool(paper_config("tabular:toy-coordination"), toy_pool)


def _rewrite_policy(src: Path, dst: Path, edit: str) -> None:
    """``src`` saved as ``dst`` with one metadata edit and a valid digest (as ``save_checkpoint`` writes it)."""
    tensors, meta = load_checkpoint(src)
    meta = {k: v for k, v in meta.items() if k not in ("format", "sha256")}
    if edit == "num_actions":
        meta["num_actions"] += 1
    elif edit == "obs_shape":
        meta["obs_shape"] = [meta["obs_shape"][0] + 1]
    elif edit == "config-field":
        meta["config"] = {**meta["config"], "num_envs": "many"}
    elif edit.startswith("device="):  # trained elsewhere, e.g. on CUDA
        meta["config"] = {**meta["config"], "device": edit.removeprefix("device=")}
    else:  # no-KEY
        del meta[edit.removeprefix("no-")]
    save_checkpoint(dst, tensors, meta)


#: edit of a policy file's metadata -> what the one-line CheckpointError names
EDITS = {
    "num_actions": "num_actions 3",
    "obs_shape": "obs_shape [11]",
    "config-field": "'config' is not a training config",
    "no-config": "lacks 'config'",
    "no-seed": "lacks 'seed'",
    "no-num_actions": "lacks 'num_actions'",
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_policy_metadata_that_does_not_fit_is_a_checkpoint_error(
    toy_pool: Path, tmp_path: Path, edit: str
) -> None:
    """A valid digest over wrong metadata (once a KeyError, or load_state_dict's RuntimeError) is refused in one
    line naming the file and what is wrong."""
    bad = tmp_path / "seed-0.safetensors"
    _rewrite_policy(toy_pool / "policies" / "seed-0.safetensors", bad, edit)
    with pytest.raises(CheckpointError) as caught:
        load_policy(bad)
    message = str(caught.value)
    assert message.startswith(f"{bad}: ") and EDITS[edit] in message and "\n" not in message


def test_crossplay_of_a_pool_with_such_a_policy_is_one_line(
    toy_pool: Path, tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    folder = tmp_path / "toy"
    shutil.copytree(toy_pool, folder, ignore=shutil.ignore_patterns("run"))
    file = folder / "policies" / "seed-4.safetensors"
    _rewrite_policy(file, file, "num_actions")
    _record_digests(folder, None)  # as written before pool.json recorded them (else: refused by the digest)
    code, out, err = deep("crossplay", str(folder), "--games", "4", "--out", str(tmp_path / "xp"))
    assert_refused("ers-deep", code, err, str(file), "num_actions 3")
    assert out == ""


def _pool_trained_on(toy_pool: Path, folder: Path, device: str) -> Path:
    """A copy of the toy pool whose policy files record ``device`` as their training device."""
    shutil.copytree(toy_pool, folder, ignore=shutil.ignore_patterns("run"))
    for file in (folder / "policies").glob("*.safetensors"):
        _rewrite_policy(file, file, f"device={device}")
    _record_digests(folder, file_sha256)
    return folder


def _record_digests(folder: Path, sha256: Callable[[Path], str] | None) -> None:
    """pool.json's ``sha256`` of each policy file: ``sha256`` of the file, or none (a pool written before)."""
    info = json.loads((folder / "pool.json").read_text())
    for entry in info["policies"]:
        entry.pop("sha256", None)
        if sha256 is not None:
            entry["sha256"] = sha256(folder / entry["file"])
    (folder / "pool.json").write_text(json.dumps(info))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
def test_a_pool_trained_on_cuda_reads_on_a_machine_without_one(
    toy_pool: Path, tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    """Pools trained on a GPU are read, cross-played and scored on a CPU machine (they raised at ``.to("cuda")``):
    each policy lands on its training device where the machine has it, else the CPU, and says so in its
    config; the games equal those of the CPU-trained pool."""
    gpu = _pool_trained_on(toy_pool, tmp_path / "gpu", "cuda")
    assert load_checkpoint(gpu / "policies" / "seed-0.safetensors")[1]["config"]["device"] == "cuda"
    pool = load_pool(gpu)
    assert {p.config.device for p in pool.policies} == {"cpu"}
    assert all(t.device.type == "cpu" for p in pool.policies for t in p.net.state_dict().values())
    code, _, err = deep("crossplay", str(gpu), "--games", "64", "--out", str(tmp_path / "xp-gpu"))
    assert code == 0, err
    code, _, err = deep("crossplay", str(toy_pool), "--games", "64", "--out", str(tmp_path / "xp-cpu"))
    assert code == 0, err
    read = lambda name: json.loads((tmp_path / name / "xp.json").read_text())  # noqa: E731
    assert read("xp-gpu")["matrix"]["mean"] == read("xp-cpu")["matrix"]["mean"]


def test_pools_on_two_devices_are_refused_by_name(toy_pool: Path, tmp_path: Path) -> None:
    """Cross-play plays every game on one device: policies loaded on two are refused, naming both and the way
    out (``--device``, ``load_pool(path, device=...)``), before any game."""
    from dataclasses import replace

    from ers_deep.crossplay import check_compatible, crossplay_matrix

    a, b = load_pool(toy_pool).policies
    elsewhere = replace(b, config=b.config.replace(device="meta"))
    with pytest.raises(PoolError, match=r"different devices \(cpu vs meta\).*--device"):
        check_compatible([a, elsewhere])
    with pytest.raises(PoolError, match="different devices"):
        crossplay_matrix([a], [elsewhere], 4)
    assert load_pool(toy_pool, "cpu").policies[0].config.device == "cpu"


def test_on_device_lets_cpu_only_switches_resolve_again() -> None:
    """A config resolved on a CPU with bfloat16 gradients and the int8 embedding (both CPU-only, refused on other
    devices) moves to CUDA with both back to "auto"; moving to the CPU keeps what it says."""
    from ers_deep.policies import on_device, usable_device

    cpu = paper_config("hanabi", bf16_gradients=True, int8_inputs=True)
    cuda = on_device(cpu, "cuda")
    assert (cuda.device, cuda.bf16_gradients, cuda.int8_inputs) == ("cuda", "auto", "auto")
    assert cuda.replace(device="cpu", bf16_gradients=True, int8_inputs=True) == cpu
    assert on_device(cpu, "cpu") is cpu
    assert usable_device("cpu") == "cpu"
    if not torch.cuda.is_available():
        assert usable_device("cuda") == usable_device("cuda:3") == "cpu"


def test_a_ray_task_trains_on_its_own_gpu() -> None:
    """Ray gives each seed's task one GPU (``num_gpus=1``), which the task sees as ``cuda``: a pool config on
    ``cuda:1`` would name a device the task does not have."""
    from ers_deep.pools import ray_task_device

    assert [ray_task_device(d) for d in ("cuda:1", "cuda", "cuda:0", "cpu")] == [
        "cuda",
        "cuda",
        "cuda",
        "cpu",
    ]
