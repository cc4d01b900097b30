"""Pools and discovery outputs may come from strangers: what their JSON names is read only inside their folder,
only from regular files of bounded size, checked against the digests and seeds they record, and a policy's
metadata cannot make the reader allocate a network its file does not hold. Every refusal is one
``InputError`` (exit 2 at the CLI) naming the file; nothing hangs, nothing runs out of memory. Pools written
before pool.json recorded each policy's ``sha256`` still load."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from ers_deep.discovery import DeepDiscoveryConfig, discover, load_symmetries
from ers_deep.pools import load_pool, train_pool
from ers_deep.train.checkpoint import load_checkpoint, save_checkpoint
from ers_deep.train.config import paper_config
from ers_exact.interface import file_sha256
from ers_exact.util.errors import InputError
from tests.cli_helpers import assert_refused
from tests.deep.threads import single_thread

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny pool of two seeds (written by this code: its pool.json records each policy's sha256), one of
    seed 0 trained otherwise (lr 0.1), and a discovery run of the first (one candidate kept)."""
    root = tmp_path_factory.mktemp("untrusted")
    small: dict[str, Any] = dict(num_envs=16, num_steps=8, total_env_steps=256)
    with single_thread():
        train_pool(
            paper_config("tabular:toy-coordination", seeds=(0, 1), **small), root / "pool", eval_games=10
        )
        other = paper_config("tabular:toy-coordination", seeds=(0,), lr=0.1, **small)
        train_pool(other, root / "other", eval_games=10)
        disc = DeepDiscoveryConfig(
            candidates=1, top=1, num_envs=4, num_steps=4, total_env_steps=64, eval_games=4
        )
        discover(root / "pool", disc, root / "disc", progress=False)
    return {"pool": root / "pool", "other": root / "other", "disc": root / "disc"}


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("run", "*.png"))
    return dst


def _edit(folder: Path, name: str, change: Callable[[dict[str, Any]], object]) -> None:
    data = json.loads((folder / name).read_text())
    change(data)
    (folder / name).write_text(json.dumps(data))


def _set_file(index: int, file: str) -> Callable[[dict[str, Any]], None]:
    def change(info: dict[str, Any]) -> None:
        info["policies"][index].update(file=file)
        info["policies"][index].pop("sha256", None)

    return change


def _refused(call: Callable[[], Any], *names: str) -> str:
    """``call`` refused with one InputError line naming ``names``."""
    with pytest.raises(InputError) as err:
        call()
    text = str(err.value)
    assert len(text.splitlines()) == 1, text
    for name in names:
        assert name in text, text
    return text


def _in_child(code: str, timeout: float = 90.0) -> str:
    """Run ``code`` in a fresh interpreter with its address space capped at 1.5 GiB above what it holds after
    the imports (so a reader that allocates without bound fails fast instead of starving the machine); its
    stdout. A child that hangs is killed at ``timeout`` (a failure)."""
    prelude = (
        "import os, resource, json, sys, time\n"
        "import torch\n"
        "from ers_deep.pools import load_pool, load_policy\n"
        "from ers_deep.discovery import load_symmetries\n"
        "from ers_exact.util.errors import InputError\n"
        "torch.set_num_threads(1)\n"
        "size = int(open('/proc/self/statm').read().split()[0]) * os.sysconf('SC_PAGE_SIZE')\n"
        "resource.setrlimit(resource.RLIMIT_AS, (size + (3 << 29), size + (3 << 29)))\n"
        "def refuse(call):\n"
        "    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "    start = time.perf_counter()\n"
        "    try:\n"
        "        call()\n"
        "    except InputError as e:\n"
        "        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) * 1024\n"
        "        print(json.dumps({'refused': str(e), 'grew': grew, 's': time.perf_counter() - start}))\n"
        "    else:\n"
        "        print(json.dumps({'refused': None}))\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        check=False,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def _child_refusal(code: str) -> dict[str, Any]:
    out = json.loads(_in_child(code))
    assert out["refused"] is not None, "accepted"
    assert len(out["refused"].splitlines()) == 1, out
    return out


needs_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, FIFOs, /dev/zero")


# pool.json's policy files


def test_a_new_pool_records_each_policy_files_sha256(made: dict[str, Path]) -> None:
    info = json.loads((made["pool"] / "pool.json").read_text())
    for entry in info["policies"]:
        assert entry["sha256"] == file_sha256(made["pool"] / entry["file"])
    assert [p.seed for p in load_pool(made["pool"]).policies] == [0, 1]


def test_a_pool_written_before_the_digests_still_loads(made: dict[str, Path], tmp_path: Path) -> None:
    pool = _copy(made["pool"], tmp_path / "old")
    _edit(pool, "pool.json", lambda info: [p.pop("sha256") for p in info["policies"]])
    assert [p.seed for p in load_pool(pool).policies] == [0, 1]


@pytest.mark.parametrize("where", ["relative", "absolute", "link"])
def test_a_policy_file_outside_the_pool_is_refused(made: dict[str, Path], tmp_path: Path, where: str) -> None:
    """pool.json naming "../other/..." or an absolute path (or a link inside pointing out) read that file:
    crossplay showed two "seed-1" rows; now the pool is refused, naming pool.json and the file."""
    pool, foreign = _copy(made["pool"], tmp_path / "pool"), made["other"] / "policies" / "seed-0.safetensors"
    if where == "link":
        (pool / "policies" / "seed-0.safetensors").unlink()
        (pool / "policies" / "seed-0.safetensors").symlink_to(foreign)
        _edit(pool, "pool.json", _set_file(0, "policies/seed-0.safetensors"))
        _refused(lambda: load_pool(pool), "pool.json", "leads out")
        return
    name = os.path.relpath(foreign, pool) if where == "relative" else str(foreign)
    assert (".." in name) == (where == "relative")
    _edit(pool, "pool.json", _set_file(0, name))
    _refused(lambda: load_pool(pool), "pool.json", name)


def test_the_cli_refuses_a_traversing_pool_in_one_line(
    made: dict[str, Path], tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    pool = _copy(made["pool"], tmp_path / "pool")
    _edit(pool, "pool.json", _set_file(1, "../other/policies/seed-0.safetensors"))
    shutil.copytree(made["other"], tmp_path / "other")
    code, _, err = deep(
        "crossplay", str(pool), "--games", "2", "--out", str(tmp_path / "xp"), "--threads", "1"
    )
    assert_refused("ers-deep", code, err, "pool.json", "../other/policies/seed-0.safetensors")
    assert not (tmp_path / "xp").exists()


@needs_linux
def test_dev_zero_is_refused_without_reading_it(made: dict[str, Path], tmp_path: Path) -> None:
    pool = _copy(made["pool"], tmp_path / "pool")
    _edit(pool, "pool.json", _set_file(0, "/dev/zero"))
    out = _child_refusal(f"refuse(lambda: load_pool({str(pool)!r}))")  # read until memory ran out
    assert "pool.json" in out["refused"] and "'/dev/zero'" in out["refused"], out
    out = _child_refusal("refuse(lambda: load_policy('/dev/zero'))")  # the policy reader itself
    assert "/dev/zero" in out["refused"] and "not a regular file" in out["refused"], out


@needs_linux
def test_a_fifo_is_refused_without_waiting_on_it(made: dict[str, Path], tmp_path: Path) -> None:
    pool = _copy(made["pool"], tmp_path / "pool")
    file = pool / "policies" / "seed-0.safetensors"
    file.unlink()
    os.mkfifo(file)
    out = _child_refusal(f"refuse(lambda: load_pool({str(pool)!r}))")
    assert str(file) in out["refused"] and "not a regular file" in out["refused"], out


def test_a_folder_in_place_of_a_policy_file_is_refused(made: dict[str, Path], tmp_path: Path) -> None:
    pool = _copy(made["pool"], tmp_path / "pool")
    _edit(pool, "pool.json", _set_file(0, "policies"))
    _refused(lambda: load_pool(pool), str(pool / "policies"), "not a regular file")


@needs_linux
def test_metadata_describing_a_huge_network_is_refused_before_allocating_it(tmp_path: Path) -> None:
    """A 1.7 KB policy whose (re-digested) metadata says obs_shape [25000000] built a 300 MB net (the audit's
    [250000, 1000]: gigabytes) before comparing it with its tensors; now the shapes are compared first."""
    tensors, meta = load_checkpoint(_one_policy(tmp_path))
    save_checkpoint(tmp_path / "huge.safetensors", tensors, {**meta, "obs_shape": [25_000_000]})
    save_checkpoint(tmp_path / "huger.safetensors", tensors, {**meta, "obs_shape": [250_000, 1000]})
    for name in ("huge", "huger"):
        out = _child_refusal(f"refuse(lambda: load_policy({str(tmp_path / name)!r} + '.safetensors'))")
        assert "has shape" in out["refused"] and f"{name}.safetensors" in out["refused"], out
        assert out["grew"] < 100 * 2**20 and out["s"] < 10, out


def _one_policy(tmp_path: Path) -> Path:
    with single_thread():
        cfg = paper_config(
            "tabular:toy-coordination", seeds=(3,), num_envs=4, num_steps=4, total_env_steps=16
        )
        train_pool(cfg, tmp_path / "one", eval_games=2)
    return tmp_path / "one" / "policies" / "seed-3.safetensors"


# policy files replaced by other valid ones


def test_a_swapped_policy_file_is_refused_by_its_digest(made: dict[str, Path], tmp_path: Path) -> None:
    """Seed 0's file replaced by another run's seed 0 (lr 0.1): a valid policy of the same seed and env."""
    pool = _copy(made["pool"], tmp_path / "pool")
    shutil.copy(made["other"] / "policies" / "seed-0.safetensors", pool / "policies" / "seed-0.safetensors")
    _refused(lambda: load_pool(pool), "seed-0.safetensors", "SHA-256", "pool.json")


def test_without_digests_a_swapped_seed_or_config_is_refused(made: dict[str, Path], tmp_path: Path) -> None:
    """A pool written before the digests: each policy's own seed and config are still checked against its
    entry and pool.json's config (the audit's mix: seed-0's file held seed 7 trained with alpha 0.9)."""
    pool = _copy(made["pool"], tmp_path / "pool")
    _edit(pool, "pool.json", lambda info: [p.pop("sha256") for p in info["policies"]])
    files = pool / "policies"
    shutil.copy(made["other"] / "policies" / "seed-0.safetensors", files / "seed-0.safetensors")
    _refused(lambda: load_pool(pool), "seed-0.safetensors", "config", "lr")
    shutil.copy(made["pool"] / "policies" / "seed-1.safetensors", files / "seed-0.safetensors")
    _refused(lambda: load_pool(pool), "seed-0.safetensors", "seed 0", "seed 1")


def test_an_entry_digest_that_is_no_sha256_is_refused(made: dict[str, Path], tmp_path: Path) -> None:
    pool = _copy(made["pool"], tmp_path / "pool")
    _edit(pool, "pool.json", lambda info: info["policies"][0].update(sha256="abc"))
    _refused(lambda: load_pool(pool), "pool.json", "'abc'")


# discovery.json's checkpoints


def _disc(made: dict[str, Path], tmp_path: Path, **entry: Any) -> Path:
    out = _copy(made["disc"], tmp_path / "disc")
    _edit(out, "discovery.json", lambda data: data["transformations"][0].update(entry))
    return out


def test_discovery_checkpoints_outside_the_folder_are_refused(made: dict[str, Path], tmp_path: Path) -> None:
    policy = made["pool"] / "policies" / "seed-0.safetensors"
    sha = file_sha256(policy)
    for i, name in enumerate((str(policy), os.path.relpath(policy, tmp_path / "1" / "disc"))):
        out = _disc(made, tmp_path / str(i), checkpoint=name, sha256=sha)
        _refused(functools.partial(load_symmetries, out), "no file inside")


def test_a_policy_file_in_place_of_the_symmetries_is_refused(made: dict[str, Path], tmp_path: Path) -> None:
    """A policy file inside the folder, its digest recorded: read as symmetries, it failed on KeyError 'env'."""
    out = _copy(made["disc"], tmp_path / "disc")
    shutil.copy(made["pool"] / "policies" / "seed-0.safetensors", out / "policy.safetensors")
    sha = file_sha256(out / "policy.safetensors")
    _edit(
        out,
        "discovery.json",
        lambda d: d["transformations"][0].update(checkpoint="policy.safetensors", sha256=sha),
    )
    _refused(lambda: load_symmetries(out), "policy.safetensors", "not a symmetries file")


def test_a_key_naming_no_map_is_refused_in_one_line(
    made: dict[str, Path], tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    out = _disc(made, tmp_path, key="bogus/")
    _refused(lambda: load_symmetries(out), "symmetries.safetensors", "'bogus/obs/'")
    argv = ["--env", "tabular:toy-coordination", "--seeds", "0", "--total-steps", "16", "--num-envs", "4"]
    code, _, err = deep("train-op", *argv, "--symmetries", str(out), "--out", str(tmp_path / "op"))
    assert_refused("ers-deep", code, err, "symmetries.safetensors", "bogus/obs/")


@needs_linux
def test_a_symmetries_file_whose_map_shapes_would_take_gigabytes_is_refused(
    made: dict[str, Path], tmp_path: Path
) -> None:
    """weights.0 of shape [1, 100000, 1] (400 KB) made ObsMap allocate its identity layers: 100000^2 floats
    each (40 GB); the map's tensor shapes are checked first."""
    out = _copy(made["disc"], tmp_path / "disc")
    tensors, meta = load_checkpoint(out / "symmetries.safetensors")
    tensors["phi/0/obs/weights.0"] = torch.zeros(1, 100_000, 1)
    meta = {k: v for k, v in meta.items() if k not in ("format", "sha256")}
    save_checkpoint(out / "symmetries.safetensors", tensors, meta)
    sha = file_sha256(out / "symmetries.safetensors")
    _edit(out, "discovery.json", lambda d: [t.update(sha256=sha) for t in d["transformations"]])
    got = _child_refusal(f"refuse(lambda: load_symmetries({str(out)!r}))")
    assert "symmetries.safetensors" in got["refused"] and "observation map" in got["refused"], got
    assert got["grew"] < 100 * 2**20, got
