"""JaxMARL is timed in a process of its own (``bench.runner``), never in the torch process: not by the benchmarks,
not by ``ers-deep env-bench``, not by the scripts (packages/ers-deep/README.md, "Benchmark").

Checked three ways: (1) a fresh interpreter with a fake ``jax`` and ``jaxmarl`` first on its path (importing
either raises) and the runner's ``subprocess.run`` replaced runs the library's reference columns, the command's
``env_bench`` and (slow) the benchmark files' own test functions, then reports which ``jax*`` modules it loaded
(none) and what the runner was asked to run; (2) the same files' imports from ``ers_deep.bench`` are parsed and
none reaches a function that imports JAX; (3) (slow, with jaxmarl installed) the real runner times JaxMARL and
the calling interpreter still has no JAX."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest

from ers_deep.envs.hanabi.config import HanabiConfig
from tests.own_process import ROOT, run_json

FAKE_RATE = 1000.0
JAX_ROOTS = ("jax", "jaxlib", "jaxmarl")

#: the child's set-up: fake jax / jaxmarl first on the path, the runner's process replaced by a recorder
CHILD_SETUP = r"""
import json, subprocess, sys
sys.path.insert(0, sys.argv[1])
calls = []

def fake_run(cmd, **kwargs):
    calls.append(cmd[1:])
    row = {"env_steps_per_s": FAKE_RATE, "cores_used": 1.0}
    return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(row) + "\n", stderr="")

import ers_deep.bench.runner, torch
subprocess.run = fake_run
torch.set_num_threads(1)

def report(out):
    out["calls"] = calls
    out["jax_modules"] = sorted(m for m in sys.modules if m.split(".")[0] in JAX_ROOTS)
    print(json.dumps(out))
""".replace("FAKE_RATE", repr(FAKE_RATE)).replace("JAX_ROOTS", repr(JAX_ROOTS))

LIBRARY_CHILD = (
    CHILD_SETUP
    + r"""
from ers_deep.bench import ENV_BENCHES
from ers_deep.bench.compare import jaxmarl_env
from ers_deep.bench.timing import jaxmarl_installed

report({
    "installed": jaxmarl_installed(),
    "hanabi": jaxmarl_env("hanabi", 4, 8),
    "overcooked": jaxmarl_env("overcooked-v2", 4, 8, observations=False, scan_length=4, repeats=2),
    "cli_hanabi": ENV_BENCHES["hanabi"]("Hanabi-Very-Small", batch=4, steps=3, against=("jaxmarl",)),
    "cli_overcooked": ENV_BENCHES["overcooked-v2"](batch=4, steps=3, against=("jaxmarl",)),
})
"""
)

#: runs ``benchmarks/<file>``'s ``<test>(benchmark, one_thread, batch)`` with a stand-in for pytest-benchmark
BENCHMARK_CHILD = (
    CHILD_SETUP
    + r"""
import importlib.util, time
from types import SimpleNamespace

class Benchmark:
    disabled, extra_info = False, {}

    def pedantic(self, fn, rounds, iterations):
        t0 = time.perf_counter()
        fn()
        s = time.perf_counter() - t0
        self.stats = SimpleNamespace(stats=SimpleNamespace(mean=s))

path, test, batch = sys.argv[2], sys.argv[3], int(sys.argv[4])
spec = importlib.util.spec_from_file_location("bench_file", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
bench = Benchmark()
getattr(mod, test)(bench, None, batch)
report({"extra_info": bench.extra_info})
"""
)


@pytest.fixture
def fake_jax(tmp_path: Path) -> Path:
    """A folder with packages ``jax`` and ``jaxmarl`` whose import raises: found by ``find_spec``, fatal if
    anything imports them in the process that has the folder on its path."""
    for name in ("jax", "jaxmarl"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise RuntimeError('{name} imported in-process')\n")
    return tmp_path


def _runner_call(call: list[str]) -> tuple[str, str, dict[str, Any]]:
    """(module, function, kwargs) of one recorded child call (``bench.runner.child_arguments``: ``-c CODE module
    function kwargs``, the code calling ``bench.runner.main``)."""
    from ers_deep.bench.runner import child_arguments

    assert call[:2] == child_arguments("module", "function", {})[:2], call
    return call[2], call[3], json.loads(call[4])


def test_reference_columns_run_jaxmarl_through_the_runner(fake_jax: Path) -> None:
    out = run_json(LIBRARY_CHILD, str(fake_jax), timeout=300)
    assert out["installed"] is True and out["jax_modules"] == []
    calls = [_runner_call(c) for c in out["calls"]]
    assert [(m, f) for m, f, _ in calls] == [
        ("hanabi", "bench_jaxmarl"),
        ("overcooked_v2", "bench_jaxmarl"),
        ("hanabi", "bench_jaxmarl"),
        ("overcooked_v2", "bench_jaxmarl"),
    ]
    assert calls[1][2] == {"batch": 4, "steps": 8, "scan_length": 4, "repeats": 2, "observations": False}
    small = HanabiConfig.preset("Hanabi-Very-Small")
    assert {k: calls[2][2]["config"][k] for k in ("players", "colors", "ranks")} == {
        "players": small.players,
        "colors": small.colors,
        "ranks": small.ranks,
    }
    assert out["hanabi"]["env_steps_per_s"] == out["overcooked"]["env_steps_per_s"] == FAKE_RATE
    for key in ("cli_hanabi", "cli_overcooked"):
        res = out[key]
        assert res["references"]["jaxmarl"]["ratio"] == pytest.approx(res["env_steps_per_s"] / FAKE_RATE)
        assert 0 < res["cores_used"] <= 64  # the torch side's cores over its timed span


@pytest.mark.slow  # ~8 s each (the default suite checks these files statically, below)
@pytest.mark.parametrize(
    "file, test, calls",
    [
        ("test_hanabi_bench.py", "test_hanabi_env_steps", 1),
        ("test_overcooked_bench.py", "test_overcooked_env_steps", 2),
    ],
)
def test_env_benchmarks_time_jaxmarl_in_its_own_process(
    fake_jax: Path, file: str, test: str, calls: int
) -> None:
    """The benchmark functions themselves at batch 1 (a few seconds each): their JaxMARL columns come from the
    runner, and the torch process never imports JAX."""
    path = ROOT / "benchmarks" / file
    out = run_json(BENCHMARK_CHILD, str(fake_jax), str(path), test, "1", timeout=600)
    assert out["jax_modules"] == []
    assert [_runner_call(c)[1] for c in out["calls"]] == ["bench_jaxmarl"] * calls
    info = out["extra_info"]
    assert info["jaxmarl_env_steps_per_s"] == FAKE_RATE and info["jaxmarl_cores_used"] == 1.0


def test_cores_used_counts_busy_time_not_waiting() -> None:
    """``time_steps``'s ``cores_used`` against what is known: a sleeping loop keeps no core busy, a spinning one
    keeps one at most (one Python thread). The spin runs until it has used its CPU seconds, not wall seconds: on
    a loaded shared machine (other jobs, a hypervisor's steal time) a wall-clock spin got a fifth of a core
    (busy 0.1997, 3 runs in 20 at load 4-5), so only the ordering and the upper bound are asserted."""
    import torch

    from ers_deep.bench.timing import time_steps

    def run(n: int, spin: bool) -> None:
        end = time.process_time() + 0.02 * n
        while spin and time.process_time() < end:
            pass
        if not spin:
            time.sleep(0.02 * n)

    cpu = torch.device("cpu")
    _, idle = time_steps(lambda n: run(n, False), 5, cpu, warmup=0, repeats=2)
    _, busy = time_steps(lambda n: run(n, True), 5, cpu, warmup=0, repeats=2)
    assert idle < 0.2 and busy < 1.2 and busy > max(0.02, 2 * idle), (idle, busy)


BENCH_SRC = ROOT / "packages" / "ers-deep" / "src" / "ers_deep" / "bench"
CALLERS = [
    *sorted((ROOT / "benchmarks").glob("*.py")),
    *sorted((ROOT / "scripts").glob("*.py")),
    *sorted((ROOT / "packages" / "ers-deep" / "src" / "ers_deep" / "cli").glob("*.py")),
]


def _imports_jax(node: ast.AST) -> bool:
    """Whether ``node`` contains an import of jax, jaxlib or jaxmarl (or ``pytest.importorskip`` of one)."""
    for n in ast.walk(node):
        names = []
        if isinstance(n, ast.Import):
            names = [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom) and n.level == 0:
            names = [n.module or ""]
        elif isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "importorskip" and n.args:
            names = [getattr(n.args[0], "value", "")]
        if any(str(x).split(".")[0] in JAX_ROOTS for x in names):
            return True
    return False


def _bench_imports(tree: ast.Module) -> dict[str, tuple[str, str | None]]:
    """Local name -> (bench module, name in it, or None for the module itself), from ``ers_deep.bench`` imports."""
    out: dict[str, tuple[str, str | None]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("ers_deep.bench"):
            for a in n.names:
                if n.module == "ers_deep.bench" and (BENCH_SRC / f"{a.name}.py").exists():
                    out[a.asname or a.name] = (a.name, None)
                else:
                    module = (n.module or "").removeprefix("ers_deep.bench").lstrip(".") or "__init__"
                    out[a.asname or a.name] = (module, a.name)
    return out


@functools.cache
def _jax_reaching() -> frozenset[tuple[str, str]]:
    """(module, name) of every top-level function or value of ``ers_deep.bench`` whose code imports JAX or
    refers (by name, or as ``module.name``) to one that does: what a caller must not run in its own process."""
    deps: dict[tuple[str, str], set[tuple[str, str]]] = {}
    bad: set[tuple[str, str]] = set()
    for path in BENCH_SRC.glob("*.py"):
        module, tree = path.stem, ast.parse(path.read_text())
        imported = _bench_imports(tree)
        top = {getattr(n, "name", None) for n in tree.body}
        for node in tree.body:
            targets = [getattr(node, "name", None)] + [
                t.id
                for t in getattr(node, "targets", []) + [getattr(node, "target", None)]
                if isinstance(t, ast.Name)
            ]
            for name in filter(None, targets):
                refs: set[tuple[str, str]] = set()
                for n in ast.walk(node):
                    if isinstance(n, ast.Name) and n.id in imported and imported[n.id][1] is not None:
                        refs.add(imported[n.id])  # type: ignore[arg-type]
                    elif isinstance(n, ast.Name) and n.id in top:
                        refs.add((module, n.id))
                    elif (
                        isinstance(n, ast.Attribute)
                        and isinstance(n.value, ast.Name)
                        and n.value.id in imported
                    ):
                        refs.add((imported[n.value.id][0], n.attr))
                deps[(module, name)] = refs
                if _imports_jax(node):
                    bad.add((module, name))
    while True:
        more = {k for k, refs in deps.items() if k not in bad and refs & bad}
        if not more:
            return frozenset(bad)
        bad |= more


def test_the_analysis_sees_the_jax_side() -> None:
    """The reference functions themselves are found (else the next test would pass vacuously)."""
    bad = _jax_reaching()
    assert {
        ("hanabi", "bench_jaxmarl"),
        ("overcooked_v2", "bench_jaxmarl"),
        ("timing", "time_jax_rollout"),
    } <= bad
    assert ("compare", "jaxmarl_env") not in bad and ("__init__", "ENV_BENCHES") not in bad


@pytest.mark.parametrize("path", CALLERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_benchmark_script_or_command_runs_jax_in_process(path: Path) -> None:
    tree = ast.parse(path.read_text())
    assert not _imports_jax(tree), f"{path.name} imports JAX itself"
    bad = _jax_reaching()
    used = {(m, n) for m, n in _bench_imports(tree).values() if n is not None}
    used |= {(m, a) for m, a in _module_attrs(tree)}
    assert not used & bad, f"{path.name} runs JAX in its own process through {sorted(used & bad)}"


def _module_attrs(tree: ast.Module) -> set[tuple[str, str]]:
    """(bench module, attribute) of every ``module.attribute`` on a bench module imported as a name."""
    modules = {k: m for k, (m, n) in _bench_imports(tree).items() if n is None}
    return {
        (modules[n.value.id], n.attr)
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules
    }


@pytest.mark.slow  # ~30 s: JAX's import and compilation in the runner's process
@pytest.mark.skipif(importlib.util.find_spec("jaxmarl") is None, reason="needs the reference extra (jaxmarl)")
def test_the_real_runner_times_jaxmarl_elsewhere() -> None:
    code = r"""
import json, sys
from ers_deep.bench.compare import jaxmarl_env
res = jaxmarl_env("hanabi", 4, 4, scan_length=4)
res["jax_modules"] = sorted(m for m in sys.modules if m.split(".")[0] in JAX_ROOTS)
print(json.dumps(res))
""".replace("JAX_ROOTS", repr(JAX_ROOTS))
    out = run_json(code, timeout=600)
    assert "error" not in out, out
    assert out["jax_modules"] == [] and out["env_steps_per_s"] > 0 and out["steps"] == 4
    assert 0 < out["cores_used"] <= 64 and out["backend"] == "cpu"


def test_a_reference_process_is_pinned_to_the_cpus_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """``cpus`` pins the reference's process before it imports anything (XLA's CPU pool ignores its thread
    flags: JaxMARL's envs kept ~1.7-2 of 2 cores busy beside ers's one torch thread); without ``cpus`` the child
    may run anywhere, even when this process carries the variable (it is not inherited); a CPU this process
    may not use is refused."""
    import os

    from ers_deep.bench.runner import CPUS_VARIABLE, one_core, reference_in_subprocess

    mine = sorted(os.sched_getaffinity(0))
    pin = one_core()
    pinned = reference_in_subprocess("runner", "process_cpus", {}, cpus=pin)
    assert pinned == {"affinity": sorted(pin), "cpus": sorted(pin)}
    monkeypatch.setenv(CPUS_VARIABLE, str(mine[0]))
    assert reference_in_subprocess("runner", "process_cpus", {}) == {"affinity": mine}
    with pytest.raises(ValueError, match="subset"):
        reference_in_subprocess("runner", "process_cpus", {}, cpus={max(mine) + 1})


def test_one_thread_benchmarks_pin_jaxmarl_to_one_core() -> None:
    """Every call of ``jaxmarl_env`` in the one-thread CPU benchmarks passes ``cpus`` (parsed, so a new call
    cannot forget it)."""
    for name in ("test_hanabi_bench.py", "test_overcooked_bench.py", "test_accel_bench.py"):
        tree = ast.parse((ROOT / "benchmarks" / name).read_text())
        calls = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "jaxmarl_env"
        ]
        assert calls, name
        for call in calls:
            assert any(k.arg == "cpus" for k in call.keywords), (name, call.lineno)


@pytest.mark.parametrize("threads, pinned", [(1, True), (2, False), (None, False)])
def test_env_bench_pins_jaxmarl_beside_one_torch_thread(
    monkeypatch: pytest.MonkeyPatch, threads: int | None, pinned: bool
) -> None:
    """``ers-deep env-bench overcooked-v2 --against jaxmarl --threads 1`` runs JaxMARL's process on one core;
    with more threads (or torch's choice) it is not pinned."""
    import torch

    from ers_deep.bench import overcooked_v2
    from ers_deep.bench.runner import one_core
    from ers_deep.cli.env_bench import EnvBenchOptions, run_env_bench

    asked: list[Any] = []

    def record(module: str, function: str, kwargs: dict[str, Any], **rest: Any) -> dict[str, Any]:
        asked.append(rest.get("cpus"))
        return {"env_steps_per_s": FAKE_RATE, "cores_used": 1.0}

    monkeypatch.setattr(overcooked_v2, "reference_in_subprocess", record)
    monkeypatch.setattr(overcooked_v2, "jaxmarl_installed", lambda: True)
    before = torch.get_num_threads()
    try:
        opts = EnvBenchOptions(env="overcooked-v2", batch=1, steps=2, against="jaxmarl", threads=threads)
        res = run_env_bench(opts)
    finally:
        torch.set_num_threads(before)
    assert res["references"]["jaxmarl"]["env_steps_per_s"] == FAKE_RATE
    assert asked == [one_core() if pinned else None]
