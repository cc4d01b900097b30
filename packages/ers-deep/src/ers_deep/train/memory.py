"""Large CPU tensors without page faults: glibc's malloc keeps the memory the learner frees, for its next tensors.

torch's CPU allocator is malloc. glibc serves every allocation above its mmap threshold (at most 32 MB) with a
fresh ``mmap`` and unmaps it when freed, so each large tensor faults in (and the kernel zeroes) every one of its
pages at its first write. The learner allocates and frees such tensors every minibatch step (a minibatch's
observations, activations and gradients: at Hanabi-Full 1,024 x 128, a minibatch's observations alone are
~170 MB per seed), so a large-batch update can spend more time in the kernel than in its own arithmetic (measured
2026-11-29: 348 s of system time against 261 s of user time, two seeds of Hanabi-Full 1,024 x 128 with MLP 64).

``keep_freed_memory`` turns glibc's mmap path off (``M_MMAP_MAX`` 0: large blocks come from the heap too) and
raises the heap's trim threshold to 2 GiB (``M_TRIM_THRESHOLD``), so freed blocks stay mapped and the next
tensors reuse their pages. The process's resident memory then stays near its peak (as torch's CUDA caching
allocator keeps GPU memory). ``TrainConfig.keep_cpu_memory`` (on by default) has the learner call it on CPU.
A freed block is not always reused at once: torch asks for aligned blocks (``posix_memalign``, the size plus
slack), so a hole that a small chunk held in glibc's per-thread cache pins at its end is too small for a block
of the same size, and the heap grows instead, for up to 7 further blocks of one size (measured 2026-12-07).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["freed_memory_kept", "keep_freed_memory"]

#: glibc's ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
#: the heap is trimmed only when this much is free at its top (mallopt takes an int: at most 2 GiB - 1)
TRIM_THRESHOLD = 2**31 - 1

_kept = False


def keep_freed_memory() -> bool:
    """For the rest of this process, large allocations come from malloc's heap and freed memory stays mapped
    for reuse (the module docstring). True where set (Linux with glibc; idempotent), False where the C library
    has no ``mallopt`` or refuses the settings (e.g. musl, macOS): nothing changes there."""
    global _kept  # noqa: PLW0603  (the one process-wide fact this module keeps)
    if _kept:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _kept = mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    return _kept


def freed_memory_kept() -> bool:
    """Whether ``keep_freed_memory`` took effect in this process (by any learner before, whatever its config)."""
    return _kept
