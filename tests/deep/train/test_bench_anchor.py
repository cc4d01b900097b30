"""``bench_anchor`` runs a reference learner in its own process: its rate is read from its JSON lines, its cores
are counted from its CPU time, and ``cpus`` pins it (XLA's CPU runtime ignores ``intra_op_parallelism_threads``
for its own thread pool, so the one-thread CPU comparison of issue 21 depends on the pinning)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ers_deep.bench.train import bench_anchor

SCRIPT = """
import json, os, sys, time
t = time.process_time()
while time.process_time() - t < 0.3:  # burn some CPU so cores_used is measurable
    pass
print(json.dumps({"cpus": sorted(os.sched_getaffinity(0)), "argv": sys.argv[1:]}))
print(json.dumps({"event": "final", "env_steps_per_s_after_compile": 123.0}))
"""


def test_bench_anchor_reads_the_rate_and_pins_the_process(tmp_path: Path) -> None:
    script = tmp_path / "anchor.py"
    script.write_text(SCRIPT)
    cpu = min(os.sched_getaffinity(0))
    out = bench_anchor(script, ["--x", "1"], cpus={cpu})
    assert "error" not in out, out
    assert out["env_steps_per_s"] == 123.0
    assert out["lines"][0] == {"cpus": [cpu], "argv": ["--x", "1"]}
    assert out["cpus"] == [cpu]
    # its CPU seconds (at least the 0.3 s it burns) over its wall seconds; a busy machine lowers the share, not
    # the CPU seconds (0.2 < cores_used failed at ~0.1 with three processes on two cores)
    assert out["cores_used"] * out["wall_s"] >= 0.29 and out["cores_used"] <= 1.2
    free = bench_anchor(script, [])
    assert free["lines"][0]["cpus"] == sorted(os.sched_getaffinity(0))


def test_bench_anchor_reports_failures_and_refuses_unknown_cpus(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text("raise SystemExit('boom')\n")
    out = bench_anchor(script, [])
    assert out["error"].startswith("exit 1") and "env_steps_per_s" not in out
    with pytest.raises(ValueError, match="not all available"):
        bench_anchor(script, [], cpus={10_000})
