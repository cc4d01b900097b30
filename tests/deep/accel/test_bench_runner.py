"""The benchmark loop in every CPU mode, and a reference run in its own process (the ``--against jaxmarl``
path, exercised here with HLE, which needs no JAX)."""

from __future__ import annotations

import pytest

from ers_deep.bench import hanabi as bench_hanabi
from ers_deep.bench import overcooked_v2 as bench_overcooked
from ers_deep.bench.runner import reference_in_subprocess
from tests.deep.threads import one_thread  # noqa: F401


@pytest.mark.parametrize(  # compiling both envs: make test-slow (the default suite compiles Overcooked V2 only)
    "mode, unroll, envs",
    [
        ("eager", 1, ("overcooked-v2", "hanabi")),
        pytest.param("compile", 1, ("overcooked-v2", "hanabi"), marks=pytest.mark.slow),
        ("compile", 4, ("overcooked-v2",)),
        pytest.param("compile", 4, ("hanabi",), marks=pytest.mark.slow),
    ],
)
def test_bench_modes(mode: str, unroll: int, envs: tuple[str, ...]) -> None:
    if "overcooked-v2" in envs:
        res = bench_overcooked.bench_ers(batch=8, steps=6, mode=mode, unroll=unroll, warmup=1)
        assert res["mode"] == mode and res["env_steps_per_s"] > 0
        assert res["steps"] % res["unroll"] == 0 and res["steps"] >= 6
    if "hanabi" in envs:
        h = bench_hanabi.bench_ers("Hanabi-Very-Small", batch=4, steps=3, mode=mode, unroll=unroll, warmup=1)
        assert h["mode"] == mode and h["env_steps_per_s"] > 0
        assert h["steps"] % h["unroll"] == 0


@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_state_only_rate(mode: str) -> None:
    res = bench_overcooked.bench_ers(batch=4, steps=2, observations=False, mode=mode, warmup=1)
    assert res["observations"] is False and res["mode"] == mode and res["env_steps_per_s"] > 0


@pytest.mark.slow  # ~11 s: a second Python process with HLE
def test_reference_runs_in_its_own_process() -> None:
    res = reference_in_subprocess("hanabi", "bench_hle", {"config": "Hanabi-Small", "batch": 4, "steps": 3})
    assert res["env_steps_per_s"] > 0 and res["batch"] == 4
    bad = reference_in_subprocess("no_such_bench", "run", {})  # a failing reference is reported, not raised
    assert "error" in bad and "no_such_bench" in bad["error"]


def test_a_reference_child_runs_one_copy_of_the_runner() -> None:
    """The child runs ``bench.runner.main`` without runpy executing the runner a second time: with
    ``python -m ers_deep.bench.runner`` the package had already imported it, so runpy warned
    (RuntimeWarning: found in sys.modules) and ran a second copy as ``__main__``; here that warning is an
    error and the child must still answer."""
    import json
    import subprocess
    import sys

    from ers_deep.bench.runner import child_arguments

    cmd = [sys.executable, "-W", "error::RuntimeWarning", *child_arguments("runner", "process_cpus", {})]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-800:]
    assert "affinity" in json.loads(done.stdout.strip().splitlines()[-1])
