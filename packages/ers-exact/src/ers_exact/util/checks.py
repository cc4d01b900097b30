"""Option checks: plain functions ``value -> str | None`` (``None``: valid; otherwise the reason it is not),
given to :func:`ers_exact.util.options.option` (``check=positive``, ``check=between(1, 50)``) and to
:func:`ers_exact.util.options.check_fields` for the library's configs: numbers and their ranges, seeds,
choices, thread counts, and the files and folders a command writes (checked before any computation).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "MAX_SEED",
    "Check",
    "at_least",
    "between",
    "finite",
    "is_number",
    "non_negative",
    "one_of",
    "output_file",
    "output_folder",
    "positive",
    "probability",
    "seed_range",
    "thread_count",
]

Check = Callable[[Any], "str | None"]


def is_number(v: Any) -> bool:
    """An int or a float, not a bool (inf and nan included)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def finite(v: Any) -> str | None:
    """A finite number (rejects nan and +-inf)."""
    return None if is_number(v) and math.isfinite(v) else "must be a finite number"


def positive(v: Any) -> str | None:
    """A finite number > 0."""
    return None if is_number(v) and math.isfinite(v) and v > 0 else "must be a finite number > 0"


#: the largest seed an option or config takes (32 bits: derived seeds add offsets and multiples to it, and
#: torch's and numpy's generators take it whole; a 64-bit seed overflowed torch's manual_seed there)
MAX_SEED = 2**32 - 1


def seed_range(v: Any) -> str | None:
    """An integer seed in 0 .. :data:`MAX_SEED`."""
    ok = isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_SEED
    return None if ok else f"must be a seed, an integer in 0 .. {MAX_SEED}"


def non_negative(v: Any) -> str | None:
    """A finite number >= 0."""
    return None if is_number(v) and math.isfinite(v) and v >= 0 else "must be a finite number >= 0"


def probability(v: Any) -> str | None:
    """A number in [0, 1]."""
    return None if is_number(v) and 0 <= v <= 1 else "must be a probability in [0, 1]"


def at_least(lo: float) -> Check:
    """A finite number >= ``lo``."""

    def check(v: Any) -> str | None:
        return None if is_number(v) and math.isfinite(v) and v >= lo else f"must be >= {lo}"

    return check


def between(lo: float, hi: float, *, open_lo: bool = False, open_hi: bool = False) -> Check:
    """A finite number in [lo, hi]; ``open_lo`` / ``open_hi`` exclude an end (``between(0, 1, open_lo=True)``
    is (0, 1])."""

    def check(v: Any) -> str | None:
        above = lo < v if open_lo else lo <= v
        below = v < hi if open_hi else v <= hi
        ok = is_number(v) and math.isfinite(v) and above and below
        return None if ok else f"must be in {'(' if open_lo else '['}{lo}, {hi}{')' if open_hi else ']'}"

    return check


def one_of(values: Sequence[Any]) -> Check:
    """One of ``values`` (for choices that are not a ``Literal`` annotation, e.g. a registry's keys); the
    command line offers them as argparse choices."""

    def check(v: Any) -> str | None:
        return None if v in values else f"must be one of {', '.join(map(str, values))}"

    check.choices = tuple(values)  # type: ignore[attr-defined]
    return check


def thread_count(v: Any) -> str | None:
    """A number of CPU threads: 1 up to 4 per core of this machine (more only oversubscribes, and a huge
    count crashes the thread pool)."""
    from ers_exact.util.budget import max_threads

    top = max_threads()
    ok = isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= top
    return None if ok else f"must be an integer from 1 to {top} (4 per CPU core of this machine)"


def output_file(suffixes: Sequence[str] = ()) -> Check:
    """A file to write: not a folder, its folder exists, and it ends in one of ``suffixes`` (when given).

    Checked when the options are built, so a bad path is refused before any computation."""

    def check(v: Any) -> str | None:
        path = os.fspath(v)
        parent = os.path.dirname(path) or "."
        if os.path.isdir(path):
            return "is a folder; give a file name"
        if not os.path.isdir(parent):
            is_file = " (it is a file)" if os.path.exists(parent) else ""
            return f"its folder {parent} does not exist{is_file}"
        if suffixes and not path.lower().endswith(tuple(s.lower() for s in suffixes)):
            return f"must end in {', '.join(suffixes)}"
        return None

    return check


def output_folder(v: Any) -> str | None:
    """A folder to write into (created with its parents when missing): it must not be an existing file, nor
    lie under one."""
    path = os.path.abspath(os.fspath(v))
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    if os.path.exists(path) and not os.path.isdir(path):
        whole = path == os.path.abspath(os.fspath(v))
        return "is a file, not a folder" if whole else f"{path} is a file, not a folder"
    return None
