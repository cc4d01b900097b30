"""The one memory budget of both packages: every size a user can type is estimated in bytes before the work
starts, and a request over the budget is refused (exit status 2) with the estimate and how to raise it.

The budget is ``$ERS_MEMORY_BUDGET`` in GB when set, else half of this machine's physical memory (at most
8 GB; 4 GB when the size of the memory is unknown). :func:`check_memory` is the only place that compares an
estimate with it; each command supplies its own estimate (bytes per history node times nodes, per start times
starts, per env times envs, ...), and an estimate that a run then exceeds by more than 2x is a bug.

Sizes that cost time rather than memory (``op --steps``) are checked the same way against the time budget,
``$ERS_TIME_BUDGET`` in seconds (default one hour), by :func:`check_time`.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
from collections.abc import Iterator
from typing import Literal

from ers_exact.util.errors import InputError

__all__ = [
    "DEFAULT_TIME_BUDGET",
    "MEMORY_BUDGET_ENV",
    "TIME_BUDGET_ENV",
    "BudgetError",
    "check_count",
    "check_memory",
    "check_time",
    "command_process",
    "format_bytes",
    "format_seconds",
    "max_threads",
    "memory_budget",
    "memory_scope",
    "resident_bytes",
    "time_budget",
]

#: environment variable holding the memory budget in GB
MEMORY_BUDGET_ENV = "ERS_MEMORY_BUDGET"
#: environment variable holding the time budget in seconds
TIME_BUDGET_ENV = "ERS_TIME_BUDGET"
#: the time budget when ``$ERS_TIME_BUDGET`` is not set: one hour
DEFAULT_TIME_BUDGET = 3600.0


class BudgetError(InputError, RuntimeError):
    """A request whose estimated memory (or size) is over its budget; the message says by how much."""


def format_bytes(n: float) -> str:
    """A byte count for messages: GB above 0.1 GB, else MB (or kB)."""
    if n >= 1e8:
        return f"{n / 1e9:,.2f} GB"
    return f"{n / 1e6:.2f} MB" if n >= 1e4 else f"{n / 1e3:.2f} kB"


def _physical_memory() -> float | None:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def memory_budget() -> float:
    """The memory budget in bytes (module docstring); a malformed ``$ERS_MEMORY_BUDGET`` is refused."""
    gb = _env_number(MEMORY_BUDGET_ENV, "GB")
    if gb is not None:
        return gb * 1e9
    phys = _physical_memory()
    return 4e9 if phys is None else min(8e9, phys / 2)


def resident_bytes() -> float:
    """This process's resident memory now, in bytes (Linux ``/proc/self/statm``; 0 where unknown)."""
    try:
        with open("/proc/self/statm") as fh:
            return float(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0.0


_WHOLE_PROCESS: contextvars.ContextVar[bool] = contextvars.ContextVar("ers_whole_process", default=False)


@contextlib.contextmanager
def command_process(whole: bool) -> Iterator[None]:
    """Within the block, :func:`memory_scope` is ``"process"`` when ``whole`` (a CLI command run as its own
    process: its budgets bound the whole process), else ``"call"`` (a command called from Python, e.g. a test
    calling ``main([...])``: its budgets bound what it adds to the process)."""
    token = _WHOLE_PROCESS.set(whole)
    try:
        yield
    finally:
        _WHOLE_PROCESS.reset(token)


def memory_scope() -> Literal["process", "call"]:
    """``"process"`` inside a command run as its own process (:func:`command_process`), else ``"call"``."""
    return "process" if _WHOLE_PROCESS.get() else "call"


def check_memory(what: str, n_bytes: float, lower: str) -> None:
    """Refuse ``what`` (e.g. "--starts 1000000000 on dectiger H=3") when it needs about ``n_bytes`` bytes,
    over :func:`memory_budget`; ``lower`` says which option lowers the need (e.g. "lower --starts")."""
    budget = memory_budget()
    if not n_bytes <= budget:
        raise BudgetError(
            f"{what} needs about {format_bytes(n_bytes)} of memory, over the budget of {format_bytes(budget)}; "
            f"{lower}, or raise the budget with ${MEMORY_BUDGET_ENV}=GB"
        )


def check_count(flag: str, value: int, per_item_bytes: float, what: str = "") -> None:
    """``check_memory`` for a count option: ``value`` items of ``per_item_bytes`` each."""
    check_memory(f"{flag} {value:,}{' ' + what if what else ''}", value * per_item_bytes, f"lower {flag}")


def format_seconds(s: float) -> str:
    """A duration for messages: seconds, minutes, hours or days."""
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:,.1f} h" if s < 172_800 else f"{s / 86_400:,.1f} days"


def _env_number(name: str, unit: str) -> float | None:
    text = os.environ.get(name)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise BudgetError(f"${name}={text!r}: must be a number of {unit} > 0")
    return value


def time_budget() -> float:
    """The time budget in seconds: ``$ERS_TIME_BUDGET``, else :data:`DEFAULT_TIME_BUDGET`."""
    value = _env_number(TIME_BUDGET_ENV, "seconds")
    return DEFAULT_TIME_BUDGET if value is None else value


def check_time(what: str, seconds: float, lower: str) -> None:
    """Refuse ``what`` when it would take about ``seconds``, over :func:`time_budget`; ``lower`` says which
    option lowers the need (the time twin of :func:`check_memory`)."""
    budget = time_budget()
    if not seconds <= budget:
        raise BudgetError(
            f"{what} takes about {format_seconds(seconds)}, over the time budget of {format_seconds(budget)}; "
            f"{lower}, or raise the budget with ${TIME_BUDGET_ENV}=SECONDS"
        )


def max_threads() -> int:
    """The most CPU threads a ``--threads`` option accepts: 4 per core of this machine (at least 4)."""
    return 4 * max(1, os.cpu_count() or 1)
