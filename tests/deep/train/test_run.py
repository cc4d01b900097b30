"""Run directories, resume after a real SIGKILL, and checkpoints that refuse damaged files."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from ers_deep.train import checkpoint as ck
from ers_deep.train.checkpoint import CheckpointError, load_checkpoint, read_metadata, save_checkpoint
from ers_deep.train.config import paper_config
from ers_deep.train.run import checkpoints, latest_checkpoint, read_metrics, resume, train
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


def test_an_edited_header_is_refused(tmp_path: Path) -> None:
    """The digest covers the metadata too: a counter edited in the header (still valid JSON) is refused like a
    flipped tensor byte (the first format left the header outside its digest)."""
    path = tmp_path / "h.safetensors"
    _small_checkpoint(path)
    data = path.read_bytes()
    assert data.count(b'update\\": 1') == 1
    path.write_bytes(data.replace(b'update\\": 1', b'update\\": 7'))
    assert read_metadata(path)["counters"] == {"update": 7}  # a readable header, edited
    with pytest.raises(CheckpointError, match=re.escape(f"{path}: checkpoint tensors or metadata")):
        load_checkpoint(path)


@pytest.mark.parametrize("change", ["shape", "dtype"])
def test_the_same_bytes_under_another_shape_or_dtype_are_refused(tmp_path: Path, change: str) -> None:
    """The digest covers each tensor's dtype and shape, not only its bytes: a file rewritten with one tensor's
    bytes kept but read as another shape ([4, 3] as [3, 4]) or dtype (float32 as int32), its recorded metadata
    and SHA-256 kept, is refused (a digest of the bytes alone passed both: a mutation run, 2026-12-08)."""
    from safetensors.torch import save as st_save

    path = tmp_path / "s.safetensors"
    tensors = _small_checkpoint(path)
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    metadata = json.loads(data[8 : 8 + n])["__metadata__"]
    w = tensors["w"].reshape(3, 4) if change == "shape" else tensors["w"].view(torch.int32)
    assert w.numpy().tobytes() == tensors["w"].numpy().tobytes()  # the same bytes
    path.write_bytes(st_save({**tensors, "w": w}, metadata=metadata))
    assert read_metadata(path)["sha256"] == json.loads(metadata["ers"])["sha256"]  # the record kept
    with pytest.raises(CheckpointError, match="do not match their recorded SHA-256"):
        load_checkpoint(path)


def test_a_header_nested_too_deep_is_refused_not_a_crash(tmp_path: Path) -> None:
    """A crafted safetensors header whose JSON nests 100,000 deep raised RecursionError (an internal error)."""
    path = tmp_path / "deep.safetensors"
    header = b"[" * 100_000 + b"]" * 100_000
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(CheckpointError, match="not an ers checkpoint"):
        read_metadata(path)


def test_a_first_format_checkpoint_still_loads(tmp_path: Path) -> None:
    """``ers-checkpoint/1`` files (a digest of the tensors only) load, their tensors still verified."""
    from safetensors.torch import save as st_save

    tensors = {"w": torch.randn(4, 3)}
    meta = {"format": "ers-checkpoint/1", "sha256": ck.digest(tensors), "counters": {"update": 3}}
    path = tmp_path / "old.safetensors"
    path.write_bytes(st_save(tensors, metadata={"ers": json.dumps(meta, sort_keys=True)}))
    loaded, got = load_checkpoint(path)
    assert got["counters"] == {"update": 3} and torch.equal(loaded["w"], tensors["w"])
    data = path.read_bytes()
    path.write_bytes(data[:-3] + bytes([data[-3] ^ 0x55]) + data[-2:])
    with pytest.raises(CheckpointError, match="tensors do not match"):
        load_checkpoint(path)


#: a tabular run of 8 updates (seconds), checkpoints at every second update
TINY = {
    "num_envs": 4,
    "num_steps": 4,
    "minibatches": 1,
    "seeds": (0, 1),
    "total_env_steps": 4 * 4 * 8,
    "checkpoint_every": 2,
    "keep_checkpoints": 2,
}


def _rewrite(path: Path, edit: Callable[[dict[str, torch.Tensor], dict[str, Any]], None]) -> None:
    """The checkpoint ``path`` written again after ``edit(tensors, metadata)``, with a valid digest."""
    tensors, meta = load_checkpoint(path)
    meta = {k: v for k, v in meta.items() if k not in ("format", "sha256")}
    edit(tensors, meta)
    save_checkpoint(path, tensors, meta)


def _no_counters(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    del meta["counters"]


def _other_net(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    for k, v in list(tensors.items()):
        if k.startswith("net/"):
            tensors[k] = torch.zeros(v.shape[0] + 1, *v.shape[1:], dtype=v.dtype)


@pytest.mark.parametrize("edit", [_no_counters, _other_net], ids=["no-counters", "other-net"])
def test_resume_skips_a_checkpoint_that_does_not_fit(
    tmp_path: Path,
    edit: Callable[[dict[str, torch.Tensor], dict[str, Any]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A verified checkpoint whose metadata lacks the counters, or whose tensors are another net's, is a
    ``CheckpointError`` naming it (it was a ``KeyError`` / ``RuntimeError``): resume falls back past it."""
    with single_thread():
        train(paper_config("tabular:toy-coordination", **TINY), tmp_path, max_updates=4)
        newest = latest_checkpoint(tmp_path)
        assert newest is not None and newest.name == "update-000004.safetensors"
        _rewrite(newest, edit)
        learner, _ = resume(tmp_path, max_updates=4)  # from update 2, updates 3 and 4 again
    assert learner.update == 4
    err = capsys.readouterr().err
    assert f"{newest}: " in err and "skipped" in err


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "before-the-record"])
def test_a_resumed_runs_seconds_count_the_whole_run(tmp_path: Path, recorded: bool) -> None:
    """``seconds`` and ``env_steps_per_s`` of a resumed run (pool.json's ``training``) count the whole run, its
    ``segment`` the resumed part (both once counted the resumed part only); a checkpoint written before the
    record counts the seconds column of metrics.csv up to it."""

    def nap(m: dict[str, Any]) -> None:
        time.sleep(0.05)

    with single_thread():
        train(paper_config("tabular:toy-coordination", **TINY), tmp_path, max_updates=4, on_update=nap)
        newest = latest_checkpoint(tmp_path)
        assert newest is not None
        before = read_metadata(newest)["counters"]["seconds"]
        if not recorded:
            _rewrite(newest, lambda tensors, meta: meta["counters"].pop("seconds"))
            before = sum(float(r["seconds"]) for r in read_metrics(tmp_path) if r["seed"] == "0")
        _, summary = resume(tmp_path, on_update=nap)
    segment = summary["segment"]
    assert segment["from_update"] == 4 and segment["seconds"] >= 4 * 0.05
    assert summary["seconds"] == pytest.approx(before + segment["seconds"])
    assert summary["seconds"] >= segment["seconds"] + (3 * 0.05 if recorded else 0.0)
    assert summary["env_steps_per_s"] == pytest.approx(summary["env_steps"] * 2 / summary["seconds"])
    assert segment["env_steps_per_s"] == pytest.approx(4 * 16 * 2 / segment["seconds"])


@pytest.mark.parametrize("tail", ["1", "11,176,0,0.5", "\n"], ids=["update-prefix", "cut-row", "blank-line"])
def test_a_row_cut_by_the_kill_is_dropped_on_resume(tmp_path: Path, tail: str) -> None:
    """A kill while metrics.csv's rows of update 11 are written (the buffer of many seeds' rows is flushed in
    parts) leaves a cut last line; resume from the checkpoint of update 10 drops it, though "1", the cut
    "11", reads as an update <= 10 (it was kept, and the pool's final returns then failed on its missing
    seed), and gives the uninterrupted run's rows."""
    config = paper_config("tabular:toy-coordination", **{**TINY, "total_env_steps": 4 * 4 * 12})
    with single_thread():
        train(config, tmp_path / "full")
        train(config, tmp_path / "killed", max_updates=10)
        with open(tmp_path / "killed" / "metrics.csv", "a", newline="") as f:
            f.write(tail)
        resume(tmp_path / "killed")
    got, want = _curve(tmp_path / "killed"), _curve(tmp_path / "full")
    assert all(None not in row.values() and None not in row for row in got)
    assert got == want


def test_resume_refuses_an_edited_config_naming_the_field(tmp_path: Path) -> None:
    """config.json edited after the run started (it was resumed with the edited values, silently): resume
    names each changed field; the unedited run resumes twice (its resumed checkpoints record the resolved
    ``cpu_products``, which is no change)."""
    from ers_deep.train.run import RunError

    with single_thread():
        train(paper_config("tabular:toy-coordination", **TINY), tmp_path, max_updates=2)
        resume(tmp_path, max_updates=4)
        text = (tmp_path / "config.json").read_text()
        info = json.loads(text)
        info["config"]["alpha"] = 0.5
        info["config"]["net"]["hidden"] = 3
        (tmp_path / "config.json").write_text(json.dumps(info))
        with pytest.raises(
            RunError,
            match=r"alpha = 0\.5 \(the checkpoint's: 0\.25\), net\.hidden = 3 \(the checkpoint's: 0\)",
        ) as e:
            resume(tmp_path)
        assert "update-000004.safetensors" in str(e.value)
        (tmp_path / "config.json").write_text(text)
        info = json.loads(text)  # how the run executes may change between segments (EXECUTION_FIELDS)
        info["config"] |= {"checkpoint_every": 3, "keep_checkpoints": 1, "update_mode": "eager"}
        (tmp_path / "config.json").write_text(json.dumps(info))
        learner, summary = resume(tmp_path)
    assert summary["finished"] and learner.update == 8
    assert [p.name for p in checkpoints(tmp_path)] == ["update-000008.safetensors"]


def test_a_resume_that_changes_the_envs_step_style_is_refused(tmp_path: Path) -> None:
    """``collect_mode`` may change between segments (EXECUTION_FIELDS) only where the env keeps its step style:
    a compiled or captured collection steps a branch-free env, whose random numbers come in another order, so
    eager -> compile continued the run on another stream (accepted before 2026-12-07); eager -> "auto" (eager on
    so short a CPU run) resumes. Checkpoints record the style (``branch_free``)."""
    from ers_deep.train.run import RunError

    with single_thread():
        train(paper_config("tabular:toy-coordination", **TINY, collect_mode="eager"), tmp_path, max_updates=2)
        assert read_metadata(latest_checkpoint(tmp_path))["branch_free"] is False
        text = (tmp_path / "config.json").read_text()
        for mode, refused in (("compile", True), ("auto", False)):
            info = json.loads(text)
            info["config"]["collect_mode"] = mode
            (tmp_path / "config.json").write_text(json.dumps(info))
            if refused:
                with pytest.raises(
                    RunError, match=r"stepped with branches \(collect_mode 'eager'\).*'compile'"
                ):
                    resume(tmp_path, max_updates=4)
            else:
                learner, _ = resume(tmp_path, max_updates=4)
                assert learner.update == 4


def test_a_resumed_run_records_its_own_config_not_what_auto_resolved_to(tmp_path: Path) -> None:
    """A resume builds its learner with what the run's "auto"s resolved to at its start (cpu_products,
    bf16_gradients, int8_inputs), but records the run's own config, as an uninterrupted run does: its
    checkpoints, and so a pool's policies and pool.json, said ``false`` / ``"openblas"`` before 2026-12-07 where
    the uninterrupted run said ``"auto"``."""
    from ers_deep.train.run_files import read_run_config

    with single_thread():
        cfg = paper_config("tabular:toy-coordination", **TINY)
        assert (cfg.bf16_gradients, cfg.int8_inputs, cfg.cpu_products) == ("auto", "auto", "auto")
        train(cfg, tmp_path, max_updates=2)
        info, _ = read_run_config(tmp_path)
        assert type(info["bf16_gradients"]) is bool  # resolved at the start
        learner, _ = resume(tmp_path, max_updates=4)
    assert learner.config == cfg
    assert read_metadata(latest_checkpoint(tmp_path))["config"] == cfg.to_json()


#: a writer killed mid-write: ``write_atomic`` of argv[1], SIGKILLed where it would rename its temporary file
KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    from ers_exact.util.output import write_atomic
    os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
    write_atomic(sys.argv[1], b"half")
""")


def _killed_writer(target: Path) -> int:
    """The PID of a process killed while it wrote ``target`` (it left its temporary file)."""
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(target)])
    assert proc.wait(timeout=60) == -signal.SIGKILL
    return proc.pid


def test_resume_removes_the_temporary_files_of_killed_writers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kill mid-write leaves ``.NAME.tmp-PID``; resume removes those of writers no longer running (they were
    left forever), in the run folder and checkpoints/, and nothing else: not a running writer's, not a name
    of another pattern, a link, a folder or a subfolder's file."""
    with single_thread():
        train(paper_config("tabular:toy-coordination", **TINY), tmp_path, max_updates=2)
    dead = _killed_writer(tmp_path / "checkpoints" / "update-000004.safetensors")
    stale = [
        tmp_path / "checkpoints" / f".update-000004.safetensors.tmp-{dead}",
        tmp_path / f".metrics.csv.tmp-{_killed_writer(tmp_path / 'metrics.csv')}",
    ]
    assert all(p.read_bytes() == b"half" for p in stale)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        kept = [
            tmp_path / f".config.json.tmp-{live.pid}",  # a running writer's
            tmp_path / f"metrics.csv.tmp-{dead}",
            tmp_path / f".metrics.csv.tmp-{dead}x",
            tmp_path / f".metrics.csv.tmp-{dead}.bak",
            tmp_path / "checkpoints" / "old" / f".update-000002.safetensors.tmp-{dead}",
        ]
        for p in kept:
            p.parent.mkdir(exist_ok=True)
            p.write_text("keep")
        (tmp_path / f".folder.tmp-{dead}").mkdir()
        (tmp_path / f".link.tmp-{dead}").symlink_to(tmp_path / "config.json")
        with single_thread():
            learner, _ = resume(tmp_path, max_updates=4)
    finally:
        live.kill()
        live.wait()
    assert learner.update == 4
    assert not any(p.exists() for p in stale)
    assert all(p.read_text() == "keep" for p in kept)
    assert (tmp_path / f".folder.tmp-{dead}").is_dir() and (tmp_path / f".link.tmp-{dead}").is_symlink()
    err = capsys.readouterr().err
    assert all(f"resume: removed {p}, left by a write" in err for p in stale) and err.count("removed") == 2


#: a tabular run (argv[2]: TINY's fields) SIGKILLed right after update argv[3]
KILLED_RUN = textwrap.dedent("""
    import json, os, signal, sys, torch
    from ers_deep.train.config import paper_config
    from ers_deep.train.run import train
    torch.set_num_threads(1)
    stop = int(sys.argv[3])
    kill = lambda m: m["update"] == stop and os.kill(os.getpid(), signal.SIGKILL)
    train(paper_config("tabular:toy-coordination", **json.loads(sys.argv[2])), sys.argv[1], on_update=kill)
""")


def test_tensorboard_shows_each_update_once_after_a_kill_and_resume(tmp_path: Path) -> None:
    """Killed after update 7 (checkpoints 4 and 6, the newest then damaged) and resumed from update 4: the
    event files read back hold every update's scalars once, equal to metrics.csv; those of the re-run updates
    5 and 6 were there twice (the killed process's and the resumed one's: no ``purge_step``)."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    child = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(tmp_path), json.dumps(TINY), "7"])
    assert child.wait(timeout=120) == -signal.SIGKILL
    assert [p.name for p in checkpoints(tmp_path)] == [
        "update-000004.safetensors",
        "update-000006.safetensors",
    ]
    newest = checkpoints(tmp_path)[-1]
    newest.write_bytes(newest.read_bytes()[:100])
    time.sleep(1.1)  # event files are read in name order, whose time is in whole seconds (then the pid)
    with single_thread():
        learner, _ = resume(tmp_path)
    assert learner.update == 8
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    rows = [r for r in read_metrics(tmp_path) if r["seed"] == "1"]
    got = [(e.step, e.value) for e in events.Scalars("return/seed1")]
    assert [step for step, _ in got] == [int(r["env_steps"]) for r in rows] == [16 * u for u in range(1, 9)]
    assert [v for _, v in got] == pytest.approx([float(r["return"]) for r in rows], rel=1e-6, nan_ok=True)


@pytest.mark.parametrize(
    ("drop", "named"),
    [
        (None, None),
        ({("3", "1"), ("5", "0"), ("5", "1"), ("6", "0")}, "3, 5-6 (of the 6"),
        ("all", "1-6"),
    ],
    ids=["complete", "rows-missing", "file-deleted"],
)
def test_resume_names_the_updates_metrics_csv_lacks(
    tmp_path: Path, drop: Any, named: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows of updates at or below the checkpoint that are missing (metrics.csv edited or deleted) stay missing
    after resume (it re-runs only the later updates): resume names them on stderr (it said nothing)."""
    import csv

    metrics = tmp_path / "metrics.csv"
    with single_thread():
        train(paper_config("tabular:toy-coordination", **TINY), tmp_path, max_updates=6)
        if drop == "all":
            metrics.unlink()
        elif drop is not None:
            rows = list(csv.reader(metrics.read_text().splitlines()))
            keep = [rows[0], *(r for r in rows[1:] if (r[0], r[2]) not in drop)]
            metrics.write_text("".join(",".join(r) + "\n" for r in keep))
        capsys.readouterr()
        learner, _ = resume(tmp_path)
    assert learner.update == 8
    err = capsys.readouterr().err
    if named is None:
        assert "lacks" not in err
    else:
        assert f"{metrics} lacks the rows of updates {named}" in err and "gap" in err
    want = 2 * 8 - (2 * 6 if drop == "all" else len(drop or ()))
    assert len(read_metrics(tmp_path)) == want


def test_config_json_records_the_threads_and_the_modes_as_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run's floats depend on torch's threads and on what "auto" made of its collection and update modes,
    which its config leaves to the machine (and to the run's length): config.json records them as run, and a
    resume on another thread count says so (it still resumes)."""
    with single_thread():
        learner, _ = train(paper_config("tabular:toy-coordination", **TINY), tmp_path, max_updates=2)
        info = json.loads((tmp_path / "config.json").read_text())
        assert info["config"]["collect_mode"] == "auto" and info["collect_mode"] == "eager"  # a short CPU run
        assert info["threads"] == 1 and info["update_mode"] == learner.updater.mode
        assert info["update_mode"] in ("eager", "compile", "graph", "compile-graph")
        capsys.readouterr()
        resume(tmp_path, max_updates=3)
        assert "threads" not in capsys.readouterr().err
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        learner, _ = resume(tmp_path, max_updates=4)
    finally:
        torch.set_num_threads(threads)
    assert learner.update == 4
    assert "began with 1 torch threads, this process has 2" in capsys.readouterr().err


def test_metrics_are_never_appended_through_a_symbolic_link(tmp_path: Path) -> None:
    """metrics.csv is appended to (not written atomically): a link planted in a shared run folder was followed,
    appending to whatever it named. Now refused, the target untouched."""
    from ers_deep.train.run_files import METRIC_COLUMNS, write_metric_rows

    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (tmp_path / "metrics.csv").symlink_to(victim)
    m = {
        "update": 1,
        "env_steps": 8,
        "lr": 0.1,
        "shaped_coef": 0.0,
        **{k: [0.0] for k in METRIC_COLUMNS[3:10]},
    }
    with pytest.raises(OSError, match="cannot append metrics"):
        write_metric_rows(tmp_path / "metrics.csv", m, (0,), 1.0)
    assert victim.read_text() == "keep\n"


def test_tensorboard_events_are_never_written_through_a_symbolic_link(tmp_path: Path) -> None:
    """A run folder received from someone else may hold ``tensorboard`` as a link to any folder: a resume wrote
    its event files there. Now refused, before any update, the linked folder untouched."""
    from ers_exact.util.output import OutputError

    with single_thread():
        train(paper_config("tabular:toy-coordination", **TINY), tmp_path, max_updates=1)
        shutil.rmtree(tmp_path / "tensorboard")
        elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
        elsewhere.mkdir()
        (tmp_path / "tensorboard").symlink_to(elsewhere, target_is_directory=True)
        rows = len(read_metrics(tmp_path))
        with pytest.raises(OutputError, match="symbolic link"):
            resume(tmp_path, max_updates=2)
    assert list(elsewhere.iterdir()) == [] and len(read_metrics(tmp_path)) == rows
