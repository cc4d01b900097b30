"""Run directories, resume after a real SIGKILL, and checkpoints that refuse damaged files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from ers_deep.train import checkpoint as ck
from ers_deep.train.checkpoint import CheckpointError, load_checkpoint, read_metadata, save_checkpoint
from ers_deep.train.run import checkpoints, latest_checkpoint, read_metrics, resume
from tests.deep.threads import single_thread

CONFIG = {
    "env": "hanabi",
    "hanabi_preset": "Hanabi-Very-Small",
    "num_envs": 8,
    "num_steps": 8,
    "minibatches": 2,
    "seeds": [0, 5],
    "total_env_steps": 8 * 8 * 14,
    "checkpoint_every": 2,
    "keep_checkpoints": 2,
    "net": {"kind": "mlp", "hidden": 32},
}

SCRIPT = textwrap.dedent("""
    import json, sys, time, torch
    from ers_deep.train.config import TrainConfig
    from ers_deep.train.run import train
    torch.set_num_threads(1)
    cfg = TrainConfig.from_json(json.loads(sys.argv[2]))
    train(cfg, sys.argv[1], on_update=lambda m: time.sleep(float(sys.argv[3])))
""")


def _start(run_dir: Path, delay: float) -> subprocess.Popen[bytes]:
    full = {**__import__("ers_deep.train.config", fromlist=["TrainConfig"]).TrainConfig().to_json(), **CONFIG}
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(run_dir), json.dumps(full), str(delay)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _resume_one_thread(run_dir: Path):  # the child processes train on one thread
    with single_thread():  # restores the thread count that resume(threads=1) sets
        return resume(run_dir, threads=1)


def _curve(run_dir: Path) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k != "seconds"} for row in read_metrics(run_dir)]


def test_resume_after_sigkill_gives_the_uninterrupted_curve(tmp_path: Path) -> None:
    full, killed = tmp_path / "full", tmp_path / "killed"
    proc = _start(full, 0.0)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode() if proc.stderr else ""
    proc = _start(killed, 0.15)
    deadline = time.time() + 300
    while time.time() < deadline:  # kill between checkpoints, after a few updates
        if (killed / "metrics.csv").exists() and len(read_metrics(killed)) >= 2 * 7:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    partial = len(read_metrics(killed))
    assert partial < 2 * 14
    present = [p.name for p in checkpoints(killed)]
    learner, summary = _resume_one_thread(killed)
    assert summary["finished"] and learner.update == 14
    got, want = _curve(killed), _curve(full)
    assert got == want, _first_difference(got, want, partial, present)  # bit-identical, row for row
    assert len(checkpoints(killed)) == 2


def _first_difference(
    got: list[dict[str, str]], want: list[dict[str, str]], partial: int, present: list[str]
) -> str:
    """Where a resumed curve first differs, and what the kill left (rows, checkpoints): a row of an update after
    the checkpoint resumed from was computed again in this process, an earlier one by the killed process."""
    for k, (a, b) in enumerate(zip(got, want)):
        cols = [c for c in b if a.get(c) != b[c]]
        if cols:
            return (
                f"row {k} (update {b['update']}, seed {b['seed']}) differs in {cols}: {[a.get(c) for c in cols]} "
                f"against {[b[c] for c in cols]}; the kill left {partial} rows and checkpoints {present}"
            )
    return f"{len(got)} rows against {len(want)}; the kill left {partial} rows and checkpoints {present}"


def _small_checkpoint(path: Path) -> dict[str, torch.Tensor]:
    tensors = {"w": torch.randn(4, 3), "step": torch.tensor(3.0), "rng": torch.Generator().get_state()}
    save_checkpoint(path, tensors, {"counters": {"update": 1}})
    return tensors


def test_checkpoint_round_trip_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    tensors = _small_checkpoint(path)
    loaded, meta = load_checkpoint(path)
    assert meta["counters"] == {"update": 1} and read_metadata(path)["sha256"] == meta["sha256"]
    assert all(torch.equal(loaded[k], v) for k, v in tensors.items())


@pytest.mark.parametrize(
    "damage", ["truncate-body", "truncate-header", "flip-byte", "garbage", "empty", "missing"]
)
def test_damaged_checkpoint_is_refused_naming_the_file(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "b.safetensors"
    _small_checkpoint(path)
    data = path.read_bytes()
    if damage == "truncate-body":
        path.write_bytes(data[:-7])
    elif damage == "truncate-header":
        path.write_bytes(data[:20])
    elif damage == "flip-byte":
        path.write_bytes(data[:-3] + bytes([data[-3] ^ 0x55]) + data[-2:])
    elif damage == "garbage":
        path.write_bytes(b"\x80\x04K\x01." * 10)  # a pickle, never unpickled
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
    with pytest.raises(CheckpointError, match=str(path)):
        load_checkpoint(path)


def test_crash_mid_write_leaves_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.safetensors"
    tensors = _small_checkpoint(path)

    def crash(fd: int) -> None:
        raise OSError("disk died during fsync")

    monkeypatch.setattr(ck.os, "fsync", crash)
    with pytest.raises(OSError, match="disk died"):
        save_checkpoint(path, {"w": torch.zeros(4, 3)}, {"counters": {"update": 2}})
    monkeypatch.undo()
    loaded, meta = load_checkpoint(path)
    assert meta["counters"]["update"] == 1 and torch.equal(loaded["w"], tensors["w"])
    assert [p.name for p in tmp_path.iterdir()] == ["c.safetensors"]  # no temporary file left


@pytest.mark.slow  # ~12 s; tests/test_cli_inputs.py resumes past a damaged checkpoint in ~2 s
def test_resume_falls_back_past_a_damaged_checkpoint(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _start(run, 0.0)
    assert proc.wait(timeout=300) == 0
    newest = latest_checkpoint(run)
    assert newest is not None
    newest.write_bytes(newest.read_bytes()[:100])
    learner, summary = _resume_one_thread(run)  # restarts from the older checkpoint and re-runs the rest
    assert summary["finished"] and learner.update == 14
