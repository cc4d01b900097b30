"""Benchmarks import the slow references that live in tests/ (one copy, shared); torch env benchmarks time with one
CPU thread (``one_thread``), and every benchmark runs numpy's BLAS on one thread (``one_blas_thread``). Under
``--benchmark-disable`` each benchmarked function runs once and that one call's wall time stands in for
``benchmark.stats`` (``benchmark``), so every file runs as a quick correctness check."""

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conftest import dpomdp_dir  # noqa: F401  (the .dpomdp folder; skips when absent)


def _one_shot(fixture: Any, raw: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = raw(*args, **kwargs)
        s = time.perf_counter() - t0
        fixture.stats = SimpleNamespace(stats=SimpleNamespace(min=s, max=s, mean=s, median=s, rounds=1))
        return out

    return call


@pytest.fixture
def benchmark(benchmark: Any) -> Any:
    """pytest-benchmark's fixture; with ``--benchmark-disable`` (the function runs once, untimed, and
    ``benchmark.stats`` stays None) the one call is timed, so the benchmarks that read ``benchmark.stats`` for their
    ratios still run and check what they compute (the ratios of one call are not measurements)."""
    if benchmark.disabled:
        benchmark._raw = _one_shot(benchmark, benchmark._raw)
        benchmark._raw_pedantic = _one_shot(benchmark, benchmark._raw_pedantic)
    return benchmark


@pytest.fixture(autouse=True)
def one_blas_thread() -> Iterator[None]:
    """numpy's (and a loaded scipy's) OpenBLAS with one thread in every benchmark (``ers_exact.util.blas``): the
    solvers pin it themselves (``SolverConfig.blas_threads``), the evaluators timed directly (dense logit map,
    sequence form, values) did not, and on the shared 2-core machine a second BLAS thread spinning on a busy
    core made Dec-Tiger H=4's dense M and DM of one policy 264 ms instead of 86 ms. Processes of their own
    (``run_json``, the command line) keep their defaults."""
    from ers_exact.util.blas import blas_threads

    with blas_threads(1):
        yield


#: ers-deep's process-wide switches at import (module, attribute, value): torch's products, float32 gradient
#: products, the float32 embedding
_SWITCHES = (("ers_deep.nets.blas", "_active", "torch"), ("ers_deep.nets.blas", "_bf16_gradients", False))
_SWITCHES += (("ers_deep.nets.int8", "_on", False),)


@pytest.fixture(autouse=True)
def fresh_process_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every benchmark starts from ers-deep's process-wide switches as at import (``_SWITCHES``) and leaves them as
    it found them: a benchmark that sets them for the process (``use_cpu_products``, ``use_bf16_gradients``,
    ``use_int8_inputs``; learners did too until 2026-12-07, now they enter their own, ``ProductSwitches``) left
    them to a later one (2026-12-07: the conv-vs-matmul comparison ran one path's gradient products in bfloat16,
    1.2e-3 apart). A module not yet imported has them."""
    for module, name, value in _SWITCHES:
        if module in sys.modules:
            monkeypatch.setattr(sys.modules[module], name, value)


def _freed_memory_kept() -> bool:
    """Whether glibc keeps freed memory in this process (``ers_deep.train.memory.keep_freed_memory``: set by the
    first CPU learner, for the rest of the process); False while that module is not imported (nothing set it)."""
    memory = sys.modules.get("ers_deep.train.memory")
    return bool(memory is not None and memory.freed_memory_kept())


@pytest.fixture(autouse=True)
def record_freed_memory(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every benchmark row records whether glibc kept freed memory when it started and when it ended
    (``freed_memory_kept_at_start`` / ``_at_end``): the setting is process-wide and irreversible, so in one
    ``make bench`` process the learners of an earlier file (``test_train_bench.py``, ``test_int8_bench.py``, ...)
    change how a later file's tensors are allocated (and whether ``int8_inputs="auto"`` turns on), and a row
    says which way it ran. ``bench.train.bench_apart`` runs a learner in a fresh process where that matters."""
    bench = request.getfixturevalue("benchmark") if "benchmark" in request.fixturenames else None
    before = _freed_memory_kept()
    yield
    if bench is not None:
        bench.extra_info["freed_memory_kept_at_start"] = before
        bench.extra_info["freed_memory_kept_at_end"] = _freed_memory_kept()


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch with one CPU thread for the test (an env step is a few hundred small ops; on the shared 2-core machine
    a second thread often costs more than it gains)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _best_of(fn: Callable[[], object], rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.fixture
def best_of() -> Callable[..., float]:
    """``best_of(fn, rounds=3)``: the least wall time of ``rounds`` calls (a reference timed beside the benchmark)."""
    return _best_of
