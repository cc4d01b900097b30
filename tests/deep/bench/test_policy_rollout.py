"""``bench.rollout.bench_policy_rollout`` (what ``benchmarks/test_accel_bench.py::test_gpu_policy_rollout`` times on
CUDA) runs on CPU at toy sizes, eager and compiled. It reports rates only; that the compiled rollout records what
the eager steps do is ``tests/deep/accel/test_fast_step.py``'s. (Moved here from the benchmarks, 2026-12-07: as a
plain test without the ``benchmark`` fixture, ``make bench``'s ``--benchmark-only`` skipped it and ``make test``
never collected it.)"""

from __future__ import annotations

from ers_deep.bench.rollout import bench_policy_rollout
from ers_deep.nets import NetConfig
from tests.deep.threads import one_thread  # noqa: F401


def test_cpu_policy_rollout_runs() -> None:
    small = NetConfig(kind="cnn-gru", hidden=8, conv=8)
    for mode in ("eager", "compile"):
        res = bench_policy_rollout(
            "overcooked-v2", "cpu", mode, batch=4, steps=4, net=small, calls=1, repeats=1
        )
        assert res["mode"] == mode and res["env_steps_per_s"] > 0
