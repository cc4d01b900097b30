"""``train.memory.keep_freed_memory`` (``TrainConfig.keep_cpu_memory``): after it, large tensors reuse the pages
freed ones leave, where glibc's defaults fault every page of every large tensor in anew. Counted with the
kernel's minor page faults, in fresh processes (the setting is process-wide and lasts)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ers_deep.train.config import paper_config
from ers_deep.train.ippo import Learner
from ers_deep.train.memory import freed_memory_kept, keep_freed_memory

PROBE = """
import json, resource, sys
import torch
from ers_deep.train.memory import freed_memory_kept, keep_freed_memory
from ers_deep.train.config import paper_config
from ers_deep.train.ippo import Learner
how = sys.argv[1]
before_any = freed_memory_kept()
kept = keep_freed_memory() if how == "call" else None
if how == "learner":  # a CPU learner of the default config sets it
    Learner(paper_config("tabular:dectiger", num_envs=2, num_steps=2))
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def cycle():  # a 128 MB tensor, every page written, then freed
    x = torch.ones(32 * 2**20)
    del x
# warm-up: the heap grows to hold the tensor beside what else was allocated meanwhile. torch asks for 64-byte
# aligned blocks (posix_memalign: the size plus slack), so a freed block pinned by a small chunk that glibc's
# per-thread cache (tcache, at most 7 chunks a size) still holds is too small for the next one, and the heap
# grows instead: measured 2026-12-07, up to 7 such cycles after the first (CI failed with 3), none after 9
for _ in range(12):
    cycle()
before = faults()
for _ in range(6):
    cycle()
print(json.dumps({"faults": faults() - before, "kept": kept, "recorded": [before_any, freed_memory_kept()]}))
"""


def _faults(how: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, how], capture_output=True, text=True, check=True, timeout=300
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_freed_pages_are_reused_after_it() -> None:
    default, kept, learner = _faults("none"), _faults("call"), _faults("learner")
    assert kept["kept"] is True
    # freed_memory_kept: False until the call, True after it, whether the call was the learner's or one's own
    assert default["recorded"] == [False, False]
    assert kept["recorded"] == learner["recorded"] == [False, True]
    # glibc's default: each cycle maps its 128 MB anew (32,768 pages of 4 kB, or 64 huge pages of 2 MB)
    assert int(default["faults"]) >= 6 * 64  # type: ignore[call-overload]
    assert int(kept["faults"]) * 5 < int(default["faults"])  # type: ignore[call-overload]
    assert int(learner["faults"]) * 5 < int(default["faults"])  # type: ignore[call-overload]


def test_it_is_idempotent_and_a_config_field() -> None:
    assert keep_freed_memory() is keep_freed_memory() is freed_memory_kept()
    assert paper_config("tabular:dectiger").keep_cpu_memory is True
    cfg = paper_config("tabular:dectiger", num_envs=2, num_steps=2, keep_cpu_memory=False)
    assert Learner(cfg).config.keep_cpu_memory is False


def test_bench_apart_runs_the_learner_in_a_fresh_process() -> None:
    """``bench.train.bench_apart`` (the keep_cpu_memory A/B's harness): its row, with the child's CPU seconds."""
    from ers_deep.bench.train import bench_apart

    cfg = paper_config("tabular:dectiger", seeds=(0,), num_envs=4, num_steps=3, keep_cpu_memory=False)
    row = bench_apart(cfg, updates=1, warmup=1)
    assert "error" not in row, row
    assert row["env_steps_per_s"] > 0 and row["user_s"] > 0 and row["system_s"] >= 0
